// Command bench is make bench: ferry beside its peers (gcloud, gsutil,
// single-stream Go uploads, the zstd CLI) on the same data, against the same
// fake-gcs-server build, in the same run. See internal/bench and the
// README's "Performance" section.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ferry-dev/ferry/internal/bench"
)

var version = "dev"

const usage = `bench — ferry beside its peers, in one run on one machine.

Usage:
  bench [flags]                         run the workloads, print tables and goals
  bench go-upload --mode simple|resumable FILE gs://BUCKET/OBJECT
                                        the single-stream Go peer (used by bench)

Workloads: 1 large-file, 2 small-files, 3 shaped-link, 4 codecs, 5 restore.
Every method runs in a fresh localstack, each repeat into an empty bucket of
its own; all of a method's processes start inside its clock. Rows are
appended to --rows in the results schema; make report shows them.

Environment: BENCH_QUICK=1 (small data: a smoke test), BENCH_FULL=1 (adds
the 1.2 GB tier), BENCH_REPEATS (default 3; 2 with BENCH_QUICK),
BENCH_WORKLOADS (e.g. "1,3" or "large-file,shaped-link"), BENCH_LINK_MBPS
(default 7). Flags override them.

Flags:
`

func main() {
	if len(os.Args) > 1 && os.Args[1] == "go-upload" {
		os.Exit(goUpload(os.Args[2:]))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func goUpload(args []string) int {
	fs := flag.NewFlagSet("go-upload", flag.ContinueOnError)
	mode := fs.String("mode", "simple", "simple (one request) or resumable (16 MiB chunks)")
	if err := fs.Parse(args); err != nil || fs.NArg() != 2 || (*mode != "simple" && *mode != "resumable") {
		fmt.Fprintln(os.Stderr, "usage: bench go-upload --mode simple|resumable FILE gs://BUCKET/OBJECT")
		return 2
	}
	ctx, stop := context.WithTimeout(context.Background(), time.Hour)
	defer stop()
	if err := bench.GoUpload(ctx, *mode == "resumable", 16<<20, fs.Arg(0), fs.Arg(1)); err != nil {
		fmt.Fprintf(os.Stderr, "go-upload: %v\n", err)
		return 1
	}
	return 0
}

func envBool(k string) bool { v := os.Getenv(k); return v != "" && v != "0" && v != "false" }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(fs.Output(), usage); fs.PrintDefaults() }
	runDir := fs.String("run-dir", ".run/bench", "data, logs and scratch `DIR`")
	rows := fs.String("rows", ".run/bench.ndjson", "NDJSON `FILE` the rows are appended to")
	bin := fs.String("bin", "bin", "`DIR` of ferry's binaries")
	quick := fs.Bool("quick", envBool("BENCH_QUICK"), "small data, to prove the bench works (figures mean little)")
	full := fs.Bool("full", envBool("BENCH_FULL"), "add the 1.2 GB tier")
	repeats := fs.Int("repeats", 0, "repeats per method (default 3, 2 with --quick; BENCH_REPEATS)")
	workloads := fs.String("workloads", os.Getenv("BENCH_WORKLOADS"), "comma-separated workloads by number or name (default all)")
	link := fs.Float64("link-mbps", 7, "the shaped link's rate in MB/s (BENCH_LINK_MBPS)")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "bench: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if v := os.Getenv("BENCH_LINK_MBPS"); v != "" && !flagSet(fs, "link-mbps") {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 {
			fmt.Fprintf(stderr, "bench: BENCH_LINK_MBPS=%q: want a positive number\n", v)
			return 2
		}
		*link = f
	}
	if *repeats == 0 {
		*repeats = 3
		if *quick {
			*repeats = 2
		}
		if v := os.Getenv("BENCH_REPEATS"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				fmt.Fprintf(stderr, "bench: BENCH_REPEATS=%q: want a positive integer\n", v)
				return 2
			}
			*repeats = n
		}
	}
	sizes := bench.Plain
	switch {
	case *quick && *full:
		fmt.Fprintln(stderr, "bench: --quick and --full exclude each other")
		return 2
	case *quick:
		sizes = bench.Quick
	case *full:
		sizes = bench.Full
	}
	wl, err := parseWorkloads(*workloads)
	if err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return 2
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return 1
	}
	for _, b := range []string{"localstack", "producer", "worker", "merger"} {
		if _, err := os.Stat(filepath.Join(*bin, b)); err != nil {
			fmt.Fprintf(stderr, "bench: %v (run make build)\n", err)
			return 1
		}
	}
	absBin, _ := filepath.Abs(*bin)
	absRun, _ := filepath.Abs(*runDir)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg := bench.Config{
		Bin: absBin, Self: self, RunDir: absRun, Rows: *rows, Repeats: *repeats, Sizes: sizes, Workloads: wl,
		LinkMBps: *link, RunID: "bench" + time.Now().UTC().Format("20060102t150405"), Version: version, Out: stdout, Log: stderr,
	}
	fmt.Fprintf(stdout, "make bench %s: %d repeats per method, tiers %s, %d cores; load average %s; started %s\n",
		modeName(*quick, *full), *repeats, strings.Join(sizes.Tiers, ", "), runtime.NumCPU(), loadAvg(), time.Now().UTC().Format(time.RFC3339))
	if err := bench.New(cfg).Run(ctx); err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "finished %s; load average %s\n", time.Now().UTC().Format(time.RFC3339), loadAvg())
	return 0
}

func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
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

var workloadNames = []string{bench.LargeFile, bench.SmallFiles, bench.Shaped, bench.Codecs, bench.Restore}

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
			return nil, fmt.Errorf("workload %q: want 1-5 or one of %s", w, strings.Join(workloadNames, ", "))
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
