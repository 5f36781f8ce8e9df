package merger

import (
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/testutil"
)

// A transfer's rejects gather per source, in the order of its parts, into
// the object beside them; a manifest that lists more than any producer
// leaves out gathers nothing and fails the transfer.
func TestRejectsGatherPerSourceAndAreBounded(t *testing.T) {
	part := func(obj string, lines ...int64) *message.File {
		tp := &message.TablePart{}
		for _, l := range lines {
			tp.Rejects = append(tp.Rejects, message.Reject{Source: "s", Line: l, Error: "e", Record: "r"})
		}
		return &message.File{Object: obj, Table: tp}
	}
	var r rejects
	for _, f := range []*message.File{part("p/a.csv/part-00000.parquet", 3), part("p/a.csv/part-00001.parquet"),
		part("p/b.csv/part-00000.parquet", 7, 9), part("p/a.csv/part-00002.parquet", 40), {Object: "p/readme.txt.zst"}} {
		testutil.OK(t, r.add(f))
	}
	var got []string
	for _, o := range r.objects {
		var lines []string
		for _, l := range strings.Split(strings.TrimSpace(string(o.body)), "\n") {
			lines = append(lines, l[strings.Index(l, `"line":`)+7:strings.Index(l, `,"error"`)])
		}
		got = append(got, o.name+" "+strings.Join(lines, ","))
	}
	if strings.Join(got, "; ") != "p/a.csv/rejects.ndjson 3,40; p/b.csv/rejects.ndjson 7,9" || r.n != 4 || r.tooMany() != nil {
		t.Fatalf("gathered %v (%d)", got, r.n)
	}
	big := part("p/c.csv/part-00000.parquet")
	big.Table.Rejects = make([]message.Reject, message.MaxBadRows)
	testutil.OK(t, r.add(big))
	if err := r.tooMany(); err == nil || len(r.objects) != 0 || !strings.Contains(err.Error(), "more than 10000 rejected records") {
		t.Fatalf("past the bound: %v, %d objects kept", err, len(r.objects))
	}
}
