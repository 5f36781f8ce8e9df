package bench

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ferry-dev/ferry/internal/bench/peer"
	"github.com/ferry-dev/ferry/internal/bench/verdict"
	"github.com/ferry-dev/ferry/internal/benchrow"
	"github.com/ferry-dev/ferry/internal/faultproxy"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/localstack"
)

// ---- ferry ----

// ferryOpts is one ferry transfer.
type ferryOpts struct {
	workers      int
	codec        string
	level        int
	sources      []string
	prefix       string
	method, tier string
	workerEnv    []string // extra variables of every worker
	env          []string // extra variables of every process
	// args are more producer submit flags.
	args []string
	// workersInNS also runs the workers on the submitting side of a
	// kernel-shaped link (the spool transport: they read the producer's
	// spool); the producer always runs there.
	workersInNS bool
	// fleet, when set, is a merger and workers already running: the run
	// times the producer's transfer alone.
	fleet *fleet
	// agents is how many ferry agents run beside the merger (a pooled
	// transfer, --pool among args), reading under agentRoot, each with
	// agentEnv.
	agents    int
	agentRoot string
	agentEnv  []string
	// during, when set, runs beside the transfer once every process is
	// started (workload 12's kill); it returns once it is done.
	during func(ctx context.Context, f *fleet, t0 time.Time)
	// settled, when set, checks what the fleet left once the transfer
	// ended, before the fleet is stopped (its clean-up runs after the
	// done event); its error fails the run.
	settled func(ctx context.Context) error
}

// ferryMethod is ferry with n workers: producer submit --wait, n workers
// and the merger, all started inside the clock.
func (b *Bench) ferryMethod(name string, workers int, codec string, level int, sources func() []string) method {
	lv := fmt.Sprintf("--level %d", level)
	if level == 0 && codec == "zstd" {
		lv = "(its level adapting, the default)"
	}
	return method{name: name, role: verdict.Ferry, workers: workers, codec: codec, level: level,
		setting: fmt.Sprintf("producer submit --wait --codec %s %s, %d workers, merger; all started inside the clock", codec, lv, workers),
		run: func(ctx context.Context, e *env) (verdict.Run, error) {
			return b.runFerry(ctx, e, ferryOpts{workers: workers, codec: codec, level: level, sources: sources(),
				prefix: "ferry", method: name, tier: e.tier})
		}}
}

// cpMethod is ferry cp of sources: one process, inside the clock.
func (b *Bench) cpMethod(sources func() []string) method {
	return method{name: verdict.FerryCp, role: verdict.Ferry, workers: 1, codec: "zstd", level: 0,
		setting: "ferry cp --json (its level adapting, the default): producer, uploads and merger in one process, no Pub/Sub",
		run:     func(ctx context.Context, e *env) (verdict.Run, error) { return b.runCp(ctx, e, sources()) }}
}

// runCp runs one ferry cp and reads its row for the stage times.
// extra are more variables of its process.
func (b *Bench) runCp(ctx context.Context, e *env, sources []string, extra ...string) (verdict.Run, error) {
	results := filepath.Join(e.dir, "results.ndjson")
	vars := append(b.ferryVars(e, ferryOpts{}), "XDG_STATE_HOME="+filepath.Join(e.dir, "state"), "PUBSUB_EMULATOR_HOST=")
	vars = append(vars, extra...)
	argv := append([]string{filepath.Join(b.cfg.Bin, "ferry"), "cp", "--json", "--timeout", "30m", "--method", verdict.FerryCp,
		"--label", "bench_run=" + b.cfg.RunID, "--label", "tier=" + e.tier}, sources...)
	argv = append(argv, "gs://"+e.bucket+"/ferry")
	lf, err := os.Create(e.logs + "-ferry-cp.log")
	if err != nil {
		return verdict.Run{}, err
	}
	defer lf.Close()
	if e.ns != nil {
		argv, vars = e.ns.wrap(argv), e.ns.rewrite(vars)
	}
	var out bytes.Buffer
	t0 := time.Now()
	p, err := peer.Start(ctx, peer.Spec{Name: "ferry-cp", Argv: argv, Env: vars, Stdout: &out, Log: lf})
	if err != nil {
		return verdict.Run{}, err
	}
	pu, perr := p.Wait()
	r := verdict.Run{Wall: time.Since(t0), Procs: []verdict.Proc{pu}, StartedAt: t0}
	id, status, msg := decodeDone(out.Bytes())
	if perr != nil {
		return r, perr
	}
	if status != "ok" {
		return r, fmt.Errorf("transfer %s %s: %s", id, status, msg)
	}
	row, err := findRow(results, id)
	if err != nil {
		return r, err
	}
	r.Files, r.Bytes, r.Wire = row.Files, row.SizeBytes, row.WireBytes
	r.CompressMS, r.UploadMS, r.ComposeMS, r.VerifyMS = row.CompressMS, row.UploadMS, row.ComposeMS, row.VerifyMS
	r.Codec, r.Level, r.Levels = row.Codec, row.Level, row.Levels
	return r, nil
}

