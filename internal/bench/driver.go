package bench

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/ferry-dev/ferry/internal/bench/peer"
	"github.com/ferry-dev/ferry/internal/bench/verdict"
	"github.com/ferry-dev/ferry/internal/benchrow"
	"github.com/ferry-dev/ferry/internal/faultproxy"
	"github.com/ferry-dev/ferry/internal/latency"
)

// Config is one bench run's configuration.
type Config struct {
	Bin     string // ferry's binaries (bin/)
	Self    string // this program, for the Go upload peers
	RunDir  string // data, logs and scratch (.run/bench)
	Rows    string // NDJSON file the rows are appended to
	Repeats int
	// MethodBudget, when positive, ends a method's repeats once its runs
	// together took this long (at least one runs).
	MethodBudget time.Duration
	Sizes        Sizes
	// Workloads to run, by name; empty: all.
	Workloads []string
	LinkMBps  float64
	// GCSRoot, when set, is a directory (a tmpfs) under which each
	// method's fresh server keeps its objects with fake-gcs-server's
	// filesystem backend, whose per-request cost does not grow with the
	// bucket; empty: the memory backend, which scans the bucket on every
	// write and so measures itself more than the clients.
	GCSRoot string
	// RealTree is a real source tree workload 7 also sends, with the
	// processes' default memory budgets; empty: none.
	RealTree string
	RunID    string
	Version  string
	Out      io.Writer // tables
	Log      io.Writer // progress
}

// Bench runs workloads and keeps their runs.
type Bench struct {
	cfg  Config
	mu   sync.Mutex
	runs []verdict.Run
	data *Data
	// kernelSkipped says why workload 6 could not run.
	kernelSkipped error
	// idle is what an idle worker and merger used (idleFleet), or why not.
	idle    []verdict.IdleCPU
	idleErr error
}

// New returns a Bench for cfg.
func New(cfg Config) *Bench { return &Bench{cfg: cfg} }

func (b *Bench) logf(format string, a ...any) {
	fmt.Fprintf(b.cfg.Log, "bench: "+format+"\n", a...)
}

func (b *Bench) wants(workload string) bool {
	if len(b.cfg.Workloads) == 0 {
		return true
	}
	for _, w := range b.cfg.Workloads {
		if w == workload {
			return true
		}
	}
	return false
}

// record keeps a run and appends its row to the rows file at once, so an
// interrupted bench keeps what it measured.
func (b *Bench) record(r verdict.Run) error {
	b.mu.Lock()
	b.runs = append(b.runs, r)
	b.mu.Unlock()
	state := "ok"
	if r.Err != nil {
		state = "FAILED: " + verdict.OneLine(r.Err.Error(), 300)
	}
	b.logf("%s %s %s #%d: %s s %s", r.Workload, r.Tier, r.Method, r.Repeat, verdict.Secs(r.Wall.Seconds()), state)
	line, err := benchrow.NDJSON([]benchrow.Row{r.Row(b.cfg.RunID, b.cfg.Version)})
	if err != nil {
		return err
	}
	f, err := os.OpenFile(b.cfg.Rows, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("rows file: %w", err)
	}
	if _, err := f.Write(line); err != nil {
		f.Close()
		return fmt.Errorf("rows file %s: %w", b.cfg.Rows, err)
	}
	return f.Close()
}

