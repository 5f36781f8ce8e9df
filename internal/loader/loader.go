// Package loader gets benchmark rows into BigQuery cheaply, without losing or
// duplicating one. The merger stages each transfer's rows as NDJSON objects in
// GCS (Staged, its sink); the Loader runs BigQuery load jobs over the staged
// objects, batched by count and age, as the seeds advise: load jobs are free
// and survive an outage, streaming inserts are neither.
//
// Exactly once:
//   - a transfer's rows are one object named after its transfer id, written
//     only if absent, so a retrying merger cannot stage them twice;
//   - a load job's id is derived from the objects it loads (name and
//     generation), with an attempt number: before loading, the Loader asks
//     BigQuery for that job. Found and succeeded: the rows are in, so it only
//     cleans up; found and failed: the next attempt number; not found: it
//     runs the load. A loader that crashed after a load and before cleaning
//     up therefore never loads the same objects twice;
//   - after a load, a tombstone per transfer records it, and then the staged
//     object is deleted; Staged skips a transfer that has a tombstone, so a
//     merger that retries after the load cannot stage the rows again.
package loader

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/ferry-dev/ferry/internal/benchrow"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/message"
)

// Tables ferry loads, and the prefixes their rows are staged under.
const (
	TransfersTable = "transfers"
	ChunksTable    = "chunks"
	resultsRoot    = message.StagingRoot + "results/"
	loadedRoot     = resultsRoot + "loaded/"
)

func stagedPrefix(table string) string { return resultsRoot + table + "/" }

func stagedObject(table, tid string) string { return stagedPrefix(table) + tid + ".ndjson" }

func tombstone(table, tid string) string { return loadedRoot + table + "/" + tid }

// objectStore is what staging and loading need of GCS.
type objectStore interface {
	Attrs(ctx context.Context, bucket, name string) (gcs.Attrs, error)
	PutSmall(ctx context.Context, bucket, name string, data []byte, ifAbsent bool, contentType string) (gcs.Attrs, error)
	Upload(ctx context.Context, bucket, name string, r io.Reader, opt gcs.UploadOptions) (gcs.Attrs, error)
	List(ctx context.Context, bucket, prefix string, fn func(gcs.Attrs) error) error
	Delete(ctx context.Context, bucket, name string) error
}

var _ objectStore = (*gcs.Store)(nil)

// Staged is the merger's sink when BigQuery is configured: it writes a
// transfer's rows as NDJSON objects in bucket. It is safe for concurrent use.
type Staged struct {
	store  objectStore
	bucket string
}

// NewStaged returns a sink staging rows in bucket.
func NewStaged(store objectStore, bucket string) *Staged {
	return &Staged{store: store, bucket: bucket}
}

// Write stages r and its chunk rows, unless they were staged or loaded
// before. Chunk rows go first: the transfer row marks the pair written.
func (s *Staged) Write(ctx context.Context, r benchrow.Row, chunks iter.Seq[benchrow.ChunkRow]) error {
	if _, err := s.store.Attrs(ctx, s.bucket, tombstone(TransfersTable, r.TransferID)); err == nil {
		return nil // loaded already
	} else if !errors.Is(err, gcs.ErrNotFound) {
		return err
	}
	if chunks != nil {
		// Through a temporary file: a transfer of a million chunks is never
		// held as rows or bytes.
		sp, err := benchrow.Spool(chunks)
		if err != nil {
			return err
		}
		defer func() { _ = sp.Close() }()
		if sp.Lines > 0 {
			_, err := s.store.Upload(ctx, s.bucket, stagedObject(ChunksTable, r.TransferID), sp, gcs.UploadOptions{
				Size: sp.Size, CRC32C: sp.CRC32C, IfAbsent: true, ContentType: "application/x-ndjson"})
			if err != nil && !errors.Is(err, gcs.ErrPrecondition) { // staged by an earlier attempt
				return err
			}
		}
	}
	tb, err := benchrow.NDJSON([]benchrow.Row{r})
	if err != nil {
		return err
	}
	return s.put(ctx, stagedObject(TransfersTable, r.TransferID), tb)
}

func (s *Staged) put(ctx context.Context, name string, b []byte) error {
	_, err := s.store.PutSmall(ctx, s.bucket, name, b, true, "application/x-ndjson")
	if errors.Is(err, gcs.ErrPrecondition) {
		return nil // staged by an earlier attempt
	}
	return err
}

// JobState is what BigQuery says of a load job.
type JobState int

// Job states.
const (
	JobNotFound JobState = iota
	JobRunning
	JobSucceeded
	JobFailed
)

// warehouse is what the Loader needs of BigQuery.
type warehouse interface {
	// JobState reports the state of job id.
	JobState(ctx context.Context, id string) (JobState, error)
	// Load runs load job id of NDJSON uris into table, appending, and
	// waits for it; an error means the rows may not be in.
	Load(ctx context.Context, id, table string, uris []string, schema []benchrow.Field) error
}