// fleet is a merger and workers running for a repeat: started by
// runFerry inside its clock, or before it (workload 9's running fleet).
type fleet struct {
	vars  []string
	procs []*peer.Process
	// agents are the ferry agents among procs, agent-1 first.
	agents []*peer.Process
	logs   []*os.File
}

// stop ends the fleet's processes and returns what each used.
func (f *fleet) stop() []verdict.Proc {
	var used []verdict.Proc
	for _, p := range f.procs {
		u, _ := p.Stop(30 * time.Second)
		used = append(used, u)
	}
	for _, lf := range f.logs {
		_ = lf.Close()
	}
	f.procs, f.logs, f.agents = nil, nil, nil
	return used
}

// ferryVars is the environment of a repeat's ferry processes.
func (b *Bench) ferryVars(e *env, o ferryOpts) []string {
	vars := append(e.stack.Environ(),
		"STORAGE_EMULATOR_HOST="+e.gcs,
		"FERRY_SPOOL_DIR="+filepath.Join(e.dir, "spool"),
		"FERRY_RESULTS_FILE="+filepath.Join(e.dir, "results.ndjson"),
		"FERRY_KEY_DIR="+filepath.Join(e.dir, "keys"),
		"FERRY_HTTP_ADDR=127.0.0.1:0",
		"FERRY_LOG_FORMAT=json",
		"FERRY_LOG_LEVEL=warn",
		"FERRY_SHUTDOWN_GRACE=5s",
	)
	return append(vars, o.env...)
}

// startFleet starts the merger and o.workers workers of a repeat.
func (b *Bench) startFleet(ctx context.Context, e *env, o ferryOpts) (*fleet, error) {
	f := &fleet{vars: b.ferryVars(e, o)}
	start := func(name string, argv []string, extra ...string) error {
		lf, err := os.Create(e.logs + "-" + name + ".log")
		if err != nil {
			return err
		}
		f.logs = append(f.logs, lf) // open until the process ends: closed by stop
		env := append(append([]string{}, f.vars...), extra...)
		if e.ns != nil && o.workersInNS && strings.HasPrefix(name, "worker") {
			argv, env = e.ns.wrap(argv), e.ns.rewrite(env)
		}
		p, err := peer.Start(ctx, peer.Spec{Name: name, Argv: argv, Env: env, Log: lf})
		if err != nil {
			return err
		}
		f.procs = append(f.procs, p)
		return nil
	}
	if err := start("merger", []string{filepath.Join(b.cfg.Bin, "merger")}); err != nil {
		f.stop()
		return nil, err
	}
	for i := 1; i <= o.agents; i++ {
		name := "agent-" + strconv.Itoa(i)
		env := append([]string{"FERRY_AGENT_ID=" + name, "FERRY_SOURCE_ROOTS=" + o.agentRoot}, o.agentEnv...)
		if err := start(name, []string{filepath.Join(b.cfg.Bin, "ferry"), "agent"}, env...); err != nil {
			f.stop()
			return nil, err
		}
		f.agents = append(f.agents, f.procs[len(f.procs)-1])
	}
	for i := 1; i <= o.workers; i++ {
		name := "worker-" + strconv.Itoa(i)
		if err := start(name, []string{filepath.Join(b.cfg.Bin, "worker")}, append([]string{"FERRY_WORKER_ID=" + name}, o.workerEnv...)...); err != nil {
			f.stop()
			return nil, err
		}
	}
	return f, nil
}

