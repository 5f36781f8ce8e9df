package table

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/arrow-go/v18/parquet/schema"
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

// ErrInvalidUTF16: a STRING value of a UTF-16 file that is not UTF-16 (an
// unpaired surrogate, or a last lone byte).
var ErrInvalidUTF16 = errors.New("invalid UTF-16 (an unpaired surrogate or a lone byte)")

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
	// BadRows is how many records of a part Convert may leave out, each
	// with its RowError, instead of failing the part: a record with the
	// wrong number of fields or a value that does not fit its column. A
	// quote that breaks the file's structure (an unterminated one, which
	// Cut finds) fails it whatever BadRows says: what follows it cannot be
	// trusted to be records.
	BadRows int
	// Constants are columns after the file's, of the same value in every
	// row: the key=value directories above the file (a hive layout),
	// which BigQuery then loads as columns. Their names are in the
	// file's ConstantsKey metadata, and restore --to csv leaves them out.
	Constants []Constant
	// Inferred says the schema was inferred from a sample (Scan with no
	// schema given): every value converted then meets the rules the
	// inference applied (a leading zero or a plus sign makes a number
	// text), so that a value after the sample that the rules would have
	// kept as text fails its record instead of being stored altered
	// (02134 as 2134). A given schema takes what its types parse, as
	// BigQuery's loads do.
	Inferred bool
	// Text is the parts' encoding and null markers.
	Text Text
}

// Constant is a STRING column of one value.
type Constant struct{ Name, Value string }

// ConstantsKey is the Parquet key-value metadata naming a part's constant
// columns, comma-separated.
const ConstantsKey = "ferry.constant_columns"

// Reject is a record Convert left out (Options.BadRows): why, and the
// record's text, at most MaxRejectText bytes of it.
type Reject struct {
	Err       *RowError
	Record    string
	Truncated bool
}

// MaxRejectText is how much of a rejected record's text a Reject keeps:
// enough to find and fix it, bounded whatever the record's size.
const MaxRejectText = 1 << 10

// ErrTooManyBadRows: a part has more records Convert would leave out than
// Options.BadRows allows.
var ErrTooManyBadRows = errors.New("more bad records than --bad-rows allows")

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

// batchRows is how many rows are parsed before they are encoded: the
// column pages being built stay compressed, so memory is about the part's
// Parquet bytes and one batch. A wide table's batch holds fewer rows
// (batchRowsFor), so that a batch is at most maxBatchCells values however
// many columns the table has.
const batchRows = 1 << 13

// maxBatchCells bounds the values one batch holds: at most 24 bytes each
// (a string's slice header, its definition level), 24 MiB a converter.
const maxBatchCells = 1 << 20

// columnState is what one column of a part being converted holds besides
// its values: its column writer's page buffers, dictionary and statistics.
// Measured as the bytes a converter allocates for one part of a table of
// 10,000 columns: 23 KiB a column of integers, 28 KiB a column of strings.
const columnState = 32 << 10

// ConverterMemory is about what a converter of a table of columns holds
// while it converts a part, besides the part and its Parquet bytes: a
// batch of values and each column's writer. A table of 10,000 columns
// needs about 336 MiB, so its converters are counted in the producer's
// memory budget (one for each that fits).
func ConverterMemory(columns int) int64 {
	columns = max(columns, 1)
	return int64(columns)*columnState + int64(batchRowsFor(columns)*columns)*24
}

// batchRowsFor is the rows of a batch of a table of columns: batchRows
// for up to 128 columns, fewer for wider ones, never under 16.
func batchRowsFor(columns int) int {
	return min(batchRows, max(16, maxBatchCells/max(columns, 1)))
}

// Converter converts parts of delimited text to Parquet files of one
// schema. It parses each value straight into its column's batch of
// Parquet physical values (strings stay slices of the part) and hands the
// batches to parquet's column writers: arrow's record builders and their
// checks cost a fifth of the conversion's CPU for nothing a CSV needs. Not
// safe for concurrent use; make one per goroutine.
type Converter struct {
	fields Schema // the file's columns, then the constants
	csvN   int    // the file's columns
	o      Options
	root   *schema.GroupNode
	props  *parquet.WriterProperties
	cols   []column
	batch  int                       // rows parsed before they are encoded (batchRowsFor)
	meta   metadata.KeyValueMetadata // ConstantsKey, nil without constants
	out    bytes.Buffer
	rec    []string
	utf8   []byte // a part decoded from Options.Text's encoding
	// Rejects are the records the last Convert left out; valid until
	// the next call.
	Rejects []Reject
}

