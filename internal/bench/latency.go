package bench

import (
	"bufio"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/ferry-dev/ferry/internal/bench/verdict"
)

// latency is workload 11: the many-files tree and the restore tier's file
// through a relay that delays every byte (package latency), at each of
// verdict.LatencyRTTs: ferry cp and ferry restore at their defaults
// beside the ideal client at 16 and 128 requests in flight (the tree), one
// plain upload request (the file) and gcloud storage cp. rclone is not
// among them: it is not installed on these machines.
func (b *Bench) latency(ctx context.Context) error {
	t := b.data.Small
	f := b.data.Tier[b.cfg.Sizes.RestoreTier]
	tree := func() []string { return []string{t.Dir} }
	file := func() []string { return []string{f.Path} }
	ideal := func(name string, n int) method {
		return b.cliMethod(name, verdict.Peer, fmt.Sprintf("the smallest Go program that puts each file, %d requests in flight", n), false, "none", 0, nil,
			func(e *env) []string {
				return []string{b.cfg.Self, "put-tree", "--parallel", strconv.Itoa(n), t.Dir, gsURL(e, "peer/")}
			})
	}
	for _, rtt := range verdict.LatencyRTTs {
		ms := []method{
			b.latencyCp(tree),
			b.latencyRestore(tree, filepath.Base(t.Dir)),
			ideal(verdict.IdealClient, verdict.IdealParallel),
			ideal(verdict.IdealClientFar, verdict.IdealFar),
			b.cliMethod(verdict.GcloudRecurse, verdict.Peer, "gcloud storage cp -r DIR (defaults)", false, "none", 0, nil,
				func(e *env) []string { return []string{"gcloud", "storage", "cp", "-r", t.Dir, gsURL(e, "peer/")} }),
		}
		if err := b.runPlan(ctx, plan{workload: verdict.Latency, tier: verdict.LatencyTier(t.Name, rtt), methods: ms,
			verify: verifyUpload(t.Files, t.Bytes, nil, "peer/"), relay: true, rtt: rtt}); err != nil {
			return err
		}
		base := filepath.Base(f.Path)
		dst := func(e *env) string { return gsURL(e, "peer/"+base) }
		ms = []method{
			b.latencyCp(file),
			b.latencyRestore(file, base+".zst"),
			b.cliMethod(verdict.GoSimple, verdict.Peer, "cloud.google.com/go/storage Writer, one request", false, "none", 0, nil,
				func(e *env) []string { return []string{b.cfg.Self, "go-upload", "--mode", "simple", f.Path, dst(e)} }),
			b.cliMethod("gcloud_storage", verdict.Peer, "gcloud storage cp (defaults)", false, "none", 0, nil,
				func(e *env) []string { return []string{"gcloud", "storage", "cp", f.Path, dst(e)} }),
		}
		one := f
		if err := b.runPlan(ctx, plan{workload: verdict.Latency, tier: verdict.LatencyTier(b.cfg.Sizes.RestoreTier, rtt), methods: ms,
			verify: verifyUpload(1, f.Size, &one, "peer/"), relay: true, rtt: rtt}); err != nil {
			return err
		}
	}
	return nil
}

// latencyCp is ferry cp at its defaults, with the requests in flight its
// uploads settled at read from its log.
func (b *Bench) latencyCp(sources func() []string) method {
	m := b.cpMethod(sources)
	m.run = func(ctx context.Context, e *env) (verdict.Run, error) {
		r, err := b.runCp(ctx, e, sources(), "FERRY_LOG_LEVEL=info") // the worker's last line says where it settled
		r.InFlight = settledInFlight(e.logs + "-ferry-cp.log")
		return r, err
	}
	return m
}

// latencyRestore is ferry restore at its defaults of what ferry cp stored
// under ferry/NAME: stored first, untimed and without the delay, then
// restored through it, and the restored files counted and sized.
func (b *Bench) latencyRestore(sources func() []string, name string) method {
	return method{name: verdict.FerryRestore, role: verdict.Ferry, workers: 1, codec: "zstd",
		setting: "ferry restore gs://BUCKET/ferry/NAME DEST (defaults) of what ferry cp stored, untimed and without the delay",
		run: func(ctx context.Context, e *env) (verdict.Run, error) {
			direct := *e
			direct.gcs = e.stack.Env["STORAGE_EMULATOR_HOST"]
			direct.logs = e.logs + "-setup"
			up, err := b.runCp(ctx, &direct, sources())
			if err != nil {
				return up, fmt.Errorf("storing the data to restore: %w", err)
			}
			dest := filepath.Join(e.dir, "restored")
			vars := append(b.cliEnv(e), "STORAGE_EMULATOR_HOST="+e.gcs, "XDG_STATE_HOME="+filepath.Join(e.dir, "state"))
			r, err := measure(ctx, e, "ferry-restore", []string{filepath.Join(b.cfg.Bin, "ferry"), "restore", gsURL(e, "ferry/"+name), dest}, vars)
			r.Files, r.Bytes, r.Wire = up.Files, up.Bytes, up.Wire
			if err != nil {
				return r, err
			}
			files, bytes, err := treeSize(dest)
			if err != nil {
				return r, err
			}
			if files != up.Files || bytes != up.Bytes {
				return r, verifyf("restored %d files of %d bytes into %s, want the %d files of %d bytes sent", files, bytes, dest, up.Files, up.Bytes)
			}
			return r, nil
		}}
}

// treeSize counts the files under dir and their bytes.
func treeSize(dir string) (int, int64, error) {
	var n int
	var total int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		n++
		total += info.Size()
		return nil
	})
	return n, total, err
}

var inFlightRE = regexp.MustCompile(`"requests_in_flight":(\d+)`)

// settledInFlight is the requests in flight a ferry cp's uploads ended at,
// from the line its worker logs when it stops; 0 when the log has none.
func settledInFlight(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if !strings.Contains(sc.Text(), "worker stopped") {
			continue
		}
		if m := inFlightRE.FindStringSubmatch(sc.Text()); m != nil {
			n, _ = strconv.Atoi(m[1])
		}
	}
	return n
}
