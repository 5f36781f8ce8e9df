// Package config holds the environment variables ferry's binaries read: one
// struct per binary, composed of the shared parts below, loaded with
// go-envconfig. The same variables configure a laptop run and a fleet on
// Google Cloud (Terraform sets them as instance metadata). Every field has a
// help tag; Describe lists them for --help and docs/configuration.md.
package config

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sethvargo/go-envconfig"

	"github.com/ferry-dev/ferry/internal/message"
)

// PubSub names the project, topics and subscriptions.
type PubSub struct {
	Project              string `env:"FERRY_PROJECT, default=ferry-local" help:"Google Cloud project of the topics and subscriptions"`
	ChunksTopic          string `env:"FERRY_CHUNKS_TOPIC, default=ferry-chunks" help:"topic the producer publishes one message per chunk to"`
	ChunksSubscription   string `env:"FERRY_CHUNKS_SUBSCRIPTION, default=ferry-chunks-workers" help:"subscription the workers receive chunks from"`
	EventsTopic          string `env:"FERRY_EVENTS_TOPIC, default=ferry-events" help:"topic of the workers' events (chunk uploaded, chunk failed); only workers may publish to it"`
	EventsSubscription   string `env:"FERRY_EVENTS_SUBSCRIPTION, default=ferry-events-merger" help:"subscription the merger receives the workers' events from"`
	ControlTopic         string `env:"FERRY_CONTROL_TOPIC, default=ferry-control" help:"topic of what producers and submitters say of a transfer (sealed, failed, cancel)"`
	ControlSubscription  string `env:"FERRY_CONTROL_SUBSCRIPTION, default=ferry-control-merger" help:"subscription the merger receives sealed, failed and cancel events from"`
	DoneTopic            string `env:"FERRY_DONE_TOPIC, default=ferry-done" help:"topic of the one done event each transfer ends with"`
	RequestsTopic        string `env:"FERRY_REQUESTS_TOPIC, default=ferry-requests" help:"topic batch systems publish transfer requests to"`
	RequestsSubscription string `env:"FERRY_REQUESTS_SUBSCRIPTION, default=ferry-requests-producer" help:"subscription producer serve receives requests from"`
	RequestsDeadLetter   string `env:"FERRY_REQUESTS_DEAD_LETTER_TOPIC, default=ferry-requests-dead" help:"dead-letter topic of the requests subscription; malformed requests are copied there too"`
	ChunksDeadLetter     string `env:"FERRY_CHUNKS_DEAD_LETTER_TOPIC, default=ferry-chunks-dead" help:"dead-letter topic of the chunks subscription; chunk messages that failed permanently are copied there too"`
	EventsDeadLetter     string `env:"FERRY_EVENTS_DEAD_LETTER_TOPIC, default=ferry-events-dead" help:"dead-letter topic of the events subscription"`
	ControlDeadLetter    string `env:"FERRY_CONTROL_DEAD_LETTER_TOPIC, default=ferry-control-dead" help:"dead-letter topic of the control subscription"`
	ShardsTopic          string `env:"FERRY_SHARDS_TOPIC, default=ferry-shards" help:"topic a producer publishes the shards of a pooled transfer (--pool) to"`
	ShardsSubscription   string `env:"FERRY_SHARDS_SUBSCRIPTION, default=ferry-shards-agents" help:"subscription the pool's agents (ferry agent) claim shards from"`
	ShardsDeadLetter     string `env:"FERRY_SHARDS_DEAD_LETTER_TOPIC, default=ferry-shards-dead" help:"dead-letter topic of the shards subscription"`
}

// Validate names the variable at fault.
func (p PubSub) Validate() error {
	for name, v := range map[string]string{
		"FERRY_PROJECT": p.Project, "FERRY_CHUNKS_TOPIC": p.ChunksTopic, "FERRY_CHUNKS_SUBSCRIPTION": p.ChunksSubscription,
		"FERRY_EVENTS_TOPIC": p.EventsTopic, "FERRY_EVENTS_SUBSCRIPTION": p.EventsSubscription, "FERRY_DONE_TOPIC": p.DoneTopic,
		"FERRY_CHUNKS_DEAD_LETTER_TOPIC": p.ChunksDeadLetter, "FERRY_EVENTS_DEAD_LETTER_TOPIC": p.EventsDeadLetter,
		"FERRY_REQUESTS_TOPIC": p.RequestsTopic, "FERRY_REQUESTS_SUBSCRIPTION": p.RequestsSubscription,
		"FERRY_REQUESTS_DEAD_LETTER_TOPIC": p.RequestsDeadLetter, "FERRY_CONTROL_TOPIC": p.ControlTopic,
		"FERRY_CONTROL_SUBSCRIPTION": p.ControlSubscription, "FERRY_CONTROL_DEAD_LETTER_TOPIC": p.ControlDeadLetter,
		"FERRY_SHARDS_TOPIC": p.ShardsTopic, "FERRY_SHARDS_SUBSCRIPTION": p.ShardsSubscription, "FERRY_SHARDS_DEAD_LETTER_TOPIC": p.ShardsDeadLetter,
	} {
		if strings.TrimSpace(v) == "" || strings.ContainsAny(v, " /") {
			return fmt.Errorf("%s=%q: want a plain resource id", name, v)
		}
	}
	return nil
}

