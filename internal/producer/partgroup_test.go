package producer

import (
	"fmt"
	"testing"

	"github.com/ferry-dev/ferry/internal/plan"
)

// A converted source's parts go or stay together: skipped only when every
// one of them would be, decided at its last; other files at once.
func TestPartsOfASourceGoOrStayTogether(t *testing.T) {
	part := func(name string, i, n int) plan.File {
		return plan.File{Object: fmt.Sprintf("%s/part-%05d.parquet", name, i), Part: &plan.Part{Index: i, Count: n}}
	}
	var g partGroup
	var got []string
	for _, in := range []struct {
		f      plan.File
		reason string
	}{
		{part("a.csv", 0, 3), "unchanged"}, {part("a.csv", 1, 3), ""}, {part("a.csv", 2, 3), "unchanged"},
		{plan.File{Object: "r.txt"}, "unchanged"},
		{part("b.csv", 0, 2), "unchanged"}, {part("b.csv", 1, 2), "unchanged"},
	} {
		fs, reasons := g.add(in.f, in.reason)
		for k, f := range fs {
			got = append(got, f.Object+"="+reasons[k])
		}
	}
	want := "[a.csv/part-00000.parquet= a.csv/part-00001.parquet= a.csv/part-00002.parquet= r.txt=unchanged b.csv/part-00000.parquet=unchanged b.csv/part-00001.parquet=unchanged]"
	if fmt.Sprint(got) != want {
		t.Fatalf("decided %v\nwant %s", got, want)
	}
}
