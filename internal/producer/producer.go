// Package producer turns a transfer request into work for the fleet. It plans
// the transfer (internal/plan), then runs a pipeline whose stages each live in
// their own file, in the manner of restic's archiver:
//
//	read.go      read stage: files → chunks, and small files → bundles (bundle.go)
//	frames.go    compress stage: independent frames on one encoder per core,
//	             with their CRC32Cs and, for zstd, seek tables
//	publish.go   publish stage: one chunk message per chunk or bundle; a
//	             payload too large for its message goes to the spool
//	             (internal/spool, FERRY_TRANSPORT=spool only)
//	manifest.go  the manifest, sealed and announced once every chunk is out
//
// pipeline.go wires them in one errgroup: every goroutine the pipeline starts
// has stopped when Submit returns. Memory is bounded by FERRY_PRODUCER_MEMORY,
// never by file size or file count.
package producer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/lease"
	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/manifest"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/metrics"
	"github.com/ferry-dev/ferry/internal/plan"
	"github.com/ferry-dev/ferry/internal/ratelimit"
	"github.com/ferry-dev/ferry/internal/spool"
	"github.com/ferry-dev/ferry/internal/table"
	"github.com/ferry-dev/ferry/internal/waiter"
)

// Request is what a batch system or a user asks for.
type Request struct {
	// TransferID, when empty, is derived from IdempotencyKey, or random.
	TransferID     string
	Sources        []string
	Destination    string
	Codec          codec.Codec
	Level          int // 0: the codec's default
	ChunkSize      int64
	Method         string
	Labels         map[string]string
	IdempotencyKey string
	Overwrite      bool
	// SourceRoots, when set, confine the sources (producer serve sets them
	// from FERRY_SOURCE_ROOTS); see plan.Spec.Roots.
	SourceRoots []string
	// NoClobber skips a file whose final object exists (gcloud storage cp
	// -n). SkipUnchanged skips one whose final object holds the same raw
	// size and mtime, or with Checksum the same raw size and CRC32C, and
	// replaces the final objects of files that changed, as rsync does (see
	// skip.go).
	NoClobber     bool
	SkipUnchanged bool
	Checksum      bool
	// With SkipUnchanged, a file that grew is sent as its tail only,
	// composed onto its final object once that object is proven to hold
	// the file's first bytes (append.go); NoAppend sends it whole.
	NoAppend bool
	// Selection is what the walk does with links and unreadable files,
	// and which files it sends (filters, --files-from); see plan.Selection.
	Selection plan.Selection
	// Stdin is read when the one source is "-" (plan.Stdin): producer
	// submit sets it to standard input; a request over Pub/Sub never has
	// one.
	Stdin io.Reader
	// EndKeySHA256 is a requester's key hash for the transfer's key
	// object (message.Request's end_key_sha256); "" none.
	EndKeySHA256 string
	// Convert, when set, sends delimited text as Parquet (plan.Convert).
	Convert *plan.Convert
	// Load, when set, has the merger load the Parquet parts into a
	// BigQuery table when the transfer ends ok; it needs Convert, and its
	// dataset must be one FERRY_BQ_LOAD_DATASETS allows.
	Load *message.Load
	// Pool has the pool's agents send the files (pool.go): this producer
	// walks the sources and cuts them into shards, and reads no file.
	Pool bool
}

// checkLoad refuses a table load the request cannot make, c being its
// codec. Without a conversion the load takes the CSV, TSV or NDJSON
// objects as sent (Load.Objects), which BigQuery reads gzip'd or raw,
// not zstd'd.
func (r Request) checkLoad(c codec.Codec) error {
	if r.Load == nil || r.Convert != nil {
		return nil
	}
	if c != codec.Gzip && c != codec.None {
		return fmt.Errorf("--bq-table %s without --convert parquet loads the CSV, TSV or NDJSON objects as sent, which BigQuery reads gzip'd or uncompressed, not %s: add --codec gzip (or none), or --convert parquet", r.Load.Table, c)
	}
	r.Load.Objects = true
	return nil
}

func (r Request) spec() plan.Spec {
	return plan.Spec{Sources: r.Sources, Destination: r.Destination, Codec: r.Codec, Level: r.Level,
		ChunkSize: r.ChunkSize, Roots: r.SourceRoots, Selection: r.Selection, Convert: r.Convert}
}

