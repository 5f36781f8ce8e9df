// Package tabletest reads Parquet files back for tests with parquet-go, an
// implementation independent of the writer's (arrow-go), and says what a
// CSV cell must read back as: ferry's conversion is checked by a reader
// nobody here wrote.
package tabletest

import (
	"bytes"
	"encoding/csv"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"math/big"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// ReadBack reads a Parquet file with parquet-go, a different implementation
// from the writer's (arrow-go), and returns its column names, the type its
// schema gives each, and every cell as text the way the CSV would write it
// ("" for NULL), decoding logical types by the file's own schema.
func ReadBack(t testing.TB, b []byte) (names, types []string, rows [][]string) {
	t.Helper()
	names, types, rows, err := Read(b)
	if err != nil {
		t.Fatal(err)
	}
	return names, types, rows
}

// Read is ReadBack for callers without a testing.TB (a double serving a
// test): it returns what is wrong.
func Read(b []byte) (names, types []string, rows [][]string, err error) {
	return read(b, "")
}

// Null stands for NULL in the cells of ReadBackNulls.
const Null = "\x00NULL"

// ReadBackNulls is ReadBack with NULL cells as Null, so that a test tells
// NULL from an empty STRING.
func ReadBackNulls(t testing.TB, b []byte) (names, types []string, rows [][]string) {
	t.Helper()
	names, types, rows, err := read(b, Null)
	if err != nil {
		t.Fatal(err)
	}
	return names, types, rows
}

func read(b []byte, null string) (names, types []string, rows [][]string, err error) {
	f, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("parquet-go cannot open the file: %w", err)
	}
	fields := f.Schema().Fields()
	for _, fl := range fields {
		names = append(names, fl.Name())
		types = append(types, logicalName(fl))
	}
	for _, rg := range f.RowGroups() {
		rr := rg.Rows()
		buf := make([]parquet.Row, 256)
		for {
			n, rerr := rr.ReadRows(buf)
			for _, row := range buf[:n] {
				cells := make([]string, len(fields))
				for _, v := range row {
					if v.IsNull() && null != "" {
						cells[v.Column()] = null
						continue
					}
					if cells[v.Column()], err = cellText(fields[v.Column()], v); err != nil {
						return nil, nil, nil, err
					}
				}
				rows = append(rows, cells)
			}
			if rerr == io.EOF {
				break
			}
			if rerr != nil {
				return nil, nil, nil, fmt.Errorf("parquet-go reading rows: %w", rerr)
			}
		}
		_ = rr.Close()
	}
	if int64(len(rows)) != f.NumRows() {
		return nil, nil, nil, fmt.Errorf("read %d rows, the footer says %d", len(rows), f.NumRows())
	}
	return names, types, rows, nil
}

// logical is the annotation of a column, nil for a plain physical type.
func logical(f parquet.Field) format.LogicalTypeValue {
	if lt := f.Type().LogicalType(); lt != nil {
		return lt.Value
	}
	return nil
}

func logicalName(f parquet.Field) string {
	switch lt := logical(f).(type) {
	case *format.DecimalType:
		return fmt.Sprintf("DECIMAL(%d,%d)", lt.Precision, lt.Scale)
	case *format.DateType:
		return "DATE"
	case *format.TimestampType:
		_, micros := lt.Unit.Value.(*format.MicroSeconds)
		return fmt.Sprintf("TIMESTAMP(utc=%v,micros=%v)", lt.IsAdjustedToUTC, micros)
	case *format.StringType:
		return "STRING"
	case *format.TimeType:
		_, micros := lt.Unit.Value.(*format.MicroSeconds)
		return fmt.Sprintf("TIME(micros=%v)", micros)
	case *format.JsonType:
		return "JSON"
	}
	return f.Type().Kind().String()
}

