package producer

import (
	"context"

	"github.com/ferry-dev/ferry/internal/codec"
)

// FrameSize is the raw size of one compressed frame. A chunk is compressed as
// one or more independent frames of this size, on a pool of one encoder per
// core: all cores keep working even when a file's last chunk is the only one
// left, which a frame per chunk would leave to a single core. Concatenated
// frames are still one valid stream, and 4 MiB is above zstd level 3's
// window, so the ratio does not suffer.
const FrameSize = 4 << 20

type frameJob struct {
	src  []byte
	out  *[]byte
	done chan<- error
}

// startFrameEncoders runs n encoder goroutines on jobs until it is closed.
func startFrameEncoders(n int, c codec.Codec, level int, jobs <-chan frameJob) error {
	encs := make([]codec.Encoder, n)
	for i := range encs {
		var err error
		if encs[i], err = codec.NewEncoder(c, level); err != nil {
			return err
		}
	}
	for _, enc := range encs {
		go func() {
			for j := range jobs {
				var err error
				*j.out, err = enc.Encode((*j.out)[:0], j.src)
				j.done <- err
			}
		}()
	}
	return nil
}

// chunkEncoder splits a chunk into frames and has the shared encoders
// compress them in parallel. One per chunk-level goroutine.
type chunkEncoder struct {
	ctx    context.Context
	jobs   chan<- frameJob
	pieces [][]byte
	done   chan error
}

func newChunkEncoder(ctx context.Context, jobs chan<- frameJob, maxChunk int64) *chunkEncoder {
	n := max(1, int((maxChunk+FrameSize-1)/FrameSize))
	return &chunkEncoder{ctx: ctx, jobs: jobs, pieces: make([][]byte, n), done: make(chan error, n)}
}

// Frames compresses src into consecutive frames. The result is valid until
// the next call.
func (e *chunkEncoder) Frames(src []byte) ([][]byte, error) {
	n := max(1, (len(src)+FrameSize-1)/FrameSize)
	for len(e.pieces) < n {
		e.pieces = append(e.pieces, nil)
	}
	if cap(e.done) < n {
		e.done = make(chan error, n)
	}
	sent := 0
	var err error
	for k := 0; k < n && err == nil; k++ {
		piece := src[k*FrameSize : min((k+1)*FrameSize, len(src))]
		select {
		case e.jobs <- frameJob{src: piece, out: &e.pieces[k], done: e.done}:
			sent++
		case <-e.ctx.Done():
			err = e.ctx.Err()
		}
	}
	for ; sent > 0; sent-- { // every frame sent must come back before reuse
		if ferr := <-e.done; ferr != nil && err == nil {
			err = ferr
		}
	}
	if err != nil {
		return nil, err
	}
	return e.pieces[:n], nil
}
