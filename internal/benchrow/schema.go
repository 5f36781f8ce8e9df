package benchrow

import (
	"fmt"
	"reflect"
	"strings"
	"time"
)

// Field is one column of a BigQuery table schema, in the JSON form
// `bq mk --schema` and Terraform's google_bigquery_table read.
type Field struct {
	Name        string  `json:"name"`
	Type        string  `json:"type"`
	Mode        string  `json:"mode"`
	Description string  `json:"description"`
	Fields      []Field `json:"fields,omitempty"`
}

// TransfersSchema is the schema of the transfers table, derived from Row.
func TransfersSchema() []Field { return schemaOf(reflect.TypeOf(Row{})) }

// ChunksSchema is the schema of the chunks table, derived from ChunkRow.
func ChunksSchema() []Field { return schemaOf(reflect.TypeOf(ChunkRow{})) }

var timeType = reflect.TypeOf(time.Time{})

// schemaOf maps a struct's JSON fields to BigQuery columns: omitempty and
// pointer fields are NULLABLE, slices REPEATED, the rest REQUIRED.
func schemaOf(t reflect.Type) []Field {
	var out []Field
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		name, opts, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		f := Field{Name: name, Mode: "REQUIRED", Description: sf.Tag.Get("desc")}
		if strings.Contains(opts, "omitempty") {
			f.Mode = "NULLABLE"
		}
		ft := sf.Type
		if ft.Kind() == reflect.Pointer {
			f.Mode = "NULLABLE" // nil marshals as null
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Slice {
			f.Mode = "REPEATED"
			ft = ft.Elem()
		}
		switch {
		case ft == timeType:
			f.Type = "TIMESTAMP"
		case ft.Kind() == reflect.String:
			f.Type = "STRING"
		case ft.Kind() == reflect.Int, ft.Kind() == reflect.Int64:
			f.Type = "INTEGER"
		case ft.Kind() == reflect.Float64:
			f.Type = "FLOAT"
		case ft.Kind() == reflect.Bool:
			f.Type = "BOOLEAN"
		case ft.Kind() == reflect.Struct:
			f.Type = "RECORD"
			f.Fields = schemaOf(ft)
		default:
			panic(fmt.Sprintf("result: no BigQuery type for %s.%s (%s)", t.Name(), sf.Name, ft))
		}
		out = append(out, f)
	}
	return out
}
