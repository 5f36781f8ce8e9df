package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/table"
)

// Convert asks for delimited-text sources to travel as Parquet (package
// table): each such file becomes parts of about its chunk size, cut at
// record boundaries, each one Parquet object
// PREFIX/<path>/part-NNNNN.parquet, all of one schema.
type Convert struct {
	// Match names more files to convert (glob patterns on a file's
	// name, as filters match a pattern without "/"): .csv and .tsv files
	// always are.
	Match []string
	// Schema, when set, is every converted file's; otherwise each
	// file's is inferred from its header and first records.
	Schema table.Schema
	// Compression is the Parquet column compression: zstd, snappy or
	// none ("" zstd).
	Compression string
	// BadRows is how many bad records the transfer may leave out, each
	// named in a rejects object beside its source's parts (--bad-rows;
	// BigQuery's maxBadRecords): 0 fails a source at its first.
	BadRows int
	// Text is the files' encoding, null markers and quotes (--encoding,
	// --null-marker, --quote).
	Text table.Text
	// InferRows is how many records an inferred schema comes from: 0
	// table.SampleRows, -1 all of them (--infer-rows).
	InferRows int

	match []Filter
	// scans keep what large sources' scans found, for the next walk of
	// the plan (the producer walks twice: to count, then to send); a
	// source that changed in between has another key.
	mu    sync.Mutex
	scans map[scanKey]*table.Source
}

// scanKey is a source as the walk saw it.
type scanKey struct {
	path             string
	size, mod, ctime int64
	ino              uint64
	target           int64
}

// Scans of sources this large are kept for the next walk, at most
// maxScans of them: a million small files are cut again (reading each
// costs less than holding them all), a few large ones are not read twice.
const (
	keepScanFrom = 64 << 20
	maxScans     = 1024
)

// ConvertParquet is the one conversion ferry makes.
const ConvertParquet = "parquet"

// ParseConvert is what --convert (a request's convert), --convert-match,
// --schema (the file's bytes) and --parquet-compression ask for: nil when
// kind is empty, which the others then must be too.
func ParseConvert(kind string, match []string, schema []byte, compression string) (*Convert, error) {
	if kind == "" {
		if len(match) > 0 || len(schema) > 0 || compression != "" {
			return nil, fmt.Errorf("a convert pattern, schema or Parquet compression without --convert parquet")
		}
		return nil, nil
	}
	if kind != ConvertParquet {
		return nil, fmt.Errorf("convert %.32q: want parquet", kind)
	}
	c := &Convert{Match: match, Compression: compression}
	if len(schema) > 0 {
		s, err := table.ParseSchema(schema)
		if err != nil {
			return nil, fmt.Errorf("schema: %w", err)
		}
		c.Schema = s
	}
	return c, c.check()
}

// MaxBadRows bounds --bad-rows (10,000 records, of at most
// table.MaxRejectText bytes of text each).
const MaxBadRows = message.MaxBadRows

// SetBadRows sets c's BadRows to n (--bad-rows, a request's bad_rows),
// refusing a count out of range or one without a conversion.
func SetBadRows(c *Convert, n int) error {
	switch {
	case n < 0 || n > MaxBadRows:
		return fmt.Errorf("bad rows %d: want 0 to %d", n, MaxBadRows)
	case n > 0 && c == nil:
		return fmt.Errorf("bad rows %d without --convert parquet: only a conversion reads records", n)
	case c != nil:
		c.BadRows = n
	}
	return nil
}

// SetText sets c's encoding, null markers and quotes (--encoding,
// --null-marker, --quote; a request's encoding, null_markers, quote),
// refusing what ferry does not read or them without a conversion.
func SetText(c *Convert, encoding string, nullMarkers []string, quote string) error {
	if c == nil {
		var said []string
		for _, o := range []struct {
			set  bool
			what string
		}{{encoding != "", "an encoding"}, {len(nullMarkers) > 0, "a null marker"}, {quote != "", "a quote setting"}} {
			if o.set {
				said = append(said, o.what)
			}
		}
		if len(said) > 0 {
			return fmt.Errorf("%s without --convert parquet: only a conversion reads records", strings.Join(said, " and "))
		}
		return nil
	}
	t, err := table.ParseText(encoding, nullMarkers, quote)
	if err != nil {
		return err
	}
	c.Text = t
	return nil
}

