package table_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/ferry-dev/ferry/internal/bench/datagen"
	"github.com/ferry-dev/ferry/internal/table"
	"github.com/ferry-dev/ferry/internal/table/tabletest"
	"github.com/ferry-dev/ferry/internal/testutil"
)

// convertFile cuts data into parts of target bytes, converts each, and
// returns the Parquet parts and the schema inferred from its header and
// first records.
func convertFile(t testing.TB, data []byte, comma rune, target int64, s table.Schema) ([][]byte, table.Schema, *table.Layout) {
	t.Helper()
	l, err := table.Cut(bytes.NewReader(data), "data.csv", target, comma)
	if err != nil {
		t.Fatal(err)
	}
	if s == nil {
		hdr := tabletest.Records(t, l.Header, comma)[0]
		sample := tabletest.Records(t, data[l.Parts[0].Offset:l.Parts[0].Offset+l.Parts[0].Size], comma)
		if s, err = table.Infer(hdr, sample); err != nil {
			t.Fatal(err)
		}
	}
	c, err := table.NewConverter(s, table.Options{Comma: comma})
	if err != nil {
		t.Fatal(err)
	}
	var parts [][]byte
	for _, p := range l.Parts {
		b, _, err := c.Convert(data[p.Offset:p.Offset+p.Size], "data.csv", p.Line)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, bytes.Clone(b))
	}
	return parts, s, l
}

// Seed-like data (internal/datagen, what make run sends) becomes typed
// Parquet parts: dates as DATE, prices as exact decimals, volumes as
// INT64; read back by parquet-go, every cell equals the CSV's and the rows
// add up to its records.
func TestSeedDataRoundTripsCellByCell(t *testing.T) {
	var buf bytes.Buffer
	if _, err := datagen.WriteCSV(&buf, 3<<20, 7); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	parts, s, l := convertFile(t, data, ',', 512<<10, nil)
	if len(parts) < 5 {
		t.Fatalf("%d parts of a 3 MiB file cut at 512 KiB", len(parts))
	}
	want := "date DATE\nsymbol STRING\nisin STRING\nexchange STRING\ncurrency STRING\nopen NUMERIC(18, 6)\nhigh NUMERIC(18, 6)\nlow NUMERIC(18, 6)\nclose NUMERIC(18, 6)\nadj_close NUMERIC(18, 6)\nvolume INT64"
	if s.String() != want {
		t.Fatalf("schema:\n%s\nwant:\n%s", s, want)
	}
	recs := tabletest.Records(t, data, ',')
	header, recs := recs[0], recs[1:]
	row := 0
	for k, part := range parts {
		names, types, rows := tabletest.ReadBack(t, part)
		if strings.Join(names, ",") != strings.Join(header, ",") {
			t.Fatalf("part %d: columns %v, want %v", k, names, header)
		}
		if k == 0 {
			t.Logf("types read back: %v", types)
			if types[0] != "DATE" || types[5] != "DECIMAL(18,6)" || types[10] != "INT64" || types[1] != "STRING" {
				t.Fatalf("types read back: %v", types)
			}
		}
		for _, got := range rows {
			if row >= len(recs) {
				t.Fatalf("more rows than the CSV's %d records", len(recs))
			}
			for c := range got {
				if exp := tabletest.Expect(t, types[c], recs[row][c]); got[c] != exp {
					t.Fatalf("record %d (line %d of the CSV), column %s: Parquet has %q, the CSV %q", row+1, row+2, names[c], got[c], recs[row][c])
				}
			}
			row++
		}
	}
	if row != len(recs) {
		t.Fatalf("parts hold %d rows, the CSV %d records", row, len(recs))
	}
	var pq int
	for _, p := range parts {
		pq += len(p)
	}
	t.Logf("%d bytes of CSV, %d records: %d parts, %d bytes of Parquet (%.2fx smaller); header %d bytes", len(data), len(recs), len(parts), pq, float64(len(data))/float64(pq), len(l.Header))
}

// Every type ferry infers, NULLs, quoted fields with commas, quotes and
// newlines, a TSV, and a cut that falls inside a quoted newline.
func TestEveryTypeAndQuotedNewlines(t *testing.T) {
	var b strings.Builder
	b.WriteString("id,price,ratio,ok,day,at,note,code\n")
	for i := range 400 {
		note := fmt.Sprintf("\"line one\nline \"\"two\"\", with a comma %d\"", i)
		if i%7 == 0 {
			note = ""
		}
		ratio := fmt.Sprintf("%g", float64(i)/3)
		if i == 5 {
			ratio = "6.02e23" // an exponent: FLOAT64, not the exact decimals the others are
		}
		price := fmt.Sprintf("%d.%02d", i-200, i%100)
		if i == 3 {
			price = "-0.51"
		}
		fmt.Fprintf(&b, "%d,%s,%s,%v,2026-%02d-%02d,2026-12-03 10:%02d:%02d.%06d,%s,%03d\n", i, price, ratio, i%2 == 0, 1+i%12, 1+i%28, i%60, i%60, i, note, i%50)
	}
	b.WriteString("400,,,,,,,007") // NULLs, and no final newline
	data := []byte(b.String())
	for _, comma := range []rune{',', '\t'} {
		d := data
		if comma == '\t' {
			d = []byte(strings.ReplaceAll(b.String(), ",", "\t")) // no commas in values but the note's
		}
		parts, s, _ := convertFile(t, d, comma, 2<<10, nil)
		wantTypes := []table.Type{table.Int64, table.Numeric, table.Float64, table.Bool, table.Date, table.Timestamp, table.String, table.String}
		for i, f := range s {
			if f.Type != wantTypes[i] {
				t.Fatalf("comma %q: column %s inferred %s, want %s (schema %s)", comma, f.Name, f.Type, wantTypes[i], s)
			}
		}
		recs := tabletest.Records(t, d, comma)[1:]
		row := 0
		for _, part := range parts {
			_, types, rows := tabletest.ReadBack(t, part)
			for _, got := range rows {
				for c := range got {
					if exp := tabletest.Expect(t, types[c], recs[row][c]); got[c] != exp {
						t.Fatalf("comma %q: record %d, column %d (%s): Parquet %q, CSV %q", comma, row+1, c+1, types[c], got[c], recs[row][c])
					}
				}
				row++
			}
		}
		if row != len(recs) || len(parts) < 10 {
			t.Fatalf("comma %q: %d rows in %d parts, the file %d records", comma, row, len(parts), len(recs))
		}
	}
}