func cellText(f parquet.Field, v parquet.Value) (string, error) {
	if v.IsNull() {
		return "", nil
	}
	switch lt := logical(f).(type) {
	case *format.DecimalType:
		switch f.Type().Kind() {
		case parquet.Int64:
			return decimalText(big.NewInt(v.Int64()), int(lt.Scale)), nil
		case parquet.FixedLenByteArray:
			return decimalText(twosComplement(v.ByteArray()), int(lt.Scale)), nil
		}
		return "", fmt.Errorf("decimal column %s stored as %s, want INT64 or FIXED_LEN_BYTE_ARRAY", f.Name(), f.Type().Kind())
	case *format.DateType:
		return time.Unix(int64(v.Int32())*86400, 0).UTC().Format(time.DateOnly), nil
	case *format.TimestampType:
		return time.UnixMicro(v.Int64()).UTC().Format("2006-01-02 15:04:05.999999"), nil
	case *format.StringType, *format.JsonType:
		return string(v.ByteArray()), nil
	case *format.TimeType:
		return time.UnixMicro(v.Int64()).UTC().Format("15:04:05.999999"), nil
	}
	switch f.Type().Kind() {
	case parquet.ByteArray:
		return "bytes " + hex.EncodeToString(v.ByteArray()), nil
	case parquet.Int64:
		return strconv.FormatInt(v.Int64(), 10), nil
	case parquet.Double:
		return "f" + strconv.FormatUint(math.Float64bits(v.Double()), 16), nil
	case parquet.Boolean:
		return strconv.FormatBool(v.Boolean()), nil
	}
	return "", fmt.Errorf("column %s: unexpected type %s", f.Name(), f.Type())
}

// twosComplement reads b, a big-endian two's complement integer, as
// Parquet stores a wide DECIMAL.
func twosComplement(b []byte) *big.Int {
	x := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 {
		x.Sub(x, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
	}
	return x
}

func decimalText(unscaled *big.Int, scale int) string {
	neg := unscaled.Sign() < 0
	s := new(big.Int).Abs(unscaled).String()
	if scale > 0 {
		for len(s) <= scale {
			s = "0" + s
		}
		s = s[:len(s)-scale] + "." + s[len(s)-scale:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

// Records reads data as encoding/csv does: the reference for what the
// CSV says.
func Records(t testing.TB, data []byte, comma rune) [][]string {
	t.Helper()
	r := csv.NewReader(bytes.NewReader(data))
	r.Comma = comma
	r.LazyQuotes = true // as ferry reads quotes (table.Cut)
	recs, err := r.ReadAll()
	if err != nil {
		t.Fatalf("encoding/csv: %v", err)
	}
	return recs
}

// Expect is a CSV cell as ReadBack gives it for a column of type typ.
func Expect(t testing.TB, typ, cell string) string {
	t.Helper()
	if cell == "" && typ != "STRING" {
		return ""
	}
	switch {
	case typ == "DOUBLE":
		x, err := strconv.ParseFloat(cell, 64)
		if err != nil {
			t.Fatalf("cell %q: %v", cell, err)
		}
		return "f" + strconv.FormatUint(math.Float64bits(x), 16)
	case typ == "BOOLEAN":
		return strings.ToLower(cell)
	case strings.HasPrefix(typ, "TIMESTAMP"):
		for _, l := range []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999999", "2006-01-02T15:04:05.999999999"} {
			if ts, err := time.Parse(l, cell); err == nil {
				return ts.UTC().Format("2006-01-02 15:04:05.999999")
			}
		}
		t.Fatalf("cell %q is no timestamp", cell)
	case strings.HasPrefix(typ, "DECIMAL("):
		var p, s int
		if _, err := fmt.Sscanf(typ, "DECIMAL(%d,%d)", &p, &s); err != nil {
			t.Fatalf("type %q: %v", typ, err)
		}
		neg := strings.HasPrefix(cell, "-")
		whole, frac, _ := strings.Cut(strings.TrimPrefix(cell, "-"), ".")
		whole = strings.TrimLeft(whole, "0")
		if whole == "" {
			whole = "0"
		}
		out := whole
		if s > 0 {
			out += "." + frac + strings.Repeat("0", s-len(frac))
		}
		if neg && strings.Trim(out, "0.") != "" {
			out = "-" + out
		}
		return out
	}
	return cell
}