// column is one column's batch: its values, of the slice its physical type
// uses, and its definition levels (nil for a REQUIRED column: 0 is NULL).
type column struct {
	phys  parquet.Type
	def   []int16
	i64   []int64
	i32   []int32
	f64   []float64
	bools []bool
	bytes []parquet.ByteArray
	fixed []parquet.FixedLenByteArray
	width int // a wide NUMERIC's bytes
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
	csvN := len(s)
	for _, k := range o.Constants {
		s = append(s[:len(s):len(s)], Field{Name: k.Name, Type: String, Required: true})
	}
	fields := make([]arrow.Field, len(s))
	props := []parquet.WriterProperty{
		parquet.WithCompression(codec),
		parquet.WithCompressionLevel(1),
		parquet.WithDictionaryDefault(true),
		parquet.WithStats(true),
		// One row group per part: a part is a chunk of the CSV,
		// megabytes, as BigQuery wants its row groups (16 MiB and
		// more) and Spark splits files.
		parquet.WithMaxRowGroupLength(1 << 40),
		parquet.WithStoreDecimalAsInteger(true),
		parquet.WithCreatedBy("ferry"),
		parquet.WithAllocator(buffers),
	}
	for i, f := range s {
		fields[i] = arrow.Field{Name: f.Name, Type: arrowType(f), Nullable: !f.Required}
		switch f.Type {
		case Int64, Numeric, Float64, Timestamp, Datetime, Time:
			// Measures are mostly distinct: a dictionary costs a
			// hash of every value and saves nothing.
			props = append(props, parquet.WithDictionaryFor(f.Name, false))
		case String, Bytes, JSON:
			// A part is a run of the file's records in file order: a
			// string column's min and max prune a read only when the
			// file is sorted by it, and comparing every value costs a
			// twentieth of the conversion. Numbers, dates and
			// timestamps keep theirs (cheap, and what files are
			// sorted by).
			props = append(props, parquet.WithStatsFor(f.Name, false))
		}
	}
	wp := parquet.NewWriterProperties(props...)
	// arrow's mapping of the types is the Parquet schema: the one
	// pqarrow wrote, and reads back (restore --to csv).
	ps, err := pqarrow.ToParquet(arrow.NewSchema(fields, nil), wp, pqarrow.DefaultWriterProps())
	if err != nil {
		return nil, fmt.Errorf("parquet schema: %w", err)
	}
	c := &Converter{fields: s, csvN: csvN, o: o, root: ps.Root(), props: wp, cols: make([]column, len(s)), batch: batchRowsFor(len(s))}
	batchRows := c.batch
	if len(o.Constants) > 0 {
		names := make([]string, len(o.Constants))
		for i, k := range o.Constants {
			names[i] = k.Name
		}
		c.meta = metadata.NewKeyValueMetadata()
		if err := c.meta.Append(ConstantsKey, strings.Join(names, ",")); err != nil {
			return nil, err
		}
	}
	for i, f := range s {
		col := &c.cols[i]
		if !f.Required {
			col.def = make([]int16, 0, batchRows)
		}
		col.phys = ps.Column(i).PhysicalType()
		switch col.phys {
		case parquet.Types.Int64:
			col.i64 = make([]int64, 0, batchRows)
		case parquet.Types.Int32:
			col.i32 = make([]int32, 0, batchRows)
		case parquet.Types.Double:
			col.f64 = make([]float64, 0, batchRows)
		case parquet.Types.Boolean:
			col.bools = make([]bool, 0, batchRows)
		case parquet.Types.ByteArray:
			col.bytes = make([]parquet.ByteArray, 0, batchRows)
		case parquet.Types.FixedLenByteArray:
			col.width = ps.Column(i).TypeLength()
			col.fixed = make([]parquet.FixedLenByteArray, 0, batchRows)
		default:
			return nil, fmt.Errorf("column %s: parquet type %s", f.Name, ps.Column(i).PhysicalType())
		}
	}
	return c, nil
}