// Run runs the chosen workloads, prints their tables and the goals, and
// returns an error only when the bench itself could not run (a failed
// method is a failed row, not an error).
func (b *Bench) Run(ctx context.Context) error {
	if err := os.MkdirAll(filepath.Dir(b.cfg.Rows), 0o755); err != nil {
		return err
	}
	b.logf("preparing data in %s", filepath.Join(b.cfg.RunDir, "data"))
	d, err := PrepareData(ctx, b.cfg.Bin, filepath.Join(b.cfg.RunDir, "data"), b.cfg.Sizes)
	if err != nil {
		return err
	}
	b.data = d
	b.warmUp(ctx)
	steps := []struct {
		name string
		run  func(context.Context) error
	}{
		{verdict.LargeFile, b.largeFile},
		{verdict.SmallFiles, b.smallFiles},
		{verdict.Shaped, b.shapedLink},
		{verdict.Codecs, b.codecs},
		{verdict.Restore, b.restore},
		{verdict.KernelLink, b.kernelLink},
		{verdict.BigTree, b.bigTree},
		{verdict.Parquet, b.parquet},
		{verdict.Append, b.appends},
		{verdict.Pushback, b.pushback},
		{verdict.Latency, b.latency},
		{verdict.Pool, b.pool},
	}
	for _, s := range steps {
		if !b.wants(s.name) {
			continue
		}
		if err := s.run(ctx); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	if ctx.Err() == nil {
		b.idle, b.idleErr = b.idleFleet(ctx, idleWindow)
	}
	b.Print(b.cfg.Out)
	return nil
}

// idleWindow is how long idleFleet watches a fleet with nothing to do.
const idleWindow = 30 * time.Second

// idleFleet starts a worker and a merger on a fresh local stack with
// nothing to receive, lets them run for window, and returns what each
// used: the cost of a fleet between transfers.
func (b *Bench) idleFleet(ctx context.Context, window time.Duration) ([]verdict.IdleCPU, error) {
	dir := filepath.Join(b.cfg.RunDir, "idle")
	log, err := os.Create(filepath.Join(b.cfg.RunDir, "idle.log"))
	if err != nil {
		return nil, err
	}
	defer log.Close()
	st, err := StartStack(ctx, StackOptions{Bin: b.cfg.Bin, Dir: filepath.Join(dir, "stack"), PubSub: true, Log: log})
	if err != nil {
		return nil, err
	}
	defer func() { _ = st.Stop() }()
	vars := append(st.Environ(), "FERRY_SPOOL_DIR="+filepath.Join(dir, "spool"), "FERRY_RESULTS_FILE="+filepath.Join(dir, "results.ndjson"),
		"FERRY_HTTP_ADDR=127.0.0.1:0", "FERRY_LOG_LEVEL=warn", "FERRY_SHUTDOWN_GRACE=5s")
	var procs []*peer.Process
	for _, name := range []string{"worker", "merger"} {
		p, err := peer.Start(ctx, peer.Spec{Name: name, Argv: []string{filepath.Join(b.cfg.Bin, name)}, Env: vars, Log: log})
		if err != nil {
			return nil, err
		}
		procs = append(procs, p)
	}
	b.logf("watching an idle worker and merger for %v", window)
	select {
	case <-time.After(window):
	case <-ctx.Done():
	}
	var out []verdict.IdleCPU
	for _, p := range procs {
		u, err := p.Stop(10 * time.Second)
		if err != nil {
			return nil, err
		}
		out = append(out, verdict.IdleCPU{Name: u.Name, CPU: u.CPU, Window: window})
	}
	return out, nil
}

// Print writes every table and the goals.
func (b *Bench) Print(w io.Writer) {
	rs := verdict.Group(b.runs)
	for _, tier := range verdict.Tiers(rs, verdict.LargeFile) {
		verdict.LargeFileTable(rs, tier).Write(w)
	}
	for _, tier := range verdict.Tiers(rs, verdict.SmallFiles) {
		verdict.SmallFilesTable(rs, tier, verdict.GcloudRecurse).Write(w)
	}
	if len(verdict.Select(rs, verdict.Shaped, "")) > 0 {
		verdict.ShapedTable(rs, b.cfg.LinkMBps).Write(w)
	}
	for _, tier := range verdict.Tiers(rs, verdict.Codecs) {
		verdict.CodecTable(rs, tier).Write(w)
	}
	if b.wants(verdict.Restore) && len(verdict.Select(rs, verdict.Restore, "")) == 0 {
		fmt.Fprintf(w, "\n== Workload 5: restore\n  skipped: no restore (%s is missing)\n", filepath.Join(b.cfg.Bin, "restore"))
	}
	for _, tier := range verdict.Tiers(rs, verdict.Restore) {
		verdict.RestoreTable(rs, tier).Write(w)
	}
	for _, tier := range verdict.Tiers(rs, verdict.KernelLink) {
		verdict.KernelTable(rs, tier, verdict.KernelRate(tier)).Write(w)
	}
	if trees := verdict.Tiers(rs, verdict.BigTree); len(trees) > 0 {
		verdict.BigTreeTable(rs, trees).Write(w)
	}
	for _, tier := range verdict.Tiers(rs, verdict.Parquet) {
		verdict.ParquetTable(rs, tier).Write(w)
	}
	for _, tier := range verdict.Tiers(rs, verdict.Append) {
		verdict.AppendTable(rs, tier).Write(w)
	}
	for _, tier := range verdict.Tiers(rs, verdict.Pushback) {
		verdict.PushbackTable(rs, tier).Write(w)
	}
	for _, tier := range verdict.Tiers(rs, verdict.Latency) {
		verdict.LatencyTable(rs, tier).Write(w)
	}
	for _, tier := range verdict.Tiers(rs, verdict.Pool) {
		verdict.PoolTable(rs, tier).Write(w)
	}
	if b.kernelSkipped != nil {
		fmt.Fprintf(w, "\n== Workload 6: a link shaped by the kernel\n  skipped: %v; workload 3's proxy rows stand in\n", b.kernelSkipped)
	}
	for _, wl := range []string{verdict.LargeFile, verdict.SmallFiles, verdict.Shaped, verdict.Codecs, verdict.Restore, verdict.KernelLink, verdict.BigTree, verdict.Parquet, verdict.Append, verdict.Pushback, verdict.Latency, verdict.Pool} {
		for _, tier := range verdict.Tiers(rs, wl) {
			verdict.CPUTable(rs, wl, tier).Write(w)
		}
	}
	switch {
	case b.idleErr != nil:
		fmt.Fprintf(w, "\n== CPU of an idle fleet\n  not measured: %v\n", b.idleErr)
	case len(b.idle) > 0:
		verdict.IdleTable(b.idle).Write(w)
	}
	verdict.WriteGoals(w, verdict.Goals(rs, b.cfg.LinkMBps, b.data.smallTier(), DefaultLimits()))
	fmt.Fprintf(w, "\nrows appended to %s (bench_run %s); make report shows them beside ferry's own\n", b.cfg.Rows, b.cfg.RunID)
}

// warmUp runs each CLI once, untimed, so that no method pays for creating
// gcloud's configuration directory or for a cold page cache of its
// installation.
func (b *Bench) warmUp(ctx context.Context) {
	for _, argv := range [][]string{{"gcloud", "version"}, {"gsutil", "version"}, {"zstd", "--version"}} {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		if _, err := peer.Output(ctx, b.cliEnv(nil), argv...); err != nil {
			b.logf("warm-up %s: %v", argv[0], err)
		}
		cancel()
	}
}

// method is one way of doing a workload's job.
type method struct {
	name    string
	role    verdict.Role
	setting string
	workers int    // ferry
	codec   string // ferry: --codec; peers: what they store
	level   int
	tls     bool // gsutil: needs the HTTPS listener
	// link, when positive, replaces the plan's link rate for this method
	// (bytes per second): a method that caps its own rate goes through a
	// link that only measures.
	link int64
	// run does one repeat. It gets a fresh empty bucket.
	run func(ctx context.Context, e *env) (verdict.Run, error)
}

// env is what one repeat runs against.
type env struct {
	stack  *Stack
	bucket string
	// gcs is the storage endpoint the method must use (the server, or the
	// shaped link in front of it): host:port, and the HTTPS one.
	gcs, gcsTLS string
	cert        string
	boto        string
	dir         string // scratch directory of the repeat
	logs        string // log file prefix
	tier        string
	workload    string
	rep         int
	// ns, when set, is the kernel-shaped link: the submitting side runs
	// in it (shapedNet.wrap, .rewrite).
	ns *shapedNet
}

// plan is one workload × tier: its methods and what to check afterwards.
type plan struct {
	workload, tier string
	methods        []method
	// verify checks what a successful repeat stored under the bucket.
	verify func(ctx context.Context, e *env, r *verdict.Run) error
	// link, when positive, puts a rate-limited proxy between every method
	// and the server (bytes per second).
	link int64
	// kernel, when positive, runs each method's submitting side in a
	// network namespace whose link sends at this rate (bytes per second).
	kernel int64
	// repeats, when positive, replaces Config.Repeats (a workload whose
	// one run takes minutes).
	repeats int
	// relay puts a relay that delays every byte by half of rtt each way
	// between every method and the server (package latency), and counts
	// the connections each opens.
	relay bool
	rtt   time.Duration
	// writeLimit, when positive, puts a proxy between every method and
	// the server that answers 429 to writes (every request but a read)
	// beyond writeLimit a second, as GCS does beyond a bucket's limit.
	writeLimit float64
}

func (b *Bench) repeats(p plan) int {
	if p.repeats > 0 {
		return min(p.repeats, b.cfg.Repeats)
	}
	return b.cfg.Repeats
}

// runPlan runs every method of p, each in a fresh localstack, each repeat
// in a new bucket, and records the runs.
func (b *Bench) runPlan(ctx context.Context, p plan) error {
	for _, m := range p.methods {
		if err := b.runMethod(ctx, p, m); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}

func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
			return r
		case r >= 'A' && r <= 'Z':
			return r + ('a' - 'A')
		}
		return '-'
	}, s)
}

