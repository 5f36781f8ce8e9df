package plan

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/internal/table"
	"github.com/ferry-dev/ferry/internal/testutil"
)

// A tree with converted and plain files plans in the order GCS lists the
// objects: a CSV's parts under its name and "/", beside a file whose name
// continues the CSV's; a matched .dat converts, a .txt does not; the parts
// cover the CSV's records after its header, one schema for all.
func TestConvertPlansPartsInObjectOrder(t *testing.T) {
	dir := t.TempDir()
	var csv strings.Builder
	csv.WriteString("id,price\n")
	for i := range 20_000 { // 160 kB: three parts of at least 64 KiB
		csv.WriteString(strings.Repeat("1", 1+i%3) + ",0.51\n")
	}
	files := map[string]string{
		"a.csv": csv.String(), "a.csv.gz": "zz", "b.dat": "x|y\n1|2\n", "c.txt": "text\n", "d/e.tsv": "k\tv\n1\ttrue\n",
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		testutil.OK(t, os.MkdirAll(filepath.Dir(p), 0o755))
		testutil.OK(t, os.WriteFile(p, []byte(body), 0o644))
	}
	cv, err := ParseConvert("parquet", []string{"*.dat"}, nil, "snappy")
	testutil.OK(t, err)
	p, err := New(Spec{Sources: []string{dir + "/"}, Destination: "gs://bkt/p", ChunkSize: MinRequestChunk, Convert: cv}, Limits{})
	testutil.OK(t, err)
	var objs []string
	var covered int64
	for i, f := range p.Files {
		objs = append(objs, f.Object)
		if i > 0 && p.Files[i-1].Object >= f.Object {
			t.Fatalf("objects out of order: %v", objs)
		}
		if f.Part != nil && strings.HasSuffix(f.Rel, "/a.csv") {
			covered += f.Size
			if f.Part.Schema.String() != "id INT64\nprice NUMERIC(18, 2)" || f.Part.Compression != "snappy" || f.Part.Comma != ',' {
				t.Fatalf("part %+v", f.Part)
			}
		}
	}
	want := strings.ReplaceAll("p/D/a.csv.gz.zst p/D/a.csv/part-00000.parquet p/D/a.csv/part-00001.parquet p/D/a.csv/part-00002.parquet "+
		"p/D/b.dat/part-00000.parquet p/D/c.txt.zst p/D/d/e.tsv/part-00000.parquet", "D", filepath.Base(dir))
	if got := strings.Join(objs, " "); got != want {
		t.Fatalf("objects\n%s\nwant\n%s", got, want)
	}
	if covered != int64(len(files["a.csv"])-len("id,price\n")) {
		t.Fatalf("a.csv's parts cover %d bytes, its records %d", covered, len(files["a.csv"])-9)
	}
}

// Issue 43 §1 and §3: a day with no events (a header only) converts to one
// part of no rows with its columns (STRING, or the given schema's), so that
// a load gives the table its 0 rows; a 0-byte file is skipped, counted and
// named, never fatal to the other files; a UTF-8 BOM is not part of the
// first column's name.
func TestEmptyDaysAndABOM(t *testing.T) {
	dir := t.TempDir()
	testutil.OK(t, os.WriteFile(filepath.Join(dir, "good.csv"), []byte("\ufeffid,name\r\n1,a\r\n2,b\r\n"), 0o644))
	testutil.OK(t, os.WriteFile(filepath.Join(dir, "header.csv"), []byte("id,name\n"), 0o644))
	testutil.OK(t, os.WriteFile(filepath.Join(dir, "empty.csv"), nil, 0o644))
	cv, err := ParseConvert("parquet", nil, nil, "")
	testutil.OK(t, err)
	p, err := New(Spec{Sources: []string{dir}, Destination: "gs://bkt/p", ChunkSize: MinRequestChunk, Convert: cv}, Limits{})
	testutil.OK(t, err)
	byName := map[string]File{}
	for _, f := range p.Files {
		byName[filepath.Base(f.Rel)] = f
	}
	good, header := byName["good.csv"], byName["header.csv"]
	if good.Part == nil || good.Part.Schema[0].Name != "id" || good.Part.Schema[0].Type != table.Int64 {
		t.Fatalf("good.csv: %+v; want its first column named id (no BOM) and INT64", good.Part)
	}
	if header.Part == nil || header.Part.Count != 1 || header.Size != 0 || header.Part.Schema.String() != table.Schema(table.Schema{{Name: "id", Type: table.String}, {Name: "name", Type: table.String}}).String() {
		t.Fatalf("header.csv: %+v; want one part of no bytes, its columns STRING", header.Part)
	}
	if len(p.Skipped) != 1 || filepath.Base(p.Skipped[0].Rel) != "empty.csv" || p.Skipped[0].Reason != SkipEmptyTable {
		t.Fatalf("skipped %+v; want empty.csv, as %q", p.Skipped, SkipEmptyTable)
	}
}

