package table

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math/big"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// The column compressions a Parquet part may use.
const (
	CompressZstd   = "zstd"
	CompressSnappy = "snappy"
	CompressNone   = "none"
)

// CheckCompression refuses a compression Convert does not write.
func CheckCompression(c string) error {
	switch c {
	case "", CompressZstd, CompressSnappy, CompressNone:
		return nil
	}
	return fmt.Errorf("parquet compression %.32q: want zstd, snappy or none", c)
}

// ErrInvalidUTF8: a STRING value that is not UTF-8.
var ErrInvalidUTF8 = errors.New("invalid UTF-8 (BigQuery's STRING is UTF-8; convert the file's encoding first)")

// MaxField is the largest field Convert takes: a field this long is more
// likely a missing quote than a value (BigQuery's own limit on a CSV row
// is 100 MB, and one cell of it costs the whole part's memory).
const MaxField = 4 << 20

// Options configure Convert.
type Options struct {
	// Comma separates fields: ',' for CSV, '\t' for TSV.
	Comma rune
	// Compression is the column compression: zstd (default), snappy or
	// none.
	Compression string
}

// RowError is a record Convert refuses: the file, line and column (1-based
// field number and its name) at fault.
type RowError struct {
	Path   string
	Line   int64
	Column int // 0: the record as a whole
	Name   string
	Err    error
}

func (e *RowError) Error() string {
	if e.Column == 0 {
		return fmt.Sprintf("%s: line %d: %v", e.Path, e.Line, e.Err)
	}
	return fmt.Sprintf("%s: line %d, column %d (%s): %v", e.Path, e.Line, e.Column, e.Name, e.Err)
}

func (e *RowError) Unwrap() error { return e.Err }

// batchRows is how many rows are built before they are encoded: the
// column pages being built stay compressed, so memory is about the part's
// Parquet bytes and one batch.
const batchRows = 1 << 15

// Converter converts parts of delimited text to Parquet files of one
// schema. Not safe for concurrent use; make one per goroutine.
type Converter struct {
	schema *arrow.Schema
	fields Schema
	o      Options
	props  *parquet.WriterProperties
	aprops pqarrow.ArrowWriterProperties
	out    bytes.Buffer
}

// NewConverter returns a Converter to schema s.
func NewConverter(s Schema, o Options) (*Converter, error) {
	if o.Comma == 0 {
		o.Comma = ','
	}
	if err := CheckCompression(o.Compression); err != nil {
		return nil, err
	}
	codec := compress.Codecs.Zstd
	switch o.Compression {
	case CompressSnappy:
		codec = compress.Codecs.Snappy
	case CompressNone:
		codec = compress.Codecs.Uncompressed
	}
	fields := make([]arrow.Field, len(s))
	for i, f := range s {
		fields[i] = arrow.Field{Name: f.Name, Type: arrowType(f), Nullable: !f.Required}
	}
	return &Converter{
		schema: arrow.NewSchema(fields, nil), fields: s, o: o,
		props: parquet.NewWriterProperties(
			parquet.WithCompression(codec),
			parquet.WithDictionaryDefault(true),
			parquet.WithStats(true),
			// One row group per part: a part is a chunk of the CSV,
			// megabytes, as BigQuery wants its row groups (16 MiB
			// and more) and Spark splits files.
			parquet.WithMaxRowGroupLength(1<<40),
			parquet.WithStoreDecimalAsInteger(true),
			parquet.WithCreatedBy("ferry"),
		),
		aprops: pqarrow.NewArrowWriterProperties(),
	}, nil
}

func arrowType(f Field) arrow.DataType {
	switch f.Type {
	case Int64:
		return arrow.PrimitiveTypes.Int64
	case Numeric:
		return &arrow.Decimal128Type{Precision: int32(f.Precision), Scale: int32(f.Scale)}
	case Float64:
		return arrow.PrimitiveTypes.Float64
	case Bool:
		return arrow.FixedWidthTypes.Boolean
	case Date:
		return arrow.FixedWidthTypes.Date32
	case Timestamp:
		return arrow.FixedWidthTypes.Timestamp_us // UTC: BigQuery's TIMESTAMP
	}
	return arrow.BinaryTypes.String
}

// Convert reads data, whole records with no header, the first of them on
// line line of the file at path, and returns them as one Parquet file and
// its row count. The bytes are valid until the next call. A record with
// the wrong number of fields, a value that does not fit its column,
// invalid UTF-8, an unterminated quote or a field over MaxField fails the
// whole part with a *RowError.
func (c *Converter) Convert(data []byte, path string, line int64) ([]byte, int64, error) {
	r := csv.NewReader(bytes.NewReader(data))
	r.Comma = c.o.Comma
	r.FieldsPerRecord = len(c.fields)
	r.ReuseRecord = true
	c.out.Reset()
	fw, err := pqarrow.NewFileWriter(c.schema, &c.out, c.props, c.aprops)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: parquet writer: %w", path, err)
	}
	defer func() { _ = fw.Close() }() // a second Close does nothing
	b := array.NewRecordBuilder(memory.DefaultAllocator, c.schema)
	defer b.Release()
	var rows, inBatch int64
	flush := func() error {
		if inBatch == 0 {
			return nil
		}
		rec := b.NewRecordBatch()
		defer rec.Release()
		inBatch = 0
		return fw.WriteBuffered(rec)
	}
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, 0, c.readError(err, rec, path, line)
		}
		for i, v := range rec {
			if err := c.append(b.Field(i), i, v); err != nil {
				l, _ := r.FieldPos(i)
				return nil, 0, &RowError{Path: path, Line: line - 1 + int64(l), Column: i + 1, Name: c.fields[i].Name, Err: err}
			}
		}
		rows++
		if inBatch++; inBatch == batchRows {
			if err := flush(); err != nil {
				return nil, 0, fmt.Errorf("%s: parquet: %w", path, err)
			}
		}
	}
	if err := flush(); err != nil {
		return nil, 0, fmt.Errorf("%s: parquet: %w", path, err)
	}
	if err := fw.Close(); err != nil {
		return nil, 0, fmt.Errorf("%s: parquet: %w", path, err)
	}
	return c.out.Bytes(), rows, nil
}