// objectStore is what the producer needs of GCS.
type objectStore interface {
	BucketExists(ctx context.Context, bucket string) error
	Attrs(ctx context.Context, bucket, name string) (gcs.Attrs, error)
	List(ctx context.Context, bucket, prefix string, fn func(gcs.Attrs) error) error
	PutSmall(ctx context.Context, bucket, name string, data []byte, ifAbsent bool, contentType string) (gcs.Attrs, error)
	ReadAll(ctx context.Context, bucket, name string) ([]byte, error)
	Delete(ctx context.Context, bucket, name string) error
	// Touch renews a lease.
	Touch(ctx context.Context, bucket, name, key, value string) error
	// Patch adopts an object of a dead transfer that -n skips.
	Patch(ctx context.Context, bucket string, a gcs.Attrs, md map[string]string) error
	// NewRangeReader reads an object's last bytes: an append's seek table.
	NewRangeReader(ctx context.Context, bucket, name string, offset, length int64) (io.ReadCloser, error)
}

var _ objectStore = (*gcs.Store)(nil)

// publisher sends one message and returns once it is stored. It must be safe
// for concurrent use.
type publisher interface {
	Publish(ctx context.Context, data []byte, attrs map[string]string) error
}

// InputError is a request that cannot start as given: a bad source,
// destination, codec or chunk size, a bucket that does not exist or may not
// be written. Nothing was written.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// SourceError is a source file that could not be read whole as planned:
// unreadable, vanished, swapped for something else or changed while it was
// read. It names the file; the transport had no part in it.
type SourceError struct{ Err error }

func (e *SourceError) Error() string { return e.Err.Error() }
func (e *SourceError) Unwrap() error { return e.Err }

// AlreadyDoneError is returned by Submit when the request's idempotency key
// names a transfer that has already ended: nothing is started again.
type AlreadyDoneError struct {
	Done message.Done
}

func (e *AlreadyDoneError) Error() string {
	if e.Done.Status == message.StatusOK {
		return fmt.Sprintf("transfer %s already ended %s", e.Done.TransferID, e.Done.Status)
	}
	// A failed transfer left nothing behind; the key keeps its answer.
	return fmt.Sprintf("transfer %s already ended %s (its idempotency key answers so while its done marker is kept; submit with a new key to try again)",
		e.Done.TransferID, e.Done.Status)
}

