// Package table turns delimited text (CSV, TSV) into typed Parquet that
// BigQuery and Spark read as tables: it reads and infers schemas in
// BigQuery's JSON schema format, cuts a file into parts at record
// boundaries (quote-aware: a quoted field may hold newlines), and converts
// each part on its own, so parts convert in parallel and memory stays
// bounded by the part, not the file. Every error names the file, line and
// column at fault.
package table

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Type is a column's type, by BigQuery's standard SQL names.
type Type string

// The types ferry infers and converts.
const (
	Int64     Type = "INT64"
	Numeric   Type = "NUMERIC" // Parquet DECIMAL(precision, scale)
	Float64   Type = "FLOAT64"
	Bool      Type = "BOOL"
	Date      Type = "DATE"
	Timestamp Type = "TIMESTAMP" // microseconds, UTC
	String    Type = "STRING"
	// Types a --schema may give (bq show --schema has them); inference
	// never picks them.
	Datetime Type = "DATETIME" // civil date and time, microseconds
	Time     Type = "TIME"     // time of day, microseconds
	Bytes    Type = "BYTES"    // base64 in the CSV, as BigQuery's CSV loads read it
	JSON     Type = "JSON"     // a JSON text, checked
)

// aliases are the legacy SQL names a BigQuery schema file may use.
var aliases = map[string]Type{
	"INT64": Int64, "INTEGER": Int64, "NUMERIC": Numeric, "DECIMAL": Numeric, "BIGNUMERIC": Numeric, "BIGDECIMAL": Numeric,
	"FLOAT64": Float64, "FLOAT": Float64, "BOOL": Bool, "BOOLEAN": Bool, "DATE": Date, "TIMESTAMP": Timestamp, "STRING": String,
	"DATETIME": Datetime, "TIME": Time, "BYTES": Bytes, "JSON": JSON,
}

// MaxScale and MaxPrecision bound a NUMERIC column: those of BigQuery's
// NUMERIC, which a Parquet DECIMAL of them loads into (its precision at
// most MaxIntDigits over its scale). MaxBigScale, MaxBigIntDigits and
// MaxBigPrecision bound a BIGNUMERIC: a DECIMAL past NUMERIC's bounds,
// which BigQuery loads as BIGNUMERIC (Parquet's DECIMAL of 32 bytes past
// 38 digits).
const (
	MaxScale        = 9
	MaxPrecision    = 38
	MaxIntDigits    = 29
	MaxBigScale     = 38
	MaxBigIntDigits = 38
	MaxBigPrecision = 76
)

// Big reports whether f is a NUMERIC column that only BigQuery's
// BIGNUMERIC holds: more decimals or integer digits than NUMERIC's.
func (f Field) Big() bool {
	return f.Type == Numeric && (f.Scale > MaxScale || f.Precision-f.Scale > MaxIntDigits)
}

// typeName is f's type as BigQuery names it.
func (f Field) typeName() string {
	if f.Big() {
		return "BIGNUMERIC"
	}
	return string(f.Type)
}

// Field is one column.
type Field struct {
	Name string
	Type Type
	// Precision and Scale are a NUMERIC column's.
	Precision, Scale int
	// Required columns refuse NULLs: an empty field (a quoted "" is a
	// STRING's empty value).
	Required bool
	// MaxLength, when set, bounds a STRING's values in characters, as
	// the table's maxLength does.
	MaxLength int
	// Renamed says an inferred column's Header name is not one BigQuery
	// takes (ColumnName gave Name): said in --dry-run and, as the
	// column's description, in the manifest.
	Renamed bool
	Header  string
	// Inexact is, for an inferred FLOAT64, the first value of the sample
	// it does not hold to the last digit (said in --dry-run).
	Inexact string
}

// reservedPrefixes are the column-name prefixes BigQuery keeps for itself.
var reservedPrefixes = []string{"_TABLE_", "_FILE_", "_PARTITION", "_ROW_TIMESTAMP", "__ROOT__", "_COLIDENTIFIER",
	"_CHANGE_SEQUENCE_NUMBER", "_CHANGE_TYPE"}

