package loader

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"cloud.google.com/go/bigquery"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"

	"github.com/ferry-dev/ferry/internal/benchrow"
)

// BigQuery runs load jobs into one dataset. It is safe for concurrent use.
type BigQuery struct {
	c       *bigquery.Client
	dataset string
}

var _ warehouse = (*BigQuery)(nil)

// NewBigQuery returns a BigQuery for dataset in project, whose location
// (FERRY_BQ_LOCATION) every job is created and looked up in: jobs.get does
// not find a job of a regional dataset without it, and a loader that reads
// that as "never ran" would rerun the same job id for ever.
func NewBigQuery(ctx context.Context, project, dataset, location string, opts ...option.ClientOption) (*BigQuery, error) {
	if location == "" {
		return nil, fmt.Errorf("bigquery dataset %s.%s: no location", project, dataset)
	}
	c, err := bigquery.NewClient(ctx, project, opts...)
	if err != nil {
		return nil, fmt.Errorf("bigquery client for project %s: %w", project, err)
	}
	c.Location = location
	return &BigQuery{c: c, dataset: dataset}, nil
}

// Close releases the client.
func (b *BigQuery) Close() error { return b.c.Close() }

// JobState asks BigQuery for job id.
func (b *BigQuery) JobState(ctx context.Context, id string) (JobState, error) {
	j, err := b.c.JobFromID(ctx, id)
	var ge *googleapi.Error
	if errors.As(err, &ge) && ge.Code == http.StatusNotFound {
		return JobNotFound, nil
	}
	if err != nil {
		return 0, fmt.Errorf("get job %s: %w", id, err)
	}
	st := j.LastStatus()
	switch {
	case st == nil || !st.Done():
		return JobRunning, nil
	case st.Err() != nil:
		return JobFailed, nil
	}
	return JobSucceeded, nil
}

// Load runs load job id: the NDJSON objects uris appended to table, which is
// created with schema if it does not exist, and given the columns of schema
// it lacks. It waits for the job.
func (b *BigQuery) Load(ctx context.Context, id, table string, uris []string, schema []benchrow.Field) error {
	ref := bigquery.NewGCSReference(uris...)
	ref.SourceFormat = bigquery.JSON
	ref.Schema = toBigQuery(schema)
	ld := b.c.Dataset(b.dataset).Table(table).LoaderFrom(ref)
	ld.JobID = id
	ld.WriteDisposition = bigquery.WriteAppend
	ld.CreateDisposition = bigquery.CreateIfNeeded
	// A table made by an earlier ferry lacks the columns added since
	// (levels): the load adds them instead of failing.
	ld.SchemaUpdateOptions = []string{"ALLOW_FIELD_ADDITION"}
	job, err := ld.Run(ctx)
	if err != nil {
		return err
	}
	st, err := job.Wait(ctx)
	if err != nil {
		return err
	}
	return st.Err()
}

func toBigQuery(fields []benchrow.Field) bigquery.Schema {
	if len(fields) == 0 {
		return nil
	}
	out := make(bigquery.Schema, len(fields))
	for i, f := range fields {
		out[i] = &bigquery.FieldSchema{
			Name: f.Name, Type: bigquery.FieldType(f.Type), Description: f.Description,
			Required: f.Mode == "REQUIRED", Repeated: f.Mode == "REPEATED", Schema: toBigQuery(f.Fields),
		}
	}
	return out
}