// Options configure a Producer.
type Options struct {
	Store  objectStore
	Chunks publisher // one message per chunk or bundle
	Events publisher // sealed and failed events: the control topic (FERRY_CONTROL_TOPIC)
	// Pool shards pooled transfers (package pool); nil: a request for the
	// pool is refused.
	Pool Pooler
	// Transport is config.TransportSpool (default) or
	// config.TransportPubSub: every payload inside its message, chunk
	// sizes capped so that one always fits MessageMax.
	Transport string
	// MessageMax bounds a chunk message (FERRY_MESSAGE_MAX). Default 9 MiB,
	// below Pub/Sub's 10 MB.
	MessageMax int64
	// MaxChunks is the most chunks per file (FERRY_MAX_CHUNKS); 0: 1000.
	MaxChunks int
	// BundleMax: files of one chunk up to this many raw bytes travel
	// together in one message of at most this many raw bytes
	// (FERRY_BUNDLE_MAX); 0 sends every file on its own.
	BundleMax int64
	// SpoolDir holds payloads for the workers with the spool transport;
	// InlineMax is the largest payload sent inside its message instead.
	// SpoolMax bounds the bytes this producer keeps in the spool at once
	// (default 4 GiB); it waits while the spool is full.
	SpoolDir  string
	InlineMax int64
	SpoolMax  int64
	// Spool, when set, replaces the spool directory (tests inject write
	// errors with it).
	Spool spool.FS
	// Buckets, when set, are the only buckets a request may write to
	// (FERRY_BUCKETS).
	Buckets []string
	// Loads are the datasets a request may load a table into
	// (FERRY_BQ_LOAD_DATASETS).
	Loads config.Loads
	// Concurrency is how many frames are compressed at once; 0 means one
	// per CPU, since compression is CPU-bound.
	Concurrency int
	// MemoryLimit bounds the buffers in flight (raw chunks, compressed
	// frames, messages waiting to be published). The default, 256 MiB,
	// holds the reader, one chunk per compressor and a spare for 32 MiB
	// chunks on 2 cores.
	MemoryLimit int64
	// Publishers is how many messages are published at once; publishing
	// waits on the network, not the CPU. Default 16.
	Publishers int
	// FailGrace is how long a failed transfer waits for the merger to end
	// it before removing the spool files it announced (see fail).
	// Default 10s.
	FailGrace time.Duration
	// IDSecret is FERRY_IDEMPOTENCY_SECRET (see KeyedTransferID).
	IDSecret string
	// TransferTimeout is FERRY_TRANSFER_TIMEOUT: a lease whose transfer
	// shows no progress for this long is stale (see lease.go). Default 6h.
	TransferTimeout time.Duration
	// LeaseHolder, when set, names the one process that runs each
	// transfer to its end (message.Lease.Holder): ferry cp's.
	LeaseHolder string
	// Now is the clock leases are judged stale by (default time.Now).
	Now func() time.Time
	// Started, when set, is called once per transfer when it has really
	// started: every check passed, before the first chunk is read.
	Started func(transferID string)
	// EndKey, when set, is given each transfer's end key once its key
	// object is written (producer submit saves it for producer cancel).
	EndKey func(transferID, key string)
	// ID names this producer in manifests.
	ID string
	// Version is ferry's version, recorded in manifests.
	Version string
	// MaxRate bounds the bytes per second of the chunk messages this
	// producer publishes, over all its transfers (FERRY_MAX_RATE; 0: no
	// limit). With FERRY_TRANSPORT=pubsub the messages carry the data, so
	// this is the producer's upload rate; with the spool they carry
	// headers and small inline payloads, and the workers' own
	// FERRY_MAX_RATE paces the uploads.
	MaxRate int64
	Log     *slog.Logger

	limiter ratelimit.Limiter // tests: replaces the one MaxRate makes
	// planned, when set, is told of each file the transfer's walk plans,
	// before the reader gets it (tests change files in between).
	planned func(f *plan.File)
}