// runFerry runs one transfer with real processes and reads the merger's
// row for the stage times. The clock starts before the first process and
// stops when submit has the done event; with o.fleet, the merger and
// workers run already, and only the producer is inside the clock.
func (b *Bench) runFerry(ctx context.Context, e *env, o ferryOpts) (verdict.Run, error) {
	results := filepath.Join(e.dir, "results.ndjson")
	open := func(name string) (*os.File, error) { return os.Create(e.logs + "-" + name + ".log") }
	t0 := time.Now()
	fl := o.fleet
	if fl == nil {
		var err error
		if fl, err = b.startFleet(ctx, e, o); err != nil {
			return verdict.Run{}, err
		}
	}
	vars := fl.vars
	stopAll := func() []verdict.Proc {
		if o.fleet != nil {
			return nil // the caller's
		}
		return fl.stop()
	}
	argv := []string{filepath.Join(b.cfg.Bin, "producer"), "submit", "--wait", "--json", "--timeout", "30m",
		"--method", o.method, "--codec", o.codec, "--level", strconv.Itoa(o.level),
		"--label", "bench_run=" + b.cfg.RunID, "--label", "tier=" + o.tier}
	argv = append(append(append(argv, o.args...), o.sources...), "gs://"+e.bucket+"/"+o.prefix)
	var out bytes.Buffer
	lf, err := open("producer")
	if err != nil {
		stopAll()
		return verdict.Run{}, err
	}
	defer lf.Close()
	penv := vars
	if e.ns != nil {
		argv, penv = e.ns.wrap(argv), e.ns.rewrite(vars)
	}
	prod, err := peer.Start(ctx, peer.Spec{Name: "producer", Argv: argv, Env: penv, Stdout: &out, Log: lf})
	if err != nil {
		stopAll()
		return verdict.Run{}, err
	}
	beside := make(chan struct{})
	dctx, stopDuring := context.WithCancel(ctx)
	go func() {
		defer close(beside)
		if o.during != nil {
			o.during(dctx, fl, t0)
		}
	}()
	pu, perr := prod.Wait()
	wall := time.Since(t0)
	stopDuring()
	<-beside
	var serr error
	if perr == nil && o.settled != nil {
		serr = o.settled(ctx)
	}
	used := append([]verdict.Proc{pu}, stopAll()...)
	r := verdict.Run{Wall: wall, Procs: used, StartedAt: t0}
	id, status, msg := decodeDone(out.Bytes())
	if perr != nil {
		return r, perr
	}
	if status != "" && status != "ok" {
		return r, fmt.Errorf("transfer %s %s: %s", id, status, msg)
	}
	row, err := findRow(results, id)
	if err != nil {
		return r, err
	}
	r.Files, r.Bytes, r.Wire = row.Files, row.SizeBytes, row.WireBytes
	for _, a := range row.Agents {
		r.AgentBytes = append(r.AgentBytes, a.Bytes)
	}
	if row.TableBytes > 0 && len(o.sources) == 1 {
		// One CSV converted: its bytes are the source's, its parts
		// what is stored.
		r.Files, r.Bytes, r.Rows = 1, row.TableBytes, row.Rows
	}
	r.CompressMS, r.UploadMS, r.ComposeMS, r.VerifyMS = row.CompressMS, row.UploadMS, row.ComposeMS, row.VerifyMS
	r.Codec, r.Level, r.Levels = row.Codec, row.Level, row.Levels
	if row.Status != "ok" {
		return r, fmt.Errorf("transfer %s: merger row status %s: %s", id, row.Status, row.Error)
	}
	return r, serr
}

