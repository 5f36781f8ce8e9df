package config

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/ferry-dev/ferry/internal/message"
)

// Agent is ferry agent's configuration: one host of the pool, which claims
// the shards of pooled transfers and reads, compresses and uploads their
// files itself, as ferry cp does in one process, with the fleet's topics
// for the shards and the merger's events. Its one budget is shared as
// cp's (Copy).
type Agent struct {
	PubSub    PubSub
	Emulators Emulators
	Buckets   Buckets
	Log       Log
	HTTP      HTTP

	ID           string        `env:"FERRY_AGENT_ID" help:"this agent's name in logs, shard records, status and benchmark rows (default: the host name)"`
	SourceRoots  []string      `env:"FERRY_SOURCE_ROOTS" help:"ferry agent: comma-separated directories (the share, mounted where every agent mounts it) shards may read from; required"`
	Memory       Bytes         `env:"FERRY_AGENT_MEMORY, default=1GiB" help:"ferry agent: the one budget of the process, shared as FERRY_CP_MEMORY is in ferry cp; it does not grow with file size or count"`
	Uploads      int           `env:"FERRY_AGENT_UPLOADS, default=512" help:"ferry agent: most upload requests in flight; the agent finds its number below this as ferry cp does"`
	Shards       int           `env:"FERRY_AGENT_SHARDS, default=1" help:"ferry agent: shards claimed and sent at once; more than 1 leaves fewer shards to the other agents of a small transfer"`
	MaxAttempts  int           `env:"FERRY_MAX_DELIVERY_ATTEMPTS, default=5" help:"the shards subscription's dead-letter threshold: on that delivery, a shard this agent cannot read fails its transfer naming the file"`
	MaxChunks    int           `env:"FERRY_MAX_CHUNKS, default=1000" help:"most chunks per file: the same as the producers', or a shard's chunks are refused"`
	Compressors  int           `env:"FERRY_COMPRESS_CONCURRENCY, default=0" help:"compression goroutines; 0 means one per CPU"`
	BundleMax    Bytes         `env:"FERRY_BUNDLE_MAX, default=4MiB" help:"small files travel together in one chunk message of up to this many raw bytes; 0 sends every file on its own"`
	MaxRate      Bytes         `env:"FERRY_MAX_RATE, default=0" help:"bytes per second this agent may upload; 0: no limit"`
	ShardTimeout time.Duration `env:"FERRY_AGENT_SHARD_TIMEOUT, default=30m" help:"ferry agent: a shard not sent within this long is left to another agent (a hung share, a stalled link); whatever this agent writes of it later changes nothing"`
	Grace        time.Duration `env:"FERRY_SHUTDOWN_GRACE, default=30s" help:"on SIGTERM, how long running shards may take before they are left to another agent"`
}

// Copy is the agent's budget as ferry cp shares it: its producer's and its
// uploaders' parts come from it.
func (a *Agent) Copy() Copy {
	return Copy{
		Emulators: a.Emulators, Buckets: a.Buckets, Log: a.Log, ChunkSize: 8 << 20, MaxChunks: a.MaxChunks, Codec: "zstd",
		Compressors: a.Compressors, BundleMax: a.BundleMax, MaxRate: a.MaxRate, Method: "ferry", Memory: a.Memory, Uploads: a.Uploads,
		TransferTimeout: 6 * time.Hour,
	}
}

// Validate names the variable at fault.
func (a *Agent) Validate() error {
	if err := firstErr(a.PubSub.Validate(), a.Emulators.Validate(), a.Buckets.Validate(), a.Log.Validate()); err != nil {
		return err
	}
	if len(a.SourceRoots) == 0 {
		return fmt.Errorf("FERRY_SOURCE_ROOTS is empty: an agent reads only under the directories it names (the share)")
	}
	for _, r := range a.SourceRoots {
		if !filepath.IsAbs(r) {
			return fmt.Errorf("FERRY_SOURCE_ROOTS: %q is not an absolute path", r)
		}
	}
	if a.Memory < 192<<20 {
		return fmt.Errorf("FERRY_AGENT_MEMORY=%d: want at least 192MiB", a.Memory)
	}
	if a.Uploads < 1 || a.Uploads > MaxRequests {
		return fmt.Errorf("FERRY_AGENT_UPLOADS=%d: want 1 to %d", a.Uploads, MaxRequests)
	}
	if a.Shards < 1 || a.Shards > 16 {
		return fmt.Errorf("FERRY_AGENT_SHARDS=%d: want 1 to 16", a.Shards)
	}
	if a.ShardTimeout < time.Second {
		return fmt.Errorf("FERRY_AGENT_SHARD_TIMEOUT=%s: want at least 1s", a.ShardTimeout)
	}
	if a.MaxAttempts < 5 || a.MaxAttempts > 100 {
		return fmt.Errorf("FERRY_MAX_DELIVERY_ATTEMPTS=%d: want 5 to 100, as Pub/Sub dead-letter policies allow", a.MaxAttempts)
	}
	if a.MaxChunks < 1 || a.MaxChunks > 1_000_000 {
		return fmt.Errorf("FERRY_MAX_CHUNKS=%d: want 1 to 1000000", a.MaxChunks)
	}
	if a.Compressors < 0 || a.Compressors > MaxCompressConcurrency {
		return fmt.Errorf("FERRY_COMPRESS_CONCURRENCY=%d: want 0 (the cores) to %d", a.Compressors, MaxCompressConcurrency)
	}
	if a.ID == "" {
		a.ID, _ = os.Hostname()
	}
	if !message.AgentID.MatchString(a.ID) {
		return fmt.Errorf("FERRY_AGENT_ID=%q: want 1 to 63 letters, digits, '.', '-' and '_' (a host name)", a.ID)
	}
	c := a.Copy()
	p, w := c.Producer(), c.Worker()
	p.MessageMax = min(p.MessageMax, 9<<20) // the bound is Pub/Sub's; these messages never leave the process
	return firstErr(p.Validate(), w.Validate())
}

// Shared returns the parts every service's configuration has.
func (a *Agent) Shared() (PubSub, Log, HTTP) { return a.PubSub, a.Log, a.HTTP }

// EmulatorHosts returns the emulators the clients should use, if any.
func (a *Agent) EmulatorHosts() Emulators { return a.Emulators }