func (o *Options) applyDefaults() {
	if o.Transport == "" {
		o.Transport = config.TransportSpool
	}
	if o.MessageMax <= 0 {
		o.MessageMax = 9 << 20
	}
	if o.Concurrency <= 0 {
		o.Concurrency = runtime.GOMAXPROCS(0)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MemoryLimit <= 0 {
		o.MemoryLimit = 256 << 20
	}
	if o.Publishers <= 0 {
		o.Publishers = 16
	}
	if o.TransferTimeout <= 0 {
		o.TransferTimeout = 6 * time.Hour
	}
	if o.FailGrace <= 0 {
		o.FailGrace = 10 * time.Second
	}
	if o.SpoolMax <= 0 {
		o.SpoolMax = 4 << 30
	}
	if o.SpoolDir == "" {
		o.SpoolDir = filepath.Join(os.TempDir(), "ferry-spool")
	}
	if o.Spool == nil {
		o.Spool = spool.Dir{Path: o.SpoolDir}
	}
	if o.limiter == nil && o.MaxRate > 0 {
		o.limiter = ratelimit.New(o.MaxRate)
	}
	o.Log = logging.OrDiscard(o.Log)
}

// ConfigOptions returns the Options FERRY_* configure; the caller adds the
// clients, ID, logger and callbacks.
func ConfigOptions(cfg *config.Producer) Options {
	return Options{
		Transport: cfg.Spool.Transport, MessageMax: int64(cfg.MessageMax), MaxChunks: cfg.MaxChunks,
		BundleMax: int64(cfg.BundleMax), SpoolDir: cfg.Spool.Dir, InlineMax: int64(cfg.InlineMax),
		SpoolMax: int64(cfg.SpoolMax), Buckets: cfg.Buckets.Allowed, Concurrency: cfg.Concurrency,
		MemoryLimit: int64(cfg.MemoryLimit), Loads: cfg.Loads, TransferTimeout: cfg.TransferTimeout,
		IDSecret: cfg.IDSecret, LeaseHolder: cfg.LeaseHolder,
	}
}

// Producer runs transfer requests. It is safe for concurrent use; the
// transfers it runs share its spool bound.
type Producer struct {
	o     Options
	spool *spool.Spool
	// Progress counts raw bytes planned (after skipping), read and
	// compressed, for progress reports.
	planned, readBytes, doneBytes atomic.Int64
	// plannedFiles and filesRead count files the same way: planned (the
	// skipped left out) and taken by the reader.
	plannedFiles, filesRead atomic.Int64
	streams                 atomic.Int32 // transfers of unknown size
	// bufs keeps raw buffers between transfers, up to MemoryLimit bytes;
	// bufsMade counts the buffers allocated.
	bufs     bufCache
	bufsMade atomic.Int64
}

// New returns a Producer.
func New(o Options) *Producer {
	o.applyDefaults()
	return &Producer{o: o, spool: spool.New(o.Spool, o.SpoolMax, o.Log), bufs: bufCache{max: o.MemoryLimit}}
}

// Progress reports raw bytes read and compressed so far, over all transfers.
func (p *Producer) Progress() (read, compressed int64) {
	return p.readBytes.Load(), p.doneBytes.Load()
}

// Files reports the files read so far and the files planned (skipped files
// left out), over all transfers.
func (p *Producer) Files() (read, planned int64) {
	return p.filesRead.Load(), p.plannedFiles.Load()
}

// Planned reports the raw bytes of the files this producer's transfers
// send, skipped files left out, over all transfers that have started; -1
// once one of them reads standard input, whose size is known only at its
// end.
func (p *Producer) Planned() int64 {
	if p.streams.Load() > 0 {
		return -1
	}
	return p.planned.Load()
}

func (p *Producer) pubsub() bool { return p.o.Transport == config.TransportPubSub }

func (p *Producer) limits() plan.Limits {
	l := plan.Limits{MaxChunks: p.o.MaxChunks, StreamMax: p.streamMax()}
	if p.pubsub() {
		l.MessageMax = p.o.MessageMax
	}
	return l
}

// Validate checks a request without touching GCS, with the default limits
// (Submit applies this producer's); errors name the input. It walks the
// sources holding nothing of them.
func Validate(req Request) error {
	if err := req.checkSkip(); err != nil {
		return err
	}
	pl, err := plan.Open(req.spec(), plan.Limits{})
	if err != nil {
		return err
	}
	if err := req.checkLoad(pl.Codec); err != nil {
		return err
	}
	return pl.Walk(func(plan.File) error { return nil }, func(plan.Skipped) {})
}

// Submit runs a request to the point where the fleet takes over: every chunk
// published and the sealed manifest written. It returns the manifest. On a
// permanent error it publishes a failed event, so the merger records the
// failure and removes the staging objects, removes the transfer's spool
// files, and returns the error. When it returns, every goroutine it started
// has stopped.
func (p *Producer) Submit(ctx context.Context, req Request) (*message.Manifest, error) {
	started := time.Now().UTC()
	pl, err := p.prepare(ctx, &req)
	if err != nil {
		return nil, err
	}
	tid := req.TransferID
	if req.IdempotencyKey != "" {
		if err := p.sameRequest(ctx, pl.Dest.Bucket, tid, req); err != nil {
			return nil, err
		}
		b, err := p.o.Store.ReadAll(ctx, pl.Dest.Bucket, message.DoneMarker(tid))
		if err == nil {
			var d message.Done
			if err := message.Decode(b, &d); err != nil {
				return nil, fmt.Errorf("done marker of transfer %s: %w", tid, err)
			}
			return nil, &AlreadyDoneError{Done: d}
		}
		if !errors.Is(err, gcs.ErrNotFound) {
			return nil, err
		}
	}
	return p.start(ctx, req, pl, started)
}

// DryRun is what a transfer would send and skip.
type DryRun struct {
	Plan *plan.Plan
	// Skipped are the files the skip check (-n, --skip-unchanged) would
	// skip; Plan.Skipped those the walk skipped.
	Skipped []message.Skipped
}

// DryRun walks, filters and checks the destination as Submit would, and
// returns what it would send and skip. It publishes and writes nothing. It
// holds every file: it is the list a person reads.
func (p *Producer) DryRun(ctx context.Context, req Request) (*DryRun, error) {
	pl, err := p.prepare(ctx, &req)
	if err != nil {
		return nil, err
	}
	if err := pl.Walk(func(f plan.File) error {
		pl.Files = append(pl.Files, f)
		return nil
	}, func(k plan.Skipped) { pl.Skipped = append(pl.Skipped, k) }); err != nil {
		return nil, &InputError{err}
	}
	skipped, err := p.skip(ctx, pl, req)
	if err != nil {
		return nil, err
	}
	return &DryRun{Plan: pl, Skipped: skipped}, nil
}

// census is what a first walk of a plan's sources counts: the files it
// finds, their bytes, and the largest chunk any of them has.
type census struct {
	files    int
	bytes    int64
	maxChunk int64
	columns  int         // the widest converted source's columns
	widest   string      // that source
	scope    lease.Scope // what the final objects' names share: the lease's
}

// prepare plans req and checks it against this producer's configuration
// and the destination bucket; it sets req.TransferID when empty.
func (p *Producer) prepare(ctx context.Context, req *Request) (*plan.Plan, error) {
	l := p.limits()
	if req.Pool {
		// The agents' chunks never travel in a Pub/Sub message.
		l.MessageMax = 0
	}
	pl, err := plan.Open(req.spec(), l)
	if err != nil {
		return nil, &InputError{err}
	}
	if len(p.o.Buckets) > 0 && !slices.Contains(p.o.Buckets, pl.Dest.Bucket) {
		return nil, &InputError{fmt.Errorf("destination %s: bucket %s is not one ferry may write to (FERRY_BUCKETS=%s)",
			pl.Dest, pl.Dest.Bucket, strings.Join(p.o.Buckets, ","))}
	}
	if err := req.checkSkip(); err != nil {
		return nil, &InputError{err}
	}
	if err := req.checkLoad(pl.Codec); err != nil {
		return nil, &InputError{err}
	}
	if req.Load != nil {
		if err := p.o.Loads.Allows(req.Load.Table); err != nil {
			return nil, &InputError{err}
		}
	}
	if err := checkStream(*req, pl); err != nil {
		return nil, &InputError{err}
	}
	if err := checkPool(*req); err != nil {
		return nil, &InputError{err}
	}
	if req.Pool && p.o.Pool == nil {
		return nil, &InputError{errors.New("--pool: this producer has no shards topic (FERRY_SHARDS_TOPIC) to reach the pool on")}
	}
	if req.Pool && pl.Codec == codec.Zstd && pl.Level == 0 {
		pl.Level = PoolLevel
	}
	if req.TransferID == "" {
		req.TransferID = message.KeyedTransferID(p.o.IDSecret, req.IdempotencyKey)
	}
	if err := p.o.Store.BucketExists(ctx, pl.Dest.Bucket); err != nil {
		err = fmt.Errorf("destination %s: %w", pl.Dest, err)
		if errors.Is(err, gcs.ErrNotFound) {
			return nil, &InputError{err}
		}
		return nil, err
	}
	return pl, nil
}

// count walks pl once, holding nothing of what it finds: what the walk
// refuses (a source that is missing, a name GCS or restore would refuse, a
// file that cannot be read) is refused before anything is sent, and the
// census sizes the pipeline's buffers. The transfer walks again as it
// sends; a file that changes in between is caught by the read stage.
func (p *Producer) count(pl *plan.Plan) (census, error) {
	c := census{maxChunk: 1}
	err := pl.Walk(func(f plan.File) error {
		c.files++
		c.bytes += f.Size
		c.scope.Add(f.Object)
		if f.Part != nil { // --bad-rows may leave rejects.ndjson beside the parts
			c.scope.Add(message.RejectsObject(f.Object))
			if n := len(f.Part.Schema) + len(f.Part.Constants); n > c.columns {
				c.columns, c.widest = n, f.Path
			}
		}
		if f.Stream != nil {
			c.maxChunk = max(c.maxChunk, f.Stream.Max)
		} else {
			c.maxChunk = max(c.maxChunk, min(f.ChunkSize, max(f.Size, 1)))
		}
		return nil
	}, func(plan.Skipped) {})
	if err != nil {
		return c, &InputError{err}
	}
	if err := p.checkConverters(c); err != nil {
		return c, &InputError{err}
	}
	return c, nil
}

// checkConverters refuses a conversion whose widest source's converter
// (table.ConverterMemory) does not fit in FERRY_PRODUCER_MEMORY beside
// the two chunk buffers the pipeline holds at least, naming the source,
// its width and the budget it needs: a converter's state grows with the
// columns, not with the part, and one of 10,000 columns holds about
// 336 MiB.
func (p *Producer) checkConverters(c census) error {
	if c.columns == 0 {
		return nil
	}
	need := table.ConverterMemory(c.columns) + 2*c.maxChunk
	if need <= p.o.MemoryLimit {
		return nil
	}
	const mib = 1 << 20
	want := (need + mib - 1) / mib
	return fmt.Errorf("source %s: converting its %d columns needs about %d MiB (a converter's column writers and batch, %d MiB, and two %d MiB chunk buffers), "+
		"more than the producer's memory budget of %d MiB: set FERRY_PRODUCER_MEMORY to at least %dMiB (in ferry cp, FERRY_CP_MEMORY to at least %dMiB), or convert fewer columns",
		c.widest, c.columns, want, table.ConverterMemory(c.columns)/mib, (c.maxChunk+mib-1)/mib, p.o.MemoryLimit/mib, want, 2*want)
}

// start runs a prepared transfer: chunks read, compressed and published,
// manifest sealed.
func (p *Producer) start(ctx context.Context, req Request, pl *plan.Plan, started time.Time) (*message.Manifest, error) {
	c, err := p.count(pl)
	if err != nil {
		return nil, err
	}
	// The progress bar's total is known before the first byte is read;
	// files the skip check leaves out come off it as the walk meets them.
	p.planned.Add(c.bytes)
	p.plannedFiles.Add(int64(c.files))
	tid := req.TransferID
	if req.SkipUnchanged {
		// What changed replaces its final object.
		req.Overwrite = true
	}
	if !p.pubsub() {
		if err := p.o.Spool.Prepare(); err != nil {
			return nil, fmt.Errorf("spool: %w", err)
		}
	}
	log := p.o.Log.With("transfer_id", tid)
	metrics.InFlight.WithLabelValues("transfers").Inc()
	defer metrics.InFlight.WithLabelValues("transfers").Dec()
	m := newManifest(req, pl, tid, started, p.o.ID)
	m.FerryVer = p.o.Version
	m.Run = message.NewRun()
	// The lease before anything else: a transfer refused because another
	// writes the same objects leaves nothing behind.
	if c.scope.Any {
		if err := p.lease(ctx, pl.Dest.Bucket, tid, pl.Dest.String(), c.scope.Prefix); err != nil {
			return nil, err
		}
		// Renewed while the producer reads and sends; the merger
		// renews it from the first chunk event to the transfer's end.
		defer p.renewLease(ctx, pl.Dest.Bucket, tid, message.LeaseRenewEvery)()
	}
	// The key object next: an end event the producer publishes (sealed,
	// failed) proves itself with the key, and so does its submitter's
	// cancel.
	if err := p.writeKeys(ctx, pl.Dest.Bucket, m, req); err != nil {
		p.release(ctx, pl.Dest.Bucket, tid)
		return nil, err
	}
	// The run is written before any chunk is published: from then on the
	// chunks of an earlier run of this transfer (a producer killed, the
	// request sent again) are dropped by the workers, and their reports
	// ignored by the merger.
	if _, err := p.o.Store.PutSmall(ctx, pl.Dest.Bucket, message.RunObject(tid), []byte(m.Run), false, "text/plain"); err != nil {
		p.release(ctx, pl.Dest.Bucket, tid)
		return nil, fmt.Errorf("transfer %s: writing its run to gs://%s/%s: %w", tid, pl.Dest.Bucket, message.RunObject(tid), err)
	}
	if p.o.Started != nil {
		p.o.Started(tid)
	}
	log.Info("transfer started", "files", c.files, "bytes", c.bytes, "destination", pl.Dest.String(), "codec", pl.Codec, "level", pl.Level,
		"transport", p.o.Transport)
	pg := manifest.NewWriter(m, func(ctx context.Context, name string, v any) error { return p.putPage(ctx, m.Bucket, name, v) })

	t0 := time.Now()
	run := p.run
	if req.Pool {
		run = func(ctx context.Context, pl *plan.Plan, m *message.Manifest, req Request, _ census, pg *manifest.Writer) error {
			return p.runPool(ctx, pl, m, req, pg)
		}
	}
	if err := run(ctx, pl, m, req, c, pg); err != nil {
		return nil, p.fail(ctx, m, err, log)
	}
	m.CompressMS = time.Since(t0).Milliseconds()
	if err := p.seal(ctx, m, pg); err != nil {
		var announce *announceError
		if !errors.As(err, &announce) {
			err = p.fail(ctx, m, err, log)
		}
		return nil, err
	}
	if !p.pubsub() {
		p.spool.RemoveTemps(tid)
	}
	log.Info("transfer sealed", "files", m.Totals.Files, "skipped", m.Totals.Skipped, "excluded", pl.Excluded, "pages", len(m.Pages), "compress_ms", m.CompressMS)
	return m, nil
}

// writeKeys makes the transfer's end key and writes its key object (see
// message.Keys): the producer's key and the requester's, if any. An earlier
// run of the transfer (the request delivered again, a producer restarted)
// left one: it is replaced, and that run's key ends nothing any more.
// Replacing needs storage.objects.delete on the key prefix, which the
// producer service has and a submitter has not; so a submitter cannot
// reuse a transfer id whose key is someone else's.
func (p *Producer) writeKeys(ctx context.Context, bucket string, m *message.Manifest, req Request) error {
	m.EndKey, m.ChunkKey = message.NewEndKey(), message.NewEndKey()
	k := message.Keys{V: message.Version, TransferID: m.TransferID, SHA256: []string{message.KeyHash(m.EndKey)}, Request: requestDigest(req),
		Chunks: message.KeyHash(m.ChunkKey)}
	if req.EndKeySHA256 != "" {
		k.Add(req.EndKeySHA256)
	}
	name := message.KeyObject(m.TransferID)
	_, err := p.o.Store.PutSmall(ctx, bucket, name, message.Encode(k), true, "application/json")
	if errors.Is(err, gcs.ErrPrecondition) {
		// An earlier run of this transfer, or a request with the same
		// idempotency key that started at the same time.
		if err := p.sameRequest(ctx, bucket, m.TransferID, req); err != nil {
			return err
		}
		_, err = p.o.Store.PutSmall(ctx, bucket, name, message.Encode(k), false, "application/json")
		if err != nil {
			err = fmt.Errorf("%w (an earlier run of transfer %s wrote it; replacing it needs storage.objects.delete on gs://%s/%s, which a submitter does not have)",
				err, m.TransferID, bucket, message.KeyRoot)
		}
	}
	if err != nil {
		return fmt.Errorf("transfer %s: writing its key object gs://%s/%s: %w", m.TransferID, bucket, name, err)
	}
	if p.o.EndKey != nil {
		p.o.EndKey(m.TransferID, m.EndKey)
	}
	return nil
}

// requestDigest is the SHA-256 (hex) of what req asks for: its sources,
// resolved to absolute paths (the same relative source typed in two
// directories names two sets of files), destination and every option that
// changes what is sent or how (message.Keys.Request). Labels, the method
// and the keys are not in it: they describe a request, not what it moves.
func requestDigest(req Request) string { return RequestDigest(req) }

// RequestDigest is what a transfer's key object records of the request
// that started it (message.Keys.Request): see requestDigest.
func RequestDigest(req Request) string {
	sel := req.Selection
	sources := make([]string, len(req.Sources))
	for i, s := range req.Sources {
		sources[i] = s
		if abs, err := filepath.Abs(s); err == nil && !plan.IsStdin([]string{s}) && !filepath.IsAbs(s) {
			sources[i] = abs
		}
	}
	b, err := json.Marshal(struct {
		Sources                                                 []string
		Destination                                             string
		Codec                                                   codec.Codec
		Level                                                   int
		ChunkSize                                               int64
		Overwrite, NoClobber, SkipUnchanged, Checksum, NoAppend bool
		Symlinks                                                plan.Symlinks
		SkipUnreadable                                          bool
		Filters                                                 []plan.Filter
		FilesFrom                                               []string
		Convert                                                 *plan.Convert
		Load                                                    *message.Load
	}{sources, req.Destination, req.Codec, req.Level, req.ChunkSize, req.Overwrite || req.SkipUnchanged, req.NoClobber, req.SkipUnchanged,
		req.Checksum, req.NoAppend, sel.Symlinks, sel.SkipUnreadable, sel.Filters, sel.FilesFrom, req.Convert, req.Load})
	if err != nil {
		return "" // not expected (every field encodes): no digest, no check
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// sameRequest refuses req when the key object of transfer tid (named by
// req's idempotency key) was written for another request: a key names
// one request, and the transfer it started answers for that one only. A
// key object of an older producer (no digest) is taken as the same.
func (p *Producer) sameRequest(ctx context.Context, bucket, tid string, req Request) error {
	name := message.KeyObject(tid)
	b, err := p.o.Store.ReadAll(ctx, bucket, name)
	switch {
	case errors.Is(err, gcs.ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("transfer %s: reading its key object gs://%s/%s: %w", tid, bucket, name, err)
	}
	var k message.Keys
	if err := message.Decode(b, &k); err != nil {
		return fmt.Errorf("transfer %s: key object gs://%s/%s: %w", tid, bucket, name, err)
	}
	if k.Request == "" || k.Request == requestDigest(req) {
		return nil
	}
	if req.IdempotencyKey == "" {
		return &InputError{fmt.Errorf("transfer %s exists already, started by another request (other sources, destination or options)", tid)}
	}
	return &InputError{fmt.Errorf("idempotency key %.200q already names transfer %s, which another request started (other sources, destination or options); a key names one request and answers for it only: send this one with a new key",
		req.IdempotencyKey, tid)}
}

// fail tells the merger that the transfer cannot complete, and removes its
// spool files. It runs even when ctx is cancelled.
//
// Workers may still hold messages naming spool files of the transfer, and a
// worker that finds its spool file gone reports it missing unless the
// transfer's done marker exists. So fail waits, up to FailGrace, for the
// merger to end the transfer before it removes files it already announced:
// the transfer then fails with its own cause, not a worker's "spool file is
// missing". It returns cause, as a *ReportedError once the merger was told.
func (p *Producer) fail(ctx context.Context, m *message.Manifest, cause error, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	ev := message.Event{V: message.Version, Type: message.EventFailed, TransferID: m.TransferID, Bucket: m.Bucket, Prefix: m.Prefix,
		Run: m.Run, Key: m.EndKey, Error: message.Truncate(cause.Error(), message.MaxErrorBytes), At: time.Now().UTC()}
	err := p.o.Events.Publish(ctx, message.Encode(ev), map[string]string{"transfer_id": m.TransferID, "type": ev.Type})
	if err != nil {
		log.Error("could not publish the failed event; the staging prefix is left to the lifecycle rule", "err", err)
	}
	if !p.pubsub() {
		if err == nil && p.spool.Holds(m.TransferID) {
			p.awaitEnd(ctx, m)
		}
		// Chunks spooled for a transfer that cannot complete are
		// garbage; a worker that still gets one of their messages finds
		// the transfer over.
		p.spool.RemoveTransfer(m.TransferID)
	}
	log.Error("transfer failed", "err", cause)
	if err != nil {
		return cause
	}
	return &ReportedError{Err: cause}
}

// ReportedError is a transfer that failed once it had started, and whose
// failure the producer told the merger (a failed event): its done event
// follows, once the merger has removed what it staged.
type ReportedError struct{ Err error }

func (e *ReportedError) Error() string { return e.Err.Error() }
func (e *ReportedError) Unwrap() error { return e.Err }

// awaitEnd waits for the transfer's done marker, for at most FailGrace.
func (p *Producer) awaitEnd(ctx context.Context, m *message.Manifest) {
	ctx, cancel := context.WithTimeout(ctx, p.o.FailGrace)
	defer cancel()
	w := waiter.NewMarker(p.o.Store, m.Bucket, m.TransferID)
	w.Poll = time.Second
	_, _ = w.Wait(ctx) // the grace ends either way
}