func arrowType(f Field) arrow.DataType {
	switch f.Type {
	case Int64:
		return arrow.PrimitiveTypes.Int64
	case Numeric:
		if f.Precision > MaxPrecision {
			return &arrow.Decimal256Type{Precision: int32(f.Precision), Scale: int32(f.Scale)}
		}
		return &arrow.Decimal128Type{Precision: int32(f.Precision), Scale: int32(f.Scale)}
	case Float64:
		return arrow.PrimitiveTypes.Float64
	case Bool:
		return arrow.FixedWidthTypes.Boolean
	case Date:
		return arrow.FixedWidthTypes.Date32
	case Timestamp:
		return arrow.FixedWidthTypes.Timestamp_us // UTC: BigQuery's TIMESTAMP
	case Datetime:
		return &arrow.TimestampType{Unit: arrow.Microsecond} // no zone: BigQuery's DATETIME
	case Time:
		return arrow.FixedWidthTypes.Time64us
	case Bytes:
		return arrow.BinaryTypes.Binary
	case JSON:
		t, _ := extensions.NewJSONType(arrow.BinaryTypes.String) // the JSON logical type
		return t
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
	if e := c.o.Text.Encoding; e != "" && e != UTF8 {
		c.utf8 = c.o.Text.decode(c.utf8[:0], data)
		data = c.utf8
	}
	c.out.Reset()
	c.reset()
	c.Rejects = c.Rejects[:0]
	opts := []file.WriteOption{file.WithWriterProps(c.props)}
	if c.meta != nil {
		opts = append(opts, file.WithWriteMetadata(c.meta))
	}
	fw, err := file.NewParquetWriterWithError(&c.out, c.root, opts...)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: parquet writer: %w", path, err)
	}
	defer func() { _ = fw.Close() }() // a second Close does nothing
	rg, err := fw.AppendBufferedRowGroupChecked()
	if err != nil {
		return nil, 0, fmt.Errorf("%s: parquet row group: %w", path, err)
	}
	var rows, inBatch int64
	flush := func() error {
		if inBatch == 0 {
			return nil
		}
		inBatch = 0
		return c.flush(rg)
	}
	add := func(rec []string, raw string, fieldLine func(i int) int64, quoted func(i int) bool) error {
		for i, v := range rec {
			// An empty field is NULL, a quoted one ("") an empty
			// STRING, as DuckDB and BigQuery read them.
			if err := c.append(i, v, (v == "" && (quoted == nil || !quoted(i))) || c.o.Text.null(v)); err != nil {
				for j := range i {
					c.cols[j].pop() // the record's values so far
				}
				return c.reject(&RowError{Path: path, Line: fieldLine(i), Column: i + 1, Name: c.fields[i].Name, Err: err}, raw)
			}
		}
		for k := range c.o.Constants {
			col := &c.cols[c.csvN+k]
			col.bytes = append(col.bytes, parquet.ByteArray(c.o.Constants[k].Value))
		}
		rows++
		if inBatch++; inBatch == int64(c.batch) {
			if err := flush(); err != nil {
				return fmt.Errorf("%s: parquet: %w", path, err)
			}
		}
		return nil
	}
	// The records before the first quote are split here, their fields
	// substrings of the part; from the first record with a quote on,
	// encoding/csv reads the rest (its strings are its own). The column
	// writers copy what they keep, so no value outlives the call.
	text := unsafe.String(unsafe.SliceData(data), len(data))
	pos, at := c.plainRecords(text, path, line, add)
	if err := at.err; err != nil {
		return nil, 0, err
	}
	if pos < len(text) {
		r := csv.NewReader(strings.NewReader(text[pos:]))
		r.Comma = c.o.Comma
		r.LazyQuotes = true // a quote inside a field is a character, as Cut reads it
		r.FieldsPerRecord = c.csvN
		r.ReuseRecord = true
		rest := text[pos:]
		for {
			from := r.InputOffset()
			rec, err := r.Read()
			if err == io.EOF {
				break
			}
			raw := rest[from:r.InputOffset()]
			if err != nil {
				re := c.readError(err, rec, path, at.line)
				var pe *csv.ParseError
				if errors.As(err, &pe) && errors.Is(pe.Err, csv.ErrFieldCount) {
					re = c.reject(re.(*RowError), raw)
				}
				if re != nil {
					return nil, 0, re
				}
				continue
			}
			if err := add(rec, raw, func(i int) int64 { l, _ := r.FieldPos(i); return at.line - 1 + int64(l) },
				func(i int) bool { return fieldQuoted(r, raw, i) }); err != nil {
				return nil, 0, err
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

// reset empties every column's batch.
func (c *Converter) reset() {
	for i := range c.cols {
		col := &c.cols[i]
		col.def, col.i64, col.i32, col.f64 = col.def[:0], col.i64[:0], col.i32[:0], col.f64[:0]
		col.bools, col.bytes, col.fixed = col.bools[:0], col.bytes[:0], col.fixed[:0]
	}
}

// flush hands each column's batch to its writer in rg, and empties it.
func (c *Converter) flush(rg file.BufferedRowGroupWriter) error {
	for i := range c.cols {
		col := &c.cols[i]
		cw, err := rg.Column(i)
		if err != nil {
			return err
		}
		switch w := cw.(type) {
		case *file.Int64ColumnChunkWriter:
			_, err = w.WriteBatch(col.i64, col.def, nil)
		case *file.Int32ColumnChunkWriter:
			_, err = w.WriteBatch(col.i32, col.def, nil)
		case *file.Float64ColumnChunkWriter:
			_, err = w.WriteBatch(col.f64, col.def, nil)
		case *file.BooleanColumnChunkWriter:
			_, err = w.WriteBatch(col.bools, col.def, nil)
		case *file.ByteArrayColumnChunkWriter:
			_, err = w.WriteBatch(col.bytes, col.def, nil)
		case *file.FixedLenByteArrayColumnChunkWriter:
			_, err = w.WriteBatch(col.fixed, col.def, nil)
		default:
			err = fmt.Errorf("column %s: writer %T", c.fields[i].Name, cw)
		}
		if err != nil {
			return err
		}
	}
	c.reset()
	return nil
}

// reject leaves out the record raw for re, or, past Options.BadRows, fails
// the part with it.
func (c *Converter) reject(re *RowError, raw string) error {
	if len(c.Rejects) >= c.o.BadRows {
		if c.o.BadRows > 0 {
			return fmt.Errorf("%w (%d): %w", ErrTooManyBadRows, c.o.BadRows, re)
		}
		return re
	}
	raw = strings.TrimSuffix(strings.TrimSuffix(raw, "\n"), "\r")
	rj := Reject{Err: re, Record: raw}
	if len(raw) > MaxRejectText {
		rj.Record, rj.Truncated = strings.ToValidUTF8(raw[:MaxRejectText], ""), true
	}
	c.Rejects = append(c.Rejects, rj)
	return nil
}

// pop takes back the last value appended to the column's batch.
func (col *column) pop() {
	if col.def != nil {
		last := col.def[len(col.def)-1]
		col.def = col.def[:len(col.def)-1]
		if last == 0 {
			return // a NULL: no value
		}
	}
	switch col.phys {
	case parquet.Types.Int64:
		col.i64 = col.i64[:len(col.i64)-1]
	case parquet.Types.Int32:
		col.i32 = col.i32[:len(col.i32)-1]
	case parquet.Types.Double:
		col.f64 = col.f64[:len(col.f64)-1]
	case parquet.Types.Boolean:
		col.bools = col.bools[:len(col.bools)-1]
	case parquet.Types.ByteArray:
		col.bytes = col.bytes[:len(col.bytes)-1]
	case parquet.Types.FixedLenByteArray:
		col.fixed = col.fixed[:len(col.fixed)-1]
	}
}

// stop is where plainRecords stopped: the line of that byte, and the error
// that stopped it.
type stop struct {
	line int64
	err  error
}

// plainRecords hands add the records of text (of the file at path), whose
// first line is line,
// up to the first line with a quote (whose records encoding/csv reads) or
// the end, as encoding/csv would read them: a line ending \r\n ends at the
// \n, the last line's \r is dropped, empty lines are skipped, and a record
// with the wrong number of fields is an error. It returns the byte and
// line where it stopped.
func (c *Converter) plainRecords(text, path string, line int64, add func([]string, string, func(int) int64, func(int) bool) error) (int, stop) {
	comma := byte(c.o.Comma)
	if c.o.Comma >= utf8.RuneSelf {
		return 0, stop{line: line} // encoding/csv reads it all
	}
	n := c.csvN
	if cap(c.rec) < n {
		c.rec = make([]string, n)
	}
	rec := c.rec[:n]
	fieldLine := func(int) int64 { return line }
	pos := 0
	for ; pos < len(text); line++ {
		end := strings.IndexByte(text[pos:], '\n')
		next := pos + end + 1
		if end < 0 {
			end, next = len(text)-pos, len(text)
		}
		ln := text[pos : pos+end]
		if c.o.Text.quotes() && strings.IndexByte(ln, '"') >= 0 {
			return pos, stop{line: line}
		}
		raw := ln
		ln = strings.TrimSuffix(ln, "\r")
		pos = next
		if ln == "" {
			continue
		}
		k := 0
		for {
			i := strings.IndexByte(ln, comma)
			if k == n {
				k++ // one too many: counted, then refused
				break
			}
			if i < 0 {
				rec[k] = ln
				k++
				break
			}
			rec[k] = ln[:i]
			ln = ln[i+1:]
			k++
		}
		if k != n {
			if k > n {
				k = n + 1 + strings.Count(ln, string(comma))
			}
			err := c.reject(&RowError{Path: path, Line: line,
				Err: fmt.Errorf("%w: %d fields, the header has %d", csv.ErrFieldCount, k, n)}, raw)
			if err != nil {
				return pos, stop{line: line, err: err}
			}
			continue
		}
		if err := add(rec, raw, fieldLine, nil); err != nil { // no quote on the line
			return pos, stop{line: line, err: err}
		}
	}
	return pos, stop{line: line}
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
			Err: fmt.Errorf("%w: %d fields, the header has %d", csv.ErrFieldCount, len(rec), c.csvN)}
	case errors.Is(pe.Err, csv.ErrQuote) && pe.Line != pe.StartLine:
		return &RowError{Path: path, Line: line - 1 + int64(pe.StartLine), Err: fmt.Errorf("%w: a quoted field opened here is never closed", ErrUnterminatedQuote)}
	}
	return &RowError{Path: path, Line: at, Err: fmt.Errorf("%w (byte %d of the line)", pe.Err, pe.Column)}
}

// fieldQuoted reports whether field i of the record r read last, whose
// text is raw, was quoted: where its first byte is a quote (r.FieldPos
// gives its line and column; a record starts a line).
func fieldQuoted(r *csv.Reader, raw string, i int) bool {
	l0, _ := r.FieldPos(0)
	l, col := r.FieldPos(i)
	at := 0
	for ; l > l0; l-- {
		nl := strings.IndexByte(raw[at:], '\n')
		if nl < 0 {
			return false
		}
		at += nl + 1
	}
	at += col - 1
	return at < len(raw) && raw[at] == '"'
}

// append parses v into column i's batch; null says it is NULL (an empty
// field, not quoted).
func (c *Converter) append(i int, v string, null bool) error {
	f, col := &c.fields[i], &c.cols[i]
	if len(v) > MaxField {
		return fmt.Errorf("field of %d bytes; ferry converts fields up to %d (a missing quote?)", len(v), MaxField)
	}
	if null || (v == "" && f.Type != String) {
		if f.Required {
			return errors.New("empty value in a REQUIRED column")
		}
		col.def = append(col.def, 0)
		return nil
	}
	switch f.Type {
	case Int64:
		x, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("%s is not an INT64", quote(v))
		}
		if c.o.Inferred && (leadingZero(v) || v[0] == '+') {
			return fmt.Errorf("%s would lose its %s as an INT64: %w", quote(v), signOrZeros(v), errInferredAltered)
		}
		col.i64 = append(col.i64, x)
	case Numeric:
		if col.width > 16 {
			x, err := parseBigNumeric(v, *f)
			if err != nil {
				return err
			}
			col.fixed = append(col.fixed, twosComplement(x, col.width))
			break
		}
		x, err := parseNumeric(v, *f)
		if err != nil {
			return err
		}
		if col.width == 0 {
			col.i64 = append(col.i64, int64(x.LowBits())) // precision <= 18: an INT64
		} else {
			col.fixed = append(col.fixed, bigEndian(x, col.width))
		}
	case Float64:
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("%s is not a FLOAT64", quote(v))
		}
		if c.o.Inferred && !inferredFloat(v, x) {
			return fmt.Errorf("%s would not read back as written as a FLOAT64: %w", quote(v), errInferredAltered)
		}
		col.f64 = append(col.f64, x)
	case Bool:
		x, ok := parseBool(v)
		if !ok {
			return fmt.Errorf("%s is not a BOOL (true/false, t/f, yes/no, y/n, 1/0)", quote(v))
		}
		col.bools = append(col.bools, x)
	case Date:
		days, ok := parseDate(v)
		if !ok {
			return fmt.Errorf("%s is not a DATE (YYYY-MM-DD)", quote(v))
		}
		col.i32 = append(col.i32, int32(days))
	case Timestamp:
		t, ok := parseTimestamp(v)
		if !ok {
			return fmt.Errorf("%s is not a TIMESTAMP (RFC 3339, or YYYY-MM-DD HH:MM:SS[.ffffff] in UTC)", quote(v))
		}
		if t.Nanosecond()%1000 != 0 {
			return fmt.Errorf("%s has nanoseconds; a TIMESTAMP keeps microseconds", quote(v))
		}
		col.i64 = append(col.i64, t.UnixMicro())
	case Datetime:
		t, ok := parseDatetime(v)
		if !ok {
			return fmt.Errorf("%s is not a DATETIME (YYYY-MM-DD[ HH:MM:SS[.ffffff]], no zone)", quote(v))
		}
		col.i64 = append(col.i64, t.UnixMicro())
	case Time:
		us, ok := parseTime(v)
		if !ok {
			return fmt.Errorf("%s is not a TIME (HH:MM:SS[.ffffff])", quote(v))
		}
		col.i64 = append(col.i64, us)
	case Bytes:
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			return fmt.Errorf("%s is not BYTES in base64, as BigQuery's CSV loads read them", quote(v))
		}
		col.bytes = append(col.bytes, parquet.ByteArray(b))
	case JSON:
		if !json.Valid([]byte(v)) {
			return fmt.Errorf("%s is not JSON", quote(v))
		}
		col.bytes = append(col.bytes, parquet.ByteArray(v))
	default:
		if !utf8.ValidString(v) {
			if u16, _ := c.o.Text.utf16(); u16 {
				return ErrInvalidUTF16
			}
			return ErrInvalidUTF8
		}
		if f.MaxLength > 0 && len(v) > f.MaxLength {
			if n := utf8.RuneCountInString(v); n > f.MaxLength {
				return fmt.Errorf("%s is %d characters; the column's maxLength is %d", quote(v), n, f.MaxLength)
			}
		}
		// The writer only reads it: copied into its pages or
		// dictionary before Convert returns.
		col.bytes = append(col.bytes, parquet.ByteArray(unsafe.Slice(unsafe.StringData(v), len(v))))
	}
	if col.def != nil {
		col.def = append(col.def, 1)
	}
	return nil
}