// readError names what encoding/csv refused.
func (c *Converter) readError(err error, rec []string, path string, line int64) error {
	var pe *csv.ParseError
	if !errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", path, err)
	}
	at := line - 1 + int64(pe.Line)
	switch {
	case errors.Is(pe.Err, csv.ErrFieldCount):
		return &RowError{Path: path, Line: line - 1 + int64(pe.StartLine),
			Err: fmt.Errorf("%w: %d fields, the header has %d", csv.ErrFieldCount, len(rec), len(c.fields))}
	case errors.Is(pe.Err, csv.ErrQuote) && pe.Line != pe.StartLine:
		return &RowError{Path: path, Line: line - 1 + int64(pe.StartLine), Err: fmt.Errorf("%w: a quoted field opened here is never closed", ErrUnterminatedQuote)}
	}
	return &RowError{Path: path, Line: at, Err: fmt.Errorf("%w (byte %d of the line)", pe.Err, pe.Column)}
}

// append parses v into column i's builder.
func (c *Converter) append(b array.Builder, i int, v string) error {
	f := &c.fields[i]
	if len(v) > MaxField {
		return fmt.Errorf("field of %d bytes; ferry converts fields up to %d (a missing quote?)", len(v), MaxField)
	}
	if v == "" && f.Type != String {
		if f.Required {
			return errors.New("empty value in a REQUIRED column")
		}
		b.AppendNull()
		return nil
	}
	switch f.Type {
	case Int64:
		x, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("%s is not an INT64", quote(v))
		}
		b.(*array.Int64Builder).Append(x)
	case Numeric:
		x, err := parseNumeric(v, f.Precision, f.Scale)
		if err != nil {
			return err
		}
		b.(*array.Decimal128Builder).Append(x)
	case Float64:
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("%s is not a FLOAT64", quote(v))
		}
		b.(*array.Float64Builder).Append(x)
	case Bool:
		x, ok := parseBool(v)
		if !ok {
			return fmt.Errorf("%s is not a BOOL (true or false)", quote(v))
		}
		b.(*array.BooleanBuilder).Append(x)
	case Date:
		t, err := time.Parse(time.DateOnly, v)
		if err != nil {
			return fmt.Errorf("%s is not a DATE (YYYY-MM-DD)", quote(v))
		}
		b.(*array.Date32Builder).Append(arrow.Date32(t.Unix() / 86400))
	case Timestamp:
		t, ok := parseTimestamp(v)
		if !ok {
			return fmt.Errorf("%s is not a TIMESTAMP (RFC 3339, or YYYY-MM-DD HH:MM:SS[.ffffff] in UTC)", quote(v))
		}
		if t.Nanosecond()%1000 != 0 {
			return fmt.Errorf("%s has nanoseconds; a TIMESTAMP keeps microseconds", quote(v))
		}
		b.(*array.TimestampBuilder).Append(arrow.Timestamp(t.UnixMicro()))
	default:
		if !utf8.ValidString(v) {
			return ErrInvalidUTF8
		}
		b.(*array.StringBuilder).Append(v)
	}
	return nil
}

// parseNumeric reads v exactly as a DECIMAL(precision, scale): fewer
// decimals than scale are padded, more are refused (no rounding), as are
// more integer digits than precision-scale.
func parseNumeric(v string, precision, scale int) (decimal128.Num, error) {
	intDigits, frac, ok := decimalShape(v)
	switch {
	case !ok:
		return decimal128.Num{}, fmt.Errorf("%s is not a NUMERIC", quote(v))
	case frac > scale:
		return decimal128.Num{}, fmt.Errorf("%s has %d decimals; the column is NUMERIC(%d, %d) and ferry does not round", quote(v), frac, precision, scale)
	case intDigits > precision-scale:
		return decimal128.Num{}, fmt.Errorf("%s has %d digits before the point; NUMERIC(%d, %d) holds %d", quote(v), intDigits, precision, scale, precision-scale)
	}
	digits := strings.Replace(v, ".", "", 1) + strings.Repeat("0", scale-frac)
	if precision <= 18 {
		x, err := strconv.ParseInt(digits, 10, 64)
		if err != nil {
			return decimal128.Num{}, fmt.Errorf("%s is not a NUMERIC", quote(v))
		}
		return decimal128.FromI64(x), nil
	}
	x, ok := new(big.Int).SetString(digits, 10)
	if !ok {
		return decimal128.Num{}, fmt.Errorf("%s is not a NUMERIC", quote(v))
	}
	return decimal128.FromBigInt(x), nil
}

// quote is v for an error message: quoted, at most 64 bytes of it.
func quote(v string) string {
	if len(v) > 64 {
		return strconv.Quote(v[:64]) + "…"
	}
	return strconv.Quote(v)
}
