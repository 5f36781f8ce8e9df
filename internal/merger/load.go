package merger

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ferry-dev/ferry/internal/loader"
	"github.com/ferry-dev/ferry/internal/message"
)

// TableLoader runs the load job of a transfer's Parquet parts into the
// BigQuery table it named: loader.Tables in BigQuery, loader.LocalTables
// on the local stack.
type TableLoader interface {
	Load(ctx context.Context, job loader.TableJob) (rows int64, location string, err error)
}

var (
	_ TableLoader = (*loader.Tables)(nil)
	_ TableLoader = (*loader.LocalTables)(nil)
)

// batches reports whether a load (of a transfer whose manifest asks for
// one) shares its job with other transfers into the same table
// (loader.Batcher).
func (m *Merger) batches(load *message.Load) bool {
	return m.o.TableBatchWindow > 0 && load.Write == message.LoadAppend && !load.Objects
}

// loadFailed is a load that ended the transfer: refused by configuration,
// or run and failed in BigQuery. The parts stay: they are complete.
type loadFailed struct{ err error }

func (e *loadFailed) Error() string { return e.err.Error() }
func (e *loadFailed) Unwrap() error { return e.err }

// loadTable loads the Parquet parts of t, an ok transfer whose manifest
// asks for a table, into it (or, with Load.Objects, its CSV, TSV or NDJSON
// objects as sent): one job over exactly the objects its confirmation
// listed (sum: no second pass over the manifest), whose id the transfer
// decides (a repeated end finds it and loads nothing twice), hive
// partitioned when the objects sit in key=value directories. The table
// must be in a dataset this merger allows (FERRY_BQ_LOAD_DATASETS): the
// manifest is the producer's claim. It checks that the job loaded the rows
// the parts hold. A *loadFailed ends
// the transfer failed; any other error is retried.
func (m *Merger) loadTable(ctx context.Context, t *transfer, sum *summary) (*message.Loaded, error) {
	man := t.manifest
	ld := &message.Loaded{Table: man.Load.Table, JobID: message.LoadJobID(t.id)}
	if _, err := message.ParseLoad(man.Load.Table, man.Load.Write); err != nil {
		return ld, &loadFailed{err}
	}
	if err := m.o.Loads.Allows(man.Load.Table); err != nil {
		return ld, &loadFailed{err}
	}
	if m.o.Tables == nil {
		return ld, &loadFailed{fmt.Errorf("bigquery table %s: this merger loads no tables", man.Load.Table)}
	}
	if len(sum.parts) == 0 && sum.emptyPart != "" {
		sum.parts = []string{sum.emptyPart} // the table's columns, 0 rows
	}
	names := make([]string, len(sum.parts))
	for i, u := range sum.parts {
		names[i] = strings.TrimPrefix(u, "gs://"+man.Bucket+"/")
	}
	job := loader.TableJob{ID: ld.JobID, Table: man.Load.Table, Write: man.Load.Write, URIs: sum.parts, Rows: sum.partRows,
		Kind: sum.kind, Hive: message.HivePrefix(man.Bucket, names)}
	what := "Parquet parts"
	if man.Load.Objects {
		job.Rows, what = -1, "objects"
	}
	if len(job.URIs) == 0 && sum.mixed == "" && man.Totals.Skipped > 0 {
		// Every file to load was unchanged (--skip-unchanged): its rows
		// are in the table already, and there is no job to run.
		ld.JobID = ""
		return ld, nil
	}
	switch {
	case sum.mixed != "":
		return ld, &loadFailed{fmt.Errorf("bigquery table %s: one load job reads one format, and %s; send them apart, or --convert parquet", man.Load.Table, sum.mixed)}
	case len(job.URIs) > loader.MaxURIs:
		return ld, &loadFailed{fmt.Errorf("bigquery table %s: more than %d %s, what one load job takes; send them in larger parts (--chunk-size) or fewer files", man.Load.Table, loader.MaxURIs, what)}
	case len(job.URIs) == 0 && man.Load.Objects:
		return ld, &loadFailed{fmt.Errorf("bigquery table %s: the transfer has no .csv, .tsv, .ndjson or .jsonl object to load", man.Load.Table)}
	case len(job.URIs) == 0:
		return ld, &loadFailed{fmt.Errorf("bigquery table %s: the transfer has no Parquet part to load (no .csv or .tsv file, or none --convert-match named)", man.Load.Table)}
	}
	var rows int64
	var location string
	var err error
	if m.batches(man.Load) {
		rows, ld.JobID, location, err = m.batcher.Load(ctx, t.id, t.bucket, job)
		ld.Rows, ld.Location = rows, location
		var re *loader.RowsError
		switch {
		case errors.As(err, &re):
			return ld, &loadFailed{err}
		case err == nil && ld.JobID != job.ID:
			return ld, nil // the shared job checked the batch's rows
		}
	} else {
		rows, location, err = m.o.Tables.Load(ctx, job)
		ld.Rows, ld.Location = rows, location
	}
	var je *loader.JobError
	switch {
	case errors.As(err, &je):
		return ld, &loadFailed{err}
	case err != nil:
		return ld, err
	case job.Rows >= 0 && rows != job.Rows:
		return ld, &loadFailed{fmt.Errorf("bigquery load job %s loaded %d rows into %s; the transfer's parts hold %d", job.ID, rows, man.Load.Table, job.Rows)}
	}
	return ld, nil
}
