// Package ratelimit paces the bytes a process sends (FERRY_MAX_RATE): the
// worker's uploads and, with FERRY_TRANSPORT=pubsub, the producer's chunk
// messages. One limiter per process covers all that it sends at once.
package ratelimit

import (
	"context"
	"io"

	"golang.org/x/time/rate"
)

// Limiter paces bytes; *rate.Limiter is one. Tests pass one on a virtual
// clock, so no test waits on wall time.
type Limiter interface {
	// WaitN blocks until n bytes may be sent, or ctx is done. n is at
	// most Burst(). Safe for concurrent use.
	WaitN(ctx context.Context, n int) error
	Burst() int
}

var _ Limiter = (*rate.Limiter)(nil)

// New returns the limiter of bytesPerSecond. The burst is a quarter second
// of it, at most 256 KiB: enough that one read of an upload body is one
// wait, small enough that the rate holds over short spans too.
func New(bytesPerSecond int64) *rate.Limiter {
	burst := min(max(bytesPerSecond/4, 1), 256<<10)
	return rate.NewLimiter(rate.Limit(bytesPerSecond), int(burst))
}

// Wait blocks until n bytes may be sent, n of any size: it waits in steps
// of at most the burst, so the bytes of any span of time stay within rate ×
// span + burst.
func Wait(ctx context.Context, lim Limiter, n int) error {
	b := lim.Burst()
	for n > 0 {
		step := min(n, b)
		if err := lim.WaitN(ctx, step); err != nil {
			return err
		}
		n -= step
	}
	return nil
}

// Reader is r read no faster than lim allows: each Read returns at most a
// burst of bytes, and only once the limiter let them go.
func Reader(ctx context.Context, r io.Reader, lim Limiter) io.Reader {
	if lim == nil {
		return r
	}
	return &reader{ctx: ctx, r: r, lim: lim}
}

type reader struct {
	ctx context.Context
	r   io.Reader
	lim Limiter
}

func (l *reader) Read(p []byte) (int, error) {
	if b := l.lim.Burst(); len(p) > b {
		p = p[:b]
	}
	n, err := l.r.Read(p)
	if n > 0 {
		// The bytes leave when Read returns: wait for them first.
		if werr := l.lim.WaitN(l.ctx, n); werr != nil {
			return 0, werr
		}
	}
	return n, err
}
