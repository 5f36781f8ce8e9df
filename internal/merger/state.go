package merger

import (
	"container/list"
	"strconv"
	"sync"
	"time"

	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/manifest"
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
	pages    *manifest.Reader
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

// end marks t finished and lets go of what it held.
func (t *transfer) end() {
	t.finished, t.manifest, t.pages, t.singles, t.present, t.reported = true, nil, nil, nil, nil, nil
}

// reset forgets which chunks are stored.
func (t *transfer) reset() {
	t.have, t.present, t.singles = 0, map[chunkKey]stored{}, newBitset(t.manifest.Totals.Files)
}

// has reports whether chunk k of f is known to be stored.
func (t *transfer) has(k chunkKey, f *message.File) bool {
	if !f.Staged() {
		return t.singles.has(k.file)
	}
	_, ok := t.present[k]
	return ok
}

// mark records chunk k of f as stored, as s describes it.
func (t *transfer) mark(k chunkKey, f *message.File, s stored) {
	if !t.has(k, f) {
		t.have++
	}
	if !f.Staged() {
		t.singles.set(k.file)
		return
	}
	t.present[k] = s
}

// unmark takes back that chunk k of f is stored.
func (t *transfer) unmark(k chunkKey, f *message.File) {
	if !t.has(k, f) {
		return
	}
	t.have--
	if !f.Staged() {
		t.singles.clear(k.file)
		return
	}
	delete(t.present, k)
}

func fromAttrs(a gcs.Attrs) stored {
	s := stored{Object: a.Name, Size: a.Size, CRC32C: a.CRC32C, Generation: a.Generation, Created: a.Created,
		Transfer: a.Metadata[message.MetaTransfer], Worker: a.Metadata[message.MetaWorker]}
	s.Started, _ = time.Parse(time.RFC3339Nano, a.Metadata[message.MetaUploadAt])
	s.Attempt, _ = strconv.Atoi(a.Metadata[message.MetaAttempt])
	return s
}

// bitset is one bit per file.
type bitset []uint64

func newBitset(n int) bitset { return make(bitset, (n+63)/64) }

func (b bitset) has(i int) bool { return b[i/64]&(1<<(i%64)) != 0 }

func (b bitset) set(i int) { b[i/64] |= 1 << (i % 64) }

func (b bitset) clear(i int) { b[i/64] &^= 1 << (i % 64) }
