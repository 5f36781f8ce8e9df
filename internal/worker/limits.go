package worker

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
)

// limiter paces the bytes a worker sends; *rate.Limiter is one.
type limiter interface {
	// WaitN blocks until n bytes may be sent, or ctx is done. n is at
	// most Burst().
	WaitN(ctx context.Context, n int) error
	Burst() int
}

var _ limiter = (*rate.Limiter)(nil)

// newLimiter returns the limiter of FERRY_MAX_RATE bytes per second. The
// burst is a quarter second of it, at most 256 KiB: enough that a read
// of the upload body is one wait, small enough that the rate holds over
// short spans too.
func newLimiter(bytesPerSecond int64) *rate.Limiter {
	burst := min(max(bytesPerSecond/4, 1), 256<<10)
	return rate.NewLimiter(rate.Limit(bytesPerSecond), int(burst))
}

// limitedReader is an upload body read no faster than its limiter allows.
type limitedReader struct {
	ctx context.Context
	r   io.Reader
	lim limiter
}

func (l *limitedReader) Read(p []byte) (int, error) {
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

// limited is body as an upload reads it: paced by FERRY_MAX_RATE when set.
func (w *Worker) limited(ctx context.Context, body io.Reader) io.Reader {
	if w.limit == nil {
		return body
	}
	return &limitedReader{ctx: ctx, r: body, lim: w.limit}
}

// doneCache answers whether a transfer has ended, from its done marker in
// GCS: asked at most once every `every` per transfer (the answer "ended"
// never changes, so it is kept), for at most max transfers at once. It is
// safe for concurrent use.
type doneCache struct {
	store objectStore
	every time.Duration
	max   int
	now   func() time.Time

	mu      sync.Mutex
	entries map[doneKey]*doneEntry
}

type doneKey struct{ bucket, id string }

type doneEntry struct {
	mu      sync.Mutex // one look at a time per transfer
	checked time.Time
	ended   bool
}

// ended reports whether the transfer's done marker exists. An error
// looking counts as "not ended": the chunk is uploaded, and the merger
// removes it if the transfer is over.
func (c *doneCache) ended(ctx context.Context, bucket, tid string) bool {
	e := c.entry(doneKey{bucket, tid})
	e.mu.Lock()
	defer e.mu.Unlock()
	now := c.now()
	if e.ended || (!e.checked.IsZero() && now.Sub(e.checked) < c.every) {
		return e.ended
	}
	_, err := c.store.Attrs(ctx, bucket, message.DoneMarker(tid))
	switch {
	case err == nil:
		e.ended = true
	case !errors.Is(err, gcs.ErrNotFound):
		return false // ask again next time
	}
	e.checked = now
	return e.ended
}

func (c *doneCache) entry(k doneKey) *doneEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[k]; ok {
		return e
	}
	if len(c.entries) >= c.max {
		// Full: forget an arbitrary transfer; at worst it is asked about
		// again.
		for old := range c.entries {
			delete(c.entries, old)
			break
		}
	}
	e := &doneEntry{}
	c.entries[k] = e
	return e
}

func (c *doneCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
