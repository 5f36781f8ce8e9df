package loader

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	"cloud.google.com/go/bigquery"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"

	"github.com/ferry-dev/ferry/internal/message"
)

// TableJob is the load of one transfer's Parquet parts, or of its CSV,
// TSV or NDJSON objects, into the table it named (producer submit
// --bq-table).
type TableJob struct {
	ID    string // message.LoadJobID: one per transfer
	Table string // PROJECT.DATASET.TABLE
	Write string // message.LoadAppend, LoadTruncate or LoadEmpty
	URIs  []string
	// Kind is the objects' message.LoadKind; "" for Parquet parts.
	Kind string
	// Hive is the source URI prefix of the objects' key=value
	// directories (message.HivePrefix): BigQuery adds the keys as
	// columns. "" for none.
	Hive string
	// Rows are the rows the parts hold, as the manifest counts them; -1
	// for objects loaded as sent (BigQuery counts them).
	Rows int64
}

// SourceFormat is BigQuery's name of the job's source format.
func (j TableJob) SourceFormat() string {
	switch j.Kind {
	case message.KindCSV, message.KindTSV:
		return "CSV"
	case message.KindJSON:
		return message.KindJSON
	}
	return "PARQUET"
}

// source is the job's source: its format, and, for text, the header row
// skipped and the columns BigQuery detects (their names from the header).
func (j TableJob) source() *bigquery.GCSReference {
	ref := bigquery.NewGCSReference(j.URIs...)
	ref.SourceFormat = bigquery.DataFormat(j.SourceFormat())
	switch j.Kind {
	case message.KindCSV, message.KindTSV:
		ref.AutoDetect = true
		ref.SkipLeadingRows = 1
		ref.AllowQuotedNewlines = true
		if j.Kind == message.KindTSV {
			ref.FieldDelimiter = "\t"
		}
	case message.KindJSON:
		ref.AutoDetect = true
	}
	return ref
}

// MaxURIs is the most source URIs BigQuery takes in one load job.
const MaxURIs = 10_000

// JobError is a load job that BigQuery ran and failed, or refused: the
// transfer's end, not something to retry.
type JobError struct {
	JobID string
	Err   error
}

func (e *JobError) Error() string { return fmt.Sprintf("bigquery load job %s: %v", e.JobID, e.Err) }
func (e *JobError) Unwrap() error { return e.Err }

// tableLoadTimeout bounds one wait for a load job; a merger that gives up
// finds the job again by its id at the next try.
const tableLoadTimeout = 30 * time.Minute

// Tables runs the load jobs of transfers' tables in BigQuery: every job in
// one project (ferry's, where terraform grants the merger Job User) and
// location (FERRY_BQ_LOCATION), into tables of any dataset the merger may
// write to (FERRY_BQ_LOAD_DATASETS, Data Editor each). It is safe for
// concurrent use.
type Tables struct {
	c *bigquery.Client
}

// NewTables returns a Tables running its jobs in project and location.
func NewTables(ctx context.Context, project, location string, opts ...option.ClientOption) (*Tables, error) {
	if location == "" {
		return nil, fmt.Errorf("bigquery table loads in project %s: no location", project)
	}
	c, err := bigquery.NewClient(ctx, project, opts...)
	if err != nil {
		return nil, fmt.Errorf("bigquery client for project %s: %w", project, err)
	}
	c.Location = location
	return &Tables{c: c}, nil
}

// Close releases the client.
func (t *Tables) Close() error { return t.c.Close() }