// SetInferRows sets c's InferRows from --infer-rows (a request's
// infer_rows): a number of records, or all; "" leaves the default.
func SetInferRows(c *Convert, v string) error {
	if v == "" {
		return nil
	}
	if c == nil {
		return fmt.Errorf("infer rows %.16q without --convert parquet: only a conversion infers a schema", v)
	}
	if strings.EqualFold(v, "all") {
		c.InferRows = -1
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return fmt.Errorf("infer rows %.16q: want a number of records (1 or more) or all", v)
	}
	c.InferRows = n
	return nil
}

// MaxConvertMatch bounds --convert-match patterns.
const MaxConvertMatch = 100

// check compiles the patterns; errors name the one at fault.
func (c *Convert) check() error {
	if err := table.CheckCompression(c.Compression); err != nil {
		return err
	}
	if err := SetBadRows(c, c.BadRows); err != nil {
		return err
	}
	if err := SetText(c, c.Text.Encoding, c.Text.NullMarkers, c.Text.Quote); err != nil {
		return err
	}
	if len(c.Match) > MaxConvertMatch {
		return fmt.Errorf("%d --convert-match patterns; %d at most", len(c.Match), MaxConvertMatch)
	}
	c.match = c.match[:0]
	for _, m := range c.Match {
		if strings.Contains(m, "/") {
			return fmt.Errorf("convert pattern %.64q: matches a file's name, which has no \"/\"", m)
		}
		f, err := NewFilter(true, m)
		if err != nil {
			return fmt.Errorf("convert pattern: %w", err)
		}
		c.match = append(c.match, f)
	}
	return nil
}

// converts reports whether the file named name (its last path element) is
// converted.
func (c *Convert) converts(name string) bool {
	if c == nil {
		return false
	}
	lower := strings.ToLower(name)
	if strings.HasSuffix(lower, ".csv") || strings.HasSuffix(lower, ".tsv") {
		return true
	}
	for _, f := range c.match {
		if f.matches(name, false) {
			return true
		}
	}
	return false
}

// Part is one part of a converted source: the plan's File is then the
// part, its Size the part's bytes of the source, and its object a Parquet
// file of its own.
type Part struct {
	table.Range
	Index, Count int
	// FileSize is the whole source's size, for the check that it did
	// not change while it was read.
	FileSize    int64
	Schema      table.Schema
	Comma       rune
	Compression string
	BadRows     int // the transfer's
	// Inferred: Schema was inferred (table.Options.Inferred).
	Inferred bool
	// Text is how the source reads: its encoding, null markers and
	// quotes, settled for the file (table.Source's).
	Text table.Text
	// Constants are the key=value directories right above the source
	// (a hive layout): columns of the parts after the file's, so a load
	// gives the table the keys as columns, as BigQuery's hive
	// partitioning does for files laid out directly in such directories
	// (a part's directory is its file's name, which its detection does
	// not take).
	Constants []table.Constant
}

