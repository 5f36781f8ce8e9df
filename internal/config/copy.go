package config

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Copy is ferry cp's configuration: the settings of the producer, the
// workers and the merger that make sense in one process, read from the
// same variables, plus the one budget and the upload concurrency of that
// process. The services' own configurations come from it (Producer,
// Worker, Merger), each checked as the services check theirs.
type Copy struct {
	Emulators Emulators
	Buckets   Buckets
	Log       Log
	Loads     Loads
	BigQuery  BigQuery

	// Project is where benchmark rows and table loads run without
	// FERRY_BQ_PROJECT; cp has no Pub/Sub project.
	Project string `env:"FERRY_PROJECT" help:"project of the BigQuery jobs when FERRY_BQ_PROJECT is empty (ferry cp uses no Pub/Sub)"`

	ChunkSize   Bytes  `env:"FERRY_CHUNK_SIZE, default=8MiB" help:"ferry cp: default chunk size, grown up to a ninth of FERRY_CP_MEMORY so that no file needs more than FERRY_MAX_CHUNKS chunks"`
	MaxChunks   int    `env:"FERRY_MAX_CHUNKS, default=1000" help:"most chunks per file: 1000 keeps within the 1024 components older GCS documents allow a composite; current GCS sets no such limit, so raise it for files above 1000 x the chunk size"`
	Codec       string `env:"FERRY_CODEC, default=zstd" help:"default codec: zstd, gzip or none"`
	Level       int    `env:"FERRY_LEVEL, default=0" help:"compression level, fixed; 0: zstd adapts each chunk's level (1, 3 or 6; it starts at 1) to what waits, the compressor or the link; gzip 6"`
	Compressors int    `env:"FERRY_COMPRESS_CONCURRENCY, default=0" help:"compression goroutines; 0 means one per CPU"`
	BundleMax   Bytes  `env:"FERRY_BUNDLE_MAX, default=4MiB" help:"small files travel together in one chunk message of up to this many raw bytes; 0 sends every file on its own"`
	MaxRate     Bytes  `env:"FERRY_MAX_RATE, default=0" help:"bytes per second this process may send; 0: no limit"`
	Method      string `env:"FERRY_METHOD, default=ferry" help:"method name written to the benchmark row"`
	KeyDir      string `env:"FERRY_KEY_DIR" help:"where each transfer's end key is kept (mode 0600); empty: $XDG_STATE_HOME/ferry/keys, else ~/.local/state/ferry/keys"`
	IDSecret    string `env:"FERRY_IDEMPOTENCY_SECRET" help:"with it, the transfer id of an --idempotency-key is an HMAC under this secret, which nobody without it can compute; at least 32 characters"`

	Memory  Bytes `env:"FERRY_CP_MEMORY, default=256MiB" help:"ferry cp: the one budget of the process: chunks being read and compressed (half), waiting for an uploader, being uploaded, and the merger's events; memory does not grow with file size or file count"`
	Uploads int   `env:"FERRY_CP_UPLOADS, default=512" help:"ferry cp: most upload requests in flight (--uploads); ferry finds its number below this, more while the rate grows, fewer when GCS pushes back"`

	ResultsFile     string        `env:"FERRY_RESULTS_FILE" help:"local NDJSON file of benchmark rows (ferry cp's default: results.ndjson in its state directory, $XDG_STATE_HOME/ferry, else ~/.local/state/ferry)"`
	LoadsFile       string        `env:"FERRY_LOADS_FILE" help:"without FERRY_BQ_DATASET: local NDJSON file of the table loads transfers ask for (ferry cp's default: loads.ndjson in its state directory)"`
	TransferTimeout time.Duration `env:"FERRY_TRANSFER_TIMEOUT, default=6h" help:"a transfer with no progress for this long ends failed, with its staging removed"`
}

// The in-process transport's names of ferry's topics and subscriptions:
// nothing outside the process sees them.
var inProcess = PubSub{
	Project: "in-process", ChunksTopic: "chunks", ChunksSubscription: "workers", ChunksDeadLetter: "chunks-dead",
	EventsTopic: "events", EventsSubscription: "merger-events", EventsDeadLetter: "events-dead",
	ControlTopic: "control", ControlSubscription: "merger-control", ControlDeadLetter: "control-dead",
	DoneTopic: "done", RequestsTopic: "requests", RequestsSubscription: "requests-producer", RequestsDeadLetter: "requests-dead",
	ShardsTopic: "shards", ShardsSubscription: "shards-agents", ShardsDeadLetter: "shards-dead",
}

// StateDir is where ferry keeps what its user's commands leave for later:
// $XDG_STATE_HOME/ferry, else ~/.local/state/ferry.
func StateDir() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "ferry"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no state directory for ferry: XDG_STATE_HOME is unset and %w", err)
	}
	return filepath.Join(home, ".local", "state", "ferry"), nil
}

// MessageMax is the largest chunk message of cp's in-process transport: a
// ninth of the budget, at least Pub/Sub's 9 MiB, so that a compressed chunk
// grown for a large file still fits.
func (c *Copy) MessageMax() Bytes { return max(9<<20, c.Memory/9) }