// errInferredAltered: a value after the inference sample that its
// column's inferred type would store altered.
var errInferredAltered = errors.New("the column's type was inferred from the first records, and this value would have made it a STRING " +
	"(give --schema with the column as STRING, or --bad-rows to leave the record out)")

// signOrZeros names what an INT64 would drop of v.
func signOrZeros(v string) string {
	if strings.HasPrefix(v, "+") {
		return "plus sign"
	}
	return "leading zeros"
}

// bigEndian is x as Parquet stores a DECIMAL in a FIXED_LEN_BYTE_ARRAY of
// width bytes: two's complement, big-endian (width holds the precision, so
// the bytes dropped are sign).
func bigEndian(x decimal128.Num, width int) parquet.FixedLenByteArray {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(x.HighBits()))
	binary.BigEndian.PutUint64(b[8:], x.LowBits())
	return parquet.FixedLenByteArray(b[16-width:])
}

// parseNumeric reads v exactly as f's DECIMAL(precision, scale) of at
// most 38 digits: fewer decimals than scale are padded, more are refused
// (no rounding), as are more digits before the point than the precision
// leaves.
func parseNumeric(v string, f Field) (decimal128.Num, error) {
	precision, scale := f.Precision, f.Scale
	if precision <= 18 {
		// The common case, in one pass and no allocation.
		if x, ok := scaledInt(v, scale); ok && fitsDigits(x, precision) {
			return decimal128.FromI64(x), nil
		}
	}
	x, err := parseBigNumeric(v, f)
	if err != nil {
		return decimal128.Num{}, err
	}
	if x.IsInt64() {
		return decimal128.FromI64(x.Int64()), nil
	}
	return decimal128.FromBigInt(x), nil
}

