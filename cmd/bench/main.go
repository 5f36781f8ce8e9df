// Command bench is make bench: ferry beside its peers (gcloud, gsutil,
// single-stream Go uploads, the zstd CLI) on the same data, against the same
// fake-gcs-server build, in the same run. See internal/bench and the
// docs/performance.md.
package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ferry-dev/ferry/internal/bench"
	"github.com/ferry-dev/ferry/internal/bench/peer"
	"github.com/ferry-dev/ferry/internal/bench/verdict"
	"github.com/ferry-dev/ferry/internal/cli"
	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/latency"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

const about = `bench — ferry beside its peers, in one run on one machine.

Workloads: 1 large-file, 2 small-files, 3 shaped-link, 4 codecs, 5 restore,
6 kernel-link, 7 big-tree (100,000 small files; 1,000,000 with BENCH_FULL;
and a real source tree, the Go distribution's by default, with the default
memory budgets, beside gcloud storage cp -r), 8 parquet (the codecs tier's
CSV as ferry's zstd object and converted to Parquet, size and CPU per core),
9 append (that CSV grown by 1 % and sent again: ferry's tail-only append
beside gcloud storage rsync and gsutil rsync), 10 pushback (the 5,000
small files behind a proxy answering 429 beyond 150 and 1,000 writes/s, as
GCS does beyond a bucket's limit: ferry's fleet and ferry cp, wall time
against the ideal, the 429s and the rate each process settled at),
11 latency (the 5,000 files and the restore tier's file through a relay
delaying every byte, at 0, 10, 40 and 80 ms round trip: ferry cp and ferry
restore beside the ideal client at 16 and 128 in flight, one plain upload
and gcloud storage cp; connections opened, requests in flight), 12 pool
(one pooled transfer of the 5,000 files and one of the largest file, by 1,
2 and 4 ferry agents each capped at 2 MiB/s: rate against agents × link,
chunk bytes through Pub/Sub).
Every method runs in a fresh localstack, each repeat into an empty bucket of
its own; all of a method's processes start inside its clock. Rows are
appended to --rows in the results schema; make report shows them.

Environment: BENCH_QUICK=1 (small data: a smoke test), BENCH_FULL=1 (adds
the 1.2 GB tier and a tree of a million files), BENCH_REPEATS (default 3; 2 with BENCH_QUICK),
BENCH_WORKLOADS (e.g. "1,3" or "large-file,shaped-link"), BENCH_LINK_MBPS
(default 7). Flags override them.

Exit status: 0 success, 1 the run failed, 2 a usage error.`

func main() { cli.Main(command()) }

// run is main with its arguments and outputs given, for tests.
func run(args []string, stdout, stderr io.Writer) int {
	return cli.Run(context.Background(), command(), args, stdout, stderr)
}

// benchFlags are bench's flags; unset ones take the BENCH_* variables.
type benchFlags struct {
	runDir, rows, bin, workloads string
	summary                      string
	quick, full                  bool
	repeats                      int
	budget                       time.Duration
	link                         float64
	gcs, tree                    string
}

