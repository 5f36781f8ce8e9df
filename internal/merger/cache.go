package merger

import (
	"container/list"
	"sync"

	"github.com/ferry-dev/ferry/internal/message"
)

// maxReported bounds the unverified reports one transfer keeps before its
// manifest is read; beyond it, the scan finds the objects in GCS instead
// (one listing call per 1,000 files).
const maxReported = 4 * message.PageFiles

// cache holds the transfers in progress, bounded: when it is over its size,
// the least recently used transfers nobody is handling are dropped, and
// rebuilt from GCS when their next event comes. It is safe for concurrent
// use.
type cache struct {
	mu    sync.Mutex
	max   int
	lru   *list.List // of *transfer, most recently used first
	byKey map[key]*list.Element
}

func newCache(max int) *cache {
	return &cache{max: max, lru: list.New(), byKey: map[key]*list.Element{}}
}

// acquire returns the transfer of k, creating it, and holds it in the
// cache until release.
func (c *cache) acquire(k key) *transfer {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[k]; ok {
		c.lru.MoveToFront(e)
		t := e.Value.(*transfer)
		t.refs++
		return t
	}
	t := &transfer{bucket: k.bucket, id: k.id, refs: 1, present: map[chunkKey]stored{}, reported: map[chunkKey]stored{}}
	t.elem = c.lru.PushFront(t)
	c.byKey[k] = t.elem
	// Evict idle transfers from the cold end. One that is being handled
	// stays; the cache is then briefly over its size.
	for e := c.lru.Back(); c.lru.Len() > c.max && e != nil; {
		prev := e.Prev()
		if old := e.Value.(*transfer); old.refs == 0 {
			c.lru.Remove(e)
			delete(c.byKey, key{old.bucket, old.id})
		}
		e = prev
	}
	return t
}

// lookup is acquire for a transfer the cache holds; nil otherwise.
func (c *cache) lookup(k key) *transfer {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[k]
	if !ok {
		return nil
	}
	t := e.Value.(*transfer)
	t.refs++
	return t
}

// keys lists the transfers the cache holds.
func (c *cache) keys() []key {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]key, 0, len(c.byKey))
	for k := range c.byKey {
		out = append(out, k)
	}
	return out
}

// release ends a use of t that acquire began.
func (c *cache) release(t *transfer) {
	c.mu.Lock()
	t.refs--
	c.mu.Unlock()
}

// len is how many transfers the cache holds.
func (c *cache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}