func (b *Bench) runMethod(ctx context.Context, p plan, m method) error {
	dir := filepath.Join(b.cfg.RunDir, "work", safeName(p.workload+"-"+p.tier+"-"+m.name))
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	logDir := filepath.Join(b.cfg.RunDir, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return err
	}
	stackLog, err := os.Create(filepath.Join(logDir, safeName(p.workload+"-"+p.tier+"-"+m.name)+"-localstack.log"))
	if err != nil {
		return err
	}
	defer stackLog.Close()
	gcsRoot := ""
	if b.cfg.GCSRoot != "" {
		gcsRoot = filepath.Join(b.cfg.GCSRoot, safeName(p.workload+"-"+p.tier+"-"+m.name))
		if err := os.RemoveAll(gcsRoot); err != nil {
			return err
		}
		defer func() { _ = os.RemoveAll(gcsRoot) }() // a tmpfs holds it in memory
	}
	st, err := StartStack(ctx, StackOptions{Bin: b.cfg.Bin, Dir: filepath.Join(dir, "stack"), PubSub: m.role == verdict.Ferry,
		TLS: m.tls, Compose: "fast", GCSRoot: gcsRoot, Log: stackLog})
	if err != nil {
		// The stack is the bench's, not the method's: still a failed row,
		// so the table shows it.
		for rep := 1; rep <= b.repeats(p); rep++ {
			if rerr := b.record(b.failed(p, m, rep, err)); rerr != nil {
				return rerr
			}
		}
		return nil
	}
	defer func() { _ = st.Stop() }()
	boto := ""
	if m.tls {
		if boto, err = b.writeBoto(dir, st.Env["LOCALSTACK_GCS_TLS_HOST"], st.Env["LOCALSTACK_GCS_CERT"]); err != nil {
			return err
		}
	}
	var spent time.Duration
	for rep := 1; rep <= b.repeats(p); rep++ {
		r := b.runRepeat(ctx, p, m, st, dir, logDir, boto, rep)
		if err := b.record(r); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if b.spent(&spent, r, b.repeats(p)) {
			break
		}
	}
	return nil
}

