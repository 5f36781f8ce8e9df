package bench

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ferry-dev/ferry/internal/bench/verdict"
)

// restore is workload 5: ferry's restore beside gcloud storage cp + zstd -d
// and gsutil cp + zstd -d for one large object, and beside gcloud storage
// cp -r for a prefix of small objects. It runs only when bin/restore
// exists. Every method reads the same objects, stored once by ferry
// (untimed) in one server.
func (b *Bench) restore(ctx context.Context) error {
	restoreBin := filepath.Join(b.cfg.Bin, "restore")
	if _, err := os.Stat(restoreBin); err != nil {
		b.logf("restore: skipped: no restore (%s is missing)", restoreBin)
		return nil
	}
	tier := b.cfg.Sizes.RestoreTier
	f := b.data.Tier[tier]
	tree := b.data.Small
	dir := filepath.Join(b.cfg.RunDir, "work", "restore")
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	logDir := filepath.Join(b.cfg.RunDir, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil { // workload 5 alone: no other made it
		return err
	}
	stackLog, err := os.Create(filepath.Join(logDir, "restore-localstack.log"))
	if err != nil {
		return err
	}
	defer stackLog.Close()
	st, err := StartStack(ctx, StackOptions{Bin: b.cfg.Bin, Dir: filepath.Join(dir, "stack"), PubSub: true, TLS: true, Compose: "fast", Log: stackLog})
	if err != nil {
		return err
	}
	defer func() { _ = st.Stop() }()
	const bucket = "restore-src"
	if err := st.CreateBucket(ctx, bucket); err != nil {
		return err
	}
	boto, err := b.writeBoto(dir, st.Env["LOCALSTACK_GCS_TLS_HOST"], st.Env["LOCALSTACK_GCS_CERT"])
	if err != nil {
		return err
	}
	// Store the data with ferry, untimed.
	setup := &env{stack: st, bucket: bucket, gcs: st.Env["STORAGE_EMULATOR_HOST"], dir: filepath.Join(dir, "setup"),
		logs: filepath.Join(logDir, "restore-setup"), tier: tier}
	if err := os.MkdirAll(setup.dir, 0o755); err != nil {
		return err
	}
	for _, src := range []string{f.Path, tree.Dir} {
		if _, err := b.runFerry(ctx, setup, ferryOpts{workers: 2, codec: "zstd", level: 3, sources: []string{src}, prefix: "stored", method: "restore-setup", tier: tier}); err != nil {
			return fmt.Errorf("storing %s with ferry for the restore workload: %w", src, err)
		}
	}
	objName := "stored/" + filepath.Base(f.Path) + ".zst"
	objURL := "gs://" + bucket + "/" + objName
	treeURL := "gs://" + bucket + "/stored/" + filepath.Base(tree.Dir)

	type rmethod struct {
		name, setting string
		argv          func(dest string) []string
		check         func(dest string) (int, int64, error)
	}
	oneFile := func(dest string) (int, int64, error) { return 1, f.Size, findFile(dest, f) }
	sh := func(script string, args ...string) []string {
		return append([]string{"sh", "-c", script, "sh"}, args...)
	}
	single := []rmethod{
		{verdict.FerryRestore, "restore gs://BUCKET/OBJECT DEST", func(d string) []string { return []string{restoreBin, objURL, d} }, oneFile},
		{verdict.GcloudDownZstd, "gcloud storage cp OBJECT - | zstd -d", func(d string) []string {
			return sh(`gcloud storage cp "$1" - | zstd -d -q -o "$2"`, objURL, filepath.Join(d, filepath.Base(f.Path)))
		}, oneFile},
		{"gsutil_cp_zstd_d", "gsutil cp OBJECT - | zstd -d (HTTPS)", func(d string) []string {
			return sh(`gsutil cp "$1" - | zstd -d -q -o "$2"`, objURL, filepath.Join(d, filepath.Base(f.Path)))
		}, oneFile},
	}
	prefix := []rmethod{
		{verdict.FerryRestore, "restore gs://BUCKET/PREFIX DEST", func(d string) []string { return []string{restoreBin, treeURL, d} },
			func(d string) (int, int64, error) { return countTree(d, tree, true) }},
		{verdict.GcloudRecurse, "gcloud storage cp -r PREFIX DEST (downloads the .zst objects, no decompression)", func(d string) []string {
			return []string{"gcloud", "storage", "cp", "-r", treeURL, d}
		}, func(d string) (int, int64, error) { return countTree(d, tree, false) }},
	}
	e := &env{stack: st, bucket: bucket, gcs: st.Env["STORAGE_EMULATOR_HOST"], gcsTLS: st.Env["LOCALSTACK_GCS_TLS_HOST"],
		cert: st.Env["LOCALSTACK_GCS_CERT"], boto: boto}
	for _, set := range []struct {
		tier    string
		methods []rmethod
	}{{"restore-" + tier, single}, {"restore-" + tree.Name, prefix}} {
		for _, m := range set.methods {
			var spent time.Duration
			for rep := 1; rep <= b.cfg.Repeats; rep++ {
				e.dir = filepath.Join(dir, safeName(fmt.Sprintf("%s-%s-%d", set.tier, m.name, rep)))
				e.logs = filepath.Join(logDir, safeName(fmt.Sprintf("restore-%s-%s-%d", set.tier, m.name, rep)))
				role := verdict.Peer
				if m.name == verdict.FerryRestore {
					role = verdict.Ferry
				}
				if err := os.MkdirAll(e.dir, 0o755); err != nil {
					return err
				}
				vars := b.cliEnv(e)
				if role == verdict.Ferry {
					// ferry's restore finds the fake server as every
					// ferry binary does: through the stack's variables.
					vars = append(vars, st.Environ()...)
				}
				r, err := measure(ctx, e, strings.SplitN(m.name, "_", 2)[0], m.argv(e.dir), vars)
				if err == nil {
					r.Files, r.Bytes, err = m.check(e.dir)
				}
				r.Workload, r.Tier, r.Method, r.Role, r.Setting, r.Repeat, r.Err = verdict.Restore, set.tier, m.name, role, m.setting, rep, err
				r.Codec, r.Level = "zstd", 3
				if r.StartedAt.IsZero() {
					r.StartedAt = time.Now()
				}
				_ = os.RemoveAll(e.dir)
				if err := b.record(r); err != nil {
					return err
				}
				if b.spent(&spent, r, b.cfg.Repeats) {
					break
				}
			}
		}
	}
	return nil
}

// findFile looks under dir for a file with f's size and CRC32C.
func findFile(dir string, f File) error {
	var others []string
	ok := false
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		g, err := checksumFile(p)
		if err != nil {
			return err
		}
		if g.Size == f.Size && g.CRC32C == f.CRC32C {
			ok = true
			return fs.SkipAll
		}
		others = append(others, fmt.Sprintf("%s (%d bytes, crc32c %08x)", p, g.Size, g.CRC32C))
		return nil
	})
	if err != nil || ok {
		return err
	}
	return verifyf("no file under %s equals %s (%d bytes, crc32c %08x); found %v", dir, f.Path, f.Size, f.CRC32C, others)
}

// countTree counts the files restored under dir; with raw, their bytes must
// add up to the tree's.
func countTree(dir string, t Tree, raw bool) (int, int64, error) {
	got, err := treeOf(dir)
	if err != nil {
		return 0, 0, err
	}
	if got.Files != t.Files || raw && got.Bytes != t.Bytes {
		return got.Files, got.Bytes, verifyf("%d files, %d bytes under %s, want %d files of %d bytes", got.Files, got.Bytes, dir, t.Files, t.Bytes)
	}
	return got.Files, t.Bytes, nil
}
