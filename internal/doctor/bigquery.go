package doctor

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"cloud.google.com/go/bigquery"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"

	"github.com/ferry-dev/ferry/internal/benchrow"
)

// BigQuery reads datasets through the BigQuery API. Safe for concurrent
// use; nothing is retried.
type BigQuery struct{ opts []option.ClientOption }

var _ datasetReader = BigQuery{}

// NewBigQuery returns a reader with the client options opts (an endpoint
// for a local double; none for Google Cloud).
func NewBigQuery(opts ...option.ClientOption) BigQuery { return BigQuery{opts: opts} }

// Dataset returns the location of project.dataset and the columns of each
// of its tables, or an error naming the dataset.
func (b BigQuery) Dataset(ctx context.Context, project, dataset string) (Dataset, error) {
	where := fmt.Sprintf("bigquery dataset %s.%s", project, dataset)
	c, err := bigquery.NewClient(ctx, project, b.opts...)
	if err != nil {
		return Dataset{}, fmt.Errorf("%s: %w", where, err)
	}
	defer func() { _ = c.Close() }()
	ds := c.Dataset(dataset)
	md, err := ds.Metadata(ctx)
	var ge *googleapi.Error
	if errors.As(err, &ge) && ge.Code == http.StatusNotFound {
		return Dataset{}, fmt.Errorf("%s does not exist", where)
	}
	if err != nil {
		return Dataset{}, fmt.Errorf("%s: %w", where, err)
	}
	d := Dataset{Location: md.Location, Tables: map[string][]string{}}
	it := ds.Tables(ctx)
	for {
		t, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			return Dataset{}, fmt.Errorf("%s: list tables: %w", where, err)
		}
		tm, err := t.Metadata(ctx)
		if err != nil {
			return Dataset{}, fmt.Errorf("%s: table %s: %w", where, t.TableID, err)
		}
		d.Tables[t.TableID] = columns(tm.Schema, "")
	}
	return d, nil
}

// columns flattens a schema to "name TYPE MODE", records as name.field.
func columns(s bigquery.Schema, prefix string) []string {
	var out []string
	for _, f := range s {
		mode := "NULLABLE"
		switch {
		case f.Repeated:
			mode = "REPEATED"
		case f.Required:
			mode = "REQUIRED"
		}
		out = append(out, prefix+f.Name+" "+string(f.Type)+" "+mode)
		if len(f.Schema) > 0 {
			out = append(out, columns(f.Schema, prefix+f.Name+".")...)
		}
	}
	return out
}

// Tables is what schema/ (result's schemas) says each table holds.
func Tables() map[string][]string {
	return map[string][]string{"transfers": fieldColumns(benchrow.TransfersSchema(), ""), "chunks": fieldColumns(benchrow.ChunksSchema(), "")}
}

func fieldColumns(fs []benchrow.Field, prefix string) []string {
	var out []string
	for _, f := range fs {
		mode := strings.ToUpper(f.Mode)
		if mode == "" {
			mode = "NULLABLE"
		}
		typ := strings.ToUpper(f.Type)
		switch typ {
		case "STRUCT":
			typ = "RECORD"
		case "INT64":
			typ = "INTEGER"
		case "FLOAT64":
			typ = "FLOAT"
		case "BOOL":
			typ = "BOOLEAN"
		}
		out = append(out, prefix+f.Name+" "+typ+" "+mode)
		if len(f.Fields) > 0 {
			out = append(out, fieldColumns(f.Fields, prefix+f.Name+".")...)
		}
	}
	return out
}
