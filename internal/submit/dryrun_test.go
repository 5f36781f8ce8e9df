package submit

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/internal/plan"
	"github.com/ferry-dev/ferry/internal/producer"
	"github.com/ferry-dev/ferry/internal/table"
)

// Issue 29: --dry-run shows a converted file's schema once, on its first
// part: as text, and with --json in BigQuery's JSON schema format.
func TestDryRunShowsAConvertedFilesSchema(t *testing.T) {
	s := table.Schema{{Name: "day", Type: table.Date}, {Name: "px", Type: table.Numeric, Precision: 18, Scale: 2}}
	part := func(i int) plan.File {
		f := plan.File{Object: "p/a.csv/part-0000" + string(rune('0'+i)) + ".parquet",
			Part: &plan.Part{Index: i, Count: 2, Schema: s, Comma: ','}}
		f.Rel, f.Size = "a.csv", 100
		return f
	}
	d := &producer.DryRun{Plan: &plan.Plan{Dest: plan.Destination{Bucket: "bkt", Prefix: "p"}, Files: []plan.File{part(0), part(1)}}}
	var text bytes.Buffer
	if err := PrintDryRun(&text, d, false); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(text.String(), "as 2 Parquet parts of schema: day DATE, px NUMERIC(18, 2)"); got != 1 {
		t.Fatalf("the schema line appears %d times, want once:\n%s", got, text.String())
	}
	var js bytes.Buffer
	if err := PrintDryRun(&js, d, true); err != nil {
		t.Fatal(err)
	}
	var first DryRunLine
	if err := json.Unmarshal(bytes.SplitN(js.Bytes(), []byte("\n"), 2)[0], &first); err != nil {
		t.Fatal(err)
	}
	again, err := table.ParseSchema(first.Schema)
	if err != nil || again.String() != s.String() || first.Parts != 2 {
		t.Fatalf("--json's first line %+v: schema %v (%v), want %s over 2 parts", first, again, err, s)
	}
}