// Emulators are the client libraries' own variables for the local
// emulators. ferry reads them like its own (so FERRY_ENV_FILE may set them)
// and hands them to the clients; unset, the clients reach Google Cloud.
type Emulators struct {
	PubSub string `env:"PUBSUB_EMULATOR_HOST" help:"host:port of the Pub/Sub emulator (unset: Google Cloud Pub/Sub)"`
	GCS    string `env:"STORAGE_EMULATOR_HOST" help:"host:port of fake-gcs-server (unset: Google Cloud Storage)"`
}

// Validate names the variable at fault.
func (e Emulators) Validate() error {
	for name, v := range map[string]string{"PUBSUB_EMULATOR_HOST": e.PubSub, "STORAGE_EMULATOR_HOST": e.GCS} {
		if strings.ContainsAny(v, " /") {
			return fmt.Errorf("%s=%q: want host:port", name, v)
		}
	}
	return nil
}

// PubSubEndpoint says where Pub/Sub calls go and what says so, for errors.
func (e Emulators) PubSubEndpoint() string {
	if e.PubSub != "" {
		return "the Pub/Sub emulator at " + e.PubSub + " (PUBSUB_EMULATOR_HOST)"
	}
	return "Google Cloud Pub/Sub (pubsub.googleapis.com; PUBSUB_EMULATOR_HOST is unset)"
}

// GCSEndpoint says where GCS calls go and what says so, for errors.
func (e Emulators) GCSEndpoint() string {
	if e.GCS != "" {
		return "the GCS emulator at " + e.GCS + " (STORAGE_EMULATOR_HOST)"
	}
	return "Google Cloud Storage (storage.googleapis.com; STORAGE_EMULATOR_HOST is unset)"
}

// Log configures logging.
type Log struct {
	Level  string `env:"FERRY_LOG_LEVEL, default=info" help:"debug, info, warn or error"`
	Format string `env:"FERRY_LOG_FORMAT, default=auto" help:"json (Cloud Logging), text, or auto: text on a terminal, json otherwise"`
}

// Validate names the variable at fault.
func (l Log) Validate() error {
	switch l.Level {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("FERRY_LOG_LEVEL=%q: want debug, info, warn or error", l.Level)
	}
	switch l.Format {
	case "json", "text", "auto":
	default:
		return fmt.Errorf("FERRY_LOG_FORMAT=%q: want json, text or auto", l.Format)
	}
	return nil
}

// HTTP is where a service serves /metrics, /healthz and /readyz.
type HTTP struct {
	Addr string `env:"FERRY_HTTP_ADDR, default=127.0.0.1:8080" help:"listen address of /metrics, /healthz and /readyz (loopback unless set: the terraform sets :8080 for the instance group's health checks); empty turns them off; 127.0.0.1:0 picks a free port (logged), as the local stack does"`
}

// Spool says how chunk bytes travel from the producer to the workers: in a
// directory both see (local disk on one machine, a shared file system for a
// fleet), or inside the chunk messages themselves.
type Spool struct {
	Transport string `env:"FERRY_TRANSPORT, default=spool" help:"how chunk bytes reach the workers: spool (a directory the producer and workers share) or pubsub (inside each chunk message; nothing shared but Pub/Sub)"`
	Dir       string `env:"FERRY_SPOOL_DIR" help:"spool directory for compressed chunks with FERRY_TRANSPORT=spool; workers read only inside theirs (default: ferry-spool in the system temp dir)"`
}

// Transports ferry knows.
const (
	TransportSpool  = "spool"
	TransportPubSub = "pubsub"
)

// Validate names the variable at fault and fills in the default directory.
func (s *Spool) Validate() error {
	switch s.Transport {
	case TransportSpool, TransportPubSub:
	default:
		return fmt.Errorf("FERRY_TRANSPORT=%q: want spool or pubsub", s.Transport)
	}
	if s.Dir == "" {
		s.Dir = filepath.Join(os.TempDir(), "ferry-spool")
	}
	if !filepath.IsAbs(s.Dir) {
		abs, err := filepath.Abs(s.Dir)
		if err != nil {
			return fmt.Errorf("FERRY_SPOOL_DIR=%q: %w", s.Dir, err)
		}
		s.Dir = abs
	}
	return nil
}

// Buckets is what ferry may write to, and how.
type Buckets struct {
	Allowed []string `env:"FERRY_BUCKETS" help:"comma-separated buckets ferry may write to; a message or request naming another fails permanently (empty: any bucket, for the local stack)"`
	KMSKey  string   `env:"FERRY_KMS_KEY" help:"Cloud KMS key (projects/P/locations/L/keyRings/R/cryptoKeys/K) that encrypts every object ferry writes (empty: the bucket's default encryption)"`
}

// Validate names the variable at fault.
func (b *Buckets) Validate() error {
	for _, name := range b.Allowed {
		if !bucketName.MatchString(name) {
			return fmt.Errorf("FERRY_BUCKETS: %q is not a bucket name", name)
		}
	}
	if b.KMSKey != "" && !kmsKey.MatchString(b.KMSKey) {
		return fmt.Errorf("FERRY_KMS_KEY=%q: want projects/P/locations/L/keyRings/R/cryptoKeys/K", b.KMSKey)
	}
	return nil
}