// spent adds r's wall time to what its method has spent and reports
// whether the method's budget is used up before its last repeat: a slow
// method (gcloud on 5,000 files, a peer through a 7 MB/s link) then runs
// fewer times, and the table's runs column says how many.
func (b *Bench) spent(total *time.Duration, r verdict.Run, repeats int) bool {
	*total += r.Wall
	if b.cfg.MethodBudget <= 0 || *total < b.cfg.MethodBudget || r.Repeat >= repeats {
		return false
	}
	b.logf("%s %s %s: %d of %d repeats, its runs took %s (budget %s)", r.Workload, r.Tier, r.Method, r.Repeat, repeats,
		total.Round(time.Second), b.cfg.MethodBudget)
	return true
}

func (b *Bench) failed(p plan, m method, rep int, err error) verdict.Run {
	return verdict.Run{Workload: p.workload, Tier: p.tier, Method: m.name, Role: m.role, Setting: m.setting, Repeat: rep,
		Workers: m.workers, Codec: m.codec, Level: m.level, StartedAt: time.Now(), Err: err}
}

func (b *Bench) runRepeat(ctx context.Context, p plan, m method, st *Stack, dir, logDir, boto string, rep int) verdict.Run {
	e := &env{stack: st, bucket: safeName(fmt.Sprintf("b-%s-%d", m.name, rep)), gcs: st.Env["STORAGE_EMULATOR_HOST"],
		gcsTLS: st.Env["LOCALSTACK_GCS_TLS_HOST"], cert: st.Env["LOCALSTACK_GCS_CERT"], boto: boto,
		dir: filepath.Join(dir, fmt.Sprintf("rep-%d", rep)), logs: filepath.Join(logDir, safeName(fmt.Sprintf("%s-%s-%s-%d", p.workload, p.tier, m.name, rep))),
		tier: p.tier, workload: p.workload, rep: rep}
	fail := func(err error) verdict.Run { return b.failed(p, m, rep, err) }
	if err := os.MkdirAll(e.dir, 0o755); err != nil {
		return fail(err)
	}
	defer os.RemoveAll(e.dir)
	if err := st.CreateBucket(ctx, e.bucket); err != nil {
		return fail(err)
	}
	var link *linkProxy
	if rate := cmp.Or(m.link, p.link); p.link > 0 {
		var err error
		if link, err = startLink(st.GCS(), rate, m.tls); err != nil {
			return fail(err)
		}
		defer func() { _ = link.Close() }()
		e.gcs, e.gcsTLS = link.host, link.tlsHost
		if m.tls {
			if e.boto, err = b.writeBoto(e.dir, link.tlsHost, link.certFile(e.dir)); err != nil {
				return fail(err)
			}
			e.cert = link.certFile(e.dir)
		}
	}
	var limiter *faultproxy.Proxy
	if p.writeLimit > 0 {
		var err error
		limiter, err = faultproxy.Start(st.GCS(), faultproxy.Plan{WriteLimit: p.writeLimit,
			Match: func(r *http.Request) bool { return r.Method != http.MethodGet }})
		if err != nil {
			return fail(err)
		}
		defer func() { _ = limiter.Close() }()
		e.gcs = strings.TrimPrefix(limiter.URL(), "http://")
	}
	var relay *latency.Relay
	if p.relay {
		var err error
		if relay, err = latency.Start(e.gcs, p.rtt/2); err != nil {
			return fail(err)
		}
		defer func() { _ = relay.Close() }()
		e.gcs = relay.Addr()
	}
	var sentBefore int64
	if p.kernel > 0 {
		var ports []string
		for _, k := range []string{"STORAGE_EMULATOR_HOST", "PUBSUB_EMULATOR_HOST", "LOCALSTACK_GCS_TLS_HOST"} {
			if _, port, err := net.SplitHostPort(st.Env[k]); err == nil {
				ports = append(ports, port)
			}
		}
		ns, err := startNet(ctx, p.kernel, ports)
		if err != nil {
			return fail(err)
		}
		defer ns.Close()
		e.ns = ns
		if sentBefore, err = ns.sent(ctx); err != nil {
			return fail(err)
		}
	}
	before, _ := st.Stats(ctx)
	cpu0 := st.CPU()
	r, err := m.run(ctx, e)
	serverCPU := st.CPU() - cpu0
	after, _ := st.Stats(ctx)
	if e.ns != nil {
		if sent, serr := e.ns.sent(ctx); serr == nil && r.Wall > 0 {
			r.LinkBytes = sent - sentBefore
			r.LinkMBps = float64(r.LinkBytes) / 1e6 / r.Wall.Seconds()
		}
	}
	r.Workload, r.Tier, r.Method, r.Role, r.Setting, r.Repeat = p.workload, p.tier, m.name, m.role, m.setting, rep
	if r.Codec == "" {
		r.Codec, r.Level = m.codec, m.level
	}
	if m.role == verdict.Ferry {
		r.Workers = m.workers
	}
	r.ServerCPU = serverCPU
	r.ServerComposeMS = after.ComposeMS - before.ComposeMS
	r.ServerComposeCalls = after.ComposeCalls - before.ComposeCalls
	if link != nil {
		c := link.Counts()
		r.LinkBytes, r.LinkMBps = c.Up.Bytes, c.Up.MBps()
	}
	if relay != nil {
		r.Connections = relay.Accepted()
	}
	if limiter != nil {
		c := limiter.Counts()
		r.WritesPassed, r.Refused = c.Matched-c.Status429, c.Status429
		r.Pushbacks = readPushbacks(e.logs)
	}
	if err == nil && p.verify != nil {
		err = p.verify(ctx, e, &r)
	}
	r.Err = err
	// Free the server's memory before the next repeat (untimed).
	if rerr := st.Reset(ctx); rerr != nil && r.Err == nil {
		r.Err = fmt.Errorf("reset the server after the run: %w", rerr)
	}
	return r
}

