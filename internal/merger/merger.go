// Package merger finishes transfers. Its handler acts on events (sealed,
// chunk uploaded, failed, cancel). Once a transfer's manifest is sealed and
// every chunk is stored with the size and CRC32C the manifest gives, it
// composes each file of several chunks into its final object with a tree of
// ≤32-source composes (a zstd file's seek table as the last component),
// checks every final object's size and CRC32C against the value predicted by
// combining the chunks' CRC32Cs, writes the benchmark row, publishes the done
// event, leaves a done marker and deletes the staging objects.
//
// What workers report is a claim, not a proof: a report that equals the
// manifest counts a chunk as stored, but no transfer ends ok until one
// listing of the destination (1,000 objects a call) shows every final
// object with the manifest's size and CRC32C and this transfer's
// ferry-transfer metadata. A forged or stale report can delay a transfer,
// never end it ok. The done event counts the objects and names at most
// message.MaxDoneInline of them; a listing object beside the done marker
// names every one, with the generation GCS reported.
//
// Every transfer ends: failed, cancelled or ok. A periodic sweep over the
// staging prefix of each bucket ends transfers that made no progress for
// FERRY_TRANSFER_TIMEOUT, and removes done markers older than
// FERRY_DONE_RETENTION.
//
// The merger keeps no state GCS does not have: what it holds in memory is a
// bounded cache, rebuilt after a restart or an eviction from the done marker,
// the manifest and a listing of the staging prefix. Two mergers may run at
// once (a rolling update): each transfer still gets one set of final objects
// and one row, though its done event may be published twice.
//
// Where things are: intake.go takes an event in (decodes, authenticates,
// records what it says of the transfer's state); reconcile.go is the step
// that state calls for (advance: manifest, scan, finish), read in calling
// order, with compose.go (the compose tree, planned by tree.go), confirm.go
// (the listing that proves the final objects) and end.go (done event, row,
// marker, clean-up) beside it; state.go is a transfer's state, cache.go the
// bounded cache of them, sweep.go the rechecks and sweeps, load.go table
// loads (a transfer's pages are read by internal/manifest, shared load jobs
// run by loader.Batcher).
package merger

import (
	"context"
	"io"
	"iter"
	"log/slog"
	"sync"
	"time"

	"github.com/ferry-dev/ferry/internal/benchrow"
	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/loader"
	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/queue"
)

// objectStore is what the merger needs of GCS.
type objectStore interface {
	Attrs(ctx context.Context, bucket, name string) (gcs.Attrs, error)
	ReadAll(ctx context.Context, bucket, name string) ([]byte, error)
	NewReader(ctx context.Context, bucket, name string) (io.ReadCloser, error)
	Upload(ctx context.Context, bucket, name string, r io.Reader, opt gcs.UploadOptions) (gcs.Attrs, error)
	Compose(ctx context.Context, bucket, dst string, srcs []string, opt gcs.ComposeOptions) (gcs.Attrs, error)
	List(ctx context.Context, bucket, prefix string, fn func(gcs.Attrs) error) error
	ListRange(ctx context.Context, bucket, prefix, start, end string, fn func(gcs.Attrs) error) error
	Delete(ctx context.Context, bucket, name string) error
	DeleteGeneration(ctx context.Context, bucket, name string, gen int64) error
	// DeleteAsSeen deletes the version a listing showed, its metadata
	// unchanged (an object another transfer adopted since stays).
	DeleteAsSeen(ctx context.Context, bucket string, a gcs.Attrs) error
	// Touch renews a lease.
	Touch(ctx context.Context, bucket, name, key, value string) error
}

var _ objectStore = (*gcs.Store)(nil)

// publisher sends one message and returns once it is stored.
type publisher interface {
	Publish(ctx context.Context, data []byte, attrs map[string]string) error
}

var _ publisher = (*queue.Publisher)(nil)

// Sink stores benchmark rows; Write must be idempotent per transfer id.
type Sink interface {
	Write(ctx context.Context, r benchrow.Row, chunks iter.Seq[benchrow.ChunkRow]) error
}

var _ Sink = (*benchrow.File)(nil)

// MaxComposeSources is GCS's limit of sources per compose call.
const MaxComposeSources = 32