// A NUMERIC wider than an INT64 (BigQuery's NUMERIC is 38 digits, 9 of
// them decimals) is stored as Parquet's fixed-length two's complement:
// parquet-go reads every value back exactly, negative ones and NULLs
// included, and restore's CSV writer gives back the CSV.
func TestWideNumericsRoundTrip(t *testing.T) {
	s := table.Schema{{Name: "id", Type: table.Int64, Required: true}, {Name: "amount", Type: table.Numeric, Precision: 38, Scale: 9}}
	vals := []string{
		"99999999999999999999999999999.999999999", "-99999999999999999999999999999.999999999",
		"0.000000001", "-0.000000001", "", "12345678901234567890.5", "-1", "0", "9223372036854775808",
	}
	var in, want strings.Builder
	want.WriteString("id,amount\n")
	for i, v := range vals {
		fmt.Fprintf(&in, "%d,%s\n", i, v)
		fmt.Fprintf(&want, "%d,%s\n", i, tabletest.Expect(t, "DECIMAL(38,9)", v))
	}
	c, err := table.NewConverter(s, table.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pq, rows, err := c.Convert([]byte(in.String()), "wide.csv", 2)
	if err != nil || rows != int64(len(vals)) {
		t.Fatalf("%d rows, %v; want %d", rows, err, len(vals))
	}
	_, types, got := tabletest.ReadBack(t, pq)
	if types[1] != "DECIMAL(38,9)" {
		t.Fatalf("types read back: %v", types)
	}
	for i, v := range vals {
		if exp := tabletest.Expect(t, types[1], v); got[i][1] != exp {
			t.Errorf("row %d: parquet-go reads %q, the CSV says %q (%q)", i, got[i][1], v, exp)
		}
	}
	var out bytes.Buffer
	w := table.NewCSVWriter(&out, ',')
	if err := w.Part(context.Background(), "part-00000.parquet", bytes.NewReader(pq)); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if out.String() != want.String() {
		t.Fatalf("restore --to csv wrote:\n%s\nwant:\n%s", out.String(), want.String())
	}
}

// Bad input is refused with the file, line and column at fault.
func TestBadInputNamesLineAndColumn(t *testing.T) {
	s := table.Schema{{Name: "id", Type: table.Int64}, {Name: "price", Type: table.Numeric, Precision: 18, Scale: 2}, {Name: "name", Type: table.String}}
	big := strings.Repeat("x", 10<<20)
	cases := []struct {
		name, data string
		line       int64
		want       string
	}{
		{"wrong field count", "1,2.50,a\n2,3.00\n", 10, "data.csv: line 11: wrong number of fields: 2 fields, the header has 3"},
		{"not an integer", "1,2.50,a\nx2,3.00,b\n", 10, `data.csv: line 11, column 1 (id): "x2" is not an INT64`},
		{"too many decimals", "1,2.505,a\n", 10, `data.csv: line 10, column 2 (price): "2.505" has 3 decimals; the column is NUMERIC(18, 2) and ferry does not round`},
		{"invalid UTF-8", "1,2.50,a\xff\n", 4, "data.csv: line 4, column 3 (name): invalid UTF-8"},
		{"line after a quoted newline", "1,2.50,\"a\nb\"\n2,x,c\n", 2, `data.csv: line 4, column 2 (price): "x" is not a NUMERIC`},
		{"10 MB field", "1,2.50," + big + "\n", 2, "data.csv: line 2, column 3 (name): field of 10485760 bytes; ferry converts fields up to 4194304"},
	}
	c, err := table.NewConverter(s, table.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		_, _, err := c.Convert([]byte(tc.data), "data.csv", tc.line)
		var re *table.RowError
		if !errors.As(err, &re) || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one starting %q", tc.name, err, tc.want)
		}
	}
}

