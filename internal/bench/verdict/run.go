package verdict

import (
	"time"

	"github.com/ferry-dev/ferry/internal/bench/peer"
	"github.com/ferry-dev/ferry/internal/benchrow"
)

// Role says what a method is in a comparison.
type Role string

// Roles of methods.
const (
	// Ferry is one of ferry's own methods.
	Ferry Role = "ferry"
	// Peer is a tool a user could choose instead of ferry; the best peer
	// is the one to beat.
	Peer Role = "peer"
	// Ceiling is a reference that is not a transfer, such as zstd -3 -T2
	// compressing the same file: what ferry's pipeline cannot beat.
	Ceiling Role = "ceiling"
)

// Proc is what one process of a run used (peer.Proc).
type Proc = peer.Proc

// Run is one repeat of one method on one workload.
type Run struct {
	Workload string
	Tier     string
	Method   string
	Role     Role
	// Setting describes the method's settings, as docs/performance.md's table does.
	Setting string
	Repeat  int

	Files int
	Bytes int64 // raw bytes of the sources
	Wire  int64 // bytes stored (or sent over the shaped link)
	Codec string
	Level int
	// Levels are the levels ferry's producer compressed at (its row's).
	Levels []benchrow.LevelUse
	// Workers is the number of ferry workers (agents, in a pool); 0 for
	// the peers.
	Workers int
	// PubSubBytes are the chunk message bytes a tap on the chunks topic
	// received during the run (workload 12).
	PubSubBytes int64
	// AgentBytes are the raw bytes each agent of a pooled transfer sent,
	// from its row, in the row's order (workload 12).
	AgentBytes []int64
	// KilledAt is when workload 12's kill variant sent SIGKILL to one of
	// its agents, from the start of the run.
	KilledAt time.Duration

	Wall  time.Duration
	Procs []Proc

	// Ferry's stage times from the merger's row (zero for the peers).
	CompressMS, UploadMS, ComposeMS, VerifyMS int64
	// ServerComposeMS and ServerComposeCalls are what fake-gcs-server
	// spent composing during the run (summed over calls).
	ServerComposeMS, ServerComposeCalls int64
	// ServerCPU is what the local stack (fake-gcs-server and, for ferry,
	// the Pub/Sub emulator) used during the run.
	ServerCPU time.Duration
	// LinkMBps is the rate the shaped link carried the run's uploads at,
	// as the proxy measured it; LinkBytes what it carried up.
	LinkMBps  float64
	LinkBytes int64
	// DecompressMS is the time to decompress the stored object (codecs).
	DecompressMS int64
	// Rows are the rows of the Parquet parts a conversion stored, and
	// LoadBytes the size of the load job request it wrote (parquet).
	Rows, LoadBytes int64
	// An append's second sync (workload 9): the first sync's wall time,
	// the bytes the file grew by, and the request bytes the server read.
	FullWall        time.Duration
	Grown, Uploaded int64
	// Behind a write limit (workload 10): the writes the proxy let
	// through and those it refused with 429, and what each process says
	// it waited out.
	WritesPassed, Refused int
	Pushbacks             []ProcPushback
	// Connections is how many connections the method opened through
	// workload 11's delaying relay; InFlight the requests in flight
	// ferry cp's uploads settled at (0: not logged).
	Connections int64
	InFlight    int

	StartedAt time.Time
	Err       error
}

// OK reports whether the run succeeded.
func (r Run) OK() bool { return r.Err == nil }

// CPU is the CPU time of all the run's processes.
func (r Run) CPU() time.Duration {
	var d time.Duration
	for _, p := range r.Procs {
		d += p.CPU
	}
	return d
}

// PeakRSSKB is the largest peak RSS of the run's processes.
func (r Run) PeakRSSKB() int64 {
	var m int64
	for _, p := range r.Procs {
		m = max(m, p.MaxRSSKB)
	}
	return m
}

// Row is the run as a benchmark row (benchrow.Row), so make report and the
// BigQuery queries compare it with ferry's own rows. Extras that have no
// column (repeat, CPU seconds and peak RSS per process, the server's
// compose time, the link rate) are labels.
func (r Run) Row(runID, version string) benchrow.Row {
	ms := r.Wall.Milliseconds()
	row := benchrow.Row{
		TransferID:   runID + "-" + r.Workload + "-" + r.Tier + "-" + r.Method + "-" + itoa(r.Repeat),
		Method:       r.Method,
		Tier:         r.Tier,
		Source:       r.Workload,
		Destination:  "",
		Files:        r.Files,
		SizeBytes:    r.Bytes,
		WireBytes:    r.Wire,
		Codec:        r.Codec,
		Level:        r.Level,
		Levels:       r.Levels,
		Workers:      r.Workers,
		CompressMS:   r.CompressMS,
		UploadMS:     r.UploadMS,
		ComposeMS:    r.ComposeMS,
		VerifyMS:     r.VerifyMS,
		TotalMS:      ms,
		RawMBps:      benchrow.Float(benchrow.MBps(r.Bytes, ms)),
		Status:       "ok",
		StartedAt:    r.StartedAt.UTC(),
		FinishedAt:   r.StartedAt.Add(r.Wall).UTC(),
		FerryVersion: version,
	}
	if r.Wire > 0 {
		row.Ratio = float64(r.Bytes) / float64(r.Wire)
	}
	if r.Role != Ferry && r.Role != Ceiling {
		row.UploadMS = ms
	}
	if row.UploadMS > 0 {
		row.WireMBps = benchrow.Float(benchrow.MBps(r.Wire, row.UploadMS))
	}
	if r.Err != nil {
		// A failed run measured no throughput.
		row.Status, row.Error = "failed", r.Err.Error()
		row.RawMBps, row.WireMBps = nil, nil
	}
	add := func(k, v string) { row.Labels = append(row.Labels, benchrow.Label{Key: k, Value: v}) }
	add("bench_run", runID)
	add("workload", r.Workload)
	add("role", string(r.Role))
	add("repeat", itoa(r.Repeat))
	if r.Setting != "" {
		add("setting", r.Setting)
	}
	for _, p := range r.Procs {
		add("cpu_s."+p.Name, ftoa(p.CPU.Seconds(), 2))
		add("peak_rss_kb."+p.Name, itoa(int(p.MaxRSSKB)))
	}
	if r.ServerCPU > 0 {
		add("cpu_s.server", ftoa(r.ServerCPU.Seconds(), 2))
	}
	if r.ServerComposeCalls > 0 {
		add("server_compose_ms", itoa(int(r.ServerComposeMS)))
		add("server_compose_calls", itoa(int(r.ServerComposeCalls)))
	}
	if r.WritesPassed > 0 {
		add("writes_let_through", itoa(r.WritesPassed))
		add("writes_refused_429", itoa(r.Refused))
		for _, p := range r.Pushbacks {
			add("pushbacks."+p.Name, itoa(int(p.PushBacks)))
			add("settled_writes_per_s."+p.Name, ftoa(p.Settled, 1))
		}
	}
	if r.Connections > 0 {
		add("connections", itoa(int(r.Connections)))
	}
	if r.InFlight > 0 {
		add("requests_in_flight", itoa(r.InFlight))
	}
	if r.LinkBytes > 0 {
		add("link_mbps", ftoa(r.LinkMBps, 2))
		add("link_bytes", itoa(int(r.LinkBytes)))
	}
	if r.DecompressMS > 0 {
		add("decompress_ms", itoa(int(r.DecompressMS)))
	}
	return row
}