func command() *cobra.Command {
	f := &benchFlags{}
	root := &cobra.Command{
		Use:     "bench [flags]",
		Short:   "ferry beside gcloud, gsutil, Go uploads and zstd, in one run",
		Long:    about,
		Version: version,
		Args:    cli.NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return f.run(cmd) },
	}
	fs := root.Flags()
	fs.SortFlags = false
	fs.StringVar(&f.runDir, "run-dir", ".run/bench", "data, logs and scratch `DIR`")
	fs.StringVar(&f.rows, "rows", ".run/bench.ndjson", "NDJSON `FILE` the rows are appended to")
	fs.StringVar(&f.bin, "bin", "bin", "`DIR` of ferry's binaries")
	fs.StringVar(&f.summary, "summary", ".run/bench-summary.md", "Markdown `FILE` of this run's goals, dated, for the README (bench readme puts it there)")
	fs.BoolVar(&f.quick, "quick", false, "small data, to prove the bench works (figures mean little; BENCH_QUICK)")
	fs.BoolVar(&f.full, "full", false, "add the 1.2 GB tier (BENCH_FULL)")
	fs.IntVar(&f.repeats, "repeats", 0, "repeats per method (default 3, 2 with --quick; BENCH_REPEATS)")
	fs.DurationVar(&f.budget, "method-budget", 20*time.Second, "a method repeats only while its runs together took less than this, so a slow peer runs once; 0: every repeat, as --full does (BENCH_METHOD_BUDGET)")
	fs.StringVar(&f.workloads, "workloads", "", "comma-separated workloads by number or name (default all; BENCH_WORKLOADS)")
	fs.Float64Var(&f.link, "link-mbps", 7, "the shaped link's rate in MB/s (BENCH_LINK_MBPS)")
	fs.StringVar(&f.tree, "tree", "goroot", "a real source `DIR` workload 7 also sends with the default budgets (BENCH_TREE): a directory, goroot (go env GOROOT: 15,000 files of every size, on any machine that builds ferry) or none")
	fs.StringVar(&f.gcs, "gcs", "fs", "fake-gcs-server backend of every method's server (BENCH_GCS): fs (files on a tmpfs; per-request cost does not grow with the bucket) or memory (scans the bucket on every write)")
	cli.Env(root, &config.Bench{})
	root.AddCommand(goUploadCommand(), putTreeCommand(), relayCommand(), readmeCommand())
	return root
}