// parseBigNumeric reads v as parseNumeric does, to the unscaled integer,
// whatever f's precision.
func parseBigNumeric(v string, f Field) (*big.Int, error) {
	precision, scale := f.Precision, f.Scale
	intDigits, frac, ok := decimalShape(v)
	switch {
	case !ok:
		return nil, fmt.Errorf("%s is not a %s", quote(v), f.typeName())
	case frac > scale:
		return nil, fmt.Errorf("%s has %d decimals; the column is %s(%d, %d) and ferry does not round", quote(v), frac, f.typeName(), precision, scale)
	case intDigits > precision-scale:
		return nil, fmt.Errorf("%s has %d digits before the point; %s(%d, %d) holds %d", quote(v), intDigits, f.typeName(), precision, scale, precision-scale)
	}
	digits := strings.Replace(v, ".", "", 1) + strings.Repeat("0", scale-frac)
	x, ok := new(big.Int).SetString(digits, 10)
	if !ok {
		return nil, fmt.Errorf("%s is not a %s", quote(v), f.typeName())
	}
	return x, nil
}

// twosComplement is x as Parquet stores a DECIMAL in a
// FIXED_LEN_BYTE_ARRAY of width bytes: two's complement, big-endian
// (width holds the precision).
func twosComplement(x *big.Int, width int) parquet.FixedLenByteArray {
	if x.Sign() < 0 {
		x = new(big.Int).Add(x, new(big.Int).Lsh(big.NewInt(1), uint(8*width)))
	}
	return x.FillBytes(make([]byte, width))
}