// What cannot be converted is refused naming the file: a header the given
// schema does not name, a broken quote, too many columns; and what a
// request cannot ask for.
func TestConvertRefusals(t *testing.T) {
	dir := t.TempDir()
	schema := []byte(`[{"name":"id","type":"INT64"},{"name":"name","type":"STRING"}]`)
	for name, tc := range map[string]struct {
		body, schema, want string
	}{
		"names.csv": {"id,nom\n1,x\n", string(schema), `names.csv: line 1, column 2: the header says "nom", the schema "name"`},
		"count.csv": {"id\n1\n", string(schema), "count.csv: line 1: the header has 1 columns, the schema 2"},
		"quote.csv": {"id,name\n1,\"x\n", "", "quote.csv: line 2: " + table.ErrUnterminatedQuote.Error()},
		"wide.csv":  {strings.Repeat("c,", table.MaxColumns) + "c\n1\n", "", "wide.csv: line 1: the header has 10001 columns; BigQuery takes 10000 at most"},
	} {
		p := filepath.Join(dir, name)
		testutil.OK(t, os.WriteFile(p, []byte(tc.body), 0o644))
		cv, err := ParseConvert("parquet", nil, []byte(tc.schema), "")
		testutil.OK(t, err)
		_, err = New(Spec{Sources: []string{p}, Destination: "gs://bkt/p", ChunkSize: MinRequestChunk, Convert: cv}, Limits{})
		if err == nil || !strings.HasSuffix(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error ending %q", name, err, tc.want)
		}
	}
	for _, tc := range []struct {
		kind, match, compression, want string
	}{
		{"orc", "", "", `convert "orc": want parquet`},
		{"", "*.dat", "", "without --convert parquet"},
		{"parquet", "a/*.dat", "", `matches a file's name`},
		{"parquet", "", "lz4", `parquet compression "lz4"`},
	} {
		var match []string
		if tc.match != "" {
			match = []string{tc.match}
		}
		if _, err := ParseConvert(tc.kind, match, nil, tc.compression); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc, err, tc.want)
		}
	}
	for _, tc := range []struct {
		c    *Convert
		n    int
		want string
	}{
		{nil, 5, "bad rows 5 without --convert parquet: only a conversion reads records"},
		{&Convert{}, -1, "bad rows -1: want 0 to 10000"},
		{&Convert{}, MaxBadRows + 1, "bad rows 10001: want 0 to 10000"},
	} {
		if err := SetBadRows(tc.c, tc.n); err == nil || err.Error() != tc.want {
			t.Errorf("SetBadRows(%v, %d): %v, want %q", tc.c, tc.n, err, tc.want)
		}
	}
	if c := (&Convert{}); SetBadRows(c, MaxBadRows) != nil || c.BadRows != MaxBadRows || SetBadRows(nil, 0) != nil {
		t.Fatalf("SetBadRows refuses what it allows")
	}
	_, err := Open(Spec{Sources: []string{"-"}, Destination: "gs://bkt/p", ChunkSize: MinRequestChunk, Convert: &Convert{}}, Limits{})
	if err == nil || !strings.Contains(err.Error(), "standard input cannot be converted") {
		t.Fatalf("stdin: %v", err)
	}
}

// The key=value directories right above a converted file become its
// parts' constant columns, the nearest ten at most; a key the header names
// too, in any case, or a key named twice, is refused naming the file.
func TestHiveColumns(t *testing.T) {
	s := table.Schema{{Name: "id", Type: table.Int64}, {Name: "Lang", Type: table.String}}
	var deep []string
	for i := range 12 {
		deep = append(deep, "k"+string(rune('a'+i))+"=1")
	}
	for _, tc := range []struct{ rel, want string }{
		{"export/dt=2026-12-01/region=eu/a.csv", "[{dt 2026-12-01} {region eu}]"},
		{"dt=2026-12-01/export/a.csv", "[]"}, // not right above it
		{"a.csv", "[]"},
		{strings.Join(deep, "/") + "/a.csv", "[{kc 1} {kd 1} {ke 1} {kf 1} {kg 1} {kh 1} {ki 1} {kj 1} {kk 1} {kl 1}]"},
		{"x/lang=en/a.csv", "error: source /src/x/lang=en/a.csv: column Lang of its header is also the directory lang=en above it"},
		{"dt=1/dt=2/a.csv", "error: source /src/dt=1/dt=2/a.csv: the directories above it name dt twice"},
	} {
		keys, err := hiveColumns(SourceFile{Path: "/src/" + tc.rel, Rel: tc.rel}, s)
		got := fmt.Sprint(keys)
		if err != nil {
			got = "error: " + err.Error()
		}
		if !strings.HasPrefix(got, tc.want) || (keys == nil && err == nil && tc.want != "[]") {
			t.Errorf("%s: %s, want %s", tc.rel, got, tc.want)
		}
	}
}

// --infer-rows takes a number of records or all, and only with a conversion.
func TestSetInferRows(t *testing.T) {
	c := &Convert{}
	for v, want := range map[string]int{"": 0, "all": -1, "ALL": -1, "50000": 50000} {
		c.InferRows = 0
		if err := SetInferRows(c, v); err != nil || c.InferRows != want {
			t.Errorf("%q: %v, InferRows %d, want %d", v, err, c.InferRows, want)
		}
	}
	for _, v := range []string{"0", "-3", "some"} {
		if err := SetInferRows(c, v); err == nil || !strings.Contains(err.Error(), "want a number of records") {
			t.Errorf("%q: %v", v, err)
		}
	}
	if err := SetInferRows(nil, "all"); err == nil || !strings.Contains(err.Error(), "without --convert parquet") {
		t.Errorf("without a conversion: %v", err)
	}
}
