package producer

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ferry-dev/ferry/internal/plan"
)

// readAll runs the read stage over pl and returns the jobs it sent, their
// buffers copied, handing every buffer back as a compress goroutine does.
func readAll(t *testing.T, pl *plan.Plan, bundleMax int64) ([]job, error) {
	t.Helper()
	p := &Producer{o: Options{BundleMax: bundleMax, MessageMax: 9 << 20, InlineMax: 256 << 10}}
	pool := make(chan []byte, 2)
	pool <- nil
	pool <- nil
	var read atomic.Int64
	r := &reader{pl: pl, pool: pool, bufSize: max(pl.MaxChunk(), bundleMax), bundler: newBundler(p, pl, "t1", false), read: &read, made: new(atomic.Int64)}
	jobs := make(chan job)
	errc := make(chan error, 1)
	go func() { errc <- r.run(context.Background(), jobs) }()
	var out []job
	for j := range jobs {
		c := job{}
		for _, pc := range j.pieces {
			pc.raw = append([]byte(nil), pc.raw...)
			c.pieces = append(c.pieces, pc)
		}
		out = append(out, c)
		pool <- j.buf
	}
	return out, <-errc
}

// TestReadStageCutsChunksAndBundles: a large file becomes one job per chunk
// at its offsets; small files share a job, each a whole piece; every byte
// is the file's.
func TestReadStageCutsChunksAndBundles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "src")
	must(t, os.MkdirAll(dir, 0o755))
	genFile(t, filepath.Join(dir, "big.csv"), 200_000)
	for _, n := range []string{"a.csv", "b.csv", "c.csv"} {
		must(t, os.WriteFile(filepath.Join(dir, n), []byte(strings.Repeat(n, 1000)), 0o644))
	}
	must(t, os.WriteFile(filepath.Join(dir, "empty.csv"), nil, 0o644))
	pl, err := plan.New(plan.Spec{Sources: []string{dir}, Destination: "gs://bkt/p", ChunkSize: 64 << 10}, plan.Limits{})
	must(t, err)
	jobs, err := readAll(t, pl, 16<<10)
	must(t, err)
	var singles, bundled int
	for _, j := range jobs {
		for _, pc := range j.pieces {
			f := pl.Files[pc.file]
			src, _ := os.ReadFile(f.Path)
			if !bytes.Equal(pc.raw, src[pc.offset:pc.offset+int64(len(pc.raw))]) || pc.offset != int64(pc.index)*f.ChunkSize {
				t.Fatalf("%s chunk %d at %d: bytes differ from the file", f.Rel, pc.index, pc.offset)
			}
		}
		if len(j.pieces) > 1 {
			bundled += len(j.pieces)
		} else {
			singles++
		}
	}
	if singles != 4 || bundled != 4 {
		t.Fatalf("%d single-chunk jobs and %d bundled files; want big.csv's 4 chunks alone and the 4 small files together", singles, bundled)
	}
}

// TestReadStageRefusesAFileThatChanged: a file that grew or changed after
// planning fails the read with an error naming it; a torn file is never
// sent.
func TestReadStageRefusesAFileThatChanged(t *testing.T) {
	for _, bundleMax := range []int64{0, 1 << 20} { // chunks, then a bundle
		src := filepath.Join(t.TempDir(), "f.csv")
		genFile(t, src, 100_000-bundleMax/16)
		pl, err := plan.New(plan.Spec{Sources: []string{src}, Destination: "gs://bkt/p", ChunkSize: 64 << 10}, plan.Limits{})
		must(t, err)
		fh, err := os.OpenFile(src, os.O_APPEND|os.O_WRONLY, 0)
		must(t, err)
		_, err = fh.WriteString("one more line\n")
		fh.Close()
		must(t, err)
		_, err = readAll(t, pl, bundleMax)
		if err == nil || !strings.Contains(err.Error(), src) || !strings.Contains(err.Error(), "while it was read") {
			t.Fatalf("bundle max %d: read = %v, want an error naming the file that changed", bundleMax, err)
		}
	}
}