// ColumnName is the column name of header name h, the column at index i
// (from 0): h itself when BigQuery's column names take it (its flexible
// names: letters, marks and digits of any script, spaces, _ - & % = + : '
// < > # |; at most 300 bytes; no reserved prefix), else a name that it
// takes: column<i+1> for an empty name, each other character as _, and c
// before a reserved prefix. DuckDB names an empty header cell by position
// in the same way.
func ColumnName(h string, i int) string {
	h = strings.ToValidUTF8(h, "_")
	if strings.TrimSpace(h) == "" {
		return fmt.Sprintf("column%d", i+1)
	}
	h = strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) || unicode.IsMark(r) || unicode.IsDigit(r) || unicode.In(r, unicode.Pc, unicode.Pd) ||
			r == ' ' || strings.ContainsRune("&%=+:'<>#|", r) {
			return r
		}
		return '_'
	}, h)
	up := strings.ToUpper(h)
	for _, p := range reservedPrefixes {
		if strings.HasPrefix(up, p) {
			h = "c" + h
			break
		}
	}
	for len(h) > 300 {
		_, n := utf8.DecodeLastRuneInString(h)
		h = h[:len(h)-n]
	}
	return h
}

// Schema is a table's columns, in the order of the file's fields.
type Schema []Field

// bqField is a column in BigQuery's JSON schema format (bq show --schema,
// bq load --schema FILE): precision and scale are int64s, which BigQuery's
// REST API writes as strings; both forms are read.
type bqField struct {
	Name      string      `json:"name"`
	Type      string      `json:"type"`
	Mode      string      `json:"mode,omitempty"`
	Precision json.Number `json:"precision,omitempty"`
	Scale     json.Number `json:"scale,omitempty"`
	// What bq show --schema prints beside them: the table's, not the
	// conversion's (read, so that its output is taken as it is, and
	// left to the table). A STRING's maxLength is checked.
	MaxLength              json.Number     `json:"maxLength,omitempty"`
	Description            string          `json:"description,omitempty"`
	PolicyTags             json.RawMessage `json:"policyTags,omitempty"`
	DefaultValueExpression string          `json:"defaultValueExpression,omitempty"`
	Collation              string          `json:"collation,omitempty"`
	RoundingMode           string          `json:"roundingMode,omitempty"`
}