// Options configure a Loader.
type Options struct {
	Store     objectStore
	Warehouse warehouse
	Bucket    string
	// Batch is the most objects one load job takes; a full batch loads at
	// once. Default 500.
	Batch int
	// MaxAge is how long a staged row may wait for a batch to fill before it
	// is loaded anyway. Default 1 minute.
	MaxAge time.Duration
	Log    *slog.Logger
	Now    func() time.Time
}

// Loader loads staged rows. Run one per results bucket (several are safe,
// just wasteful).
type Loader struct{ o Options }

// New returns a Loader.
func New(o Options) *Loader {
	if o.Batch <= 0 {
		o.Batch = 500
	}
	if o.MaxAge <= 0 {
		o.MaxAge = time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	o.Log = logging.OrDiscard(o.Log)
	return &Loader{o: o}
}

// Run loads every interval until ctx ends; errors are logged and retried on
// the next round, so an outage delays rows but loses none.
func (l *Loader) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := l.Once(ctx); err != nil && ctx.Err() == nil {
			l.o.Log.Warn("loading benchmark rows into BigQuery failed; will retry", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Once loads what is due in both tables and returns how many objects it
// loaded. Chunk rows load before transfer rows, so a transfers row never
// lacks its chunks.
func (l *Loader) Once(ctx context.Context) (int, error) {
	total := 0
	for _, table := range []string{ChunksTable, TransfersTable} {
		schema := benchrow.ChunksSchema()
		if table == TransfersTable {
			schema = benchrow.TransfersSchema()
		}
		for {
			n, err := l.loadBatch(ctx, table, schema)
			total += n
			if err != nil {
				return total, fmt.Errorf("load %s: %w", table, err)
			}
			if n < l.o.Batch {
				break
			}
		}
	}
	return total, nil
}

// loadBatch loads the oldest staged objects of table, if a batch is due.
func (l *Loader) loadBatch(ctx context.Context, table string, schema []benchrow.Field) (int, error) {
	var objs []gcs.Attrs
	if err := l.o.Store.List(ctx, l.o.Bucket, stagedPrefix(table), func(a gcs.Attrs) error {
		objs = append(objs, a)
		return nil
	}); err != nil {
		return 0, err
	}
	if len(objs) == 0 {
		return 0, nil
	}
	sort.Slice(objs, func(i, j int) bool { return objs[i].Created.Before(objs[j].Created) })
	if len(objs) < l.o.Batch && l.o.Now().Sub(objs[0].Created) < l.o.MaxAge {
		return 0, nil // wait for the batch to fill or age
	}
	objs = objs[:min(len(objs), l.o.Batch)]
	sort.Slice(objs, func(i, j int) bool { return objs[i].Name < objs[j].Name })

	base := JobIDBase(table, objs)
	for attempt := 1; ; attempt++ {
		id := fmt.Sprintf("%s_%d", base, attempt)
		state, err := l.o.Warehouse.JobState(ctx, id)
		if err != nil {
			return 0, err
		}
		switch state {
		case JobFailed:
			continue // that attempt's rows are not in; try the next id
		case JobRunning:
			return 0, fmt.Errorf("load job %s is still running", id)
		case JobNotFound:
			uris := make([]string, len(objs))
			for i, a := range objs {
				uris[i] = "gs://" + l.o.Bucket + "/" + a.Name
			}
			if err := l.o.Warehouse.Load(ctx, id, table, uris, schema); err != nil {
				return 0, fmt.Errorf("job %s: %w", id, err)
			}
			l.o.Log.Info("benchmark rows loaded", "table", table, "objects", len(objs), "job", id)
		case JobSucceeded:
			l.o.Log.Info("benchmark rows were loaded before; cleaning up", "table", table, "job", id)
		}
		return len(objs), l.cleanUp(ctx, table, objs)
	}
}

// cleanUp leaves a tombstone per loaded transfer, then deletes its object.
func (l *Loader) cleanUp(ctx context.Context, table string, objs []gcs.Attrs) error {
	for _, a := range objs {
		tid := strings.TrimSuffix(strings.TrimPrefix(a.Name, stagedPrefix(table)), ".ndjson")
		if _, err := l.o.Store.PutSmall(ctx, l.o.Bucket, tombstone(table, tid), nil, false, ""); err != nil {
			return err
		}
		if err := l.o.Store.Delete(ctx, l.o.Bucket, a.Name); err != nil {
			return err
		}
	}
	return nil
}

// JobIDBase derives a load job's id from the objects it loads: the same
// objects (names and generations) always give the same id.
func JobIDBase(table string, objs []gcs.Attrs) string {
	h := sha256.New()
	for _, a := range objs {
		fmt.Fprintf(h, "%s#%d\n", a.Name, a.Generation)
	}
	return "ferry_" + table + "_" + hex.EncodeToString(h.Sum(nil))[:32]
}
