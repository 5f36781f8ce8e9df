package table

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"
)

// SampleRows is how many records after the header Infer looks at.
const SampleRows = 10_000

// Infer chooses each column's type from the header's names and a sample of
// records: the narrowest type every non-empty value of the column fits, in
// the order INT64, NUMERIC (decimals of at most MaxScale digits, at the
// largest scale seen, fewer padded: 0.51 stays exactly 0.51, and no digit
// is lost to a FLOAT64), FLOAT64, BOOL, DATE,
// TIMESTAMP, else STRING. A column with no value in the sample is STRING.
// Integers with a leading zero ("007", a code, not a count) stay STRING.
// Every column is NULLABLE: a later record may leave it empty.
func Infer(header []string, sample [][]string) (Schema, error) {
	in := newInference(len(header))
	for _, rec := range sample {
		in.observe(rec)
	}
	return in.schema(header)
}

// inference is Infer over records as they come, in memory of one guess a
// column whatever their number (--infer-rows all).
type inference []guess

func newInference(columns int) inference {
	in := make(inference, columns)
	for i := range in {
		in[i] = guess{int64: true, numeric: true, float: true, boolean: true, date: true, timestamp: true, scale: -1}
	}
	return in
}

func (in inference) observe(rec []string) {
	for i, v := range rec {
		if i < len(in) && v != "" {
			in[i].observe(v)
		}
	}
}

func (in inference) schema(header []string) (Schema, error) {
	s := make(Schema, len(header))
	seen := map[string]int{}
	for i, raw := range header {
		name := ColumnName(raw, i)
		if err := CheckName(name); err != nil {
			return nil, fmt.Errorf("header, column %d: %w", i+1, err)
		}
		key := strings.ToLower(name)
		if j, dup := seen[key]; dup {
			return nil, fmt.Errorf("header, column %d: name %q is column %d's (%q) too (BigQuery column names are case-insensitive)", i+1, raw, j+1, header[j])
		}
		seen[key] = i
		s[i] = in[i].field(name)
		if name != raw {
			s[i].Header, s[i].Renamed = raw, true
		}
	}
	return s, nil
}

// guess is what the values of one column seen so far allow.
type guess struct {
	int64, numeric, float, boolean, date, timestamp bool
	scale, intDigits                                int
	any                                             bool
	// inexact is the first value seen that a FLOAT64 does not hold to
	// its last digit.
	inexact string
}

// readsBack reports whether v, parsed as x, is the number x's shortest
// text is (1e5 and 100000 are; 0.30000000000000001 and 0.3 are not): what
// restore --to csv and a query give back has every digit of v.
func readsBack(v string, x float64) bool {
	var a, b big.Rat
	if _, ok := a.SetString(v); !ok {
		return false
	}
	if _, ok := b.SetString(strconv.FormatFloat(x, 'g', -1, 64)); !ok {
		return false
	}
	return a.Cmp(&b) == 0
}

// field is the column name's type, from what g saw.
func (g *guess) field(name string) Field {
	f := Field{Name: name, Type: String}
	switch {
	case !g.any:
	case g.int64:
		f.Type = Int64
	case g.numeric && (g.scale >= 1 || g.intDigits > 18):
		f.Type, f.Scale = Numeric, g.scale
		switch {
		case g.scale > MaxScale || g.intDigits > MaxIntDigits:
			f.Precision = g.scale + MaxBigIntDigits // a BIGNUMERIC
		case g.intDigits+g.scale <= 18:
			f.Precision = 18 // fits an INT64 in Parquet
		default:
			f.Precision = g.scale + MaxIntDigits // NUMERIC's most, which BigQuery loads as NUMERIC
		}
	case g.float:
		f.Type, f.Inexact = Float64, g.inexact
	case g.boolean:
		f.Type = Bool
	case g.date:
		f.Type = Date
	case g.timestamp:
		f.Type = Timestamp
	}
	return f
}

