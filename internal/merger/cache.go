package merger

import (
	"container/list"
	"sync"
	"time"

	"github.com/ferry-dev/ferry/internal/message"
)

// key names a transfer: its id and the bucket its events name. The same id
// in two buckets is two transfers (two staging prefixes, two done markers).
type key struct{ bucket, id string }

// transfer is the cached view of one transfer in progress. Everything in it
// can be rebuilt from GCS: the done marker, the manifest, a listing of the
// staging chunks and the attributes of one-chunk final objects.
type transfer struct {
	mu       sync.Mutex // one event of a transfer at a time
	bucket   string
	id       string
	checked  bool // done marker looked for
	finished bool // ended (here or, as the done marker says, elsewhere)
	refused  bool // names a bucket FERRY_BUCKETS does not allow; ended
	// manifest is the sealed manifest's header; pages reads its files a
	// page at a time. finals is what every final object's name starts
	// with (the listing that confirms them).
	manifest *message.Manifest
	pages    *pages
	finals   string
	// prefix is the destination prefix a producer's failed event gave,
	// for a transfer that ended before its manifest was sealed.
	prefix string
	// status is how the transfer ended, once known here (ok, failed,
	// cancelled): a late chunk event then needs no look at the marker.
	status string
	// kept: it ended with its final objects confirmed and left in
	// place (ok, or failed in its table load).
	kept bool
	// run is the transfer's current run as its sealed manifest or its
	// RunObject said; oldRuns are runs seen superseded.
	run     string
	oldRuns []string
	need    int // chunks the manifest lists
	have    int // of them known to be stored
	scanned bool
	// reported holds what workers said they stored before the manifest
	// was read, up to maxReported: unverified until the scan holds it
	// against the manifest. Beyond it, the scan finds them in GCS.
	reported map[chunkKey]stored
	// singles holds, by file, the one-chunk files known to be stored with
	// the size and CRC32C the manifest gives: a bit a file, so a million
	// files cost 125 KB; what GCS says of them is listed again at the end.
	// present holds the same for the chunks of files of several chunks,
	// whose number grows with bytes (a chunk is at least size/1000), not
	// with files.
	singles bitset
	present map[chunkKey]stored
	// lastEvent is when this process last handled an event of the
	// transfer; progressAt when it last wrote the progress marker;
	// lastScan when it last looked in GCS for missing chunks, and
	// recheckWait how long a quiet transfer waits for the next look.
	lastEvent, progressAt, lastScan time.Time
	recheckWait                     time.Duration
	// renewed is when this process last renewed the transfer's lease.
	renewed time.Time

	// Guarded by cache.mu.
	refs int
	elem *list.Element
}

type chunkKey struct{ file, index int }

// stored is one stored chunk object as GCS or its worker described it.
type stored struct {
	Object     string
	Size       int64
	CRC32C     uint32
	Generation int64
	Transfer   string // the ferry-transfer metadata
	Worker     string
	Started    time.Time // upload start, from the object's metadata
	Created    time.Time
	Attempt    int
}

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