// Loads are the BigQuery datasets transfers may load tables into.
type Loads struct {
	Datasets []string `env:"FERRY_BQ_LOAD_DATASETS" help:"comma-separated PROJECT.DATASET that a transfer's --bq-table (a request's bq_table) may load into; empty: no transfer loads a table"`
}

// Validate names the variable at fault.
func (l *Loads) Validate() error {
	for _, d := range l.Datasets {
		if _, _, _, err := message.SplitTable(d + ".t"); err != nil {
			return fmt.Errorf("FERRY_BQ_LOAD_DATASETS: %q is not PROJECT.DATASET", d)
		}
	}
	return nil
}

// Allows refuses a table outside the allowed datasets, naming the
// variable that decides.
func (l Loads) Allows(table string) error {
	project, dataset, _, err := message.SplitTable(table)
	if err != nil {
		return err
	}
	if !slices.Contains(l.Datasets, project+"."+dataset) {
		return fmt.Errorf("bigquery table %s: dataset %s.%s is not in FERRY_BQ_LOAD_DATASETS (%s)", table, project, dataset, strings.Join(l.Datasets, ","))
	}
	return nil
}

// Allows reports whether ferry may write to bucket.
func (b Buckets) Allows(bucket string) bool {
	if len(b.Allowed) == 0 {
		return true
	}
	for _, a := range b.Allowed {
		if a == bucket {
			return true
		}
	}
	return false
}

// Check returns nil when ferry may write to bucket, else an error naming the
// bucket and the variable that does not list it.
func (b Buckets) Check(bucket string) error {
	if b.Allows(bucket) {
		return nil
	}
	return fmt.Errorf("bucket %q is not in FERRY_BUCKETS (%s): %w", bucket, strings.Join(b.Allowed, ","), ErrBucketNotAllowed)
}

// ErrBucketNotAllowed marks a message or request naming a bucket that
// FERRY_BUCKETS does not list.
var ErrBucketNotAllowed = errors.New("bucket not allowed")