func (g *guess) observe(v string) {
	g.any = true
	if g.int64 {
		_, err := strconv.ParseInt(v, 10, 64)
		g.int64 = err == nil && !leadingZero(v) && v[0] != '+'
	}
	if g.numeric {
		intDigits, scale, ok := decimalShape(v)
		if !ok || scale > MaxBigScale || intDigits > MaxBigIntDigits {
			g.numeric = false
		} else {
			g.scale = max(g.scale, scale) // fewer decimals are padded, exactly
		}
		g.intDigits = max(g.intDigits, intDigits)
	}
	if g.float {
		x, err := strconv.ParseFloat(v, 64)
		g.float = err == nil && inferredFloat(v, x)
		if g.float && g.inexact == "" && !readsBack(v, x) {
			g.inexact = v
		}
	}
	if g.boolean {
		_, ok := parseBool(v)
		g.boolean = ok
	}
	if g.date {
		_, g.date = parseDate(v)
	}
	if g.timestamp {
		t, ok := parseTimestamp(v)
		g.timestamp = ok && t.Nanosecond()%1000 == 0 // BigQuery keeps microseconds
	}
}

// leadingZero: "0" and "-0" are numbers, "007" and "-07" codes.
// inferredFloat reports whether v, parsed as x, is a FLOAT64 as inference
// takes one: finite, no digit separators or hexadecimal, no plus sign, no
// leading zero.
func inferredFloat(v string, x float64) bool {
	whole, _, _ := strings.Cut(v, ".")
	return !math.IsInf(x, 0) && !math.IsNaN(x) && !strings.ContainsAny(v, "_xXpP") && v[0] != '+' && !leadingZero(whole)
}

func leadingZero(v string) bool {
	v = strings.TrimPrefix(v, "-")
	return len(v) > 1 && v[0] == '0'
}

// decimalShape reads v as [-]DIGITS[.DIGITS]: the digits before the point
// (leading zeros not counted) and after it.
func decimalShape(v string) (intDigits, scale int, ok bool) {
	v = strings.TrimPrefix(v, "-")
	whole, frac, _ := strings.Cut(v, ".")
	if whole == "" || !allDigits(whole) || !allDigits(frac) || (leadingZero(whole) && strings.TrimLeft(whole, "0") != "") {
		return 0, 0, false
	}
	return len(strings.TrimLeft(whole, "0")), len(frac), true
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// parseBool reads the spellings of a BOOL that BigQuery's CSV loads take,
// in any case: true/false, t/f, yes/no, y/n, 1/0 (a column of 1 and 0 is
// inferred INT64, which comes first; a given BOOL takes them).
func parseBool(v string) (bool, bool) {
	if len(v) > 5 {
		return false, false
	}
	switch strings.ToLower(v) {
	case "true", "t", "yes", "y", "1":
		return true, true
	case "false", "f", "no", "n", "0":
		return false, true
	}
	return false, false
}

// timestampLayouts are what a TIMESTAMP column's values may look like: RFC
// 3339, and BigQuery's own "YYYY-MM-DD HH:MM:SS[.ffffff]" with or without a
// zone; a value without a zone is UTC, as BigQuery reads it.
var timestampLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02 15:04:05.999999999Z07:00",
	"2006-01-02 15:04:05.999999999 Z07:00",
	"2006-01-02 15:04:05.999999999",
	"2006-01-02T15:04:05.999999999",
}

func parseTimestamp(v string) (time.Time, bool) {
	if len(v) < len("2006-01-02 15:04:05") {
		return time.Time{}, false
	}
	for _, l := range timestampLayouts {
		if t, err := time.Parse(l, v); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// parseDatetime reads a DATETIME as BigQuery's CSV loads take it: a date,
// a space or T, and a time of day with up to six decimals, no zone; or a
// date alone (midnight).
func parseDatetime(v string) (time.Time, bool) {
	for _, layout := range []string{"2006-01-02 15:04:05.999999", "2006-01-02T15:04:05.999999", time.DateOnly} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, t.Nanosecond()%1000 == 0
		}
	}
	return time.Time{}, false
}

// parseTime reads a TIME (HH:MM:SS with up to six decimals) as
// microseconds since midnight.
func parseTime(v string) (int64, bool) {
	t, err := time.Parse("15:04:05.999999", v)
	if err != nil || t.Nanosecond()%1000 != 0 {
		return 0, false
	}
	return int64(t.Hour())*3600e6 + int64(t.Minute())*60e6 + int64(t.Second())*1e6 + int64(t.Nanosecond()/1000), true
}
