package worker

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/ratelimit"
)

// limited is body as an upload reads it: paced by FERRY_MAX_RATE when set.
func (w *Worker) limited(ctx context.Context, body io.Reader) io.Reader {
	if w.limit == nil {
		return body
	}
	return ratelimit.Reader(ctx, body, w.limit)
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
