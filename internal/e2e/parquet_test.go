package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/plan"
	"github.com/ferry-dev/ferry/internal/producer"
	"github.com/ferry-dev/ferry/internal/table/tabletest"
	"github.com/ferry-dev/ferry/internal/testutil"
)

// objects lists the bucket's objects under prefix, ferry's own aside.
func (s *stack) objects(prefix string) map[string]gcs.Attrs {
	s.t.Helper()
	out := map[string]gcs.Attrs{}
	err := s.store.List(context.Background(), s.bucket, prefix, func(a gcs.Attrs) error {
		out[a.Name] = a
		return nil
	})
	if err != nil {
		s.t.Fatal(err)
	}
	return out
}

// Issue 29: with --convert parquet a CSV and a TSV land as typed Parquet
// parts under <path>/, read back cell by cell by parquet-go (not the
// writer's library) equal to the source, every part's CRC32C is GCS's, the
// rows add up to the records, and the other files travel as before. The
// binary's --dry-run prints the schema.
func TestCSVLandsAsParquetParts(t *testing.T) {
	s := newStack(t, stackOptions{workers: 2, inlineMax: 64 << 10})
	dir := filepath.Join(t.TempDir(), "export")
	seed := bytes.NewBuffer(seedCSV(t, dir, "prices.csv", 3<<20, 11))
	testutil.OK(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	tsv := "id\tnote\tat\n1\t\"two\nlines\"\t2026-12-04 10:00:00.123456\n2\t\t2026-12-04T10:00:01Z\n"
	testutil.OK(t, os.WriteFile(filepath.Join(dir, "sub", "notes.tsv"), []byte(tsv), 0o644))
	testutil.OK(t, os.WriteFile(filepath.Join(dir, "readme.txt"), []byte("not a table\n"), 0o644))
	// Named as --to csv once named its temporary file for prices.csv
	// (and emptied it, O_TRUNC, issue 42 §4).
	testutil.OK(t, os.WriteFile(filepath.Join(dir, ".prices.csv.ferry-csv"), []byte("a file of its own\n"), 0o644))

	env := s.env("FERRY_BUCKETS=" + s.bucket)
	// The TSV quotes its newline: said with --quote '"' (a TSV's quotes
	// are characters by default, as most TSV writers mean them).
	code, stdout, stderr := runBinary(t, env, "producer", "submit", "--dry-run", "--convert", "parquet", "--quote", `"`, "--chunk-size", "1MiB", dir, "gs://"+s.bucket+"/land")
	if code != 0 || !strings.Contains(stdout, "Parquet parts of schema: date DATE, symbol STRING") || !strings.Contains(stdout, "open NUMERIC(18, 6)") ||
		!strings.Contains(stdout, "land/export/prices.csv/part-00000.parquet") {
		t.Fatalf("dry run: exit %d, stdout:\n%s\nstderr: %s", code, stdout, stderr)
	}

	cv, err := plan.ParseConvert("parquet", nil, nil, "")
	testutil.OK(t, err)
	testutil.OK(t, plan.SetText(cv, "", nil, `"`))
	done, err := s.transfer(producer.Request{Sources: []string{dir}, Destination: "gs://" + s.bucket + "/land",
		ChunkSize: 1 << 20, Method: "e2e-parquet", Convert: cv})
	if err != nil || done.Status != message.StatusOK {
		t.Fatalf("transfer: %v, done %+v", err, done)
	}
	objs := s.objects("land/")
	var names []string
	for n := range objs {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(done.Objects) != len(names) {
		t.Fatalf("done event lists %d objects, the bucket holds %v", len(done.Objects), names)
	}
	for _, o := range done.Objects {
		a, ok := objs[strings.TrimPrefix(o.Name, "gs://"+s.bucket+"/")]
		if !ok || a.CRC32C != o.CRC32C || a.Size != o.Size {
			t.Fatalf("done event's %+v, the bucket's %+v", o, a)
		}
	}
	if _, ok := objs["land/export/readme.txt.zst"]; !ok {
		t.Fatalf("the text file did not travel as before: %v", names)
	}
	check := func(source string, data []byte, comma rune, wantParts int) {
		t.Helper()
		recs := tabletest.Records(t, data, comma)
		header, recs := recs[0], recs[1:]
		row, parts := 0, 0
		for _, n := range names {
			if !strings.HasPrefix(n, "land/export/"+source+"/part-") {
				continue
			}
			want := fmt.Sprintf("land/export/%s/part-%05d.parquet", source, parts)
			if n != want {
				t.Fatalf("part %s, want %s", n, want)
			}
			parts++
			b, err := s.store.ReadAll(context.Background(), s.bucket, n)
			testutil.OK(t, err)
			a := objs[n]
			if crc32c.Checksum(b) != a.CRC32C || a.ContentType != message.ParquetContentType || a.Metadata[message.MetaTableSource] != "export/"+source {
				t.Fatalf("%s: CRC32C %08x, GCS says %08x; content type %q; metadata %v", n, crc32c.Checksum(b), a.CRC32C, a.ContentType, a.Metadata)
			}
			cols, types, rows := tabletest.ReadBack(t, b)
			if strings.Join(cols, ",") != strings.Join(header, ",") {
				t.Fatalf("%s: columns %v, the header %v", n, cols, header)
			}
			if a.Metadata[message.MetaTableRows] != fmt.Sprint(len(rows)) {
				t.Fatalf("%s: metadata says %s rows, the file holds %d", n, a.Metadata[message.MetaTableRows], len(rows))
			}
			for _, got := range rows {
				for c := range got {
					if exp := tabletest.Expect(t, types[c], recs[row][c]); got[c] != exp {
						t.Fatalf("%s: record %d, column %s: Parquet %q, the source %q", n, row+1, cols[c], got[c], recs[row][c])
					}
				}
				row++
			}
		}
		if row != len(recs) || parts != wantParts {
			t.Fatalf("%s: %d rows in %d parts, the source has %d records (want %d parts)", source, row, parts, len(recs), wantParts)
		}
	}
	check("prices.csv", seed.Bytes(), ',', 3)
	check("sub/notes.tsv", []byte(tsv), '\t', 1)
	records := len(tabletest.Records(t, seed.Bytes(), ',')) - 1 + 2
	if row := s.row(done.TransferID); row.Status != "ok" || row.Files != len(names) || row.Rows != int64(records) || row.TableBytes != int64(seed.Len()-72+len(tsv)-len("id\tnote\tat\n")) {
		t.Fatalf("row %+v, want ok over %d files, %d rows", row, len(names), records)
	}
	s.assertClean()

	// restore --to csv gives the CSV back: the seed-like file byte for
	// byte, the TSV value for value, the text file as it was.
	out := filepath.Join(t.TempDir(), "out")
	code, _, stderr = runBinary(t, env, "restore", "--to", "csv", "gs://"+s.bucket+"/land/", out)
	if code != 0 || !strings.Contains(stderr, "2 delimited files written back from their Parquet parts") {
		t.Fatalf("restore --to csv: exit %d, %s", code, stderr)
	}
	back, err := os.ReadFile(filepath.Join(out, "export", "prices.csv"))
	testutil.OK(t, err)
	if !bytes.Equal(back, seed.Bytes()) {
		t.Fatalf("prices.csv came back as %d bytes, not the %d sent", len(back), seed.Len())
	}
	if b, err := os.ReadFile(filepath.Join(out, "export", "readme.txt")); err != nil || string(b) != "not a table\n" {
		t.Fatalf("readme.txt came back as %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(out, "export", ".prices.csv.ferry-csv")); err != nil || string(b) != "a file of its own\n" {
		t.Fatalf(".prices.csv.ferry-csv came back as %q, %v", b, err)
	}
	tsvBack, err := os.ReadFile(filepath.Join(out, "export", "sub", "notes.tsv"))
	testutil.OK(t, err)
	got, want := tabletest.Records(t, tsvBack, '\t'), tabletest.Records(t, []byte(tsv), '\t')
	types := []string{"INT64", "STRING", "TIMESTAMP"}
	for i := range want {
		for c := range want[i] {
			typ := types[c]
			if i == 0 {
				typ = "STRING" // the header
			}
			if tabletest.Expect(t, typ, got[i][c]) != tabletest.Expect(t, typ, want[i][c]) {
				t.Fatalf("notes.tsv record %d, column %d: %q came back as %q", i, c, want[i][c], got[i][c])
			}
		}
	}
	if left, _ := os.ReadDir(filepath.Join(out, ".ferry-to-csv")); len(left) != 0 {
		t.Fatalf("restore --to csv left its stage: %v", left)
	}
}

// Issue 29: a record the schema does not take fails the transfer with the
// file, line and column, and no part of the file (nor any other object of
// the transfer) is left behind.
func TestABadRecordLeavesNoPartBehind(t *testing.T) {
	s := newStack(t, stackOptions{workers: 2, inlineMax: 64 << 10})
	dir := filepath.Join(t.TempDir(), "export")
	lines := strings.SplitAfter(string(seedCSV(t, dir, "a.csv", 3<<20, 5)), "\n")
	bad := 25_000                     // in the third part: the first two are converted and stored first
	lines[bad-1] = "x" + lines[bad-1] // not a DATE
	testutil.OK(t, os.WriteFile(filepath.Join(dir, "b.csv"), []byte(strings.Join(lines, "")), 0o644))
	cv, err := plan.ParseConvert("parquet", nil, nil, "")
	testutil.OK(t, err)
	testutil.OK(t, plan.SetText(cv, "", nil, `"`))
	done, err := s.transfer(producer.Request{Sources: []string{dir}, Destination: "gs://" + s.bucket + "/land",
		ChunkSize: 1 << 20, Method: "e2e-parquet", Convert: cv})
	want := fmt.Sprintf("b.csv: line %d, column 1 (date)", bad)
	if err == nil || done.Status != message.StatusFailed || !strings.Contains(err.Error(), want) || !strings.Contains(done.Error, want) {
		t.Fatalf("submit: %v; done %+v; want both to say %q", err, done, want)
	}
	s.assertClean()
	if left := s.objects("land/"); len(left) != 0 {
		t.Fatalf("a failed transfer left %d objects: %v", len(left), left)
	}
}

// Issue 29: with --bad-rows N, up to N bad records of the whole transfer
// (a value that does not fit, a field missing, too many decimals, one in
// each of three parts) are left out and named, with their text, in
// rejects.ndjson beside the parts; the parts hold every other record, read
// back by parquet-go; the done event and the row count them, and restore
// --to csv gives back the file without them and the rejects beside it.
// One bad record more than allowed fails the transfer and leaves nothing.
func TestBadRowsLandInARejectsObject(t *testing.T) {
	s := newStack(t, stackOptions{workers: 2, inlineMax: 64 << 10})
	dir := filepath.Join(t.TempDir(), "export")
	lines := strings.SplitAfter(string(seedCSV(t, dir, "prices.csv", 3<<20, 17)), "\n")
	bad := map[int]string{}                       // after the 10,000 records the schema is inferred from
	at := func(n int, edit func(string) string) { // n: the 1-based line
		lines[n-1] = edit(lines[n-1])
		bad[n] = strings.TrimSuffix(lines[n-1], "\n")
	}
	at(10_200, func(l string) string { return "x" + l })                                                       // not a DATE
	at(15_000, func(l string) string { return l[:strings.LastIndexByte(l, ',')] + "\n" })                      // a field short
	at(25_000, func(l string) string { f := strings.Split(l, ","); f[5] += "7"; return strings.Join(f, ",") }) // 7 decimals
	data := strings.Join(lines, "")
	testutil.OK(t, os.WriteFile(filepath.Join(dir, "prices.csv"), []byte(data), 0o644))
	var good strings.Builder
	for i, l := range lines {
		if _, ok := bad[i+1]; !ok {
			good.WriteString(l)
		}
	}

	env := s.env("FERRY_BUCKETS=" + s.bucket)
	done, code, stderr := submitJSON(t, env, "--convert", "parquet", "--bad-rows", "3", "--chunk-size", "1MiB", dir, "gs://"+s.bucket+"/land")
	if code != 0 || done.Status != message.StatusOK || done.Rejected != 3 {
		t.Fatalf("submit --bad-rows 3: exit %d, done %+v\n%s", code, done, tail(stderr, 3000))
	}
	rejName := "land/export/prices.csv/" + message.RejectsName
	rej, err := s.store.ReadAll(context.Background(), s.bucket, rejName)
	testutil.OK(t, err)
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(string(rej)), "\n") {
		var r message.Reject
		testutil.OK(t, json.Unmarshal([]byte(l), &r))
		got = append(got, fmt.Sprintf("%s %d %d %s %q", r.Source, r.Line, r.Column, r.Name, r.Record))
		if r.Record != bad[int(r.Line)] || r.Error == "" {
			t.Fatalf("reject %+v: want the text of line %d, %q", r, r.Line, bad[int(r.Line)])
		}
	}
	want := fmt.Sprintf("export/prices.csv 10200 1 date %q|export/prices.csv 15000 0  %q|export/prices.csv 25000 6 open %q", bad[10200], bad[15000], bad[25000])
	if strings.Join(got, "|") != want {
		t.Fatalf("rejects:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.ReplaceAll(want, "|", "\n"))
	}
	listed := false
	for _, o := range done.Objects {
		listed = listed || o.Name == "gs://"+s.bucket+"/"+rejName && o.CRC32C == crc32c.Checksum(rej)
	}
	recs := tabletest.Records(t, []byte(good.String()), ',')[1:]
	row := 0
	for k := range 3 {
		b, err := s.store.ReadAll(context.Background(), s.bucket, fmt.Sprintf("land/export/prices.csv/part-%05d.parquet", k))
		testutil.OK(t, err)
		_, types, rows := tabletest.ReadBack(t, b)
		for _, r := range rows {
			for c := range r {
				if exp := tabletest.Expect(t, types[c], recs[row][c]); r[c] != exp {
					t.Fatalf("part %d, good record %d, column %d: Parquet %q, the CSV %q", k, row+1, c+1, r[c], recs[row][c])
				}
			}
			row++
		}
	}
	if !listed || row != len(recs) {
		t.Fatalf("rejects object listed in the done event: %v; parts hold %d rows, the good records are %d", listed, row, len(recs))
	}
	if r := s.row(done.TransferID); r.Rows != int64(len(recs)) || r.RowsRejected != 3 {
		t.Fatalf("row: %d rows, %d rejected; want %d and 3", r.Rows, r.RowsRejected, len(recs))
	}
	out := filepath.Join(t.TempDir(), "out")
	if code, _, stderr := runBinary(t, env, "restore", "--to", "csv", "gs://"+s.bucket+"/land/", out); code != 0 {
		t.Fatalf("restore --to csv: exit %d, %s", code, stderr)
	}
	back, err := os.ReadFile(filepath.Join(out, "export", "prices.csv"))
	testutil.OK(t, err)
	rejBack, err := os.ReadFile(filepath.Join(out, "export", "prices.csv."+message.RejectsName))
	testutil.OK(t, err)
	if string(back) != good.String() || !bytes.Equal(rejBack, rej) {
		t.Fatalf("restore --to csv: %d bytes of CSV (want the %d without the bad records), rejects %d bytes (want %d)", len(back), good.Len(), len(rejBack), len(rej))
	}

	// One bad record more than allowed: the transfer fails, naming one,
	// and leaves nothing.
	done, code, stderr = submitJSON(t, env, "--convert", "parquet", "--bad-rows", "2", "--chunk-size", "1MiB", dir, "gs://"+s.bucket+"/again")
	if code == 0 || done.Status == message.StatusOK || !strings.Contains(stderr, "more than 2 bad records in the transfer (--bad-rows)") || !strings.Contains(stderr, "export/prices.csv: line ") {
		t.Fatalf("submit --bad-rows 2: exit %d, done %+v\n%s", code, done, tail(stderr, 3000))
	}
	s.assertClean()
	if left := s.objects("again/"); len(left) != 0 {
		t.Fatalf("a failed transfer left %d objects: %v", len(left), left)
	}
}