// findRow waits up to 10 s for the merger's row of transfer id.
func findRow(path, id string) (benchrow.Row, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		rows, err := benchrow.ReadFile(path)
		if err == nil {
			for _, r := range rows {
				if r.TransferID == id {
					return r, nil
				}
			}
		}
		if time.Now().After(deadline) {
			return benchrow.Row{}, fmt.Errorf("no row for transfer %q in %s: %v", id, path, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ---- peers ----

// cliMethod runs one command line per repeat; argv gets the bucket.
func (b *Bench) cliMethod(name string, role verdict.Role, setting string, tlsNeeded bool, codec string, level int, extraEnv []string,
	argv func(e *env) []string) method {
	return method{name: name, role: role, setting: setting, tls: tlsNeeded, codec: codec, level: level,
		run: func(ctx context.Context, e *env) (verdict.Run, error) {
			vars := append(b.cliEnv(e), extraEnv...)
			vars = append(vars, "STORAGE_EMULATOR_HOST="+e.gcs)
			return measure(ctx, e, name, argv(e), vars)
		}}
}

func gsURL(e *env, rest string) string { return "gs://" + e.bucket + "/" + rest }

// uploadPeers are workload 1's peers for one file, at their defaults and
// at the settings that suit large files best.
func (b *Bench) uploadPeers(f File) []method {
	base := filepath.Base(f.Path)
	dst := func(e *env) string { return gsURL(e, "peer/"+base) }
	gcloudPCU := []string{"CLOUDSDK_STORAGE_PARALLEL_COMPOSITE_UPLOAD_ENABLED=True"}
	return []method{
		b.cliMethod("go_simple", verdict.Peer, "cloud.google.com/go/storage Writer, one request (ChunkSize 0)", false, "none", 0, nil,
			func(e *env) []string { return []string{b.cfg.Self, "go-upload", "--mode", "simple", f.Path, dst(e)} }),
		b.cliMethod("go_resumable", verdict.Peer, "cloud.google.com/go/storage Writer, resumable in 16 MiB chunks (the library's default)", false, "none", 0, nil,
			func(e *env) []string { return []string{b.cfg.Self, "go-upload", "--mode", "resumable", f.Path, dst(e)} }),
		b.cliMethod("gsutil_cp", verdict.Peer, "gsutil cp (defaults; HTTPS to the server)", true, "none", 0, nil,
			func(e *env) []string { return []string{"gsutil", "cp", f.Path, dst(e)} }),
		b.cliMethod("gsutil_parallel", verdict.Peer, "gsutil -o GSUtil:parallel_composite_upload_threshold=150M cp", true, "none", 0, nil,
			func(e *env) []string {
				return []string{"gsutil", "-o", "GSUtil:parallel_composite_upload_threshold=150M", "cp", f.Path, dst(e)}
			}),
		b.cliMethod("gcloud_storage", verdict.Peer, "gcloud storage cp (defaults)", false, "none", 0, nil,
			func(e *env) []string { return []string{"gcloud", "storage", "cp", f.Path, dst(e)} }),
		b.cliMethod("gcloud_storage_pcu", verdict.Peer, "gcloud storage cp with storage/parallel_composite_upload_enabled=True (its threshold 150 MiB)", false, "none", 0, gcloudPCU,
			func(e *env) []string { return []string{"gcloud", "storage", "cp", f.Path, dst(e)} }),
		b.cliMethod("gcloud_storage_Z", verdict.Peer, "gcloud storage cp -Z (gzip on the wire and at rest)", false, "gzip", 0, nil,
			func(e *env) []string { return []string{"gcloud", "storage", "cp", "-Z", f.Path, dst(e)} }),
	}
}

// zstdCeiling is zstd -3 -T2 compressing the file to a file: what ferry's
// pipeline is measured against.
func (b *Bench) zstdCeiling(name string, f File) method {
	return method{name: name, role: verdict.Ceiling, codec: "zstd-cli", level: 3, setting: "zstd -3 -T2 FILE -o FILE.zst (no upload)",
		run: func(ctx context.Context, e *env) (verdict.Run, error) {
			out := filepath.Join(e.dir, "cli.zst")
			r, err := localTool(ctx, e, "zstd", []string{"zstd", "-3", "-T2", "-q", "-f", "-o", out, f.Path}, f, out)
			if err != nil {
				return r, err
			}
			dec, derr := decompress(ctx, e, "zstd", out)
			r.DecompressMS = dec.Milliseconds()
			return r, derr
		}}
}

// decompress times the stock CLI decompressing path to /dev/null.
func decompress(ctx context.Context, e *env, codec, path string) (time.Duration, error) {
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return 0, err
	}
	defer null.Close()
	argv := []string{"zstd", "-d", "-q", "-c", path}
	if codec == "gzip" {
		argv = []string{"gzip", "-d", "-c", path}
	}
	wall, _, err := peer.Measure(ctx, peer.Spec{Name: argv[0] + " -d", Argv: argv, Stdout: null})
	return wall, err
}

// verifyUpload checks what a method stored under prefix: files objects;
// for raw uploads their total size and, for one file, its CRC32C.
func verifyUpload(files int, bytes int64, one *File, prefix string) func(ctx context.Context, e *env, r *verdict.Run) error {
	return func(ctx context.Context, e *env, r *verdict.Run) error {
		if r.Role == verdict.Ceiling {
			return nil
		}
		p := prefix
		if r.Role == verdict.Ferry {
			p = "ferry/"
		}
		// Counted as the listing goes: the bench's own memory would
		// otherwise show in the peak RSS of the processes it forks next.
		var total int64
		var n int
		var first gcs.Attrs
		err := e.stack.Each(ctx, e.bucket, p, func(a gcs.Attrs) error {
			if n == 0 {
				first = a
			}
			n++
			total += a.Size
			return nil
		})
		if err != nil {
			return err
		}
		if n != files {
			return verifyf("%d objects under gs://%s/%s, want %d", n, e.bucket, p, files)
		}
		if r.Files == 0 {
			r.Files, r.Bytes = files, bytes
		}
		if r.Role == verdict.Ferry {
			return nil // the merger checked size and CRC32C of every object
		}
		r.Wire = total
		if r.Codec != "none" {
			return nil
		}
		if total != bytes {
			return verifyf("%d bytes under gs://%s/%s, want %d", total, e.bucket, p, bytes)
		}
		if one != nil {
			if c := first.CRC32C; c != one.CRC32C {
				return verifyf("gs://%s/%s has crc32c %08x, want the source's %08x", e.bucket, first.Name, first.CRC32C, one.CRC32C)
			}
		}
		return nil
	}
}

// ---- workloads ----

func (b *Bench) largeFile(ctx context.Context) error {
	for _, tier := range b.cfg.Sizes.Tiers {
		f := b.data.Tier[tier]
		src := func() []string { return []string{f.Path} }
		ms := []method{
			b.ferryMethod("ferry-1w", 1, "zstd", 0, src),
			b.ferryMethod("ferry-2w", 2, "zstd", 0, src),
			b.ferryMethod("ferry-4w", 4, "zstd", 0, src),
			b.cpMethod(src),
		}
		ms = append(ms, b.uploadPeers(f)...)
		ms = append(ms, b.zstdCeiling(verdict.ZstdCLI, f))
		one := f
		if err := b.runPlan(ctx, plan{workload: verdict.LargeFile, tier: tier, methods: ms, verify: verifyUpload(1, f.Size, &one, "peer/")}); err != nil {
			return err
		}
	}
	return nil
}

func (b *Bench) smallFiles(ctx context.Context) error {
	for _, t := range []Tree{b.data.Small, b.data.Big} {
		dir := t.Dir
		base := filepath.Base(dir)
		src := func() []string { return []string{dir} }
		ms := []method{
			b.ferryMethod("ferry-2w", 2, "zstd", 0, src),
			b.cpMethod(src),
			b.cliMethod("gsutil_m_cp_r", verdict.Peer, "gsutil -m cp -r DIR (HTTPS to the server)", true, "none", 0, nil,
				func(e *env) []string { return []string{"gsutil", "-m", "cp", "-r", dir, gsURL(e, "peer/")} }),
			b.cliMethod(verdict.GcloudRecurse, verdict.Peer, "gcloud storage cp -r DIR (defaults)", false, "none", 0, nil,
				func(e *env) []string { return []string{"gcloud", "storage", "cp", "-r", dir, gsURL(e, "peer/")} }),
			b.cliMethod(verdict.IdealClient, verdict.Peer, fmt.Sprintf("the smallest Go program that puts each file, %d requests in flight, nothing else: the server's ceiling", verdict.IdealParallel), false, "none", 0, nil,
				func(e *env) []string {
					return []string{b.cfg.Self, "put-tree", "--parallel", strconv.Itoa(verdict.IdealParallel), dir, gsURL(e, "peer/")}
				}),
		}
		_ = base
		if err := b.runPlan(ctx, plan{workload: verdict.SmallFiles, tier: t.Name, methods: ms, verify: verifyUpload(t.Files, t.Bytes, nil, "peer/")}); err != nil {
			return err
		}
	}
	return nil
}

// bigTree is workload 7: trees of many small files, one run of each
// method (a run of a million files takes minutes), with each process's
// peak RSS.
func (b *Bench) bigTree(ctx context.Context) error {
	for _, size := range b.cfg.Sizes.Trees {
		b.logf("writing a tree of %d files", size.Files)
		t, err := tinyTree(filepath.Join(b.cfg.RunDir, "data", fmt.Sprintf("tiny-%d", size.Files)), size.Files)
		if err != nil {
			return err
		}
		t.Name = fmt.Sprintf("files-%d", size.Files)
		b.data.Trees = append(b.data.Trees, t)
		dir := t.Dir
		src := func() []string { return []string{dir} }
		ms := []method{b.ferryMethod("ferry-2w", 2, "zstd", 0, src)}
		if size.Gcloud {
			ms = append(ms, b.cliMethod(verdict.GcloudRecurse, verdict.Peer, "gcloud storage cp -r DIR (defaults)", false, "none", 0, nil,
				func(e *env) []string { return []string{"gcloud", "storage", "cp", "-r", dir, gsURL(e, "peer/")} }))
		}
		if err := b.runPlan(ctx, plan{workload: verdict.BigTree, tier: t.Name, methods: ms, verify: verifyUpload(t.Files, t.Bytes, nil, "peer/"), repeats: 1}); err != nil {
			return err
		}
	}
	return b.realTree(ctx)
}

// realTree sends Config.RealTree, a real source tree (files of every size,
// from empty to tens of megabytes), with every process at its default
// memory budget: the row that shows a budget holding on real data, not
// only on generated files of one size.
func (b *Bench) realTree(ctx context.Context) error {
	if b.cfg.RealTree == "" {
		return nil
	}
	b.logf("counting the real tree %s", b.cfg.RealTree)
	t, err := treeOf(b.cfg.RealTree)
	if err != nil {
		return fmt.Errorf("the real tree %s: %w", b.cfg.RealTree, err)
	}
	t.Name = fmt.Sprintf("tree-%s-%d", filepath.Base(t.Dir), t.Files)
	b.data.Trees = append(b.data.Trees, t)
	dir := t.Dir
	src := func() []string { return []string{dir} }
	ms := []method{b.ferryMethod("ferry-2w", 2, "zstd", 0, src)}
	if b.cfg.Sizes.RealTreeGcloud {
		ms = append(ms, b.cliMethod(verdict.GcloudRecurse, verdict.Peer, "gcloud storage cp -r DIR (defaults)", false, "none", 0, nil,
			func(e *env) []string { return []string{"gcloud", "storage", "cp", "-r", dir, gsURL(e, "peer/")} }))
	}
	return b.runPlan(ctx, plan{workload: verdict.BigTree, tier: t.Name, methods: ms, verify: verifyUpload(t.Files, t.Bytes, nil, "peer/"), repeats: 1})
}

func (b *Bench) shapedLink(ctx context.Context) error {
	f := b.data.Shaped
	src := func() []string { return []string{f.Path} }
	base := filepath.Base(f.Path)
	dst := func(e *env) string { return gsURL(e, "peer/"+base) }
	ms := []method{
		b.ferryMethod("ferry-2w", 2, "zstd", 0, src),
		b.cpMethod(src),
		b.cliMethod("go_simple", verdict.Peer, "cloud.google.com/go/storage Writer, one request", false, "none", 0, nil,
			func(e *env) []string { return []string{b.cfg.Self, "go-upload", "--mode", "simple", f.Path, dst(e)} }),
		b.cliMethod("gcloud_storage", verdict.Peer, "gcloud storage cp (defaults)", false, "none", 0, nil,
			func(e *env) []string { return []string{"gcloud", "storage", "cp", f.Path, dst(e)} }),
	}
	// --max-rate holding: one worker capped at the link's rate, through a
	// link fast enough that only the cap can hold it there.
	capped := fmt.Sprintf("%.0fMB", b.cfg.LinkMBps)
	ms = append(ms, method{name: "ferry-1w-max-rate", role: verdict.Ferry, workers: 1, codec: "zstd", level: 0, link: 1e9,
		setting: "1 worker with FERRY_MAX_RATE=" + capped + ", through an unshaped (1 GB/s) link that measures",
		run: func(ctx context.Context, e *env) (verdict.Run, error) {
			return b.runFerry(ctx, e, ferryOpts{workers: 1, codec: "zstd", level: 0, sources: src(), prefix: "ferry",
				method: "ferry-1w-max-rate", tier: e.tier, workerEnv: []string{"FERRY_MAX_RATE=" + capped}})
		}})
	one := f
	return b.runPlan(ctx, plan{workload: verdict.Shaped, tier: fmt.Sprintf("shaped-%.0fMBps", b.cfg.LinkMBps), methods: ms,
		verify: verifyUpload(1, f.Size, &one, "peer/"), link: int64(b.cfg.LinkMBps * 1e6)})
}

// kernelLink is workload 6: the shaped file through a link the kernel
// shapes, at BENCH_LINK_MBPS and at a fast link, for both of ferry's
// transports and the single-stream peers. Without the privileges for a
// network namespace it says so, and workload 3's proxy rows stand in.
func (b *Bench) kernelLink(ctx context.Context) error {
	if err := probeNet(ctx); err != nil {
		b.logf("workload 6 (kernel-shaped link) skipped: %v; workload 3's proxy rows stand in", err)
		b.kernelSkipped = err
		return nil
	}
	f := b.data.Shaped
	src := func() []string { return []string{f.Path} }
	base := filepath.Base(f.Path)
	dst := func(e *env) string { return gsURL(e, "peer/"+base) }
	ferry := func(name, transport string, workersInNS bool, setting string) method {
		return method{name: name, role: verdict.Ferry, workers: 2, codec: "zstd", level: 0, setting: setting,
			run: func(ctx context.Context, e *env) (verdict.Run, error) {
				return b.runFerry(ctx, e, ferryOpts{workers: 2, codec: "zstd", level: 0, sources: src(), prefix: "ferry", method: name, tier: e.tier,
					env: []string{"FERRY_TRANSPORT=" + transport}, workersInNS: workersInNS})
			}}
	}
	for _, rate := range []float64{b.cfg.LinkMBps, 100} {
		ms := []method{
			ferry("ferry-2w", "spool", true, "FERRY_TRANSPORT=spool: producer and 2 workers behind the link (they share its spool), merger on the far side"),
			ferry("ferry-2w-pubsub", "pubsub", false, "FERRY_TRANSPORT=pubsub: the producer behind the link publishes every chunk; 2 workers and the merger on the far side"),
			b.cliMethod("go_simple", verdict.Peer, "cloud.google.com/go/storage Writer, one request, behind the link", false, "none", 0, nil,
				func(e *env) []string { return []string{b.cfg.Self, "go-upload", "--mode", "simple", f.Path, dst(e)} }),
			b.cliMethod("gcloud_storage", verdict.Peer, "gcloud storage cp (defaults), behind the link", false, "none", 0, nil,
				func(e *env) []string { return []string{"gcloud", "storage", "cp", f.Path, dst(e)} }),
		}
		one := f
		if err := b.runPlan(ctx, plan{workload: verdict.KernelLink, tier: fmt.Sprintf("kernel-%.0fMBps", rate), methods: ms,
			verify: verifyUpload(1, f.Size, &one, "peer/"), kernel: int64(rate * 1e6)}); err != nil {
			return err
		}
	}
	return nil
}

func (b *Bench) codecs(ctx context.Context) error {
	tier := b.cfg.Sizes.CodecTier
	f := b.data.Tier[tier]
	src := func() []string { return []string{f.Path} }
	var ms []method
	for _, c := range []struct {
		name  string
		codec string
		level int
	}{{verdict.FerryAdapt, "zstd", 0}, {"ferry-zstd1", "zstd", 1}, {verdict.FerryZstd3, "zstd", 3}, {"ferry-zstd6", "zstd", 6}, {"ferry-gzip6", "gzip", 6}, {verdict.FerryNone, "none", 0}} {
		m := b.ferryMethod(c.name, 2, c.codec, c.level, src)
		inner := m.run
		codec := c.codec
		m.run = func(ctx context.Context, e *env) (verdict.Run, error) {
			r, err := inner(ctx, e)
			if err != nil || codec == "none" {
				return r, err
			}
			objs, err := e.stack.List(ctx, e.bucket, "ferry/")
			if err != nil || len(objs) != 1 {
				return r, fmt.Errorf("the stored object under gs://%s/ferry/: %d objects, %v", e.bucket, len(objs), err)
			}
			local := filepath.Join(e.dir, filepath.Base(objs[0].Name))
			if err := e.stack.Download(ctx, e.bucket, objs[0].Name, local); err != nil {
				return r, err
			}
			dec, err := decompress(ctx, e, codec, local)
			r.DecompressMS = dec.Milliseconds()
			return r, err
		}
		ms = append(ms, m)
	}
	ms = append(ms, b.zstdCeiling(verdict.CodecZstdCLI, f))
	one := f
	if err := b.runPlan(ctx, plan{workload: verdict.Codecs, tier: tier, methods: ms, verify: verifyUpload(1, f.Size, &one, "peer/")}); err != nil {
		return err
	}
	// Incompressible data: zstd must cost little more than no codec.
	r := b.data.Random
	rsrc := func() []string { return []string{r.Path} }
	return b.runPlan(ctx, plan{workload: verdict.Codecs, tier: verdict.RandomTier, methods: []method{
		b.ferryMethod(verdict.FerryAdapt, 2, "zstd", 0, rsrc),
		b.ferryMethod(verdict.FerryNone, 2, "none", 0, rsrc),
	}, verify: verifyUpload(1, r.Size, nil, "peer/")})
}

// parquet is workload 8: the seed-like CSV of the codecs tier as ferry's
// zstd object and converted to Parquet, with the load job a --bq-table
// would run (written to the merger's loads file: there is no BigQuery
// here), beside zstd -3 of it and DuckDB's own Parquet writer; then the
// same with prices of 2 to 6 decimals.
func (b *Bench) parquet(ctx context.Context) error {
	tier := b.cfg.Sizes.CodecTier
	seed := b.data.Tier[tier]
	varied, err := variedDecimals(seed.Path, filepath.Join(b.cfg.RunDir, "data", "prices-varied-"+tier+".csv"))
	if err != nil {
		return fmt.Errorf("workload 8: the prices of varying decimals: %w", err)
	}
	for _, c := range []struct {
		tier string
		f    File
		all  bool
	}{{tier, seed, true}, {tier + "-varied-decimals", varied, false}} {
		if err := b.runPlan(ctx, plan{workload: verdict.Parquet, tier: c.tier, methods: b.parquetMethods(c.f, c.all)}); err != nil {
			return err
		}
	}
	return nil
}

// parquetMethods are workload 8's on f: ferry's zstd object, ferry's
// Parquet (and, with all, with snappy columns), zstd -3 and DuckDB.
func (b *Bench) parquetMethods(f File, all bool) []method {
	src := func() []string { return []string{f.Path} }
	ms := []method{b.ferryMethod(verdict.FerryAdapt, 2, "zstd", 0, src)}
	variants := []struct{ name, compression string }{{verdict.FerryParquet, "zstd"}}
	if all {
		variants = append(variants, struct{ name, compression string }{verdict.FerryParquetSnappy, "snappy"})
	}
	for _, c := range variants {
		compression := c.compression
		name := c.name
		ms = append(ms, method{name: name, role: verdict.Ferry, workers: 2, codec: "parquet",
			setting: fmt.Sprintf("producer submit --wait --convert parquet --parquet-compression %s --bq-table (loads file), 2 workers, merger", compression),
			run: func(ctx context.Context, e *env) (verdict.Run, error) {
				records, err := countLines(f.Path)
				if err != nil {
					return verdict.Run{}, err
				}
				records-- // the header
				loads := filepath.Join(e.dir, "loads.ndjson")
				r, err := b.runFerry(ctx, e, ferryOpts{workers: 2, codec: "zstd", sources: src(), prefix: "ferry", method: name, tier: e.tier,
					args: []string{"--convert", "parquet", "--parquet-compression", compression, "--bq-table", "bench-project.bench.prices"},
					env:  []string{"FERRY_BQ_LOAD_DATASETS=bench-project.bench", "FERRY_LOADS_FILE=" + loads}})
				if err != nil {
					return r, err
				}
				if r.Rows != records {
					return r, verifyf("the Parquet parts hold %d rows, the CSV %d records", r.Rows, records)
				}
				st, err := os.Stat(loads)
				if err != nil {
					return r, fmt.Errorf("no load job request: %w", err)
				}
				r.LoadBytes = st.Size()
				return r, nil
			}})
	}
	return append(ms, b.zstdCeiling(verdict.CodecZstdCLI, f), b.duckdbMethod(f))
}

// countLines counts the newlines of the file at path.
func countLines(path string) (int64, error) {
	fh, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer fh.Close()
	buf := make([]byte, 1<<20)
	var n int64
	for {
		k, err := fh.Read(buf)
		n += int64(bytes.Count(buf[:k], []byte{'\n'}))
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// ---- the shaped link ----

// linkProxy is a faultproxy with a rate limit in front of the server, and
// an HTTPS listener for gsutil.
type linkProxy struct {
	*faultproxy.Proxy
	host, tlsHost string
	certPEM       []byte
}

func startLink(target string, rate int64, withTLS bool) (*linkProxy, error) {
	p, err := faultproxy.Start(target, faultproxy.Plan{Rate: rate})
	if err != nil {
		return nil, err
	}
	l := &linkProxy{Proxy: p, host: strings.TrimPrefix(p.URL(), "http://")}
	if withTLS {
		cert, pem, err := localstack.SelfSignedCert()
		if err != nil {
			_ = p.Close()
			return nil, err
		}
		if l.tlsHost, err = p.ServeTLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}); err != nil {
			_ = p.Close()
			return nil, err
		}
		l.certPEM = pem
	}
	return l, nil
}

// certFile writes the proxy's certificate into dir and returns its path.
func (l *linkProxy) certFile(dir string) string {
	path := filepath.Join(dir, "link-cert.pem")
	_ = os.WriteFile(path, l.certPEM, 0o644)
	return path
}
