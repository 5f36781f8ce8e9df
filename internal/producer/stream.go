package producer

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/ferry-dev/ferry/internal/plan"
)

// The read stage for standard input (`producer submit - gs://B/P/NAME`): a
// stream of unknown length, read in the chunk sizes plan.Stream gives, into
// the same pool of buffers as files, so memory stays within
// FERRY_PRODUCER_MEMORY however long the stream. Its chunk count is known
// only at its end, so its chunks are staged and the merger composes them,
// seek table last — except for a stream that ends within its first chunk:
// the reader holds that chunk until it has seen a byte of the next, and
// sends a stream of one chunk straight to its final name, as a file of one
// chunk. Until then a staged chunk's part announces FERRY_MAX_CHUNKS as its
// file's chunk count: the most it may have.

// checkStream refuses what standard input cannot do.
func checkStream(req Request, pl *plan.Plan) error {
	if len(pl.Files) != 1 || pl.Files[0].Stream == nil {
		return nil
	}
	switch {
	case req.Stdin == nil:
		return fmt.Errorf("source %s: %s is read only by producer submit", plan.Stdin, plan.StdinName)
	case req.SkipUnchanged:
		return fmt.Errorf("--skip-unchanged compares a file's size and mtime (or CRC32C); %s has none before it is read: use -n to skip an existing object", plan.StdinName)
	}
	return nil
}

// readStream reads the stream f (file fi) from src and sends its chunks.
func (r *reader) readStream(ctx context.Context, fi int, f *plan.File, src io.Reader, jobs chan<- job) error {
	st := f.Stream
	var held *job // chunk 0, until it is known whether another follows
	var off int64
	for idx := 0; ; idx++ {
		size := st.Chunk(idx)
		buf, err := r.get(ctx)
		if err != nil {
			r.put(held)
			return err
		}
		n, err := io.ReadFull(src, buf[:size])
		end := errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
		if err != nil && !end {
			r.pool <- buf
			r.put(held)
			return fmt.Errorf("%s: read chunk %d: %w", plan.StdinName, idx, err)
		}
		buf = buf[:n]
		if n > 0 && idx >= st.MaxChunks {
			r.pool <- buf
			r.put(held)
			return st.TooLong(r.limits)
		}
		r.count(int64(n))
		j := job{buf: buf, pieces: []piece{{file: fi, f: f, index: idx, offset: off, raw: buf, chunks: st.MaxChunks}}}
		off += int64(n)
		switch {
		case idx == 0 && end:
			// The whole stream is one chunk (perhaps empty).
			j.pieces[0].chunks = 1
			return send(ctx, jobs, j)
		case idx == 0:
			held = &j
			continue
		case idx == 1 && n == 0:
			// The stream ended with its first chunk.
			r.pool <- buf
			held.pieces[0].chunks = 1
			return send(ctx, jobs, *held)
		case idx == 1:
			h := *held
			held = nil
			if err := send(ctx, jobs, h); err != nil {
				r.pool <- buf
				return err
			}
		}
		if n == 0 {
			r.pool <- buf
			return nil
		}
		if err := send(ctx, jobs, j); err != nil {
			r.pool <- buf
			return err
		}
		if end {
			return nil
		}
	}
}

// put returns a held job's buffer to the pool.
func (r *reader) put(j *job) {
	if j != nil {
		r.pool <- j.buf
	}
}