var (
	bucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$`)
	kmsKey     = regexp.MustCompile(`^projects/[^/]+/locations/[^/]+/keyRings/[^/]+/cryptoKeys/[^/]+$`)
)

// Chunk sizes a user may ask for, with --chunk-size or FERRY_CHUNK_SIZE:
// below 1 MiB the per-chunk message and object cost more than the bytes;
// above 1 GiB a chunk no longer fits the producer's memory bound.
const (
	MinChunkSize Bytes = 1 << 20
	MaxChunkSize Bytes = 1 << 30
)

// CheckChunkSize is the one check of a chunk size a user gave; the caller
// names where it came from.
func CheckChunkSize(b Bytes) error {
	if b < MinChunkSize || b > MaxChunkSize {
		return fmt.Errorf("chunk size %d: want %s to %s", b, MinChunkSize, MaxChunkSize)
	}
	return nil
}

// Producer is the producer's configuration.
type Producer struct {
	PubSub    PubSub
	Emulators Emulators
	Spool     Spool
	Buckets   Buckets
	Log       Log
	HTTP      HTTP
	Loads     Loads

	ChunkSize    Bytes         `env:"FERRY_CHUNK_SIZE, default=32MiB" help:"default chunk size; grows so that no file needs more than FERRY_MAX_CHUNKS chunks (with FERRY_TRANSPORT=pubsub it is capped so that a chunk fits a message)"`
	MaxChunks    int           `env:"FERRY_MAX_CHUNKS, default=1000" help:"most chunks per file: 1000 keeps within the 1024 components older GCS documents allow a composite; current GCS sets no such limit, so raise it for files above 1000 x the chunk size"`
	Codec        string        `env:"FERRY_CODEC, default=zstd" help:"default codec: zstd, gzip or none"`
	Level        int           `env:"FERRY_LEVEL, default=0" help:"compression level, fixed; 0: zstd adapts each chunk's level (1, 3 or 6; it starts at 1) to what waits, the compressor or the link; gzip 6"`
	Concurrency  int           `env:"FERRY_COMPRESS_CONCURRENCY, default=0" help:"compression goroutines; 0 means one per CPU; at most 64 (each encoder holds buffers beside FERRY_PRODUCER_MEMORY)"`
	MemoryLimit  Bytes         `env:"FERRY_PRODUCER_MEMORY, default=256MiB" help:"bound on chunk buffers in flight; memory does not grow with file size"`
	InlineMax    Bytes         `env:"FERRY_INLINE_MAX, default=256KiB" help:"with FERRY_TRANSPORT=spool, chunks up to this many compressed bytes travel inside the message instead of the spool"`
	SpoolMax     Bytes         `env:"FERRY_SPOOL_MAX, default=4GiB" help:"most bytes this producer keeps in the spool at once; it waits while the spool is full"`
	MessageMax   Bytes         `env:"FERRY_MESSAGE_MAX, default=9MiB" help:"largest chunk message; Pub/Sub allows 10 MB (the in-process pstest server 4 MiB)"`
	BundleMax    Bytes         `env:"FERRY_BUNDLE_MAX, default=4MiB" help:"small files travel together in one chunk message of up to this many raw bytes; 0 sends every file on its own"`
	MaxRate      Bytes         `env:"FERRY_MAX_RATE, default=0" help:"bytes per second this process may send (chunk messages with FERRY_TRANSPORT=pubsub); 0: no limit"`
	Method       string        `env:"FERRY_METHOD, default=ferry" help:"method name written to the benchmark row"`
	Requests     int           `env:"FERRY_PRODUCER_REQUESTS, default=1" help:"producer serve: requests run at once (each has its own FERRY_PRODUCER_MEMORY)"`
	RequestStall time.Duration `env:"FERRY_REQUEST_STALL, default=10m" help:"producer serve: when the requests in flight walk, read and compress nothing for this long, /readyz answers 503 naming them (a hung file system), so the instance group can replace the VM"`
	KeyDir       string        `env:"FERRY_KEY_DIR" help:"where producer submit keeps each transfer's end key (mode 0600) and producer cancel finds it; empty: $XDG_STATE_HOME/ferry/keys, else ~/.local/state/ferry/keys"`
	SubmitWait   string        `env:"FERRY_SUBMIT_WAIT, default=subscription" help:"how producer submit --wait and its progress bar follow a transfer: subscription (temporary subscriptions on the done and events topics) or marker (polls the done marker in GCS: needs only read on .ferry-done/, as terraform's submitter has)"`
	ShardFiles   int           `env:"FERRY_SHARD_FILES, default=250" help:"--pool: most files a shard holds (at most 1000, a manifest page); smaller shards spread a transfer over more agents"`
	ShardBytes   Bytes         `env:"FERRY_SHARD_BYTES, default=64MiB" help:"--pool: most source bytes a shard holds; a larger file is split into shards of its chunks of about this many bytes (at least one chunk each)"`
	SourceRoots  []string      `env:"FERRY_SOURCE_ROOTS" help:"producer serve: comma-separated directories requests may read from; with none, every request is refused (submit reads what its user can)"`
	IDSecret     string        `env:"FERRY_IDEMPOTENCY_SECRET" help:"with it, the transfer id of an --idempotency-key is an HMAC under this secret, which nobody without it can compute (and so create that transfer's key object first); at least 32 characters, shared by every producer and submitter that must agree on a key's transfer; setting or changing it gives every key a new transfer id"`
	// TransferTimeout is the merger's: a lease whose transfer made no
	// progress for this long is stale.
	TransferTimeout time.Duration `env:"FERRY_TRANSFER_TIMEOUT, default=6h" help:"the merger's: a transfer with no progress for this long is ended; its destination lease no longer holds off another transfer"`
	// LeaseHolder is set by ferry cp, whose one process runs a transfer
	// from start to end: see message.Lease.Holder.
	LeaseHolder string
}

// Validate names the variable at fault.
// MaxCompressConcurrency bounds FERRY_COMPRESS_CONCURRENCY: each encoder
// holds buffers of its own beside the producer's memory budget.
const MaxCompressConcurrency = 64

func (p *Producer) Validate() error {
	if err := firstErr(p.PubSub.Validate(), p.Emulators.Validate(), p.Spool.Validate(), p.Buckets.Validate(), p.Log.Validate(), p.Loads.Validate()); err != nil {
		return err
	}
	if err := CheckChunkSize(p.ChunkSize); err != nil {
		return fmt.Errorf("FERRY_CHUNK_SIZE: %w", err)
	}
	if p.TransferTimeout < time.Minute {
		return fmt.Errorf("FERRY_TRANSFER_TIMEOUT=%s: want at least 1m", p.TransferTimeout)
	}
	if p.IDSecret != "" && len(p.IDSecret) < 32 {
		return fmt.Errorf("FERRY_IDEMPOTENCY_SECRET: %d characters, want at least 32", len(p.IDSecret))
	}
	if p.SubmitWait != "subscription" && p.SubmitWait != "marker" {
		return fmt.Errorf("FERRY_SUBMIT_WAIT=%.32q: want subscription or marker", p.SubmitWait)
	}
	if p.MaxChunks < 1 || p.MaxChunks > 1_000_000 {
		return fmt.Errorf("FERRY_MAX_CHUNKS=%d: want 1 to 1000000", p.MaxChunks)
	}
	switch p.Codec {
	case "zstd", "gzip", "none":
	default:
		return fmt.Errorf("FERRY_CODEC=%q: want zstd, gzip or none", p.Codec)
	}
	if p.Concurrency < 0 || p.Concurrency > MaxCompressConcurrency {
		// Each encoder's buffers sit outside FERRY_PRODUCER_MEMORY.
		return fmt.Errorf("FERRY_COMPRESS_CONCURRENCY=%d: want 0 (the cores) to %d", p.Concurrency, MaxCompressConcurrency)
	}
	if p.ShardFiles < 1 || p.ShardFiles > 1000 {
		return fmt.Errorf("FERRY_SHARD_FILES=%d: want 1 to 1000 (a manifest page)", p.ShardFiles)
	}
	if p.ShardBytes < 1<<20 {
		return fmt.Errorf("FERRY_SHARD_BYTES=%d: want at least 1MiB", p.ShardBytes)
	}
	if p.Requests < 1 || p.Requests > 64 {
		return fmt.Errorf("FERRY_PRODUCER_REQUESTS=%d: want 1 to 64", p.Requests)
	}
	if p.RequestStall < time.Second {
		return fmt.Errorf("FERRY_REQUEST_STALL=%v: want 1s or more", p.RequestStall)
	}
	if p.MemoryLimit < 16<<20 {
		return fmt.Errorf("FERRY_PRODUCER_MEMORY=%d: want at least 16MiB", p.MemoryLimit)
	}
	if p.InlineMax < 0 || p.InlineMax > 4<<20 {
		return fmt.Errorf("FERRY_INLINE_MAX=%d: want 0 to 4MiB (Pub/Sub messages are at most 10 MB)", p.InlineMax)
	}
	if p.MessageMax < 1<<20 || p.MessageMax > 10_000_000 {
		return fmt.Errorf("FERRY_MESSAGE_MAX=%d: want 1MiB to 10MB (Pub/Sub's limit)", p.MessageMax)
	}
	if p.SpoolMax < 64<<20 {
		return fmt.Errorf("FERRY_SPOOL_MAX=%d: want at least 64MiB", p.SpoolMax)
	}
	if p.BundleMax < 0 || p.BundleMax > p.MessageMax/2 {
		return fmt.Errorf("FERRY_BUNDLE_MAX=%d: want 0 to half of FERRY_MESSAGE_MAX (%d)", p.BundleMax, p.MessageMax/2)
	}
	for _, r := range p.SourceRoots {
		if !filepath.IsAbs(r) {
			return fmt.Errorf("FERRY_SOURCE_ROOTS: %q is not an absolute path", r)
		}
	}
	return nil
}

// Worker is the worker's configuration.
type Worker struct {
	PubSub    PubSub
	Emulators Emulators
	Spool     Spool
	Buckets   Buckets
	Log       Log
	HTTP      HTTP

	ID             string        `env:"FERRY_WORKER_ID" help:"name in logs, events and benchmark rows (default: host name and process id)"`
	Concurrency    int           `env:"FERRY_WORKER_CONCURRENCY, default=8" help:"chunks uploaded at once (Pub/Sub MaxOutstandingMessages)"`
	MaxOutstanding Bytes         `env:"FERRY_WORKER_MAX_OUTSTANDING_BYTES, default=64MiB" help:"Pub/Sub flow control on message bytes held at once"`
	MaxAttempts    int           `env:"FERRY_MAX_DELIVERY_ATTEMPTS, default=5" help:"the chunks subscription's dead-letter threshold; on that delivery a failing chunk fails its transfer instead of waiting forever"`
	ShutdownGrace  time.Duration `env:"FERRY_SHUTDOWN_GRACE, default=30s" help:"on SIGTERM, how long running uploads may take before they are abandoned to redelivery"`
	MaxRate        Bytes         `env:"FERRY_MAX_RATE, default=0" help:"bytes per second this worker may upload to GCS; 0: no limit"`
	Requests       int           `env:"FERRY_WORKER_REQUESTS, default=0" help:"most upload requests in flight, over all chunks; the worker finds its number below this as the rate grows, as a congestion window does; 0: 8 per chunk of FERRY_WORKER_CONCURRENCY"`
	RequestMemory  Bytes         `env:"FERRY_WORKER_REQUEST_MEMORY, default=0" help:"what the upload requests in flight may hold beside their messages: a small file's upload holds its own bytes and a bounded header, a large one its copy buffers; 0: 1MiB per chunk of FERRY_WORKER_CONCURRENCY"`
}

// RequestCap is the most upload requests in flight (FERRY_WORKER_REQUESTS,
// or its default).
func (w *Worker) RequestCap() int {
	if w.Requests > 0 {
		return w.Requests
	}
	return 8 * w.Concurrency
}

// RequestBytes is what the requests in flight may hold
// (FERRY_WORKER_REQUEST_MEMORY, or its default).
func (w *Worker) RequestBytes() int64 {
	if w.RequestMemory > 0 {
		return int64(w.RequestMemory)
	}
	return int64(w.Concurrency) << 20
}

// MaxRequests bounds the upload requests one process keeps in flight.
const MaxRequests = 4096

// Validate names the variable at fault and fills in the default ID.
func (w *Worker) Validate() error {
	if err := firstErr(w.PubSub.Validate(), w.Emulators.Validate(), w.Spool.Validate(), w.Buckets.Validate(), w.Log.Validate()); err != nil {
		return err
	}
	if w.Concurrency < 1 || w.Concurrency > 1000 {
		return fmt.Errorf("FERRY_WORKER_CONCURRENCY=%d: want 1 to 1000", w.Concurrency)
	}
	if w.MaxOutstanding < 1<<20 {
		return fmt.Errorf("FERRY_WORKER_MAX_OUTSTANDING_BYTES=%d: want at least 1MiB", w.MaxOutstanding)
	}
	if w.Requests < 0 || w.Requests > MaxRequests {
		return fmt.Errorf("FERRY_WORKER_REQUESTS=%d: want 0 (8 per chunk) to %d", w.Requests, MaxRequests)
	}
	if w.RequestMemory != 0 && w.RequestMemory < 1<<20 {
		return fmt.Errorf("FERRY_WORKER_REQUEST_MEMORY=%d: want 0 (1MiB per chunk) or at least 1MiB", w.RequestMemory)
	}
	if w.MaxAttempts < 5 || w.MaxAttempts > 100 {
		return fmt.Errorf("FERRY_MAX_DELIVERY_ATTEMPTS=%d: want 5 to 100, as Pub/Sub dead-letter policies allow", w.MaxAttempts)
	}
	if w.ShutdownGrace < 0 {
		return fmt.Errorf("FERRY_SHUTDOWN_GRACE=%s: want 0 or more", w.ShutdownGrace)
	}
	if w.ID == "" {
		h, _ := os.Hostname()
		w.ID = fmt.Sprintf("%s-%d", h, os.Getpid())
	}
	return nil
}

// BigQuery says where benchmark rows go when they go to BigQuery.
type BigQuery struct {
	Dataset       string        `env:"FERRY_BQ_DATASET" help:"BigQuery dataset of the transfers and chunks tables; empty: rows go to FERRY_RESULTS_FILE only"`
	Project       string        `env:"FERRY_BQ_PROJECT" help:"project of that dataset (default: FERRY_PROJECT)"`
	Location      string        `env:"FERRY_BQ_LOCATION" help:"location of that dataset (US, EU or a region such as us-central1; required with FERRY_BQ_DATASET): BigQuery finds a load job only where it ran"`
	ResultsBucket string        `env:"FERRY_RESULTS_BUCKET" help:"bucket where rows are staged as NDJSON for load jobs (required with FERRY_BQ_DATASET)"`
	LoadBatch     int           `env:"FERRY_LOAD_BATCH, default=500" help:"most staged transfers one load job takes; a full batch loads at once"`
	LoadMaxAge    time.Duration `env:"FERRY_LOAD_MAX_AGE, default=1m" help:"how long a staged row waits for a batch to fill before it is loaded anyway"`
}

// Merger is the merger's configuration.
type Merger struct {
	PubSub    PubSub
	Emulators Emulators
	Buckets   Buckets
	Log       Log
	HTTP      HTTP
	BigQuery  BigQuery
	Loads     Loads

	ResultsFile        string        `env:"FERRY_RESULTS_FILE, default=ferry-results.ndjson" help:"local NDJSON file of benchmark rows (the BigQuery table's schema)"`
	LoadsFile          string        `env:"FERRY_LOADS_FILE, default=ferry-loads.ndjson" help:"without FERRY_BQ_DATASET: local NDJSON file of the table loads transfers ask for (--bq-table), one load job request a line, instead of running them"`
	TableBatchWindow   time.Duration `env:"FERRY_BQ_TABLE_BATCH_WINDOW, default=1m" help:"how long a --bq-write append of Parquet parts waits for other transfers into the same table to share its load job (BigQuery runs 1,500 load jobs a table a day); 0: one job per transfer"`
	TableBatchMax      int           `env:"FERRY_BQ_TABLE_BATCH, default=100" help:"most transfers one shared load job takes; a full batch loads at once"`
	ComposeConcurrency int           `env:"FERRY_COMPOSE_CONCURRENCY, default=8" help:"compose and Attrs calls one finishing transfer has in flight at once (one limit shared by both)"`
	Concurrency        int           `env:"FERRY_MERGER_CONCURRENCY, default=16" help:"events handled at once"`
	MaxAttempts        int           `env:"FERRY_MERGER_MAX_DELIVERY_ATTEMPTS, default=10" help:"the events and control subscriptions' dead-letter threshold; on that delivery an event that still fails ends its transfer failed with its error instead of leaving it to wait for FERRY_TRANSFER_TIMEOUT"`
	Memory             Bytes         `env:"FERRY_MERGER_MEMORY, default=128MiB" help:"bound on event bytes held at once (a quarter for each of the two subscriptions' flow control) and, with a stated overhead, the Go runtime's memory limit; listings, rows and done listings are paged or spooled, so nothing else grows with a transfer"`

	TransferTimeout time.Duration `env:"FERRY_TRANSFER_TIMEOUT, default=6h" help:"a transfer with no progress for this long ends failed, with its staging removed (a producer that died and was never resubmitted)"`
	DoneRetention   time.Duration `env:"FERRY_DONE_RETENTION, default=720h" help:"how long done markers (.ferry-done/) are kept; while one exists, a request with the same idempotency key is answered, not run again"`

	// Grace is how long running handlers may go on once receiving stops:
	// none for the service (a merger stopped leaves its events to
	// redelivery), a while for ferry cp, whose merger ends its transfer
	// (done marker, staging removed) after the done event that ends cp.
	Grace time.Duration
}

// Validate names the variable at fault.
func (m *Merger) Validate() error {
	if err := firstErr(m.PubSub.Validate(), m.Emulators.Validate(), m.Buckets.Validate(), m.Log.Validate(), m.Loads.Validate()); err != nil {
		return err
	}
	if m.Memory < 16<<20 {
		return fmt.Errorf("FERRY_MERGER_MEMORY=%d: want at least 16MiB", m.Memory)
	}
	if m.MaxAttempts < 5 || m.MaxAttempts > 100 {
		return fmt.Errorf("FERRY_MERGER_MAX_DELIVERY_ATTEMPTS=%d: want 5 to 100, as Pub/Sub dead-letter policies allow", m.MaxAttempts)
	}
	if m.TableBatchWindow < 0 || m.TableBatchWindow > time.Hour {
		return fmt.Errorf("FERRY_BQ_TABLE_BATCH_WINDOW=%s: want 0 (no batching) to 1h", m.TableBatchWindow)
	}
	if m.TableBatchMax < 1 || m.TableBatchMax > 10000 {
		return fmt.Errorf("FERRY_BQ_TABLE_BATCH=%d: want 1 to 10000", m.TableBatchMax)
	}
	if b := m.BigQuery; b.Dataset != "" {
		if b.ResultsBucket == "" {
			return fmt.Errorf("FERRY_RESULTS_BUCKET is empty: FERRY_BQ_DATASET=%s needs a bucket to stage rows in", b.Dataset)
		}
		if b.Location == "" {
			return fmt.Errorf("FERRY_BQ_LOCATION is empty: FERRY_BQ_DATASET=%s needs the dataset's location, without which BigQuery does not find a load job in a regional dataset and a retried load never ends", b.Dataset)
		}
		if b.LoadBatch < 1 || b.LoadBatch > 10000 {
			return fmt.Errorf("FERRY_LOAD_BATCH=%d: want 1 to 10000 (a load job takes at most 10000 URIs)", b.LoadBatch)
		}
		if b.LoadMaxAge < time.Second {
			return fmt.Errorf("FERRY_LOAD_MAX_AGE=%s: want at least 1s", b.LoadMaxAge)
		}
	}
	if m.ResultsFile == "" {
		return fmt.Errorf("FERRY_RESULTS_FILE is empty: want a file path")
	}
	if m.ComposeConcurrency < 1 || m.ComposeConcurrency > 256 {
		return fmt.Errorf("FERRY_COMPOSE_CONCURRENCY=%d: want 1 to 256", m.ComposeConcurrency)
	}
	if m.Concurrency < 1 || m.Concurrency > 1000 {
		return fmt.Errorf("FERRY_MERGER_CONCURRENCY=%d: want 1 to 1000", m.Concurrency)
	}
	if m.TransferTimeout < time.Minute {
		return fmt.Errorf("FERRY_TRANSFER_TIMEOUT=%s: want at least 1m", m.TransferTimeout)
	}
	if m.DoneRetention < 24*time.Hour {
		return fmt.Errorf("FERRY_DONE_RETENTION=%s: want at least 24h", m.DoneRetention)
	}
	return nil
}

// Verify is the configuration of verify (and of any command that only
// reads objects).
type Verify struct {
	Emulators Emulators
}

// Validate names the variable at fault.
func (v *Verify) Validate() error { return v.Emulators.Validate() }

// Bench is make bench's configuration (bin/bench); its flags override it.
type Bench struct {
	Quick     bool    `env:"BENCH_QUICK, default=false" help:"bench: small data, to prove the bench works (figures mean little) (--quick)"`
	Full      bool    `env:"BENCH_FULL, default=false" help:"bench: add the 1.2 GB tier (--full)"`
	Repeats   int     `env:"BENCH_REPEATS, default=0" help:"bench: repeats per method; 0: 3, or 2 with BENCH_QUICK (--repeats)"`
	Workloads string  `env:"BENCH_WORKLOADS" help:"bench: comma-separated workloads by number or name; empty: all (--workloads)"`
	LinkMBps  float64 `env:"BENCH_LINK_MBPS, default=7" help:"bench: the shaped link's rate in MB/s (--link-mbps)"`
	GCS       string  `env:"BENCH_GCS, default=fs" help:"bench: fake-gcs-server backend of every method's server: fs (files on a tmpfs) or memory (--gcs)"`
	Tree      string  `env:"BENCH_TREE, default=goroot" help:"bench: the real source tree workload 7 also sends: a directory, goroot (the Go distribution that built ferry, go env GOROOT) or none (--tree)"`
	// MethodBudget: a method stops repeating once its runs took this long
	// together, so that a slow peer runs once.
	MethodBudget time.Duration `env:"BENCH_METHOD_BUDGET, default=20s" help:"bench: a method repeats only while its runs together took less than this; 0: every repeat (--method-budget; BENCH_FULL runs every repeat)"`
}

// Validate names the variable at fault.
func (b *Bench) Validate() error {
	switch {
	case b.Repeats < 0:
		return fmt.Errorf("BENCH_REPEATS=%d: want 0 (the default) or more", b.Repeats)
	case b.MethodBudget < 0:
		return fmt.Errorf("BENCH_METHOD_BUDGET=%s: want 0 (no budget) or more", b.MethodBudget)
	case b.LinkMBps <= 0:
		return fmt.Errorf("BENCH_LINK_MBPS=%q: want a positive number", strconv.FormatFloat(b.LinkMBps, 'g', -1, 64))
	case b.GCS != "fs" && b.GCS != "memory":
		return fmt.Errorf("BENCH_GCS=%q: want fs or memory", b.GCS)
	case b.Quick && b.Full:
		return errors.New("BENCH_QUICK and BENCH_FULL exclude each other")
	}
	return nil
}

// Restore is the restore command's configuration; its flags override it.
type Restore struct {
	Emulators Emulators

	Memory      Bytes `env:"FERRY_RESTORE_MEMORY, default=256MiB" help:"restore: bound on download buffers and decoder windows held at once; memory does not grow with object size or count"`
	Concurrency int   `env:"FERRY_RESTORE_CONCURRENCY, default=16" help:"restore: byte ranges of large objects downloading at once, across all objects"`
	Requests    int   `env:"FERRY_RESTORE_REQUESTS, default=512" help:"restore: most small objects (one request each) downloading at once; the restore finds its number below this, more while the rate grows"`
}

// Validate names the variable at fault.
func (r *Restore) Validate() error {
	if err := r.Emulators.Validate(); err != nil {
		return err
	}
	if r.Concurrency < 1 || r.Concurrency > 1024 {
		return fmt.Errorf("FERRY_RESTORE_CONCURRENCY=%d: want 1 to 1024", r.Concurrency)
	}
	if r.Requests < 1 || r.Requests > MaxRequests {
		return fmt.Errorf("FERRY_RESTORE_REQUESTS=%d: want 1 to %d", r.Requests, MaxRequests)
	}
	if int64(r.Memory) < int64(r.Concurrency)*(4<<20) {
		return fmt.Errorf("FERRY_RESTORE_MEMORY=%d: want at least 4MiB per range in flight (FERRY_RESTORE_CONCURRENCY=%d)", r.Memory, r.Concurrency)
	}
	return nil
}

// LocalStack is what localstack reads: the names of the topics and
// subscriptions to create.
type LocalStack struct {
	PubSub PubSub
}

// Validate names the variable at fault.
func (l *LocalStack) Validate() error { return l.PubSub.Validate() }

// Error is a configuration that cannot be used: a variable that does not
// parse or is out of range, or a .env file that does not parse. Binaries
// exit 2 on it, as on a usage error.
type Error struct{ Err error }

func (e *Error) Error() string { return "config: " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// IsError reports whether err is a configuration error.
func IsError(err error) bool {
	var ce *Error
	return errors.As(err, &ce)
}

// validator is a config that checks itself.
type validator interface{ Validate() error }

// Load fills cfg from l (envconfig.OsLookuper() in production) and validates
// it. Errors name the variable.
func Load(ctx context.Context, cfg validator, l envconfig.Lookuper) error {
	rec := &recorder{l: l}
	if err := envconfig.ProcessWith(ctx, &envconfig.Config{Target: cfg, Lookuper: rec}); err != nil {
		// envconfig names the Go field; users know the variable, which is
		// the last one looked up before decoding failed.
		return &Error{fmt.Errorf("%s=%q: %w", rec.key, rec.val, err)}
	}
	if err := cfg.Validate(); err != nil {
		return &Error{err}
	}
	return nil
}

// recorder remembers the last variable looked up.
type recorder struct {
	l        envconfig.Lookuper
	key, val string
}

func (r *recorder) Lookup(key string) (string, bool) {
	v, ok := r.l.Lookup(key)
	r.key, r.val = key, v
	return v, ok
}

// Var describes one environment variable.
type Var struct {
	Name, Default, Help string
}

// Describe lists the variables cfg reads, in field order.
func Describe(cfg any) []Var {
	var out []Var
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag := f.Tag.Get("env")
			if tag == "" {
				if f.Type.Kind() == reflect.Struct {
					walk(f.Type)
				}
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			v := Var{Name: name, Help: f.Tag.Get("help")}
			for _, o := range strings.Split(opts, ",") {
				if d, ok := strings.CutPrefix(strings.TrimSpace(o), "default="); ok {
					v.Default = d
				}
			}
			out = append(out, v)
		}
	}
	walk(reflect.TypeOf(cfg).Elem())
	return out
}

// Usage formats the variables of cfg for --help.
func Usage(cfg any) string {
	var b strings.Builder
	b.WriteString("Environment variables (FERRY_ENV_FILE names a .env file for those the environment does not set):\n")
	for _, v := range Describe(cfg) {
		def := v.Default
		if def == "" {
			def = "(none)"
		}
		fmt.Fprintf(&b, "  %-36s default %s\n      %s\n", v.Name, def, v.Help)
	}
	return b.String()
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Shared returns the parts every service's configuration has.
func (p *Producer) Shared() (PubSub, Log, HTTP) { return p.PubSub, p.Log, p.HTTP }

// Shared returns the parts every service's configuration has.
func (w *Worker) Shared() (PubSub, Log, HTTP) { return w.PubSub, w.Log, w.HTTP }

// Shared returns the parts every service's configuration has.
func (m *Merger) Shared() (PubSub, Log, HTTP) { return m.PubSub, m.Log, m.HTTP }

// EmulatorHosts returns the emulators the clients should use, if any.
func (p *Producer) EmulatorHosts() Emulators { return p.Emulators }

// EmulatorHosts returns the emulators the clients should use, if any.
func (w *Worker) EmulatorHosts() Emulators { return w.Emulators }

// EmulatorHosts returns the emulators the clients should use, if any.
func (m *Merger) EmulatorHosts() Emulators { return m.Emulators }
