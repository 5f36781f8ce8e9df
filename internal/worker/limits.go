package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
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

	// The transfer's current run as its RunObject said when last read,
	// and the runs known to be superseded (that never changes back).
	run        string
	runChecked time.Time
	superseded []string

	// The transfer's key object as last read (keys nil: not yet).
	keys *message.Keys
}

// errUnproven: a chunk message its transfer's key object does not prove.
var errUnproven = errors.New("not proven by the transfer's chunk key")

// proves checks that key, a chunk message's, is the chunk key the
// transfer's key object lists (message.Keys.Chunks): only its producer
// knows it, so a message anyone else published (every submitter may
// publish chunks) writes nothing. The key object is read once per
// transfer, and again when a key does not match it (a new run writes a
// new one). No key object, or one ferry did not write: unproven. An error
// reading it is returned, to try again.
func (c *doneCache) proves(ctx context.Context, bucket, tid, key string) error {
	e := c.entry(doneKey{bucket, tid})
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.keys != nil && e.keys.ProvesChunk(key) {
		return nil
	}
	name := message.KeyObject(tid)
	b, err := c.store.ReadAll(ctx, bucket, name)
	var k message.Keys
	switch {
	case errors.Is(err, gcs.ErrNotFound):
		return fmt.Errorf("%w: transfer %s has no key object gs://%s/%s", errUnproven, tid, bucket, name)
	case err != nil:
		return fmt.Errorf("reading the key object of transfer %s: %w", tid, err)
	case message.Decode(b, &k) != nil || k.Check(tid) != nil:
		return fmt.Errorf("%w: the key object gs://%s/%s of transfer %s is not one ferry wrote", errUnproven, bucket, name, tid)
	}
	e.keys = &k
	if !k.ProvesChunk(key) {
		return fmt.Errorf("%w: its key is not the one the key object gs://%s/%s lists", errUnproven, bucket, name)
	}
	return nil
}

// maxSuperseded bounds the superseded runs remembered per transfer; one
// forgotten is only read about again.
const maxSuperseded = 8

// superseded reports whether run is no longer the transfer's current run:
// a later run wrote the transfer's RunObject since. A run the cache saw
// current within `every` is taken as current unless fresh is set; fresh
// reads the object, and its error is returned. A missing object (an old
// producer, or a transfer whose staging is gone) supersedes nothing: the
// done marker tells an ended transfer.
func (c *doneCache) superseded(ctx context.Context, bucket, tid, run string, fresh bool) (bool, error) {
	if run == "" {
		return false, nil
	}
	e := c.entry(doneKey{bucket, tid})
	e.mu.Lock()
	defer e.mu.Unlock()
	if slices.Contains(e.superseded, run) {
		return true, nil
	}
	now := c.now()
	if !fresh && e.run == run && now.Sub(e.runChecked) < c.every {
		return false, nil
	}
	b, err := c.store.ReadAll(ctx, bucket, message.RunObject(tid))
	switch {
	case errors.Is(err, gcs.ErrNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("reading the current run of transfer %s: %w", tid, err)
	}
	if !message.ValidRun(string(b)) {
		return false, nil // not a run ferry wrote: it supersedes nothing
	}
	e.run, e.runChecked = string(b), now
	if e.run == run {
		return false, nil
	}
	if len(e.superseded) == maxSuperseded {
		e.superseded = e.superseded[1:]
	}
	e.superseded = append(e.superseded, run)
	return true, nil
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
