package table

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
)

// Source is a delimited-text file ready to convert: where its parts are,
// and the one schema all of them are written with (BigQuery takes a
// table's schema from the last file of a load, so every part must agree).
type Source struct {
	Layout
	Schema Schema
	Comma  rune
	// Inferred: Schema was inferred from the first records (Options.Inferred).
	Inferred bool
}

// ErrNoRecords: an empty file (a header only converts to a part of no
// rows).
var ErrNoRecords = errors.New("no header and no records to convert (the file is empty)")

// ScanOptions are how Scan reads a file.
type ScanOptions struct {
	Comma rune
	// Schema, when set, is the file's (the header must name its
	// columns); otherwise it is inferred from the first InferRows
	// records (0: SampleRows; -1: every record).
	Schema    Schema
	InferRows int
	// BadRows records of the wrong field count may be left out of the
	// inference (--bad-rows).
	BadRows int
	Text    Text
}

// Comma is the field separator of the file named name: a tab for .tsv,
// else a comma.
func Comma(name string) rune {
	if strings.HasSuffix(strings.ToLower(name), ".tsv") {
		return '\t'
	}
	return ','
}

// Scan reads the first size bytes of r, the file at path, once to cut them
// into parts of about target bytes (Cut), then reads its header and its
// first SampleRows records, whatever the parts' size, to settle the
// schema: given, when it must match the header column for column (names
// compared as BigQuery does, ignoring case), or inferred (Infer). Up to
// badRows records of the sample with the wrong number of fields are left
// out of the inference (the conversion leaves them out, with --bad-rows,
// and names them). Errors name path, and the line and column at fault.
func Scan(r io.ReaderAt, size int64, path string, target int64, o ScanOptions) (*Source, error) {
	comma, given, badRows, text := o.Comma, o.Schema, o.BadRows, o.Text
	l, err := Cut(io.NewSectionReader(r, 0, size), path, target, comma)
	if err != nil {
		return nil, err
	}
	if len(l.Header) == 0 {
		return nil, fmt.Errorf("%s: %w", path, ErrNoRecords)
	}
	header, err := readHeader(text.decode(nil, l.Header), comma, path)
	if err != nil {
		return nil, err
	}
	if len(l.Parts) == 0 {
		// A header only (a day with no events): one part of no rows,
		// so that a load gives the table its columns and 0 rows.
		l.Parts = []Range{{Offset: int64(len(l.Header)), Line: 2}}
		s := &Source{Layout: *l, Comma: comma, Schema: given}
		if given == nil {
			// No value to infer from: every column a NULLABLE STRING.
			if s.Schema, err = Infer(header, nil); err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			s.Inferred = true
		} else if err := matchHeader(given, header, path); err != nil {
			return nil, err
		}
		return s, nil
	}
	if len(header) > MaxColumns {
		return nil, fmt.Errorf("%s: line 1: the header has %d columns; BigQuery takes %d at most", path, len(header), MaxColumns)
	}
	s := &Source{Layout: *l, Comma: comma}
	if given != nil {
		if err := matchHeader(given, header, path); err != nil {
			return nil, err
		}
		s.Schema = given
		return s, nil
	}
	first := l.Parts[0]
	cr := csv.NewReader(text.reader(io.NewSectionReader(r, first.Offset, size-first.Offset)))
	cr.Comma = comma
	cr.LazyQuotes = true // a quote inside a field is a character, as Cut reads it
	cr.FieldsPerRecord = len(header)
	limit := o.InferRows
	switch {
	case limit == 0:
		limit = SampleRows
	case limit < 0:
		limit = math.MaxInt // every record
	}
	cr.ReuseRecord = true
	in := newInference(len(header))
	for n := 0; n < limit; n++ {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		var pe *csv.ParseError
		if err != nil && badRows > 0 && errors.As(err, &pe) && errors.Is(pe.Err, csv.ErrFieldCount) {
			badRows--
			continue
		}
		if err != nil {
			// Convert names the record at fault the same way.
			return nil, (&Converter{fields: headerFields(header), csvN: len(header)}).readError(err, rec, path, first.Line)
		}
		for i, v := range rec {
			if text.null(v) {
				rec[i] = "" // NULL: no value to infer from
			}
		}
		in.observe(rec)
	}
	if s.Schema, err = in.schema(header); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	s.Inferred = true
	return s, nil
}

func readHeader(b []byte, comma rune, path string) ([]string, error) {
	if bytes.HasPrefix(b, []byte{0xff, 0xfe}) || bytes.HasPrefix(b, []byte{0xfe, 0xff}) {
		// What spreadsheets write as "Unicode text": its delimiters and
		// newlines are two bytes each, which the cut between parts does
		// not read. Said as such, not as invalid UTF-8 in some column.
		return nil, fmt.Errorf("%s: line 1: the file is UTF-16 (its byte order mark says so); ferry converts UTF-8 and ISO-8859-1 (--encoding): convert it to UTF-8 first (iconv -f UTF-16 -t UTF-8)", path)
	}
	r := csv.NewReader(bytes.NewReader(b))
	r.Comma = comma
	r.LazyQuotes = true
	h, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("%s: line 1 (the header): %w", path, err)
	}
	// A UTF-8 byte order mark (what spreadsheets write) is not part of
	// the first name, as DuckDB and BigQuery read it.
	h[0] = strings.TrimPrefix(h[0], "\ufeff")
	return h, nil
}

func headerFields(header []string) Schema {
	s := make(Schema, len(header))
	for i, n := range header {
		s[i] = Field{Name: n, Type: String}
	}
	return s
}

// matchHeader checks that the file's header names the schema's columns, in
// its order.
func matchHeader(s Schema, header []string, path string) error {
	if len(header) != len(s) {
		return fmt.Errorf("%s: line 1: the header has %d columns, the schema %d", path, len(header), len(s))
	}
	for i, f := range s {
		if !strings.EqualFold(header[i], f.Name) && !strings.EqualFold(ColumnName(header[i], i), f.Name) {
			return fmt.Errorf("%s: line 1, column %d: the header says %.64q, the schema %q", path, i+1, header[i], f.Name)
		}
	}
	return nil
}