// Producer is the producer's part of the configuration: chunks travel in
// their messages (nothing is spooled) and its buffers hold half the budget.
func (c *Copy) Producer() Producer {
	return Producer{
		PubSub: inProcess, Emulators: c.Emulators, Buckets: c.Buckets, Log: c.Log, Loads: c.Loads,
		Spool:     Spool{Transport: TransportPubSub, Dir: os.TempDir()},
		ChunkSize: c.ChunkSize, MaxChunks: c.MaxChunks, Codec: c.Codec, Level: c.Level, Concurrency: c.Compressors,
		MemoryLimit: c.Memory / 2, InlineMax: 0, SpoolMax: 64 << 20, MessageMax: c.MessageMax(), BundleMax: min(c.BundleMax, c.MessageMax()/2),
		MaxRate: c.MaxRate, Method: c.Method, Requests: 1, RequestStall: 10 * time.Minute, KeyDir: c.KeyDir, SubmitWait: "subscription",
		TransferTimeout: c.TransferTimeout, IDSecret: c.IDSecret, ShardFiles: 250, ShardBytes: 64 << 20,
	}
}

// Worker is the uploaders' part: at most FERRY_CP_UPLOADS requests in
// flight, their messages holding a quarter of the budget and the requests
// themselves an eighth. A message is held by one handler, so there are as
// many handlers as requests: a message of one large chunk is one request.
func (c *Copy) Worker() Worker {
	return Worker{
		PubSub: inProcess, Emulators: c.Emulators, Buckets: c.Buckets, Log: c.Log,
		Spool:       Spool{Transport: TransportPubSub, Dir: os.TempDir()},
		Concurrency: min(c.Uploads, 1000), MaxOutstanding: c.Memory / 4, MaxAttempts: copyAttempts, ShutdownGrace: 30 * time.Second, MaxRate: c.MaxRate,
		Requests: c.Uploads, RequestMemory: c.requestMemory(),
	}
}

// requestMemory is the requests' share: an eighth of the budget, or what
// the other shares leave when that is less (a small budget, where the
// merger's floor weighs).
func (c *Copy) requestMemory() Bytes {
	rest := c.Memory - c.Memory/2 - Bytes(c.Backlog()) - c.Memory/4 - c.Merger(os.TempDir()).Memory
	return min(c.Memory/8, rest)
}

// The budget's shares: the producer a half, the chunks waiting for an
// uploader a sixteenth, the uploads' messages a quarter and their requests
// at most an eighth, the merger a sixteenth.
//
// Merger is the merger's part: a sixteenth of the budget (at least its
// 16 MiB) for events, and one load job per transfer.
// copyAttempts is the dead-letter threshold of cp's in-process
// subscriptions: the fewest Pub/Sub allows, so that a message that cannot
// succeed ends its transfer soon.
const copyAttempts = 5

func (c *Copy) Merger(state string) Merger {
	m := Merger{
		PubSub: inProcess, Emulators: c.Emulators, Buckets: c.Buckets, Log: c.Log, BigQuery: c.BigQuery, Loads: c.Loads,
		ResultsFile: c.ResultsFile, LoadsFile: c.LoadsFile, TableBatchWindow: 0, TableBatchMax: 100,
		ComposeConcurrency: 8, Concurrency: 16, Memory: max(16<<20, c.Memory/16), MaxAttempts: copyAttempts,
		TransferTimeout: c.TransferTimeout, DoneRetention: 720 * time.Hour, Grace: time.Minute,
	}
	m.PubSub.Project = c.Project
	if m.ResultsFile == "" {
		m.ResultsFile = filepath.Join(state, "results.ndjson")
	}
	if m.LoadsFile == "" {
		m.LoadsFile = filepath.Join(state, "loads.ndjson")
	}
	return m
}

// Backlog bounds the chunk bytes waiting for an uploader: a sixteenth of
// the budget (one chunk message more always fits an empty queue).
func (c *Copy) Backlog() int64 { return int64(c.Memory / 16) }

// Validate names the variable at fault: the services' own checks of the
// configurations cp gives them, and cp's.
func (c *Copy) Validate() error {
	if c.Memory < 192<<20 {
		return fmt.Errorf("FERRY_CP_MEMORY=%d: want at least 192MiB", c.Memory)
	}
	// What the requests hold is bounded by their share of the budget,
	// not by their number.
	if c.Uploads < 1 || c.Uploads > MaxRequests {
		return fmt.Errorf("FERRY_CP_UPLOADS=%d: want 1 to %d", c.Uploads, MaxRequests)
	}
	if c.BigQuery.Dataset != "" && c.Project == "" && c.BigQuery.Project == "" {
		return fmt.Errorf("FERRY_BQ_DATASET=%s: its project is FERRY_BQ_PROJECT, else FERRY_PROJECT, and both are empty", c.BigQuery.Dataset)
	}
	p, w := c.Producer(), c.Worker()
	// FERRY_MESSAGE_MAX's bound is Pub/Sub's; cp's messages never leave
	// the process.
	p.MessageMax = min(p.MessageMax, 9<<20)
	if err := firstErr(p.Validate(), w.Validate()); err != nil {
		return err
	}
	m := c.Merger(os.TempDir())
	if m.PubSub.Project == "" {
		m.PubSub.Project = inProcess.Project
	}
	return m.Validate()
}