// Load runs job, or, when a job of its id exists (an end repeated), waits
// for that one instead: a transfer loads once. It returns the rows the job
// loaded and where it ran. A job that failed, or that BigQuery refuses for
// good, is a *JobError with BigQuery's own error text; anything else (a
// 5xx, a rate limit, a deadline) is for the caller to retry.
func (t *Tables) Load(ctx context.Context, job TableJob) (rows int64, location string, err error) {
	project, dataset, table, err := message.SplitTable(job.Table)
	if err != nil {
		return 0, "", &JobError{JobID: job.ID, Err: err}
	}
	ctx, cancel := context.WithTimeout(ctx, tableLoadTimeout)
	defer cancel()
	j, err := t.c.JobFromID(ctx, job.ID)
	switch {
	case httpStatus(err) == http.StatusNotFound:
		ld := t.c.DatasetInProject(project, dataset).Table(table).LoaderFrom(job.source())
		ld.JobID = job.ID
		if job.Hive != "" {
			ld.HivePartitioningOptions = &bigquery.HivePartitioningOptions{Mode: bigquery.AutoHivePartitioningMode, SourceURIPrefix: job.Hive}
		}
		ld.CreateDisposition = bigquery.CreateIfNeeded
		ld.WriteDisposition = writeDisposition(job.Write)
		if j, err = ld.Run(ctx); err != nil {
			if refused(err) {
				return 0, "", &JobError{JobID: job.ID, Err: err}
			}
			return 0, "", fmt.Errorf("bigquery load job %s into %s: %w", job.ID, job.Table, err)
		}
	case err != nil:
		return 0, "", fmt.Errorf("bigquery: get load job %s: %w", job.ID, err)
	}
	st, err := j.Wait(ctx)
	if err != nil {
		return 0, "", fmt.Errorf("bigquery: wait for load job %s: %w", job.ID, err)
	}
	if err := st.Err(); err != nil {
		return 0, "", &JobError{JobID: job.ID, Err: err}
	}
	if ls, ok := st.Statistics.Details.(*bigquery.LoadStatistics); ok {
		rows = ls.OutputRows
	}
	return rows, j.Location(), nil
}

func httpStatus(err error) int {
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		return ge.Code
	}
	return 0
}

// refused reports whether BigQuery refused a job for good: a 4xx other
// than 409 (the job exists: another merger inserted it; the retry finds
// it), 429 and a 403 whose reason is rateLimitExceeded (BigQuery's way of
// saying "slow down").
func refused(err error) bool {
	var ge *googleapi.Error
	if !errors.As(err, &ge) || ge.Code < 400 || ge.Code >= 500 || ge.Code == http.StatusConflict || ge.Code == http.StatusTooManyRequests {
		return false
	}
	for _, e := range ge.Errors {
		if e.Reason == "rateLimitExceeded" || e.Reason == "backendError" {
			return false
		}
	}
	return true
}

func writeDisposition(w string) bigquery.TableWriteDisposition {
	switch w {
	case message.LoadAppend:
		return bigquery.WriteAppend
	case message.LoadTruncate:
		return bigquery.WriteTruncate
	}
	return bigquery.WriteEmpty
}

// LocalLoad is one line of the local loads file: the load job a merger
// without BigQuery would have run, with the rows the parts hold.
type LocalLoad struct {
	JobID        string    `json:"job_id"`
	Table        string    `json:"table"`
	Write        string    `json:"write"`
	SourceFormat string    `json:"source_format"`
	URIs         []string  `json:"source_uris"`
	Hive         string    `json:"hive_partitioning_source_uri_prefix,omitempty"`
	Rows         int64     `json:"rows"`
	At           time.Time `json:"at"`
}

// LocalTables writes each load job it is given to an NDJSON file instead
// of running it, once per job id: the local stack's BigQuery. It is safe
// for concurrent use.
type LocalTables struct {
	mu   sync.Mutex
	path string
}

// NewLocalTables returns a LocalTables appending to the file at path.
func NewLocalTables(path string) *LocalTables { return &LocalTables{path: path} }

// Load appends job, unless its id is in the file already, and returns the
// rows its parts hold, and "local".
func (l *LocalTables) Load(_ context.Context, job TableJob) (int64, string, error) {
	return job.Rows, "local", l.append(job)
}

func (l *LocalTables) append(job TableJob) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	fh, err := os.OpenFile(l.path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("loads file: %w", err)
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var ll LocalLoad
		if json.Unmarshal(sc.Bytes(), &ll) == nil && ll.JobID == job.ID {
			return nil
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("loads file %s: %w", l.path, err)
	}
	b, err := json.Marshal(LocalLoad{JobID: job.ID, Table: job.Table, Write: job.Write, SourceFormat: job.SourceFormat(), URIs: job.URIs, Hive: job.Hive, Rows: job.Rows, At: time.Now().UTC()})
	if err != nil {
		return err
	}
	if _, err := fh.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("loads file %s: %w", l.path, err)
	}
	return fh.Sync()
}
