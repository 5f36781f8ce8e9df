package producer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync/atomic"
	"time"

	"github.com/ferry-dev/ferry/internal/metrics"
	"github.com/ferry-dev/ferry/internal/plan"
)

// The read stage: files in plan order become jobs for the compress stage,
// one per chunk of a large file, one per bundle of small files. Buffers come
// from a fixed pool, so memory does not grow with file size or count. A file
// that changes while it is read fails the transfer: a torn file is never
// uploaded.

// job is one unit of work for the compress stage: a chunk of a file, or a
// bundle of whole small files. Its pieces share buf, a buffer of the pool.
type job struct {
	buf    []byte
	pieces []piece
}

// piece is one chunk's raw bytes. chunks is the file's chunk count as the
// chunk's part announces it.
type piece struct {
	file, index, chunks int
	f                   *plan.File
	offset              int64
	raw                 []byte
}

type reader struct {
	pool    chan []byte // buffers of bufSize capacity, or nil to be made
	bufSize int64
	bundler *bundler // nil: no bundles
	read    *atomic.Int64
	files   *atomic.Int64 // files taken, for progress reports
	made    *atomic.Int64 // buffers allocated
	// stdin is read for a stream (plan.File.Stream).
	stdin  io.Reader
	limits plan.Limits
}

// run reads every file the walk plans and sends its jobs; it closes jobs
// when it returns.
func (r *reader) run(ctx context.Context, files <-chan planned, jobs chan<- job) error {
	defer close(jobs)
	var open *job // the bundle being filled
	for pf := range files {
		i, f := pf.i, pf.f
		if r.files != nil {
			r.files.Add(1)
		}
		if f.Stream != nil {
			if err := r.readStream(ctx, i, f, r.stdin, jobs); err != nil {
				return err
			}
			continue
		}
		if f.Part != nil {
			if err := r.readPart(ctx, i, f, jobs); err != nil {
				return err
			}
			continue
		}
		if !r.bundler.takes(i, f) {
			if err := r.readChunks(ctx, i, f, jobs); err != nil {
				return err
			}
			continue
		}
		if open != nil && !r.bundler.fits(i, f) {
			if err := send(ctx, jobs, *open); err != nil {
				return err
			}
			open = nil
		}
		if open == nil {
			buf, err := r.get(ctx)
			if err != nil {
				return err
			}
			open = &job{buf: buf[:0]}
			r.bundler.reset()
		}
		if err := r.readWhole(i, f, open); err != nil {
			r.pool <- open.buf
			return err
		}
		r.bundler.add(i, f)
	}
	if open != nil {
		return send(ctx, jobs, *open)
	}
	return nil
}