// OptionsKey is a digest of what the part's Parquet bytes depend on
// besides its bytes of the source: the schema, delimiter, compression,
// bad rows allowed, encoding and null markers, and constant columns. A part whose object has the same
// key, source size and mtime (or range CRC32C) is unchanged.
func (p *Part) OptionsKey() string {
	b, err := p.TableSchema().MarshalJSON()
	if err != nil {
		b = []byte(p.TableSchema().String())
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%q\n%q\n%d\n", b, p.Comma, p.Compression, p.BadRows)
	if p.Text.Encoding != "" || len(p.Text.NullMarkers) > 0 {
		fmt.Fprintf(h, "%q %q\n", p.Text.Encoding, p.Text.NullMarkers)
	}
	if p.Text.Quote == table.QuoteNone {
		fmt.Fprintf(h, "quote %q\n", p.Text.Quote) // the default's parts keep their key
	}
	for _, k := range p.Constants {
		fmt.Fprintf(h, "%q=%q\n", k.Name, k.Value)
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// TableSchema is the parts' schema: the file's columns, then the
// constants as REQUIRED STRING columns.
func (p *Part) TableSchema() table.Schema {
	s := p.Schema
	for _, k := range p.Constants {
		s = append(s[:len(s):len(s)], table.Field{Name: k.Name, Type: table.String, Required: true})
	}
	return s
}

// MaxHiveKeys bounds the key=value directories taken as columns, as
// BigQuery's hive partitioning does.
const MaxHiveKeys = 10

// hiveColumns are the key=value directories right above sf (the run of
// them that ends at its own directory, at most MaxHiveKeys, the nearest
// kept), refused when one names a column of the file's schema s: a table
// cannot have it twice.
func hiveColumns(sf SourceFile, s table.Schema) ([]table.Constant, error) {
	dirs := strings.Split(sf.Rel, "/")
	dirs = dirs[:len(dirs)-1]
	i := len(dirs)
	for i > 0 && len(dirs)-i < MaxHiveKeys && message.HiveKey(dirs[i-1]) != "" {
		i--
	}
	var keys []table.Constant
	for _, d := range dirs[i:] {
		k, v, _ := strings.Cut(d, "=")
		for _, o := range keys {
			if strings.EqualFold(o.Name, k) {
				return nil, fmt.Errorf("source %s: the directories above it name %s twice; a table has one column of a name", sf.Path, k)
			}
		}
		for _, f := range s {
			if strings.EqualFold(f.Name, k) {
				return nil, fmt.Errorf("source %s: column %s of its header is also the directory %s above it; rename one (a table has one column of a name)", sf.Path, f.Name, d)
			}
		}
		keys = append(keys, table.Constant{Name: k, Value: v})
	}
	return keys, nil
}

// scan cuts sf into parts and settles its schema, or gives back what an
// earlier walk found for it unchanged.
func (c *Convert) scan(sf SourceFile, target int64) (*table.Source, error) {
	key := scanKey{path: sf.Path, size: sf.Size, mod: sf.Mod, ctime: sf.Ctime, ino: sf.Ino, target: target}
	c.mu.Lock()
	src, ok := c.scans[key]
	c.mu.Unlock()
	if ok {
		return src, nil
	}
	fh, err := sf.Open()
	if err != nil {
		return nil, fmt.Errorf("source %s: %w", sf.Path, err)
	}
	src, err = table.Scan(fh, sf.Size, sf.Path, target, table.ScanOptions{Comma: table.Comma(sf.Rel), Schema: c.Schema, InferRows: c.InferRows, BadRows: c.BadRows, Text: c.Text})
	_ = fh.Close()
	if err != nil {
		return nil, err
	}
	if sf.Size >= keepScanFrom {
		c.mu.Lock()
		if c.scans == nil {
			c.scans = map[scanKey]*table.Source{}
		}
		if len(c.scans) < maxScans {
			c.scans[key] = src
		}
		c.mu.Unlock()
	}
	return src, nil
}

// PartObject is the object of part index of the source whose own object
// name (with no extension) is obj.
func PartObject(obj string, index int) string {
	return obj + "/" + PartName(index)
}

// PartName is the name of part index inside its source's prefix.
func PartName(index int) string { return message.PartName(index) }

// convertKey is what a converted file's name sorts as among its
// neighbours: its parts' objects follow its name and a "/".
const convertKey = "/"

// parts plans the parts of the converted source sf, whose parts are about
// target bytes.
func (c *Convert) parts(sf SourceFile, dest Destination, target int64, fn func(File) error) error {
	src, err := c.scan(sf, target)
	if err != nil {
		return err
	}
	obj := dest.Object(sf.Rel, "")
	keys, err := hiveColumns(sf, src.Schema)
	if err != nil {
		return err
	}
	for i, r := range src.Parts {
		f := File{SourceFile: sf, Object: PartObject(obj, i), ChunkSize: max(r.Size, 1), Chunks: 1,
			Part: &Part{Range: r, Index: i, Count: len(src.Parts), FileSize: sf.Size, Schema: src.Schema, Comma: src.Comma, Compression: c.Compression,
				BadRows: c.BadRows, Constants: keys, Inferred: src.Inferred, Text: src.Text}}
		f.Size = r.Size
		if err := checkFinal(f.Object); err != nil {
			return fmt.Errorf("source %s: object name: %w", sf.Path, err)
		}
		if err := fn(f); err != nil {
			return err
		}
	}
	return nil
}