// MarshalJSON writes s in BigQuery's JSON schema format.
func (s Schema) MarshalJSON() ([]byte, error) {
	out := make([]bqField, len(s))
	for i, f := range s {
		out[i] = bqField{Name: f.Name, Type: f.typeName(), Mode: "NULLABLE"}
		if f.Required {
			out[i].Mode = "REQUIRED"
		}
		if f.Type == Numeric {
			out[i].Precision, out[i].Scale = json.Number(strconv.Itoa(f.Precision)), json.Number(strconv.Itoa(f.Scale))
		}
		if f.MaxLength > 0 {
			out[i].MaxLength = json.Number(strconv.Itoa(f.MaxLength))
		}
		if f.Renamed {
			out[i].Description = fmt.Sprintf("the header's %q", f.Header)
		}
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads s strictly (ParseSchema).
func (s *Schema) UnmarshalJSON(b []byte) error {
	v, err := ParseSchema(b)
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// ParseSchema reads a schema in BigQuery's JSON schema format: an array of
// fields, or an object whose "fields" is one. Unknown keys, nested or
// repeated fields, types ferry does not convert and duplicate names are
// refused, naming the field.
func ParseSchema(b []byte) (Schema, error) {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '{' {
		var wrap struct {
			Fields json.RawMessage `json:"fields"`
		}
		if err := strictDecode(b, &wrap); err != nil {
			return nil, fmt.Errorf("schema: %w", err)
		}
		b = wrap.Fields
	}
	var fields []bqField
	if err := strictDecode(b, &fields); err != nil {
		return nil, fmt.Errorf("schema: %w (want BigQuery's JSON schema format: [{\"name\": ..., \"type\": ...}, ...])", err)
	}
	if len(fields) == 0 {
		return nil, errors.New("schema: no fields")
	}
	if len(fields) > MaxColumns {
		return nil, fmt.Errorf("schema: %d fields; BigQuery takes %d at most", len(fields), MaxColumns)
	}
	s := make(Schema, len(fields))
	seen := map[string]bool{}
	for i, bf := range fields {
		f, err := bf.field()
		if err != nil {
			return nil, fmt.Errorf("schema: field %d (%.64q): %w", i+1, bf.Name, err)
		}
		if key := strings.ToLower(f.Name); seen[key] {
			return nil, fmt.Errorf("schema: field %d: name %q appears twice (BigQuery column names are case-insensitive)", i+1, f.Name)
		} else {
			seen[key] = true
		}
		s[i] = f
	}
	return s, nil
}

func (bf bqField) field() (Field, error) {
	f := Field{Name: bf.Name}
	if err := CheckName(bf.Name); err != nil {
		return f, err
	}
	t, ok := aliases[strings.ToUpper(bf.Type)]
	if !ok {
		return f, fmt.Errorf("type %.32q: ferry converts INT64, NUMERIC, FLOAT64, BOOL, DATE, TIMESTAMP and STRING", bf.Type)
	}
	f.Type = t
	switch strings.ToUpper(bf.Mode) {
	case "", "NULLABLE":
	case "REQUIRED":
		f.Required = true
	default:
		return f, fmt.Errorf("mode %.32q: want NULLABLE or REQUIRED (a CSV column is never REPEATED)", bf.Mode)
	}
	if bf.MaxLength != "" {
		n, err := strconv.Atoi(string(bf.MaxLength))
		if err != nil || n < 1 || t != String {
			return f, fmt.Errorf("maxLength %s: want a positive length, of a STRING column", bf.MaxLength)
		}
		f.MaxLength = n
	}
	if t != Numeric {
		if bf.Precision != "" || bf.Scale != "" {
			return f, fmt.Errorf("precision and scale are for NUMERIC columns, not %s", t)
		}
		return f, nil
	}
	// BigQuery's bounds: NUMERIC(P, S) has 1 <= P-S <= 29 and S <= 9,
	// NUMERIC alone (38, 9); BIGNUMERIC 1 <= P-S <= 38 and S <= 38,
	// alone (76, 38).
	name, maxScale, maxInt := "NUMERIC", MaxScale, MaxIntDigits
	if big := strings.ToUpper(bf.Type); big == "BIGNUMERIC" || big == "BIGDECIMAL" {
		name, maxScale, maxInt = "BIGNUMERIC", MaxBigScale, MaxBigIntDigits
	}
	f.Precision, f.Scale = maxInt+maxScale, maxScale
	if bf.Precision == "" && bf.Scale != "" {
		return f, fmt.Errorf("scale %s without a precision: BigQuery takes a %s's scale only with its precision", bf.Scale, name)
	}
	if bf.Precision != "" {
		p, err := strconv.Atoi(string(bf.Precision))
		if err != nil || p < 1 || p > maxInt+maxScale {
			return f, fmt.Errorf("precision %s: want 1 to %d for a %s", bf.Precision, maxInt+maxScale, name)
		}
		f.Precision, f.Scale = p, 0
	}
	if bf.Scale != "" {
		sc, err := strconv.Atoi(string(bf.Scale))
		if err != nil || sc < 0 || sc > maxScale || sc > f.Precision || f.Precision-sc > maxInt {
			return f, fmt.Errorf("%s(%s, %s): want a scale of 0 to %d, at most the precision, and at most %d digits before the point", name, bf.Precision, bf.Scale, maxScale, maxInt)
		}
		f.Scale = sc
	} else if bf.Precision != "" && f.Precision > maxInt {
		return f, fmt.Errorf("%s(%s): at most %d digits before the point; give a scale, or a BIGNUMERIC for up to %d", name, bf.Precision, maxInt, MaxBigIntDigits)
	}
	return f, nil
}

// MaxColumns is the most columns a table has, BigQuery's limit: a header or
// a schema of more is refused before anything is built for its columns.
const MaxColumns = 10_000

// CheckName refuses a column name BigQuery refuses: empty, longer than
// 300 bytes, or not UTF-8.
func CheckName(name string) error {
	switch {
	case name == "":
		return errors.New("empty column name")
	case !utf8.ValidString(name):
		return fmt.Errorf("column name %.64q is not valid UTF-8", name)
	case len(name) > 300:
		return fmt.Errorf("column name %.32q… is %d bytes; BigQuery allows 300", name, len(name))
	}
	return nil
}

func strictDecode(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return errors.New("trailing data after the schema")
	}
	return nil
}

// String is s as a person reads it: one column a line.
func (s Schema) String() string {
	var b strings.Builder
	for i, f := range s {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%s %s", f.Name, f.typeName())
		if f.Type == Numeric {
			fmt.Fprintf(&b, "(%d, %d)", f.Precision, f.Scale)
		}
		if f.Required {
			b.WriteString(" REQUIRED")
		}
		if f.Renamed {
			fmt.Fprintf(&b, " (the header's %q)", f.Header)
		}
		if f.Inexact != "" {
			x, _ := strconv.ParseFloat(f.Inexact, 64)
			fmt.Fprintf(&b, " (not every value reads back exactly: %.40s as %s)", f.Inexact, strconv.FormatFloat(x, 'g', -1, 64))
		}
	}
	return b.String()
}