// scaledInt reads v, [-]DIGITS[.DIGITS] with at most scale decimals, no
// leading zero before another digit and at most 18 digits in all, as the
// integer v × 10^scale; ok is false for anything else (parseNumeric then
// says why, or takes it the long way).
func scaledInt(v string, scale int) (x int64, ok bool) {
	i, neg := 0, false
	if i < len(v) && v[i] == '-' {
		neg, i = true, 1
	}
	start, digits, frac := i, 0, -1
	for ; i < len(v); i++ {
		c := v[i]
		switch {
		case c >= '0' && c <= '9':
			if digits == 18 {
				return 0, false
			}
			x = x*10 + int64(c-'0')
			digits++
			if frac >= 0 {
				frac++
			}
		case c == '.' && frac < 0 && i > start:
			frac = 0
		default:
			return 0, false
		}
	}
	if frac < 0 {
		frac = 0
	}
	switch {
	case i == start || v[len(v)-1] == '.' || frac > scale:
		return 0, false
	case v[start] == '0' && start+1 < len(v) && v[start+1] != '.':
		return 0, false // a leading zero: the long way names it
	}
	for ; frac < scale; frac++ {
		if x > math.MaxInt64/10 {
			return 0, false
		}
		x *= 10
	}
	if neg {
		x = -x
	}
	return x, true
}

