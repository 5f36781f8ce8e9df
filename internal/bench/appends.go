package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/ferry-dev/ferry/internal/gcs"
)

// Append is workload 9: the seed-like CSV sent, grown by 1 %,
// and sent again, by ferry (--skip-unchanged: the tail only, composed onto
// the object) and by the peers' rsync, which send a grown file again
// whole.
const Append = "append"

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
func (b *Bench) appendMethod(m method, f File, sync func(ctx context.Context, e *env, dir string, fl *fleet) (Run, error)) method {
	m.run = func(ctx context.Context, e *env) (Run, error) {
		var fl *fleet
		if m.workers > 0 {
			var err error
			if fl, err = b.startFleet(ctx, e, ferryOpts{workers: m.workers}); err != nil {
				return Run{}, err
			}
			defer fl.stop()
		}
		dir := filepath.Join(e.dir, "src")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return Run{}, err
		}
		path := filepath.Join(dir, filepath.Base(f.Path))
		if err := copyFile(f.Path, path); err != nil {
			return Run{}, err
		}
		full, err := sync(ctx, e, dir, fl)
		if err != nil {
			return full, fmt.Errorf("the first, whole sync: %w", err)
		}
		grown, err := grow(path, int64(float64(f.Size)*growth))
		if err != nil {
			return Run{}, err
		}
		before, err := e.stack.Stats(ctx)
		if err != nil {
			return Run{}, err
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
	ferry := b.appendMethod(method{name: "ferry-append", role: Ferry, workers: 2, codec: "zstd",
		setting: "producer submit --wait --skip-unchanged (the tail only, composed onto the object); 2 workers and the merger running already"}, f,
		func(ctx context.Context, e *env, dir string, fl *fleet) (Run, error) {
			return b.runFerry(ctx, e, ferryOpts{workers: 2, codec: "zstd", sources: []string{dir}, prefix: "ferry", method: "ferry-append",
				tier: e.tier, args: []string{"--skip-unchanged"}, fleet: fl})
		})
	cli := func(name, setting string, tls bool, argv func(e *env, dir string) []string) method {
		return b.appendMethod(method{name: name, role: Peer, setting: setting, tls: tls, codec: "none"}, f,
			func(ctx context.Context, e *env, dir string, _ *fleet) (Run, error) {
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
	return b.runPlan(ctx, plan{workload: Append, tier: tier, methods: ms, verify: verifyAppend(filepath.Base(f.Path))})
}

// verifyAppend checks a second sync: ferry compressed the tail only (its
// merger checked the object's size and CRC32C), a peer's object has the
// grown file's size.
func verifyAppend(base string) func(ctx context.Context, e *env, r *Run) error {
	return func(ctx context.Context, e *env, r *Run) error {
		if r.Role == Ferry {
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

// AppendTable is workload 9: the second sync of a file grown by 1 %.
func AppendTable(rs []Result, tier string) Table {
	rs = Select(rs, Append, tier)
	t := Table{
		Title:  fmt.Sprintf("Workload 9: a file grown by 1 %%, sent again, tier %s (%s)", tier, sizeOf(rs)),
		Header: []string{"method", "runs", "grown MB", "whole s", "again s", "again / whole", "MB read+compressed", "MB to the server", "vs best peer"},
	}
	again := func(g Result) float64 { return g.Median(func(r Run) float64 { return r.Wall.Seconds() }) }
	best := 0.0
	for _, g := range rs {
		if g.Role == Peer && len(g.OK) > 0 && (best == 0 || again(g) < best) {
			best = again(g)
		}
	}
	for _, g := range rs {
		if len(g.OK) == 0 {
			t.Rows = append(t.Rows, []string{g.Method, runsCell(g), "-", "-", "-", "-", "-", "-", "-"})
			continue
		}
		whole := g.Median(func(r Run) float64 { return r.FullWall.Seconds() })
		read := "-"
		if g.Role == Ferry {
			read = ftoa(g.Median(func(r Run) float64 {
				var n int64
				for _, l := range r.Levels {
					n += l.Bytes
				}
				return float64(n) / 1e6
			}), 1)
		}
		vs := "-"
		if best > 0 && g.Role == Ferry {
			vs = fmtX(best / again(g))
		}
		t.Rows = append(t.Rows, []string{g.Method, runsCell(g), ftoa(g.Median(func(r Run) float64 { return float64(r.Grown) / 1e6 }), 1),
			ftoa(whole, 2), ftoa(again(g), 2), fmtX(again(g) / whole), read,
			ftoa(g.Median(func(r Run) float64 { return float64(r.Uploaded) / 1e6 }), 1), vs})
	}
	t.Notes = append(t.Notes,
		"whole: the first sync of the file; again: the second, after it grew by 1 % (timed, and counted, alone); ferry's merger and workers run already (a fleet serving hourly growth), its producer inside the clock",
		"MB to the server: the request bodies the storage stand-in read during the second sync",
		"targets: ferry's second sync at most 5 % of its whole one, and at least 10x faster than the best peer's")
	return t
}