// Options configure a Merger.
type Options struct {
	Store objectStore
	Done  publisher
	Sink  Sink
	// Tables load the Parquet parts of transfers that name a BigQuery
	// table (message.Manifest.Load) into datasets Loads allows
	// (FERRY_BQ_LOAD_DATASETS); nil: such a transfer fails at its end.
	Tables TableLoader
	Loads  config.Loads
	// TableBatchWindow is how long an append of Parquet parts waits for
	// others into the same table to share its load job, and TableBatchMax
	// the most transfers one job takes (FERRY_BQ_TABLE_BATCH_WINDOW,
	// FERRY_BQ_TABLE_BATCH); a window of 0 gives every transfer its own
	// job. See loader.Batcher.
	TableBatchWindow time.Duration
	TableBatchMax    int
	// ComposeConcurrency bounds the GCS calls one finishing transfer has
	// in flight — composes, the Attrs of composed objects and seek-table
	// uploads share the one limit; default 8.
	ComposeConcurrency int
	Version            string
	// Buckets are the buckets the merger may write to (FERRY_BUCKETS; none
	// listed: any) and the KMS key it writes with (FERRY_KMS_KEY). An
	// event naming another bucket ends its transfer failed without
	// touching that bucket.
	Buckets config.Buckets
	// TransferTimeout: a transfer with no progress for this long ends
	// failed (FERRY_TRANSFER_TIMEOUT); default 6h.
	TransferTimeout time.Duration
	// DoneRetention: the sweep removes done markers older than this
	// (FERRY_DONE_RETENTION); default 720h.
	DoneRetention time.Duration
	// SweepEvery is how often RunSweeps looks; default a quarter of
	// TransferTimeout, between 1m and 15m.
	SweepEvery time.Duration
	// RecheckEvery: a sealed transfer in the cache that is still
	// incomplete and got no event for this long is looked at again in GCS
	// (the events of its missing chunks may have gone to another merger),
	// then after twice as long, up to SweepEvery; default 5s.
	RecheckEvery time.Duration
	// MaxAttempts is the events and control subscriptions' dead-letter
	// threshold (FERRY_MERGER_MAX_DELIVERY_ATTEMPTS): on that delivery an
	// event whose handling still fails ends its transfer failed with its
	// error, so that no transfer waits for a message that went to the
	// dead-letter topic. 0: never.
	MaxAttempts int
	// CacheTransfers bounds the transfers held in memory; default 1024.
	// An evicted transfer is rebuilt from GCS at its next event.
	CacheTransfers int
	Log            *slog.Logger

	now func() time.Time // tests move the clock
}

func (o *Options) applyDefaults() {
	if o.TableBatchMax <= 0 {
		o.TableBatchMax = 100
	}
	if o.ComposeConcurrency <= 0 {
		o.ComposeConcurrency = 8
	}
	if o.TransferTimeout <= 0 {
		o.TransferTimeout = 6 * time.Hour
	}
	if o.DoneRetention <= 0 {
		o.DoneRetention = 720 * time.Hour
	}
	if o.SweepEvery <= 0 {
		o.SweepEvery = min(max(o.TransferTimeout/4, time.Minute), 15*time.Minute)
	}
	if o.RecheckEvery <= 0 {
		o.RecheckEvery = 5 * time.Second
	}
	if o.CacheTransfers <= 0 {
		o.CacheTransfers = 1024
	}
	if o.now == nil {
		o.now = time.Now
	}
}

// Merger handles events. It is safe for concurrent use.
type Merger struct {
	o     Options
	log   *slog.Logger
	cache *cache

	mu   sync.Mutex
	seen map[string]bool // buckets events named, swept when FERRY_BUCKETS is empty

	batcher *loader.Batcher // the shared load jobs

	// The handlers of each topic in their middleware (on), made once.
	anyTopic, workers, control queue.Handler
}

// maxSeenBuckets bounds the buckets swept when FERRY_BUCKETS lists none.
const maxSeenBuckets = 1024

// New returns a Merger.
func New(o Options) *Merger {
	o.applyDefaults()
	m := &Merger{o: o, log: logging.OrDiscard(o.Log), cache: newCache(o.CacheTransfers), seen: map[string]bool{}}
	m.batcher = &loader.Batcher{Store: o.Store, Tables: o.Tables, Allows: o.Buckets.Allows, KMSKey: o.Buckets.KMSKey,
		Window: o.TableBatchWindow, Max: o.TableBatchMax, Log: m.log}
	m.anyTopic, m.workers, m.control = m.on(""), m.on("workers"), m.on("control")
	return m
}

// sawBucket remembers a bucket to sweep when FERRY_BUCKETS lists none.
func (m *Merger) sawBucket(b string) {
	if len(m.o.Buckets.Allowed) > 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.seen) < maxSeenBuckets {
		m.seen[b] = true
	}
}

func destination(man *message.Manifest) string {
	if man.Bucket == "" {
		return ""
	}
	if man.Prefix == "" {
		return "gs://" + man.Bucket
	}
	return "gs://" + man.Bucket + "/" + man.Prefix
}