func putTreeCommand() *cobra.Command {
	var parallel int
	cmd := &cobra.Command{
		Use:   "put-tree [--parallel N] DIR gs://BUCKET/PREFIX",
		Short: "the ideal client of the many-files workload (used by bench)",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 2 {
				return cli.Usagef("put-tree needs DIR and gs://BUCKET/PREFIX")
			}
			if parallel < 1 || parallel > 1024 {
				return cli.Usagef("--parallel %d: want 1 to 1024", parallel)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := context.WithTimeout(cmd.Context(), time.Hour)
			defer stop()
			if err := peer.PutTree(ctx, parallel, args[0], args[1]); err != nil {
				return fmt.Errorf("put-tree: %w", err)
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&parallel, "parallel", verdict.IdealParallel, "requests in flight")
	return cmd
}

func relayCommand() *cobra.Command {
	var rtt time.Duration
	cmd := &cobra.Command{
		Use:   "relay [--rtt D] HOST:PORT",
		Short: "make a loopback server far: relay to it with a round trip of D, until interrupted",
		Long: `relay listens on a loopback port, prints it, and forwards every connection
to HOST:PORT with half of --rtt added each way (and one round trip more
for a new connection, as TCP's handshake costs). Point a client at the
printed address (STORAGE_EMULATOR_HOST=…) to see it as a user far from
GCS would. On exit it prints how many connections the clients opened.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return cli.Usagef("relay needs HOST:PORT")
			}
			if rtt < 0 || rtt > time.Minute {
				return cli.Usagef("--rtt %v: want 0 to 1m", rtt)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := latency.Start(args[0], rtt/2)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), r.Addr())
			<-cmd.Context().Done()
			fmt.Fprintf(cmd.ErrOrStderr(), "relay %s -> %s: %d connections opened\n", r.Addr(), args[0], r.Accepted())
			return r.Close()
		},
	}
	cmd.Flags().DurationVar(&rtt, "rtt", 40*time.Millisecond, "round trip to add")
	return cmd
}

func goUploadCommand() *cobra.Command {
	var mode string
	cmd := &cobra.Command{
		Use:   "go-upload --mode simple|resumable FILE gs://BUCKET/OBJECT",
		Short: "the single-stream Go peer (used by bench)",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 2 {
				return cli.Usagef("go-upload needs FILE and gs://BUCKET/OBJECT")
			}
			if mode != "simple" && mode != "resumable" {
				return cli.Usagef("--mode %q: want simple or resumable", mode)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := context.WithTimeout(cmd.Context(), time.Hour)
			defer stop()
			if err := peer.GoUpload(ctx, mode == "resumable", 16<<20, args[0], args[1]); err != nil {
				return fmt.Errorf("go-upload: %w", err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&mode, "mode", "simple", "simple (one request) or resumable (16 MiB chunks)")
	return cmd
}

// fromConfig takes the BENCH_* variables for every flag not given.
func (f *benchFlags) fromConfig(cmd *cobra.Command, c config.Bench) {
	set := cmd.Flags().Changed
	if !set("quick") {
		f.quick = c.Quick
	}
	if !set("full") {
		f.full = c.Full
	}
	if !set("repeats") {
		f.repeats = c.Repeats
	}
	if !set("method-budget") {
		f.budget = c.MethodBudget
		if f.full {
			f.budget = 0
		}
	}
	if !set("workloads") {
		f.workloads = c.Workloads
	}
	if !set("link-mbps") {
		f.link = c.LinkMBps
	}
	if !set("gcs") {
		f.gcs = c.GCS
	}
	if !set("tree") {
		f.tree = c.Tree
	}
}

// realTree resolves --tree: "none" is no tree, "goroot" the Go
// distribution's root, anything else a directory that must exist.
func realTree(ctx context.Context, tree string) (string, error) {
	switch tree {
	case "none", "":
		return "", nil
	case "goroot":
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, "go", "env", "GOROOT").Output()
		if err != nil {
			return "", fmt.Errorf("--tree goroot (BENCH_TREE): go env GOROOT: %w", err)
		}
		tree = strings.TrimSpace(string(out))
	}
	st, err := os.Stat(tree)
	if err != nil {
		return "", &cli.UsageError{Err: fmt.Errorf("--tree %s (BENCH_TREE): %w", tree, err)}
	}
	if !st.IsDir() {
		return "", cli.Usagef("--tree %s (BENCH_TREE): not a directory", tree)
	}
	return tree, nil
}

func (f *benchFlags) run(cmd *cobra.Command) error {
	stdout := cmd.OutOrStdout()
	var env config.Bench
	if err := config.FromEnvironment(cmd.Context(), &env); err != nil {
		return err
	}
	f.fromConfig(cmd, env)
	if f.repeats == 0 {
		f.repeats = 3
		if f.quick {
			f.repeats = 2
		}
	}
	if f.quick && f.full {
		return cli.Usagef("--quick and --full exclude each other")
	}
	sizes := bench.Plain
	switch {
	case f.quick:
		sizes = bench.Quick
	case f.full:
		sizes = bench.Full
	}
	wl, err := parseWorkloads(f.workloads)
	if err != nil {
		return &cli.UsageError{Err: err}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	for _, b := range []string{"localstack", "producer", "worker", "merger"} {
		if _, err := os.Stat(filepath.Join(f.bin, b)); err != nil {
			return fmt.Errorf("%w (run make build)", err)
		}
	}
	absBin, _ := filepath.Abs(f.bin)
	absRun, _ := filepath.Abs(f.runDir)
	gcsRoot, gcsWhere := "", "memory backend"
	switch f.gcs {
	case "memory":
	case "fs":
		gcsRoot = filepath.Join(absRun, "gcs")
		if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
			gcsRoot = filepath.Join("/dev/shm", "ferry-bench-"+strconv.Itoa(os.Getpid()))
		}
		gcsWhere = "filesystem backend in " + gcsRoot
		defer func() { _ = os.RemoveAll(gcsRoot) }()
	default:
		return cli.Usagef("--gcs %q (BENCH_GCS): want fs or memory", f.gcs)
	}
	tree, err := realTree(cmd.Context(), f.tree)
	if err != nil {
		return err
	}
	cfg := bench.Config{
		RealTree: tree, Bin: absBin, Self: self, RunDir: absRun, Rows: f.rows, Repeats: f.repeats, MethodBudget: f.budget, Sizes: sizes, Workloads: wl,
		LinkMBps: f.link, GCSRoot: gcsRoot, RunID: "bench" + time.Now().UTC().Format("20060102t150405"), Version: version, Out: stdout, Log: cmd.ErrOrStderr(),
	}
	started := time.Now().UTC()
	fmt.Fprintf(stdout, "make bench %s: %d repeats per method, tiers %s, %d cores; every method on its own fresh fake-gcs-server (%s); load average %s; started %s\n",
		modeName(f.quick, f.full), f.repeats, strings.Join(sizes.Tiers, ", "), runtime.NumCPU(), gcsWhere, loadAvg(), time.Now().UTC().Format(time.RFC3339))
	b := bench.New(cfg)
	if err := b.Run(cmd.Context()); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "finished %s; load average %s\n", time.Now().UTC().Format(time.RFC3339), loadAvg())
	if f.summary == "" {
		return nil
	}
	var sum bytes.Buffer
	b.Summary(&sum, fmt.Sprintf("Measured by `%s` from %s to %s UTC (bench_run %s, ferry %s), on %d cores; every method on its own fresh fake-gcs-server (%s). Full tables: [docs/performance.md](docs/performance.md).",
		modeCommand(f.quick, f.full, f.workloads), started.Format("2006-01-02 15:04"), time.Now().UTC().Format("15:04"), cfg.RunID, version, runtime.NumCPU(),
		strings.SplitN(gcsWhere, " in ", 2)[0]+" (--gcs "+f.gcs+")")) // no path of this machine in the README
	if err := os.WriteFile(f.summary, sum.Bytes(), 0o644); err != nil {
		return fmt.Errorf("--summary: %w", err)
	}
	fmt.Fprintf(stdout, "goals in Markdown: %s (make bench-readme puts them in README.md)\n", f.summary)
	return nil
}

// modeCommand is the command that repeats a run of this mode.
func modeCommand(quick, full bool, workloads string) string {
	cmd := "make bench"
	switch {
	case quick:
		cmd = "BENCH_QUICK=1 " + cmd
	case full:
		cmd = "BENCH_FULL=1 " + cmd
	}
	if workloads != "" {
		cmd = "BENCH_WORKLOADS=" + workloads + " " + cmd
	}
	return cmd
}

func readmeCommand() *cobra.Command {
	var partial bool
	c := &cobra.Command{
		Use:   "readme [--partial] SUMMARY README",
		Short: "put a run's goals (bench --summary) into the README, between its markers",
		Long: `readme replaces the README's generated table with the goals of the run that
wrote SUMMARY. A run of some workloads only (BENCH_WORKLOADS) or of small data
(BENCH_QUICK) is refused: its few goals would replace a whole run's. --partial
puts it there anyway.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 2 {
				return cli.Usagef("readme needs SUMMARY and README")
			}
			return nil
		},
		RunE: func(_ *cobra.Command, args []string) error {
			sum, err := os.ReadFile(args[0])
			if err != nil {
				return fmt.Errorf("%w (run make bench first: it writes the summary)", err)
			}
			if v := verdict.PartialRun(sum); v != "" && !partial {
				return cli.Usagef("%s: its run set %s, so it holds only part of make bench's goals; the README's table is a whole run's (run make bench, or pass --partial)", args[0], v)
			}
			doc, err := os.ReadFile(args[1])
			if err != nil {
				return err
			}
			out, err := verdict.SpliceSummary(doc, sum)
			if err != nil {
				return fmt.Errorf("%s: %w", args[1], err)
			}
			return os.WriteFile(args[1], out, 0o644)
		},
	}
	c.Flags().BoolVar(&partial, "partial", false, "put the goals of a run of some workloads, or of BENCH_QUICK, into the README all the same")
	return c
}

func modeName(quick, full bool) string {
	switch {
	case quick:
		return "(BENCH_QUICK: smoke test, figures mean little)"
	case full:
		return "(BENCH_FULL)"
	}
	return "(plain)"
}

var workloadNames = []string{verdict.LargeFile, verdict.SmallFiles, verdict.Shaped, verdict.Codecs, verdict.Restore, verdict.KernelLink, verdict.BigTree, verdict.Parquet, verdict.Append, verdict.Pushback, verdict.Latency, verdict.Pool}

// parseWorkloads reads "1,3" or "large-file,shaped-link".
func parseWorkloads(s string) ([]string, error) {
	var out []string
	for _, w := range strings.Split(s, ",") {
		w = strings.TrimSpace(w)
		if w == "" {
			continue
		}
		if n, err := strconv.Atoi(w); err == nil && n >= 1 && n <= len(workloadNames) {
			out = append(out, workloadNames[n-1])
			continue
		}
		found := false
		for _, name := range workloadNames {
			if w == name {
				out, found = append(out, name), true
			}
		}
		if !found {
			return nil, fmt.Errorf("workload %q: want 1-%d or one of %s", w, len(workloadNames), strings.Join(workloadNames, ", "))
		}
	}
	return out, nil
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