// writeBoto writes gsutil's configuration for an HTTPS endpoint with the
// self-signed certificate, and returns its path.
func (b *Bench) writeBoto(dir, hostPort, cert string) (string, error) {
	host, port, ok := strings.Cut(hostPort, ":")
	if !ok {
		return "", fmt.Errorf("gsutil endpoint %q: want host:port", hostPort)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "boto.cfg")
	cfg := fmt.Sprintf(`[Credentials]
gs_json_host = %[1]s
gs_json_port = %[2]s
gs_host = %[1]s
gs_port = %[2]s

[Boto]
https_validate_certificates = True
ca_certificates_file = %[3]s
num_retries = 2
max_retry_delay = 2

[GSUtil]
default_project_id = ferry-local
prefer_api = json
software_update_check_period = 0
`, host, port, cert)
	return path, os.WriteFile(path, []byte(cfg), 0o644)
}

// cliEnv is the environment of gcloud and gsutil: the fake server as the
// storage endpoint, no credentials, no prompts, no update checks or usage
// reports, and a configuration directory of the bench's own.
func (b *Bench) cliEnv(e *env) []string {
	vars := []string{
		"CLOUDSDK_CONFIG=" + filepath.Join(b.cfg.RunDir, "gcloud-config"),
		"CLOUDSDK_AUTH_DISABLE_CREDENTIALS=true",
		"CLOUDSDK_CORE_PROJECT=ferry-local",
		"CLOUDSDK_CORE_DISABLE_PROMPTS=1",
		"CLOUDSDK_CORE_DISABLE_USAGE_REPORTING=true",
		"CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK=true",
		"CLOUDSDK_CORE_PASS_CREDENTIALS_TO_GSUTIL=false",
		"NO_GCE_CHECK=True",
	}
	if e != nil {
		vars = append(vars, "CLOUDSDK_API_ENDPOINT_OVERRIDES_STORAGE=http://"+e.gcs+"/")
		if e.boto != "" {
			// gcloud's gsutil wrapper passes its own CA file to gsutil;
			// this one makes it pass the server's certificate.
			vars = append(vars, "BOTO_CONFIG="+e.boto, "CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE="+e.cert)
		}
	}
	return vars
}

