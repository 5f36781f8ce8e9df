package table_test

import (
	"bytes"
	"encoding/csv"
	"errors"
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ferry-dev/ferry/internal/table"
	"github.com/ferry-dev/ferry/internal/table/tabletest"
)

// records parses b as encoding/csv does, every record of any width; ok is
// false where it refuses b.
func records(b []byte) ([][]string, bool) {
	r := csv.NewReader(bytes.NewReader(b))
	r.FieldsPerRecord = -1
	r.LazyQuotes = true // as Cut and Convert read quotes
	recs, err := r.ReadAll()
	return recs, err == nil
}

// FuzzCut: the parts follow the header without a gap or overlap to the end
// of the file, each starts on the line it says, and for any file
// encoding/csv reads, reading the parts one by one gives the same records
// as reading the file whole: a cut never falls inside a record.
func FuzzCut(f *testing.F) {
	for _, s := range []string{"a,b\n1,2\n3,4\n", "a\n\"x\ny\"\nz\n", "h\n\"\"\"\"\n\"a\"\"\nb\"\n", "", "h", "h\n\r\n\n", "a,b\n1,\"2\n"} {
		f.Add([]byte(s), int64(3))
	}
	f.Fuzz(func(t *testing.T, data []byte, target int64) {
		target = 1 + (target&0xffff)%64
		l, err := table.Cut(bytes.NewReader(data), "f.csv", target, ',')
		if err != nil {
			if !errors.Is(err, table.ErrUnterminatedQuote) {
				t.Fatalf("Cut: %v", err)
			}
			return
		}
		at := int64(len(l.Header))
		if !bytes.HasPrefix(data, l.Header) {
			t.Fatalf("header %q is not the file's start", l.Header)
		}
		for _, p := range l.Parts {
			if p.Offset != at || p.Size <= 0 {
				t.Fatalf("part %+v after byte %d", p, at)
			}
			if want := int64(1 + bytes.Count(data[:p.Offset], []byte{'\n'})); p.Line != want {
				t.Fatalf("part %+v says line %d, it starts on line %d", p, p.Line, want)
			}
			at += p.Size
		}
		if at != int64(len(data)) {
			t.Fatalf("parts end at byte %d of %d", at, len(data))
		}
		whole, ok := records(data[len(l.Header):])
		if !ok {
			return
		}
		var pieced [][]string
		for _, p := range l.Parts {
			recs, ok := records(data[p.Offset : p.Offset+p.Size])
			if !ok {
				t.Fatalf("encoding/csv reads the file but not part %+v: %q", p, data[p.Offset:p.Offset+p.Size])
			}
			pieced = append(pieced, recs...)
		}
		if len(whole) != len(pieced) {
			t.Fatalf("%d records whole, %d in parts %+v", len(whole), len(pieced), l.Parts)
		}
		for i := range whole {
			if strings.Join(whole[i], "\x00") != strings.Join(pieced[i], "\x00") {
				t.Fatalf("record %d: %q whole, %q in parts", i, whole[i], pieced[i])
			}
		}
	})
}

// FuzzInfer: whatever Infer chooses for a sample, Convert takes every
// record of that sample: inference never picks a type its own values do
// not fit.
func FuzzInfer(f *testing.F) {
	for _, s := range []string{"1,0.51,x\n2,1.00,y\n", "007,1e5,true\n", "2026-12-04,2026-12-04 10:00:00.123456,-0\n", ",,\n-1,+1,.5\n", "1.2345678901234567890,0.1,TRUE\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := csv.NewReader(bytes.NewReader(data))
		r.FieldsPerRecord = 3
		var sample [][]string
		for {
			rec, err := r.Read()
			if err == io.EOF {
				break
			}
			if err != nil {
				return
			}
			sample = append(sample, rec)
		}
		if len(sample) == 0 {
			return
		}
		s, err := table.Infer([]string{"a", "b", "c"}, sample)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		w := csv.NewWriter(&buf)
		if err := w.WriteAll(sample); err != nil {
			t.Fatal(err)
		}
		c, err := table.NewConverter(s, table.Options{})
		if err != nil {
			t.Fatal(err)
		}
		_, rows, err := c.Convert(buf.Bytes(), "f.csv", 2)
		var re *table.RowError
		if errors.As(err, &re) && (errors.Is(re.Err, table.ErrInvalidUTF8) || strings.Contains(re.Err.Error(), "field of")) {
			return // refused whatever the type: not the inference's choice
		}
		if err != nil || rows != int64(len(sample)) {
			t.Fatalf("schema %s inferred from %q, then Convert: %d rows, %v", s, sample, rows, err)
		}
	})
}

// FuzzRecords: Convert reads the records of a part as encoding/csv does
// (its own splitting up to the first quote, encoding/csv's from there):
// the same rows and values, or both refuse the part.
func FuzzRecords(f *testing.F) {
	for _, s := range []string{"a,b,c\n", "a,b,c\r\nd,e,f", "\n\na,,c\n\r\n", "a,b\n", "a,b,c,d\n", "a,\"b\nc\",d\n", "x,y,z\r", "a,b\"c,d\n", "1,2,3\n4,5,6\n\"7\",8,9\n"} {
		f.Add([]byte(s))
	}
	s := table.Schema{{Name: "a", Type: table.String}, {Name: "b", Type: table.String}, {Name: "c", Type: table.String}}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !utf8.Valid(data) {
			return // refused by Convert whatever the splitting
		}
		r := csv.NewReader(bytes.NewReader(data))
		r.FieldsPerRecord = 3
		r.LazyQuotes = true
		want, werr := r.ReadAll()
		c, err := table.NewConverter(s, table.Options{})
		if err != nil {
			t.Fatal(err)
		}
		pq, rows, err := c.Convert(data, "f.csv", 2)
		if (err != nil) != (werr != nil) {
			t.Fatalf("%q: Convert %v, encoding/csv %v", data, err, werr)
		}
		if err != nil {
			return
		}
		_, _, got, rerr := tabletest.Read(pq)
		if rerr != nil || rows != int64(len(want)) || len(got) != len(want) {
			t.Fatalf("%q: %d rows (%v), encoding/csv %d records", data, rows, rerr, len(want))
		}
		for i := range want {
			if strings.Join(got[i], "\x00") != strings.Join(want[i], "\x00") {
				t.Fatalf("%q: record %d is %q, encoding/csv %q", data, i, got[i], want[i])
			}
		}
	})
}