// With BadRows, a record with the wrong number of fields or a value that
// does not fit is left out, with its line, column and text, and the rest
// of the part converts: the values of a record refused at its third
// column are taken back from the first two (parquet-go reads exactly the
// good records). One more bad record than allowed fails the part, naming
// it; a broken quote fails it whatever BadRows says.
func TestBadRowsAreLeftOutAndNamed(t *testing.T) {
	s := table.Schema{{Name: "id", Type: table.Int64}, {Name: "note", Type: table.String}, {Name: "price", Type: table.Numeric, Precision: 18, Scale: 2}}
	data := "1,a,1.50\n" +
		"2,b\n" + // line 11: a field short
		"3,c,x\n" + // line 12: not a NUMERIC, after two good values
		",d,2.00\n" +
		"\"4\",\"e\nf\",9.999\n" + // line 14-15, quoted: too many decimals
		"5,\"g\",3.25,extra\n" + // line 16: a field too many
		"6,h,4.00\n"
	c, err := table.NewConverter(s, table.Options{BadRows: 4})
	if err != nil {
		t.Fatal(err)
	}
	pq, rows, err := c.Convert([]byte(data), "data.csv", 10)
	if err != nil || rows != 3 {
		t.Fatalf("%d rows, %v; want 3", rows, err)
	}
	var got []string
	for _, r := range c.Rejects {
		got = append(got, fmt.Sprintf("%s | %q", r.Err, r.Record))
	}
	want := []string{
		`data.csv: line 11: wrong number of fields: 2 fields, the header has 3 | "2,b"`,
		`data.csv: line 12, column 3 (price): "x" is not a NUMERIC | "3,c,x"`,
		`data.csv: line 15, column 3 (price): "9.999" has 3 decimals; the column is NUMERIC(18, 2) and ferry does not round | "\"4\",\"e\nf\",9.999"`,
		`data.csv: line 16: wrong number of fields: 4 fields, the header has 3 | "5,\"g\",3.25,extra"`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("rejects:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	_, _, back := tabletest.ReadBack(t, pq)
	if fmt.Sprint(back) != "[[1 a 1.50] [ d 2.00] [6 h 4.00]]" {
		t.Fatalf("parquet-go reads %v", back)
	}

	c, _ = table.NewConverter(s, table.Options{BadRows: 3})
	if _, _, err := c.Convert([]byte(data), "data.csv", 10); !errors.Is(err, table.ErrTooManyBadRows) || !strings.Contains(err.Error(), "data.csv: line 16: wrong number of fields") {
		t.Fatalf("a fourth bad record with 3 allowed: %v", err)
	}
	c, _ = table.NewConverter(s, table.Options{BadRows: 100})
	long := "7," + strings.Repeat("y", 5000) + ",zz\n"
	if _, _, err := c.Convert([]byte(long), "data.csv", 2); err != nil || len(c.Rejects) != 1 || !c.Rejects[0].Truncated || len(c.Rejects[0].Record) != table.MaxRejectText {
		t.Fatalf("a long bad record: %v, %+v", err, c.Rejects)
	}
}

// Cut refuses an unterminated quote, names a header-only and an empty file
// by having no parts, and never cuts inside quotes.
func TestCutEdges(t *testing.T) {
	if _, err := table.Cut(strings.NewReader("a,b\n1,\"open\n2,3\n"), "x.csv", 4, ','); !errors.Is(err, table.ErrUnterminatedQuote) || !strings.HasPrefix(err.Error(), "x.csv: line 2: ") {
		t.Fatalf("unterminated quote: %v", err)
	}
	for _, d := range []string{"", "a,b\n", "a,b"} {
		l, err := table.Cut(strings.NewReader(d), "x.csv", 4, ',')
		if err != nil || len(l.Parts) != 0 {
			t.Fatalf("%q: %+v, %v; want no parts", d, l, err)
		}
	}
	l, err := table.Cut(strings.NewReader("a,b\n1,\"x\ny\"\n2,3\n4,5"), "x.csv", 1, ',')
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(l.Parts)
	if want := "[{4 8 2} {12 4 4} {16 3 5}]"; got != want {
		t.Fatalf("parts %s, want %s", got, want)
	}
	// A file does not choose the size of a part: a record longer than
	// MaxRecord is refused, with or without its newline.
	huge := strings.Repeat("x", table.MaxRecord+1)
	for _, d := range []string{"a\n1\n" + huge + "\n2\n", "a\n1\n" + huge} {
		_, err := table.Cut(strings.NewReader(d), "x.csv", 1<<20, ',')
		if err == nil || !strings.HasPrefix(err.Error(), "x.csv: line 3: a record of more than 67108864 bytes") {
			t.Fatalf("a record of %d bytes: %v", len(huge), err)
		}
	}
}

// A schema in BigQuery's JSON format, as bq show --schema prints it and as
// its REST API writes it (numbers as strings), and what is refused.
func TestParseSchema(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "s.json")
	if err := os.WriteFile(p, []byte(`[{"name":"id","type":"INTEGER","mode":"REQUIRED"},{"name":"px","type":"NUMERIC","precision":"10","scale":2},{"name":"at","type":"TIMESTAMP"}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	s, err := table.ParseSchema(b)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.String(); got != "id INT64 REQUIRED\npx NUMERIC(10, 2)\nat TIMESTAMP" {
		t.Fatalf("schema %q", got)
	}
	out, _ := s.MarshalJSON()
	if again, err := table.ParseSchema(out); err != nil || again.String() != s.String() {
		t.Fatalf("round trip %s: %v %v", out, again, err)
	}
	for in, want := range map[string]string{
		`[{"name":"a","type":"RECORD"}]`:                             "type \"RECORD\"",
		`[{"name":"a","type":"STRING","mode":"REPEATED"}]`:           "mode \"REPEATED\"",
		`[{"name":"a","type":"STRING"},{"name":"A","type":"INT64"}]`: `name "A" appears twice`,
		`[{"name":"a","type":"STRING","colour":"red"}]`:              "unknown field",
		`[]`: "no fields",
		"[" + strings.Repeat(`{"name":"c","type":"STRING"},`, table.MaxColumns) + `{"name":"d","type":"STRING"}]`: "10001 fields; BigQuery takes 10000 at most",
		`{"fields":[{"name":"a","type":"NUMERIC","scale":"12"}]}`:                                                 "scale 12",
	} {
		if _, err := table.ParseSchema([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q", in, err, want)
		}
	}
}

// Constants (the key=value directories above a file) become columns after
// the file's, the same value in every row, read back by parquet-go; a bad
// record left out takes none of them along, and restore's CSV writer
// leaves them out, giving the file back.
func TestConstantColumnsFollowTheFilesAndStayOutOfTheCSV(t *testing.T) {
	s := table.Schema{{Name: "id", Type: table.Int64}, {Name: "note", Type: table.String}}
	c, err := table.NewConverter(s, table.Options{BadRows: 1, Constants: []table.Constant{{Name: "dt", Value: "2026-12-04"}, {Name: "lang", Value: "en"}}})
	if err != nil {
		t.Fatal(err)
	}
	pq, rows, err := c.Convert([]byte("1,a\nx,b\n2,\"c\nd\"\n"), "dt=2026-12-04/lang=en/a.csv", 2)
	if err != nil || rows != 2 || len(c.Rejects) != 1 {
		t.Fatalf("%d rows, %v, rejects %+v", rows, err, c.Rejects)
	}
	names, types, back := tabletest.ReadBack(t, pq)
	if fmt.Sprint(names, types) != "[id note dt lang] [INT64 STRING STRING STRING]" || fmt.Sprint(back) != "[[1 a 2026-12-04 en] [2 c\nd 2026-12-04 en]]" {
		t.Fatalf("parquet-go reads %v %v %q", names, types, back)
	}
	var out bytes.Buffer
	w := table.NewCSVWriter(&out, ',')
	testutil.OK(t, w.Part(context.Background(), "part-00000.parquet", bytes.NewReader(pq)))
	testutil.OK(t, w.Flush())
	if out.String() != "id,note\n1,a\n2,\"c\nd\"\n" {
		t.Fatalf("restore --to csv wrote %q", out.String())
	}
}

// Issue 43 §7: ZIP codes sorted descending, whose first leading zero comes
// after the 10,000 records inference reads, were stored as INT64 with the
// zeros dropped (02134 as 2134) and the transfer ended ok. An inferred
// column's rules hold for every value: the record fails naming its line
// and column, or with BadRows is left out, and no value is stored altered.
func TestAnInferredTypeNeverAltersALaterValue(t *testing.T) {
	var b strings.Builder
	b.WriteString("zip,city\n")
	n := 0
	for z := 99999; n < table.SampleRows+500; z -= 9 {
		fmt.Fprintf(&b, "%05d,c%d\n", z, n)
		n++
	}
	data := []byte(b.String())
	src, err := table.Scan(bytes.NewReader(data), int64(len(data)), "zips.csv", 1<<30, table.ScanOptions{Comma: ','})
	if err != nil {
		t.Fatal(err)
	}
	if src.Schema[0].Type != table.Int64 || !src.Inferred {
		t.Fatalf("schema %v inferred %v: the sample holds no leading zero, so INT64 is the sample's type", src.Schema, src.Inferred)
	}
	p := src.Parts[0]
	c, err := table.NewConverter(src.Schema, table.Options{Inferred: true})
	testutil.OK(t, err)
	_, _, err = c.Convert(data[p.Offset:p.Offset+p.Size], "zips.csv", p.Line)
	var re *table.RowError
	if !errors.As(err, &re) || re.Column != 1 || !strings.Contains(err.Error(), "would lose its leading zeros as an INT64") {
		t.Fatalf("converting the zips: %v; want the first code with a leading zero refused, naming its line and column", err)
	}
	if first := strings.Index(b.String(), "\n0"); re.Line != int64(strings.Count(b.String()[:first+1], "\n")+1) {
		t.Errorf("refused at line %d, want the first code with a leading zero (%s)", re.Line, err)
	}
	// With BadRows, those records are left out and named, and every
	// value stored is the text's.
	c, err = table.NewConverter(src.Schema, table.Options{Inferred: true, BadRows: 1000})
	testutil.OK(t, err)
	_, rows, err := c.Convert(data[p.Offset:p.Offset+p.Size], "zips.csv", p.Line)
	testutil.OK(t, err)
	if zeros := strings.Count(b.String(), "\n0"); len(c.Rejects) != zeros || rows != int64(n-zeros) {
		t.Fatalf("%d rows, %d rejects; want %d rejects (each leading zero) and the other %d rows", rows, len(c.Rejects), zeros, n-zeros)
	}
	// --infer-rows all: the whole file decides, and the codes are text.
	all, err := table.Scan(bytes.NewReader(data), int64(len(data)), "zips.csv", 1<<30, table.ScanOptions{Comma: ',', InferRows: -1})
	testutil.OK(t, err)
	if all.Schema[0].Type != table.String {
		t.Fatalf("--infer-rows all: zip is %s, want STRING", all.Schema[0].Type)
	}
	// A given schema takes what its types parse, as BigQuery's loads do.
	c, err = table.NewConverter(src.Schema, table.Options{})
	testutil.OK(t, err)
	if _, _, err := c.Convert(data[p.Offset:p.Offset+p.Size], "zips.csv", p.Line); err != nil {
		t.Fatalf("a given INT64 schema: %v", err)
	}
}

// Issue 43 §7 and §8: the sample is the first SampleRows records whatever
// the parts' size (a 12.5 at record 7,001 sets the column's scale with
// parts of 16 KiB too: NUMERIC at its scale), and with --bad-rows a record of the wrong field
// count inside the sample does not stop the planning: it is left out of
// the inference, and the conversion leaves it out, named.
func TestTheSampleIsTheFirstRecordsWhateverThePartsAndTakesBadRows(t *testing.T) {
	var b strings.Builder
	b.WriteString("n,v\n")
	for i := range 8000 {
		switch i {
		case 7000:
			b.WriteString("7000,12.5\n")
		case 3:
			b.WriteString("3\n") // one field short
		default:
			fmt.Fprintf(&b, "%d,%d\n", i, i)
		}
	}
	data := []byte(b.String())
	if _, err := table.Scan(bytes.NewReader(data), int64(len(data)), "d.csv", 16<<10, table.ScanOptions{Comma: ','}); err == nil || !strings.Contains(err.Error(), "line 5") {
		t.Fatalf("no --bad-rows: %v, want the short record refused naming line 5", err)
	}
	src, err := table.Scan(bytes.NewReader(data), int64(len(data)), "d.csv", 16<<10, table.ScanOptions{Comma: ',', BadRows: 1})
	testutil.OK(t, err)
	if len(src.Parts) < 4 || (table.Schema{src.Schema[1]}).String() != "v NUMERIC(18, 1)" {
		t.Fatalf("%d parts, schema %v: want several parts and v NUMERIC(18, 1) from the 7,001st record", len(src.Parts), src.Schema)
	}
}

// Issue 43 §2: an empty field is NULL in every type, a quoted "" an empty
// STRING, as DuckDB and BigQuery read them, on the fast path (a line with
// no quote) and on encoding/csv's (a record with one); restore --to csv
// writes them back as they came: NULL as an empty field, "" quoted.
func TestEmptyIsNullAndQuotedEmptyIsAString(t *testing.T) {
	s := table.Schema{{Name: "id", Type: table.Int64}, {Name: "note", Type: table.String}, {Name: "n", Type: table.Int64}}
	c, err := table.NewConverter(s, table.Options{})
	testutil.OK(t, err)
	// (A quoted "" in another type is NULL, as DuckDB's allow_quoted_nulls
	// reads it.)
	data := []byte("id,note,n\n1,,\n2,\"\",5\n3,\"a \"\"b\"\"\",\n4,x,\n5,\"\",\n6,,\"\"\n")
	b, _, err := c.Convert(data[len("id,note,n\n"):], "d.csv", 2)
	testutil.OK(t, err)
	_, _, rows := tabletest.ReadBackNulls(t, b)
	N := tabletest.Null
	want := [][]string{{"1", N, N}, {"2", "", "5"}, {"3", `a "b"`, N}, {"4", "x", N}, {"5", "", N}, {"6", N, N}}
	if fmt.Sprint(rows) != fmt.Sprint(want) {
		t.Fatalf("rows %q\nwant %q", rows, want)
	}
	var out bytes.Buffer
	w := table.NewCSVWriter(&out, ',')
	testutil.OK(t, w.Part(context.Background(), "part", bytes.NewReader(b)))
	testutil.OK(t, w.Flush())
	if want := strings.TrimSuffix(string(data), "6,,\"\"\n") + "6,,\n"; out.String() != want {
		t.Fatalf("restore --to csv wrote\n%s\nwant\n%s", out.String(), want)
	}
}

// Issue 43 §9: BOOL takes the spellings BigQuery's CSV loads take, in any
// case; a column of them is inferred BOOL, and a given BOOL takes 1 and 0.
func TestBoolSpellings(t *testing.T) {
	hdr := []string{"a", "b", "c"}
	sample := [][]string{{"yes", "T", "y"}, {"No", "f", "N"}, {"YES", "t", "Y"}}
	s, err := table.Infer(hdr, sample)
	testutil.OK(t, err)
	for _, f := range s {
		if f.Type != table.Bool {
			t.Fatalf("schema %s: want every column BOOL", s)
		}
	}
	c, err := table.NewConverter(table.Schema{{Name: "a", Type: table.Bool}}, table.Options{})
	testutil.OK(t, err)
	b, _, err := c.Convert([]byte("1\n0\nTrue\nn\n"), "d.csv", 2)
	testutil.OK(t, err)
	if _, _, rows := tabletest.ReadBack(t, b); fmt.Sprint(rows) != "[[true] [false] [true] [false]]" {
		t.Fatalf("rows %v", rows)
	}
	if _, _, err := c.Convert([]byte("maybe\n"), "d.csv", 2); err == nil || !strings.Contains(err.Error(), "is not a BOOL (true/false, t/f, yes/no, y/n, 1/0)") {
		t.Fatalf("maybe: %v", err)
	}
}

// Issue 43 §9: bq show --schema --format=prettyjson prints descriptions,
// maxLength, policy tags and the rest beside name and type; ferry takes
// its output as it is, and holds a STRING to its maxLength.
func TestBQShowSchemaOutputIsTakenAsItIs(t *testing.T) {
	out := `[
  {"description": "the trading day", "mode": "REQUIRED", "name": "day", "type": "DATE"},
  {"maxLength": "4", "mode": "NULLABLE", "name": "sym", "type": "STRING", "policyTags": {"names": []}},
  {"defaultValueExpression": "0", "name": "px", "precision": "10", "scale": "2", "type": "NUMERIC", "roundingMode": "ROUND_HALF_EVEN"},
  {"collation": "und:ci", "name": "note", "type": "STRING"}
]`
	s, err := table.ParseSchema([]byte(out))
	testutil.OK(t, err)
	if got := s.String(); got != "day DATE REQUIRED\nsym STRING\npx NUMERIC(10, 2)\nnote STRING" || s[1].MaxLength != 4 {
		t.Fatalf("schema %q (maxLength %d)", got, s[1].MaxLength)
	}
	c, err := table.NewConverter(s, table.Options{})
	testutil.OK(t, err)
	if _, _, err := c.Convert([]byte("2026-12-05,ABCD,1.50,x\n2026-12-05,ABCDE,1.50,x\n"), "d.csv", 2); err == nil ||
		!strings.Contains(err.Error(), `line 3, column 2 (sym): "ABCDE" is 5 characters; the column's maxLength is 4`) {
		t.Fatalf("a value over maxLength: %v", err)
	}
	if _, err := table.ParseSchema([]byte(`[{"name":"a","type":"INT64","maxLength":"3"}]`)); err == nil || !strings.Contains(err.Error(), "of a STRING column") {
		t.Fatalf("maxLength on an INT64: %v", err)
	}
}

// Issue 43 §1: a header name BigQuery's column names do not take gets one
// they do instead of the file being refused (an empty one its position, as
// DuckDB names it), said in the schema's text and, as the column's
// description, in its JSON; a given schema may name the column either way;
// duplicates stay refused, naming both columns.
func TestHeaderNamesBigQueryRefusesAreMapped(t *testing.T) {
	hdr := []string{"", "Amount ($)", "Qty.", "ratio/pct", "@at", "_PARTITIONTIME", "ok name", "naïve-ü"}
	s, err := table.Infer(hdr, [][]string{{"1", "2", "3", "4", "5", "6", "7", "8"}})
	testutil.OK(t, err)
	want := []string{"column1", "Amount ___", "Qty_", "ratio_pct", "_at", "c_PARTITIONTIME", "ok name", "naïve-ü"}
	for i, f := range s {
		if f.Name != want[i] || f.Renamed != (want[i] != hdr[i]) {
			t.Errorf("column %d %q: named %q (header %q), want %q", i+1, hdr[i], f.Name, f.Header, want[i])
		}
	}
	if !strings.Contains(s.String(), `Qty_ INT64 (the header's "Qty.")`) {
		t.Errorf("schema text %q: want the renamed column to say its header", s.String())
	}
	if j, _ := s.MarshalJSON(); !strings.Contains(string(j), `"description":"the header's \"Qty.\""`) {
		t.Errorf("schema JSON %s: want the header in the description", j)
	}
	if _, err := table.Infer([]string{"a.b", "a_b"}, nil); err == nil || !strings.Contains(err.Error(), `column 2: name "a_b" is column 1's ("a.b") too`) {
		t.Errorf("names that map to one: %v", err)
	}
	data := []byte("Qty.,x\n1,2\n")
	given := table.Schema{{Name: "Qty_", Type: table.Int64}, {Name: "x", Type: table.Int64}}
	if _, err := table.Scan(bytes.NewReader(data), int64(len(data)), "q.csv", 1<<20, table.ScanOptions{Comma: ',', Schema: given}); err != nil {
		t.Errorf("a given schema naming the mapped column: %v", err)
	}
}

// Issue 43 §2 and §4: a Latin-1 file (BigQuery's other encoding) is read
// as such, header and sample included, and stored as UTF-8; its null
// markers are NULL in every column, left out of the inference too; an
// encoding ferry does not read is refused naming those it does.
func TestLatin1AndNullMarkers(t *testing.T) {
	text, err := table.ParseText("latin1", []string{"NULL", `\N`, "NA"}, "")
	testutil.OK(t, err)
	data := []byte("caf\xe9,prix\nd\xe9j\xe0,1.50\nNULL,\\N\nna\xefve,NA\n")
	src, err := table.Scan(bytes.NewReader(data), int64(len(data)), "l.csv", 1<<20, table.ScanOptions{Comma: ',', Text: text})
	testutil.OK(t, err)
	if got := src.Schema.String(); got != "café STRING\nprix NUMERIC(18, 2)" {
		t.Fatalf("schema %q: want the Latin-1 name read, and prix NUMERIC (its markers not values)", got)
	}
	c, err := table.NewConverter(src.Schema, table.Options{Text: text, Inferred: true})
	testutil.OK(t, err)
	p := src.Parts[0]
	b, _, err := c.Convert(data[p.Offset:p.Offset+p.Size], "l.csv", p.Line)
	testutil.OK(t, err)
	_, _, rows := tabletest.ReadBackNulls(t, b)
	N := tabletest.Null
	if want := [][]string{{"déjà", "1.50"}, {N, N}, {"naïve", N}}; fmt.Sprint(rows) != fmt.Sprint(want) {
		t.Fatalf("rows %q, want %q", rows, want)
	}
	if _, err := table.ParseText("EBCDIC", nil, ""); err == nil || !strings.Contains(err.Error(), `encoding "EBCDIC": want UTF-8, ISO-8859-1`) {
		t.Fatalf("EBCDIC: %v", err)
	}
	// Without the encoding, the same bytes are refused naming the line.
	if _, err := table.Scan(bytes.NewReader(data), int64(len(data)), "l.csv", 1<<20, table.ScanOptions{Comma: ','}); err == nil {
		c, _ := table.NewConverter(table.Schema{{Name: "a", Type: table.String}, {Name: "b", Type: table.String}}, table.Options{})
		if _, _, err := c.Convert(data[p.Offset:p.Offset+p.Size], "l.csv", p.Line); err == nil || !strings.Contains(err.Error(), "line 2") {
			t.Fatalf("Latin-1 read as UTF-8: %v, want invalid UTF-8 at line 2", err)
		}
	}
}

// Issue 43 §5: no digit lost by default. A column of decimals of mixed
// scales is NUMERIC at the largest scale (fewer decimals padded, exactly),
// not FLOAT64, which stored 123456789012345678.123456789 as
// 123456789012345680; past NUMERIC (more than 9 decimals, or 29 digits
// before the point) BIGNUMERIC, a Parquet DECIMAL BigQuery loads as such;
// FLOAT64 is left to values that need it (an exponent, more digits than
// BIGNUMERIC holds). restore --to csv gives each back with the column's
// decimals.
func TestMixedScalesAreExactNumerics(t *testing.T) {
	wide := "-" + strings.Repeat("9", 38) + "." + strings.Repeat("1", 38) // BIGNUMERIC's most of each
	s, err := table.Infer([]string{"px", "big", "sci", "third", "huge", "wide", "past"}, [][]string{
		{"1.5", "123456789012345678.123456789", "1e5", "0.3333333333333333", strings.Repeat("7", 35), wide, "0." + strings.Repeat("1", 39)},
		{"2.25", "1.5", "2.5", "1", "1", "0", "1"},
		{"3", "7", "3", "2", "-2", "1.5", "2"},
	})
	testutil.OK(t, err)
	if got := s.String(); got != "px NUMERIC(18, 2)\nbig NUMERIC(38, 9)\nsci FLOAT64\nthird BIGNUMERIC(54, 16)\nhuge BIGNUMERIC(38, 0)\nwide BIGNUMERIC(76, 38)\npast FLOAT64 (not every value reads back exactly: 0.11111111111111111111111111111111111111 as 0.1111111111111111)" {
		t.Fatalf("schema %q", got)
	}
	if j, _ := s.MarshalJSON(); !strings.Contains(string(j), `{"name":"third","type":"BIGNUMERIC","mode":"NULLABLE","precision":54,"scale":16}`) {
		t.Fatalf("schema JSON %s: want third a BIGNUMERIC", j)
	}
	c, err := table.NewConverter(s, table.Options{Inferred: true})
	testutil.OK(t, err)
	in := "1.5,123456789012345678.123456789,1e5,0.5," + strings.Repeat("7", 35) + "," + wide + ",1\n" +
		"-2,-1.5,2.5,-0.3333333333333333,-1,-0.00000000000000000000000000000000000001,2\n"
	b, _, err := c.Convert([]byte(in), "d.csv", 2)
	testutil.OK(t, err)
	_, types, rows := tabletest.ReadBack(t, b)
	if types[3] != "DECIMAL(54,16)" || types[5] != "DECIMAL(76,38)" {
		t.Fatalf("types read back %v", types)
	}
	want := [][]string{
		{"1.50", "123456789012345678.123456789", "", "0.5000000000000000", strings.Repeat("7", 35), wide, ""},
		{"-2.00", "-1.500000000", "", "-0.3333333333333333", "-1", "-0.00000000000000000000000000000000000001", ""},
	}
	for i := range want {
		for _, col := range []int{0, 1, 3, 4, 5} {
			if rows[i][col] != want[i][col] {
				t.Errorf("row %d, column %d: %q, want %q", i+1, col+1, rows[i][col], want[i][col])
			}
		}
	}
	var out bytes.Buffer
	w := table.NewCSVWriter(&out, ',')
	testutil.OK(t, w.Part(context.Background(), "p.parquet", bytes.NewReader(b)))
	testutil.OK(t, w.Flush())
	if lines := strings.Split(out.String(), "\n"); lines[1] != "1.50,123456789012345678.123456789,100000,0.5000000000000000,"+strings.Repeat("7", 35)+","+wide+",1" {
		t.Fatalf("restore --to csv wrote %q", lines[1])
	}
	// More decimals than the column's scale is refused, not rounded.
	if _, _, err := c.Convert([]byte("1,1,1,0.12345678901234567,1,1,1\n"), "d.csv", 9); err == nil || !strings.Contains(err.Error(), "line 9, column 4 (third): \"0.12345678901234567\" has 17 decimals; the column is BIGNUMERIC(54, 16)") {
		t.Fatalf("17 decimals in a scale of 16: %v", err)
	}
}

// BigQuery's bounds on a given NUMERIC and BIGNUMERIC: alone (38, 9) and
// (76, 38); a precision past the digits before the point either holds is
// refused naming the type.
func TestGivenNumericsKeepBigQuerysBounds(t *testing.T) {
	s, err := table.ParseSchema([]byte(`[{"name":"a","type":"NUMERIC"},{"name":"b","type":"BIGNUMERIC"},{"name":"c","type":"BIGNUMERIC","precision":"50","scale":"20"},{"name":"d","type":"NUMERIC","precision":"29"}]`))
	testutil.OK(t, err)
	if got := s.String(); got != "a NUMERIC(38, 9)\nb BIGNUMERIC(76, 38)\nc BIGNUMERIC(50, 20)\nd NUMERIC(29, 0)" {
		t.Fatalf("schema %q", got)
	}
	for in, want := range map[string]string{
		`[{"name":"a","type":"NUMERIC","precision":"38"}]`:                 "NUMERIC(38): at most 29 digits before the point",
		`[{"name":"a","type":"BIGNUMERIC","precision":"77","scale":"38"}]`: "precision 77: want 1 to 76 for a BIGNUMERIC",
		`[{"name":"a","type":"BIGNUMERIC","precision":"50","scale":"39"}]`: "BIGNUMERIC(50, 39)",
		`[{"name":"a","type":"NUMERIC","precision":"20","scale":"10"}]`:    "NUMERIC(20, 10): want a scale of 0 to 9",
		`[{"name":"a","type":"NUMERIC","scale":"2"}]`:                      "scale 2 without a precision",
	} {
		if _, err := table.ParseSchema([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q", in, err, want)
		}
	}
}

// Issue 43 §8: a quote inside an unquoted field is a character, as DuckDB
// and BigQuery read one (an inch mark: Monitor 27" LED), in Cut as in
// Convert, on either side of a quoted field with a newline; the file's
// parts fall between records all the same.
func TestAQuoteInsideAFieldIsACharacter(t *testing.T) {
	var b strings.Builder
	b.WriteString("id,item,note\n")
	for i := range 300 {
		switch i % 3 {
		case 0:
			fmt.Fprintf(&b, "%d,Monitor 27\" LED,plain\n", i)
		case 1:
			fmt.Fprintf(&b, "%d,\"a \"\"quoted\"\" one\nover two lines\",x\n", i)
		default:
			fmt.Fprintf(&b, "%d,5' 11\",\"ok\"\n", i)
		}
	}
	data := []byte(b.String())
	parts, s, l := convertFile(t, data, ',', 1<<10, nil)
	if len(l.Parts) < 5 {
		t.Fatalf("%d parts, want several", len(l.Parts))
	}
	var rows [][]string
	for _, p := range parts {
		_, _, r := tabletest.ReadBack(t, p)
		rows = append(rows, r...)
	}
	if len(rows) != 300 || s[1].Type != table.String {
		t.Fatalf("%d rows (schema %s), want 300", len(rows), s)
	}
	for i, want := range [][]string{{"0", `Monitor 27" LED`, "plain"}, {"1", "a \"quoted\" one\nover two lines", "x"}, {"2", `5' 11"`, "ok"}} {
		if fmt.Sprint(rows[i]) != fmt.Sprint(want) {
			t.Fatalf("row %d: %q, want %q", i, rows[i], want)
		}
	}
}

// Issue 43 §5: where a column must be FLOAT64 (an exponent), --dry-run
// says which value of the sample a FLOAT64 will not give back to its last
// digit, so that the analyst can give --schema instead.
func TestDryRunSaysWhichFloatsWillNotReadBackExactly(t *testing.T) {
	s, err := table.Infer([]string{"x", "y"}, [][]string{{"1e-3", "2.5e3"}, {"1234567890.12345678901e0", "0.1"}})
	testutil.OK(t, err)
	if got := s.String(); got != "x FLOAT64 (not every value reads back exactly: 1234567890.12345678901e0 as 1.2345678901234567e+09)\ny FLOAT64" {
		t.Fatalf("schema %q", got)
	}
}

// Issue 43 §9: --schema takes the types bq show --schema has beyond the
// inferred ones: DATETIME (no zone), TIME, BYTES (base64 in the CSV, as
// BigQuery's CSV loads read them) and JSON (checked). parquet-go reads each
// back with its logical type (TIMESTAMP not adjusted to UTC, TIME, plain
// bytes, JSON); restore's CSV writer gives the CSV back; a value a type
// does not take is refused naming its line and column.
func TestDatetimeTimeBytesAndJSONFromASchema(t *testing.T) {
	s, err := table.ParseSchema([]byte(`[{"name":"at","type":"DATETIME"},{"name":"tod","type":"TIME"},{"name":"blob","type":"BYTES"},{"name":"doc","type":"JSON"}]`))
	testutil.OK(t, err)
	csvText := "2026-12-05 10:11:12.123456,10:11:12.5,aGVsbG8=,\"{\"\"a\"\": [1, 2]}\"\n" +
		"2026-12-05,23:59:59,,null\n" +
		",,,\n"
	c, err := table.NewConverter(s, table.Options{})
	testutil.OK(t, err)
	part, rows, err := c.Convert([]byte(csvText), "d.csv", 2)
	testutil.OK(t, err)
	if rows != 3 {
		t.Fatalf("%d rows, want 3", rows)
	}
	_, types, got := tabletest.ReadBackNulls(t, part)
	if want := []string{"TIMESTAMP(utc=false,micros=true)", "TIME(micros=true)", "BYTE_ARRAY", "JSON"}; fmt.Sprint(types) != fmt.Sprint(want) {
		t.Fatalf("Parquet types %v, want %v", types, want)
	}
	want := [][]string{
		{"2026-12-05 10:11:12.123456", "10:11:12.5", "bytes " + hex.EncodeToString([]byte("hello")), `{"a": [1, 2]}`},
		{"2026-12-05 00:00:00", "23:59:59", tabletest.Null, "null"},
		{tabletest.Null, tabletest.Null, tabletest.Null, tabletest.Null},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("parquet-go reads\n%q\nwant\n%q", got, want)
	}
	var back bytes.Buffer
	w := table.NewCSVWriter(&back, ',')
	testutil.OK(t, w.Part(context.Background(), "d.parquet", bytes.NewReader(part)))
	testutil.OK(t, w.Flush())
	if wantCSV := "at,tod,blob,doc\n2026-12-05 10:11:12.123456,10:11:12.5,aGVsbG8=,\"{\"\"a\"\": [1, 2]}\"\n2026-12-05 00:00:00,23:59:59,,null\n,,,\n"; back.String() != wantCSV {
		t.Fatalf("restore --to csv gives\n%s\nwant\n%s", back.String(), wantCSV)
	}
	for _, bad := range []struct{ rec, says string }{
		{"2026-12-05T10:00:00Z,,,\n", "column 1 (at): \"2026-12-05T10:00:00Z\" is not a DATETIME"},
		{",25:00:00,,\n", "column 2 (tod): \"25:00:00\" is not a TIME"},
		{",,not base64!,\n", "column 3 (blob): \"not base64!\" is not BYTES in base64"},
		{",,,{\"a\":\n", "column 4 (doc): \"{\\\"a\\\":\" is not JSON"},
	} {
		if _, _, err := c.Convert([]byte(bad.rec), "d.csv", 7); err == nil || !strings.Contains(err.Error(), "line 7, "+bad.says) {
			t.Errorf("%q: %v, want it refused: line 7, %s", bad.rec, err, bad.says)
		}
	}
}

// scanAll scans data as the producer does and converts every part, and
// returns the schema and the rows read back, NULL distinguished from empty.
func scanAll(t *testing.T, data []byte, name string, target int64, o table.ScanOptions) (table.Schema, [][]string, error) {
	t.Helper()
	src, err := table.Scan(bytes.NewReader(data), int64(len(data)), name, target, o)
	if err != nil {
		return nil, nil, err
	}
	c, err := table.NewConverter(src.Schema, table.Options{Comma: src.Comma, Text: src.Text, Inferred: src.Inferred})
	testutil.OK(t, err)
	var rows [][]string
	for _, p := range src.Parts {
		b, _, err := c.Convert(data[p.Offset:p.Offset+p.Size], name, p.Line)
		if err != nil {
			return src.Schema, rows, err
		}
		_, _, r := tabletest.ReadBackNulls(t, b)
		rows = append(rows, r...)
	}
	return src.Schema, rows, nil
}

// utf16Of is s as UTF-16 in the order be says, after a byte order mark.
func utf16Of(s string, be, mark bool) []byte {
	var b []byte
	if mark {
		b = append(b, 0xfe, 0xff)
		if !be {
			b[0], b[1] = 0xff, 0xfe
		}
	}
	for _, u := range utf16.Encode([]rune(s)) {
		if be {
			b = append(b, byte(u>>8), byte(u))
		} else {
			b = append(b, byte(u), byte(u>>8))
		}
	}
	return b
}

// Issue 43 §4: a UTF-16 file (a spreadsheet's "Unicode text", with its
// byte order mark) converts as its UTF-8 does, in either byte order and
// cut into parts wherever its records end: characters beyond the BMP (a
// surrogate pair), one whose UTF-16 holds a newline's byte (U+010A), a
// quoted newline. A unit that is no UTF-16 (an unpaired surrogate) is
// refused naming its line; UTF-16 said with no byte order mark asks for
// the order.
func TestAUTF16FileConvertsAsItsUTF8(t *testing.T) {
	var b strings.Builder
	b.WriteString("name,qty,note\r\n")
	for i := range 400 {
		fmt.Fprintf(&b, "caf\u00e9 \u010a%d \U0001f600,%d,\"two\nlines\"\r\n", i, i*3)
	}
	utf8Data := []byte(b.String())
	wantSchema, want, err := scanAll(t, utf8Data, "u.csv", 4<<10, table.ScanOptions{Comma: ','})
	testutil.OK(t, err)
	for _, be := range []bool{false, true} {
		for _, enc := range []string{"", "UTF-16"} {
			text, err := table.ParseText(enc, nil, "")
			testutil.OK(t, err)
			data := utf16Of(b.String(), be, true)
			s, rows, err := scanAll(t, data, "u.csv", 4<<10, table.ScanOptions{Comma: ',', Text: text})
			testutil.OK(t, err)
			if s.String() != wantSchema.String() || fmt.Sprint(rows) != fmt.Sprint(want) {
				t.Fatalf("big-endian %v, encoding %q: schema %q and %d rows (first %q), want %q and %d rows (first %q)",
					be, enc, s, len(rows), rows[0], wantSchema, len(want), want[0])
			}
		}
	}
	// Without a byte order mark, the order said.
	text, err := table.ParseText("utf-16be", nil, "")
	testutil.OK(t, err)
	if _, rows, err := scanAll(t, utf16Of(b.String(), true, false), "u.csv", 4<<10, table.ScanOptions{Comma: ',', Text: text}); err != nil || fmt.Sprint(rows) != fmt.Sprint(want) {
		t.Fatalf("UTF-16BE without a mark: %v", err)
	}
	text, err = table.ParseText("UTF-16", nil, "")
	testutil.OK(t, err)
	if _, _, err := scanAll(t, utf16Of(b.String(), false, false), "u.csv", 4<<10, table.ScanOptions{Comma: ',', Text: text}); err == nil || !strings.Contains(err.Error(), "u.csv: line 1: no UTF-16 byte order mark") {
		t.Fatalf("UTF-16 without a mark: %v, want the order asked for", err)
	}
	// An unpaired surrogate on line 3, in a STRING column.
	bad := utf16Of("a,b\nx,1\ny", false, true)
	bad = append(bad, 0x00, 0xd8) // a high surrogate, then a comma
	bad = append(bad, utf16Of(",2\n", false, false)...)
	if _, _, err := scanAll(t, bad, "u.csv", 1<<20, table.ScanOptions{Comma: ','}); err == nil || !strings.Contains(err.Error(), "u.csv: line 3, column 1 (a): invalid UTF-16") {
		t.Fatalf("an unpaired surrogate: %v, want line 3 named", err)
	}
}

// Issue 43 §8: a TSV reads its quotes as characters by default, as most
// TSV writers mean them (an inch mark, a quoted phrase, a lone quote at a
// field's start); --quote '"' reads them as RFC 4180 does; a CSV quotes by
// default and may say none. Cut and the sample read them alike.
func TestQuotesAreATSVsCharacters(t *testing.T) {
	tsv := []byte("item\tnote\tqty\n" +
		"Monitor 27\" LED\t\"as is\"\t1\n" +
		"\"open\tnever closed\t2\n" +
		"x\t\t3\n")
	_, rows, err := scanAll(t, tsv, "q.tsv", 8, table.ScanOptions{Comma: '\t'})
	testutil.OK(t, err)
	N := tabletest.Null
	want := [][]string{{`Monitor 27" LED`, `"as is"`, "1"}, {`"open`, "never closed", "2"}, {"x", N, "3"}}
	if fmt.Sprint(rows) != fmt.Sprint(want) {
		t.Fatalf("TSV rows %q, want %q", rows, want)
	}
	quoted, err := table.ParseText("", nil, `"`)
	testutil.OK(t, err)
	data := []byte("a\tb\n\"x\ty\"\t\"\"\n")
	if _, rows, err := scanAll(t, data, "q.tsv", 1<<20, table.ScanOptions{Comma: '\t', Text: quoted}); err != nil || fmt.Sprint(rows) != fmt.Sprint([][]string{{"x\ty", ""}}) {
		t.Fatalf("TSV with --quote '\"': %q %v", rows, err)
	}
	none, err := table.ParseText("", nil, "NONE")
	testutil.OK(t, err)
	if _, rows, err := scanAll(t, []byte("a,b\n\"x\",\"\"\n"), "q.csv", 1<<20, table.ScanOptions{Comma: ',', Text: none}); err != nil || fmt.Sprint(rows) != fmt.Sprint([][]string{{`"x"`, `""`}}) {
		t.Fatalf("CSV with --quote none: %q %v", rows, err)
	}
	if _, err := table.ParseText("", nil, "'"); err == nil || !strings.Contains(err.Error(), `quote "'"`) {
		t.Fatalf("quote ': %v, want it refused", err)
	}
	// A record of the wrong field count in a TSV names its line.
	if _, _, err := scanAll(t, []byte("a\tb\n1\t2\n\"3\n"), "q.tsv", 1<<20, table.ScanOptions{Comma: '\t'}); err == nil || !strings.Contains(err.Error(), "q.tsv: line 3: wrong number of fields") {
		t.Fatalf("a short TSV record: %v", err)
	}
}
