package table

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/arrow-go/v18/parquet/schema"
)

// CSVWriter writes the rows of Parquet parts back as delimited text: the
// header once, then each part's rows in order, a value as ferry reads it
// (a NUMERIC with its scale's decimals, a DATE as YYYY-MM-DD, a TIMESTAMP
// as RFC 3339 in UTC with microseconds, a FLOAT64 in the fewest digits
// that read back as the same double, NULL as an empty field and an empty
// STRING as "", as the conversion reads them). Seed-like data comes back
// byte for byte.
type CSVWriter struct {
	w      *bufio.Writer
	comma  rune
	header []string
	rec    []string
	quote  []bool // the cell is an empty STRING, not NULL
	Rows   int64
}

// NewCSVWriter writes to w with comma between fields.
func NewCSVWriter(w io.Writer, comma rune) *CSVWriter {
	return &CSVWriter{w: bufio.NewWriterSize(w, 64<<10), comma: comma}
}

// write writes one record as encoding/csv's Writer does (a field quoted
// when it holds the comma, a quote, a line break or starts with a space),
// and an empty field quoted where quote says so.
func (c *CSVWriter) write(rec []string, quote []bool) error {
	for i, f := range rec {
		if i > 0 {
			_, _ = c.w.WriteRune(c.comma)
		}
		if (quote == nil || !quote[i]) && !c.needsQuotes(f) {
			_, _ = c.w.WriteString(f)
			continue
		}
		_ = c.w.WriteByte('"')
		_, _ = c.w.WriteString(strings.ReplaceAll(f, `"`, `""`))
		_ = c.w.WriteByte('"')
	}
	return c.w.WriteByte('\n')
}

// needsQuotes is encoding/csv's rule; in a TSV, whose quotes are
// characters unless --quote says otherwise, only a tab or a line break
// makes a field quoted (a TSV without quotes holds neither).
func (c *CSVWriter) needsQuotes(f string) bool {
	if f == "" {
		return false
	}
	if c.comma == '\t' {
		return strings.ContainsAny(f, "\t\r\n")
	}
	if f == `\.` || strings.ContainsRune(f, c.comma) || strings.ContainsAny(f, "\"\r\n") {
		return true
	}
	r, _ := utf8.DecodeRuneInString(f)
	return unicode.IsSpace(r)
}

// Part appends the rows of the Parquet file r, named path in errors.
// Every part must have the first one's columns.
func (c *CSVWriter) Part(ctx context.Context, path string, r parquet.ReaderAtSeeker) error {
	pf, err := file.NewParquetReader(r)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer func() { _ = pf.Close() }()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: batchRows}, memory.DefaultAllocator)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	// The file's columns: not the constants (key=value directories) the
	// conversion added after them.
	var cols []int
	if v := pf.MetaData().KeyValueMetadata().FindValue(ConstantsKey); v != nil && *v != "" {
		n := pf.MetaData().Schema.NumColumns() - len(strings.Split(*v, ","))
		for i := range max(n, 0) {
			cols = append(cols, i)
		}
	}
	rr, err := fr.GetRecordReader(ctx, cols, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer rr.Release()
	s := rr.Schema()
	names := make([]string, s.NumFields())
	for i, f := range s.Fields() {
		names[i] = f.Name
	}
	if c.header == nil {
		c.header = names
		if err := c.write(names, nil); err != nil {
			return err
		}
	} else if fmt.Sprint(names) != fmt.Sprint(c.header) {
		return fmt.Errorf("%s: columns %v, the first part's %v", path, names, c.header)
	}
	jsonCol := make([]bool, len(names))
	for i := range jsonCol {
		_, jsonCol[i] = pf.MetaData().Schema.Column(i).LogicalType().(schema.JSONLogicalType)
	}
	c.rec = make([]string, len(names))
	c.quote = make([]bool, len(names))
	for rr.Next() {
		rec := rr.RecordBatch()
		for row := range int(rec.NumRows()) {
			for col := range c.rec {
				a := rec.Column(col)
				if c.rec[col], err = cell(a, row, jsonCol[col]); err != nil {
					return fmt.Errorf("%s: column %s: %w", path, names[col], err)
				}
				c.quote[col] = c.rec[col] == "" && !a.IsNull(row)
			}
			if err := c.write(c.rec, c.quote); err != nil {
				return err
			}
			c.Rows++
		}
	}
	if err := rr.Err(); err != nil && err != io.EOF {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// Flush writes what is buffered.
func (c *CSVWriter) Flush() error {
	return c.w.Flush()
}

// cell is row i of column a as CSV text; json says the column's Parquet
// logical type is JSON.
func cell(a arrow.Array, i int, json bool) (string, error) {
	if a.IsNull(i) {
		return "", nil
	}
	switch a := a.(type) {
	case *array.Int64:
		return strconv.FormatInt(a.Value(i), 10), nil
	case *array.Decimal128:
		return a.Value(i).ToString(a.DataType().(*arrow.Decimal128Type).Scale), nil
	case *array.Decimal256:
		return a.Value(i).ToString(a.DataType().(*arrow.Decimal256Type).Scale), nil
	case *array.Float64:
		return strconv.FormatFloat(a.Value(i), 'g', -1, 64), nil
	case *array.Boolean:
		return strconv.FormatBool(a.Value(i)), nil
	case *array.Date32:
		return time.Unix(int64(a.Value(i))*86400, 0).UTC().Format(time.DateOnly), nil
	case *array.Timestamp:
		tt := a.DataType().(*arrow.TimestampType)
		if tt.TimeZone == "" { // a DATETIME: civil, no zone
			return a.Value(i).ToTime(tt.Unit).UTC().Format("2006-01-02 15:04:05.999999"), nil
		}
		return a.Value(i).ToTime(tt.Unit).UTC().Format("2006-01-02T15:04:05.999999Z07:00"), nil
	case *array.Time64:
		return a.Value(i).ToTime(a.DataType().(*arrow.Time64Type).Unit).Format("15:04:05.999999"), nil
	case *array.String:
		return a.Value(i), nil
	case *array.Binary:
		if json { // a JSON column, read back as its bytes
			return string(a.Value(i)), nil
		}
		return base64.StdEncoding.EncodeToString(a.Value(i)), nil // BYTES, as BigQuery's CSV loads read them
	case array.ExtensionArray:
		return cell(a.Storage(), i, json)
	}
	return "", fmt.Errorf("type %s is not one ferry writes", a.DataType())
}