func send(ctx context.Context, jobs chan<- job, j job) error {
	select {
	case jobs <- j:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// get takes a buffer from the pool, waiting for one to come back.
func (r *reader) get(ctx context.Context) ([]byte, error) {
	select {
	case buf := <-r.pool:
		if buf == nil {
			buf = make([]byte, 0, r.bufSize)
			r.made.Add(1)
		}
		return buf[:0], nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// readWhole appends file fi, one chunk, to the bundle j.
func (r *reader) readWhole(fi int, f *plan.File, j *job) error {
	fh, err := f.Open()
	if err != nil {
		return &SourceError{fmt.Errorf("source %s: %w", f.Path, unwrapPathErr(err))}
	}
	defer fh.Close()
	start := len(j.buf)
	j.buf = j.buf[:start+int(f.Size)] // within capacity: the bundler keeps a bundle within bufSize
	if _, err := io.ReadFull(fh, j.buf[start:]); err != nil {
		return &SourceError{fmt.Errorf("source %s: %w (did the file change while it was read?)", f.Path, err)}
	}
	if err := unchanged(fh, f); err != nil {
		return err
	}
	r.count(f.Size)
	j.pieces = append(j.pieces, piece{file: fi, f: f, chunks: 1, raw: j.buf[start:len(j.buf):len(j.buf)]})
	return nil
}

// readChunks cuts file fi into chunks and sends them to jobs.
func (r *reader) readChunks(ctx context.Context, fi int, f *plan.File, jobs chan<- job) error {
	fh, err := f.Open()
	if err != nil {
		return &SourceError{fmt.Errorf("source %s: %w", f.Path, unwrapPathErr(err))}
	}
	defer fh.Close()
	first, last := 0, f.Chunks
	if f.Append != nil {
		// The object holds the first chunk: only the tail is read.
		first = 1
	}
	if f.Span != nil {
		// A pool's shard of the file: its chunks only.
		first, last = max(first, f.Span.Lo), f.Span.Hi
	}
	if first > 0 {
		off, _ := f.ChunkRange(first)
		if _, err := fh.Seek(off, io.SeekStart); err != nil {
			return &SourceError{fmt.Errorf("source %s: %w", f.Path, err)}
		}
	}
	for idx := first; idx < last; idx++ {
		off, size := f.ChunkRange(idx)
		buf, err := r.get(ctx)
		if err != nil {
			return err
		}
		buf = buf[:size]
		if _, err := io.ReadFull(fh, buf); err != nil {
			r.pool <- buf
			return &SourceError{fmt.Errorf("source %s: read chunk %d: %w (did the file change while it was read?)", f.Path, idx, err)}
		}
		r.count(size)
		if err := send(ctx, jobs, job{buf: buf, pieces: []piece{{file: fi, f: f, index: idx, chunks: f.Chunks, offset: off, raw: buf}}}); err != nil {
			r.pool <- buf
			return err
		}
	}
	if last < f.Chunks {
		return same(fh, f, f.Size)
	}
	return unchanged(fh, f)
}

// readPart reads file fi, a part of a source converted to Parquet: its
// range of the source, one job.
func (r *reader) readPart(ctx context.Context, fi int, f *plan.File, jobs chan<- job) error {
	fh, err := f.Open()
	if err != nil {
		return &SourceError{fmt.Errorf("source %s: %w", f.Path, unwrapPathErr(err))}
	}
	defer fh.Close()
	buf, err := r.get(ctx)
	if err != nil {
		return err
	}
	buf = buf[:f.Size]
	if _, err := fh.ReadAt(buf, f.Part.Offset); err != nil {
		r.pool <- buf
		return &SourceError{fmt.Errorf("source %s: read part %d at byte %d: %w (did the file change while it was read?)", f.Path, f.Part.Index, f.Part.Offset, err)}
	}
	if err := same(fh, f, f.Part.FileSize); err != nil {
		r.pool <- buf
		return err
	}
	r.count(f.Size)
	if err := send(ctx, jobs, job{buf: buf, pieces: []piece{{file: fi, f: f, chunks: 1, raw: buf}}}); err != nil {
		r.pool <- buf
		return err
	}
	return nil
}

func (r *reader) count(n int64) {
	r.read.Add(n)
	metrics.BytesRead.Add(float64(n))
}

// unchanged checks, after the last read, that the file ends where it ended
// when it was planned and still has the same size, mtime and ctime. ctime
// catches a file overwritten while it was read whose mtime was then set back
// (cp -p, rsync -t, tar x do that); nobody can set ctime back.
func unchanged(fh *os.File, f *plan.File) error {
	var one [1]byte
	if k, _ := fh.Read(one[:]); k != 0 {
		return &SourceError{fmt.Errorf("source %s: %w: file grew while it was read (planned %d bytes)", f.Path, plan.ErrChanged, f.Size)}
	}
	return same(fh, f, f.Size)
}

// same checks that the open file fh still has size bytes and f's mtime and
// ctime.
func same(fh *os.File, f *plan.File, size int64) error {
	st, err := fh.Stat()
	if err != nil {
		return &SourceError{fmt.Errorf("source %s: %w", f.Path, err)}
	}
	_, ctime := plan.StatID(st)
	if st.Size() != size || st.ModTime().UnixNano() != f.Mod || (f.Ctime != 0 && ctime != f.Ctime) {
		return &SourceError{fmt.Errorf("source %s: %w: file changed while it was read (size %d→%d, mtime %s→%s, ctime %s→%s)",
			f.Path, plan.ErrChanged, size, st.Size(), stamp(f.Mod), stamp(st.ModTime().UnixNano()), stamp(f.Ctime), stamp(ctime))}
	}
	return nil
}

func stamp(ns int64) string { return time.Unix(0, ns).UTC().Format(time.RFC3339Nano) }

func unwrapPathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
