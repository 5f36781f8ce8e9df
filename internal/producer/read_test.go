package producer

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/ferry-dev/ferry/internal/plan"
	"github.com/ferry-dev/ferry/internal/testutil"
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
	r := &reader{pool: pool, bufSize: max(pl.MaxChunk(), bundleMax), bundler: newBundler(p, pl, "t1", false), read: &read, made: new(atomic.Int64)}
	jobs := make(chan job)
	errc := make(chan error, 1)
	files := make(chan planned, len(pl.Files))
	for i := range pl.Files {
		files <- planned{i, &pl.Files[i]}
	}
	close(files)
	go func() { errc <- r.run(context.Background(), files, jobs) }()
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
	testutil.OK(t, os.MkdirAll(dir, 0o755))
	testutil.WriteCSV(t, filepath.Join(dir, "big.csv"), 200_000, 1)
	for _, n := range []string{"a.csv", "b.csv", "c.csv"} {
		testutil.OK(t, os.WriteFile(filepath.Join(dir, n), []byte(strings.Repeat(n, 1000)), 0o644))
	}
	testutil.OK(t, os.WriteFile(filepath.Join(dir, "empty.csv"), nil, 0o644))
	pl, err := plan.New(plan.Spec{Sources: []string{dir}, Destination: "gs://bkt/p", ChunkSize: 64 << 10}, plan.Limits{})
	testutil.OK(t, err)
	jobs, err := readAll(t, pl, 16<<10)
	testutil.OK(t, err)
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
		testutil.WriteCSV(t, src, 100_000-bundleMax/16, 1)
		pl, err := plan.New(plan.Spec{Sources: []string{src}, Destination: "gs://bkt/p", ChunkSize: 64 << 10}, plan.Limits{})
		testutil.OK(t, err)
		fh, err := os.OpenFile(src, os.O_APPEND|os.O_WRONLY, 0)
		testutil.OK(t, err)
		_, err = fh.WriteString("one more line\n")
		fh.Close()
		testutil.OK(t, err)
		_, err = readAll(t, pl, bundleMax)
		if err == nil || !strings.Contains(err.Error(), src) || !strings.Contains(err.Error(), "while it was read") {
			t.Fatalf("bundle max %d: read = %v, want an error naming the file that changed", bundleMax, err)
		}
	}
}

// Issue 16 §3: a file swapped for a FIFO, a socket's neighbour or another
// file after planning is refused at open, naming it: the open does not block
// (the test would hang past its deadline if it did), and nothing is read.
func TestReadStageRefusesAFileSwappedAfterPlanning(t *testing.T) {
	for _, tc := range []struct {
		name string
		swap func(t *testing.T, p string)
		want string
	}{
		{"fifo", func(t *testing.T, p string) { testutil.OK(t, os.Remove(p)); testutil.OK(t, syscall.Mkfifo(p, 0o644)) }, "named pipe"},
		{"other file", func(t *testing.T, p string) {
			// Written beside it, then renamed over it, as editors and
			// rsync replace files: a new inode.
			testutil.OK(t, os.WriteFile(p+".new", []byte("other"), 0o644))
			testutil.OK(t, os.Rename(p+".new", p))
		}, "replaced by another file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, bundleMax := range []int64{0, 1 << 20} {
				src := filepath.Join(t.TempDir(), "f.csv")
				testutil.WriteCSV(t, src, 100_000, 1)
				pl, err := plan.New(plan.Spec{Sources: []string{src}, Destination: "gs://bkt/p", ChunkSize: 64 << 10}, plan.Limits{})
				testutil.OK(t, err)
				tc.swap(t, src)
				jobs, err := readAll(t, pl, bundleMax)
				var se *SourceError
				if !errors.As(err, &se) || !errors.Is(err, plan.ErrChanged) || !strings.Contains(err.Error(), src) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("bundle max %d: read = %v, want a SourceError naming %s and %q", bundleMax, err, src, tc.want)
				}
				if len(jobs) != 0 {
					t.Fatalf("%d jobs sent from a swapped file", len(jobs))
				}
			}
		})
	}
}

// Issue 16 §3: a file overwritten while it is read, with its size kept and
// its mtime set back afterwards (as cp -p, rsync -t and tar x do), is
// refused: its ctime moved.
func TestReadStageRefusesAFileOverwrittenWithItsMtimeSetBack(t *testing.T) {
	src := filepath.Join(t.TempDir(), "f.csv")
	testutil.WriteCSV(t, src, 100_000, 1)
	st, err := os.Stat(src)
	testutil.OK(t, err)
	pl, err := plan.New(plan.Spec{Sources: []string{src}, Destination: "gs://bkt/p", ChunkSize: 64 << 10}, plan.Limits{})
	testutil.OK(t, err)
	fh, err := os.OpenFile(src, os.O_WRONLY, 0)
	testutil.OK(t, err)
	_, err = fh.WriteAt([]byte("OVERWRITTEN"), 50_000)
	fh.Close()
	testutil.OK(t, err)
	testutil.OK(t, os.Chtimes(src, st.ModTime(), st.ModTime()))
	if st2, _ := os.Stat(src); st2.Size() != st.Size() || !st2.ModTime().Equal(st.ModTime()) {
		t.Fatalf("size and mtime not restored: %v %v", st2.Size(), st2.ModTime())
	}
	_, err = readAll(t, pl, 0)
	if err == nil || !strings.Contains(err.Error(), src) || !strings.Contains(err.Error(), "ctime") {
		t.Fatalf("read = %v, want an error naming the file and its ctime", err)
	}
}

// Issue 29: the parts of a converted file are read by range, and a file
// that grew after planning still fails the read, naming it: no part of a
// torn file is converted.
func TestReadStageRefusesAConvertedFileThatChanged(t *testing.T) {
	src := filepath.Join(t.TempDir(), "f.csv")
	testutil.WriteCSV(t, src, 300_000, 1)
	cv, err := plan.ParseConvert("parquet", nil, nil, "")
	testutil.OK(t, err)
	pl, err := plan.New(plan.Spec{Sources: []string{src}, Destination: "gs://bkt/p", ChunkSize: 64 << 10, Convert: cv}, plan.Limits{})
	testutil.OK(t, err)
	if len(pl.Files) < 2 || pl.Files[0].Part == nil {
		t.Fatalf("%d files planned, want the parts of a converted file", len(pl.Files))
	}
	fh, err := os.OpenFile(src, os.O_APPEND|os.O_WRONLY, 0)
	testutil.OK(t, err)
	_, err = fh.WriteString("one more line\n")
	fh.Close()
	testutil.OK(t, err)
	jobs, err := readAll(t, pl, 0)
	if err == nil || !errors.Is(err, plan.ErrChanged) || !strings.Contains(err.Error(), src) || !strings.Contains(err.Error(), "while it was read") {
		t.Fatalf("read = %v, want an error naming the file that changed", err)
	}
	if len(jobs) != 0 {
		t.Fatalf("%d parts of a changed file were read", len(jobs))
	}
}