// measure runs one command as one method's repeat: its wall time and what
// its process tree used.
func measure(ctx context.Context, e *env, name string, argv []string, vars []string) (verdict.Run, error) {
	logf, err := os.Create(e.logs + "-" + name + ".log")
	if err != nil {
		return verdict.Run{}, err
	}
	defer logf.Close()
	t0 := time.Now()
	if e.ns != nil {
		argv, vars = e.ns.wrap(argv), e.ns.rewrite(vars)
	}
	wall, proc, err := peer.Measure(ctx, peer.Spec{Name: name, Argv: argv, Env: vars, Log: logf, Stdout: logf})
	return verdict.Run{Wall: wall, Procs: []verdict.Proc{proc}, StartedAt: t0}, err
}

// errVerify marks a run whose result was wrong.
var errVerify = errors.New("verify")

func verifyf(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errVerify}, a...)...)
}

// decodeDone reads the one document producer submit --wait --json and
// ferry cp --json print: the done event, or the error that came first.
func decodeDone(out []byte) (id string, status, msg string) {
	var done struct {
		TransferID string `json:"transfer_id"`
		Status     string `json:"status"`
		Error      string `json:"error"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(out), &done); err != nil {
		return "", "", fmt.Sprintf("not one JSON document (%v): %s", err, verdict.OneLine(string(out), 200))
	}
	return done.TransferID, done.Status, done.Error
}