// fitsDigits reports whether the integer x of a NUMERIC has at most
// precision digits.
func fitsDigits(x int64, precision int) bool {
	if x < 0 {
		x = -x
	}
	return precision >= 19 || x < pow10[precision]
}

// pow10 are the powers of ten an int64 holds.
var pow10 = func() (p [19]int64) {
	p[0] = 1
	for i := 1; i < len(p); i++ {
		p[i] = p[i-1] * 10
	}
	return p
}()

// parseDate reads YYYY-MM-DD as days since 1970-01-01, as time.Parse with
// time.DateOnly takes it (a real day of a real month), without its
// general parser.
func parseDate(v string) (int64, bool) {
	if len(v) != 10 || v[4] != '-' || v[7] != '-' || !allDigits(v[:4]) || !allDigits(v[5:7]) || !allDigits(v[8:]) {
		return 0, false
	}
	y := int(v[0]-'0')*1000 + int(v[1]-'0')*100 + int(v[2]-'0')*10 + int(v[3]-'0')
	m := time.Month(int(v[5]-'0')*10 + int(v[6]-'0'))
	d := int(v[8]-'0')*10 + int(v[9]-'0')
	t := time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	if m < 1 || m > 12 || d < 1 || t.Day() != d {
		return 0, false
	}
	return t.Unix() / 86400, true
}

// quote is v for an error message: quoted, at most 64 bytes of it.
func quote(v string) string {
	if len(v) > 64 {
		return strconv.Quote(v[:64]) + "…"
	}
	return strconv.Quote(v)
}
