package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/ferry-dev/ferry/internal/bench/verdict"
	"github.com/ferry-dev/ferry/internal/gcs"
)

// growth is how much workload 9 grows the file: 1 %.
const growth = 0.01

// appendMethod is one method of workload 9: sync sends dir to the bucket
// (the same call both times). Its run copies the CSV into the repeat's
// directory, syncs it (untimed but for FullWall), grows it by 1 % with
// more of its own records, and times the second sync, counting the bytes
// the server received during it. For ferry (m.workers > 0) a merger and
// workers run throughout, started before the first sync, as a fleet
// serving hourly growth would be: both syncs time the producer's
// transfer.
func (b *Bench) appendMethod(m method, f File, sync func(ctx context.Context, e *env, dir string, fl *fleet) (verdict.Run, error)) method {
	m.run = func(ctx context.Context, e *env) (verdict.Run, error) {
		var fl *fleet
		if m.workers > 0 {
			var err error
			if fl, err = b.startFleet(ctx, e, ferryOpts{workers: m.workers}); err != nil {
				return verdict.Run{}, err
			}
			defer fl.stop()
		}
		dir := filepath.Join(e.dir, "src")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return verdict.Run{}, err
		}
		path := filepath.Join(dir, filepath.Base(f.Path))
		if err := copyFile(f.Path, path); err != nil {
			return verdict.Run{}, err
		}
		full, err := sync(ctx, e, dir, fl)
		if err != nil {
			return full, fmt.Errorf("the first, whole sync: %w", err)
		}
		grown, err := grow(path, int64(float64(f.Size)*growth))
		if err != nil {
			return verdict.Run{}, err
		}
		before, err := e.stack.Stats(ctx)
		if err != nil {
			return verdict.Run{}, err
		}
		r, err := sync(ctx, e, dir, fl)
		after, serr := e.stack.Stats(ctx)
		if err == nil && serr != nil {
			err = serr
		}
		r.FullWall, r.Grown, r.Uploaded = full.Wall, grown, after.BodyBytes-before.BodyBytes
		r.Files, r.Bytes = 1, f.Size+grown
		return r, err
	}
	return m
}

// grow appends about n bytes of the file's own records (those after its
// header line) to it, whole lines, and returns how many it appended.
func grow(path string, n int64) (int64, error) {
	fh, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		return 0, err
	}
	defer fh.Close()
	buf := make([]byte, n+64<<10)
	k, err := fh.ReadAt(buf, 0)
	if err != nil && err != io.EOF {
		return 0, err
	}
	buf = buf[:k]
	start := bytes.IndexByte(buf, '\n') + 1
	end := start + int(n)
	for end < len(buf) && buf[end-1] != '\n' {
		end++
	}
	if start <= 0 || end > len(buf) {
		return 0, fmt.Errorf("%s: too small to grow by %d bytes of its own records", path, n)
	}
	w, err := fh.Write(buf[start:end])
	return int64(w), err
}

// copyFile copies the file at from to a new file at to.
func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// appends is workload 9.
func (b *Bench) appends(ctx context.Context) error {
	tier := b.cfg.Sizes.CodecTier
	f := b.data.Tier[tier]
	ferry := b.appendMethod(method{name: "ferry-append", role: verdict.Ferry, workers: 2, codec: "zstd",
		setting: "producer submit --wait --skip-unchanged (the tail only, composed onto the object); 2 workers and the merger running already"}, f,
		func(ctx context.Context, e *env, dir string, fl *fleet) (verdict.Run, error) {
			return b.runFerry(ctx, e, ferryOpts{workers: 2, codec: "zstd", sources: []string{dir}, prefix: "ferry", method: "ferry-append",
				tier: e.tier, args: []string{"--skip-unchanged"}, fleet: fl})
		})
	cli := func(name, setting string, tls bool, argv func(e *env, dir string) []string) method {
		return b.appendMethod(method{name: name, role: verdict.Peer, setting: setting, tls: tls, codec: "none"}, f,
			func(ctx context.Context, e *env, dir string, _ *fleet) (verdict.Run, error) {
				return measure(ctx, e, name, argv(e, dir), append(b.cliEnv(e), "STORAGE_EMULATOR_HOST="+e.gcs))
			})
	}
	ms := []method{ferry,
		cli("gcloud_storage_rsync", "gcloud storage rsync DIR gs://…/peer (a grown file goes again whole)", false,
			func(e *env, dir string) []string {
				return []string{"gcloud", "storage", "rsync", dir, gsURL(e, "peer")}
			}),
		cli("gsutil_rsync", "gsutil rsync DIR gs://…/peer (HTTPS to the server)", true,
			func(e *env, dir string) []string { return []string{"gsutil", "rsync", dir, gsURL(e, "peer")} }),
	}
	return b.runPlan(ctx, plan{workload: verdict.Append, tier: tier, methods: ms, verify: verifyAppend(filepath.Base(f.Path))})
}

// verifyAppend checks a second sync: ferry compressed the tail only (its
// merger checked the object's size and CRC32C), a peer's object has the
// grown file's size.
func verifyAppend(base string) func(ctx context.Context, e *env, r *verdict.Run) error {
	return func(ctx context.Context, e *env, r *verdict.Run) error {
		if r.Role == verdict.Ferry {
			var n int64
			for _, l := range r.Levels {
				n += l.Bytes
			}
			if n != r.Grown {
				return verifyf("ferry compressed %d bytes the second time; the file grew by %d (no append?)", n, r.Grown)
			}
			return nil
		}
		var size int64 = -1
		err := e.stack.Each(ctx, e.bucket, "peer/", func(a gcs.Attrs) error {
			if filepath.Base(a.Name) == base {
				size = a.Size
			}
			return nil
		})
		if err != nil {
			return err
		}
		if size != r.Bytes {
			return verifyf("gs://%s/peer/%s has %d bytes, the grown file %d", e.bucket, base, size, r.Bytes)
		}
		return nil
	}
}
