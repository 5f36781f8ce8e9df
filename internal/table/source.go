package table

import (
	"bufio"
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
	// Text is how the file reads: ScanOptions.Text with its encoding
	// (UTF-16's order) and quotes settled (Options.Text).
	Text Text
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
	comma, given, badRows := o.Comma, o.Schema, o.BadRows
	text, bom, err := settleText(r, size, path, comma, o.Text)
	if err != nil {
		return nil, err
	}
	l, err := cutText(r, size, bom, path, target, comma, text)
	if err != nil {
		return nil, err
	}
	if len(l.Header) == 0 {
		return nil, fmt.Errorf("%s: %w", path, ErrNoRecords)
	}
	header, err := readHeader(l.Header, comma, text, path)
	if err != nil {
		return nil, err
	}
	if len(l.Parts) == 0 {
		// A header only (a day with no events): one part of no rows,
		// so that a load gives the table its columns and 0 rows.
		l.Parts = []Range{{Offset: size, Line: 2}}
		s := &Source{Layout: *l, Comma: comma, Schema: given, Text: text}
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
	s := &Source{Layout: *l, Comma: comma, Text: text}
	if given != nil {
		if err := matchHeader(given, header, path); err != nil {
			return nil, err
		}
		s.Schema = given
		return s, nil
	}
	first := l.Parts[0]
	cr := newRecordReader(text.reader(io.NewSectionReader(r, first.Offset, size-first.Offset)), comma, text, len(header))
	limit := o.InferRows
	switch {
	case limit == 0:
		limit = SampleRows
	case limit < 0:
		limit = math.MaxInt // every record
	}
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

// readHeader reads the header record, UTF-8.
func readHeader(b []byte, comma rune, text Text, path string) ([]string, error) {
	h, err := newRecordReader(bytes.NewReader(b), comma, text, -1).Read()
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

// settleText is the Text the file at path reads with: its encoding
// (UTF-16 of the order its byte order mark says, where the encoding
// said allows) and quotes (by its delimiter where not said), and the
// bytes of its byte order mark.
func settleText(r io.ReaderAt, size int64, path string, comma rune, t Text) (Text, int64, error) {
	if t.Quote == "" {
		t.Quote = QuoteDouble
		if comma == '\t' {
			t.Quote = QuoteNone
		}
	}
	var mark [2]byte
	n, err := r.ReadAt(mark[:], 0)
	if n < 2 && err != nil && err != io.EOF {
		return t, 0, fmt.Errorf("%s: %w", path, err)
	}
	var order string
	switch {
	case n < 2:
	case mark == [2]byte{0xff, 0xfe}:
		order = UTF16LE
	case mark == [2]byte{0xfe, 0xff}:
		order = UTF16BE
	}
	switch t.Encoding {
	case "", UTF8, UTF16:
		if order != "" {
			// What spreadsheets write as "Unicode text"; no UTF-8
			// starts so.
			t.Encoding = order
			return t, 2, nil
		}
		if t.Encoding == UTF16 {
			return t, 0, fmt.Errorf("%s: line 1: no UTF-16 byte order mark; say its order (--encoding UTF-16LE or UTF-16BE)", path)
		}
	case UTF16LE, UTF16BE:
		if order == t.Encoding {
			return t, 2, nil
		}
	}
	return t, 0, nil
}

// cutText cuts the file as Cut does, after its byte order mark of bom
// bytes, in text's encoding: a UTF-16 file is cut in its UTF-8, and its
// parts are then found in its own bytes. The header is UTF-8.
func cutText(r io.ReaderAt, size, bom int64, path string, target int64, comma rune, text Text) (*Layout, error) {
	cut := Cut
	if !text.quotes() {
		cut = CutUnquoted
	}
	in := io.NewSectionReader(r, bom, size-bom)
	u16, be := text.utf16()
	if !u16 {
		l, err := cut(in, path, target, comma)
		if err == nil {
			l.Header = text.decode(nil, l.Header)
		}
		return l, err
	}
	l, err := cut(text.reader(in), path, target, comma)
	if err != nil {
		return nil, err
	}
	offs := make([]int64, 0, 1+2*len(l.Parts))
	offs = append(offs, int64(len(l.Header)))
	for _, p := range l.Parts {
		offs = append(offs, p.Offset, p.Offset+p.Size)
	}
	at, err := offsets16(io.NewSectionReader(r, bom, size-bom), be, offs)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for i := range l.Parts {
		l.Parts[i].Offset, l.Parts[i].Size = bom+at[1+2*i], at[2+2*i]-at[1+2*i]
	}
	return l, nil
}

// recordReader reads a file's records, whatever reads them.
type recordReader interface{ Read() ([]string, error) }

// newRecordReader reads the UTF-8 records of r as text reads them:
// encoding/csv (quotes read lazily, as Cut does), or, without quotes, at
// every newline. fields is the number of fields a record must have (-1:
// any); a record of another number is a *csv.ParseError of
// csv.ErrFieldCount, as encoding/csv says it. Records may share memory.
func newRecordReader(r io.Reader, comma rune, text Text, fields int) recordReader {
	if !text.quotes() {
		return &unquotedReader{r: bufio.NewReaderSize(r, 64<<10), comma: string(comma), fields: fields}
	}
	cr := csv.NewReader(r)
	cr.Comma = comma
	cr.LazyQuotes = true // a quote inside a field is a character, as Cut reads it
	cr.FieldsPerRecord = fields
	cr.ReuseRecord = true
	return cr
}

// unquotedReader reads records of no quotes, as encoding/csv would read
// them were a quote a character: a line ending \r\n ends at the \n, and
// empty lines are skipped.
type unquotedReader struct {
	r      *bufio.Reader
	comma  string
	fields int
	line   int
	rec    []string
}

func (u *unquotedReader) Read() ([]string, error) {
	for {
		ln, err := u.r.ReadString('\n')
		if ln == "" && err != nil {
			return nil, err
		}
		if len(ln) > MaxRecord {
			return nil, fmt.Errorf("line %d: a record of more than %d bytes", u.line+1, MaxRecord)
		}
		u.line++
		ln = strings.TrimSuffix(strings.TrimSuffix(ln, "\n"), "\r")
		if ln == "" {
			continue
		}
		u.rec = append(u.rec[:0], strings.Split(ln, u.comma)...)
		if u.fields >= 0 && len(u.rec) != u.fields {
			return u.rec, &csv.ParseError{StartLine: u.line, Line: u.line, Column: 1, Err: csv.ErrFieldCount}
		}
		return u.rec, nil
	}
}
