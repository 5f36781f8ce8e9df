// Package restore brings objects back out of GCS into local files: sliced
// parallel downloads, CRC32C at every hop, parallel decompression, and an
// output that appears under its name only once its bytes are proven.
//
// A ferry object (one with ferry-codec, ferry-raw-size and ferry-raw-crc32c
// metadata) is decompressed: a zstd object with a seek table at its end
// (brief decision 4, package seektable) is cut into ranges of whole frames
// that are downloaded, decompressed and written at their raw offsets in
// parallel; a gzip object, a zstd object without a table and every small
// object are downloaded in parallel ranges and decompressed in order; a
// `none` object is its raw bytes. Any other object is downloaded as stored.
// Every range's CRC32C is combined into the object's and compared with what
// GCS reports; the raw bytes' CRC32C and size are compared with the
// metadata. Only then is the temporary file renamed to its name.
//
// Memory is bounded by Options, never by object size or count: at most
// Concurrency ranges are in flight, each holding at most Memory/Concurrency
// bytes (a readahead buffer, or a streaming decoder's window).
//
// An interrupted restore leaves `.NAME.ferry-part` beside the output, and for
// an object restored in several positional ranges a journal
// `.NAME.ferry-part.log` of the ranges already written. The next run of the
// same restore checks those ranges again from the disk (CRC32C) and
// downloads only the rest; a journal that does not describe the same object
// generation is discarded. Nothing else is kept between runs.
package restore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sync/semaphore"

	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/osfile"
	"github.com/ferry-dev/ferry/internal/window"
)

// ErrCorrupt marks an object whose bytes are not what GCS or its ferry
// metadata say: a corrupt, truncated or foreign object. Retrying does not
// help.
var ErrCorrupt = errors.New("corrupt object")

// ErrExists marks an output that exists with other content; Overwrite
// replaces it.
var ErrExists = errors.New("output exists and differs")

// Store is what restore needs of GCS. *gcs.Store implements it; it must be
// safe for concurrent use.
type Store interface {
	Attrs(ctx context.Context, bucket, name string) (gcs.Attrs, error)
	NewRangeReader(ctx context.Context, bucket, name string, offset, length int64) (io.ReadCloser, error)
	List(ctx context.Context, bucket, prefix string, fn func(gcs.Attrs) error) error
}

var _ Store = (*gcs.Store)(nil)

// Options configure a Restorer. Zero values take the defaults.
type Options struct {
	// Memory bounds the bytes of buffers and decoder windows held at once
	// (default 256 MiB, the producer's default too).
	Memory int64
	// Concurrency is how many ranges of large objects download at once,
	// across all objects (default 16: enough requests in flight to hide
	// GCS's per-request latency, few enough to leave each a useful
	// buffer).
	Concurrency int
	// Requests caps the small objects (read in one request) downloading
	// at once (default 512); below it the restore finds its own number,
	// more while the rate grows (package window). Each holds what it
	// needs of Memory, not a slot's share.
	Requests int
	// RangeSize is the most wire bytes one positional range covers
	// (default 16 MiB: large enough that a request's latency is small
	// beside its transfer, small enough that a large object spreads over
	// every slot). Objects of at most min(RangeSize, 1 MiB) are read in a
	// single request.
	RangeSize int64
	// Timeout bounds each request (default 2m); a listing gets 15 times
	// as long.
	Timeout time.Duration
	// Attempts is how often a range is tried when the network fails
	// (default 3); a corrupt object is never retried.
	Attempts int
	// Overwrite replaces outputs that exist with other content.
	Overwrite bool
	// AsStored restores every object as its stored bytes, ferry objects
	// too, without decompressing (verify runs the stock CLIs on these).
	AsStored bool
	// PreservePosix restores each file's owner and group from the
	// object's metadata (gcloud's goog-reserved-posix-uid and -gid) also
	// when not running as root, where that is done anyway. The mode is
	// always restored.
	PreservePosix bool
}

const (
	defaultMemory      = 256 << 20
	defaultConcurrency = 16
	defaultRequests    = 512
	maxRequests        = 4096
	defaultRangeSize   = 16 << 20
	smallObjectMax     = 1 << 20
)

// Validate reports whether o, with defaults applied, is usable; the error
// names the option.
func (o Options) Validate() error { return o.applyDefaults() }

// applyDefaults fills in zero values and checks the result.
func (o *Options) applyDefaults() error {
	if o.Memory == 0 {
		o.Memory = defaultMemory
	}
	if o.Concurrency == 0 {
		o.Concurrency = defaultConcurrency
	}
	if o.Requests == 0 {
		o.Requests = defaultRequests
	}
	if o.RangeSize == 0 {
		o.RangeSize = defaultRangeSize
	}
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Minute
	}
	if o.Attempts == 0 {
		o.Attempts = 3
	}
	switch {
	case o.Concurrency < 1 || o.Concurrency > 1024:
		return fmt.Errorf("concurrency %d: want 1 to 1024", o.Concurrency)
	case o.Requests < 1 || o.Requests > maxRequests:
		return fmt.Errorf("requests %d: want 1 to %d", o.Requests, maxRequests)
	case o.Memory/int64(o.Concurrency) < 4<<20:
		return fmt.Errorf("memory %d bytes for concurrency %d: want at least 4 MiB per range in flight", o.Memory, o.Concurrency)
	case o.RangeSize < 64<<10:
		return fmt.Errorf("range size %d: want at least 64 KiB", o.RangeSize)
	case o.Timeout < 0 || o.Attempts < 1:
		return fmt.Errorf("timeout %s, attempts %d: want positive values", o.Timeout, o.Attempts)
	}
	return nil
}

// Restorer restores objects. It is safe for concurrent use; all its
// restores share one budget of Concurrency slots and Memory.
type Restorer struct {
	store Store
	o     Options
	// slots bounds the ranges in flight; each slot may hold one buffer of
	// bufSize bytes or one decoder of at most window bytes.
	slots   chan struct{}
	perSlot int64
	// mem is Memory: a slot holds its share, a small object's download
	// what it needs; win admits the small objects' downloads.
	mem     *semaphore.Weighted
	win     *window.Window
	bufs    chan []byte
	bufSize int64
	window  uint64
	decs    sync.Pool // *zstd.Decoder, synchronous

	wire, raw, resumed atomic.Int64
	total              atomic.Int64 // raw bytes of a single object's restore
	objects, listed    atomic.Int64
	listing            atomic.Bool
	start              time.Time
	// freeSpace is osfile.FreeSpace; tests inject a small disk.
	freeSpace func(dir string) (int64, error)
	// euid is os.Geteuid; tests restore as someone else.
	euid func() int
	// noteOnce and noteText keep the first note (see note).
	noteOnce sync.Once
	noteText atomic.Pointer[string]
	// temps are the temporary files being written (see temps.go).
	temps *temps
	// written, when set, is called with a temporary file's path once
	// its bytes are downloaded (tests write to it as another process).
	written func(path string)
}

// New returns a Restorer reading from store.
func New(store Store, o Options) (*Restorer, error) {
	if err := o.applyDefaults(); err != nil {
		return nil, err
	}
	perSlot := o.Memory / int64(o.Concurrency)
	r := &Restorer{store: store, o: o, perSlot: perSlot, mem: semaphore.NewWeighted(o.Memory),
		win:   window.New(window.Options{Start: min(window.DefaultStart, o.Requests), Max: o.Requests}),
		slots: make(chan struct{}, o.Concurrency), bufs: make(chan []byte, o.Concurrency),
		// Half a slot for a readahead buffer or a decoder's window, the
		// rest for what decoders and copies allocate around them.
		bufSize:   min(perSlot/2, o.RangeSize),
		window:    uint64(min(perSlot/2, 1<<30)),
		start:     time.Now(),
		freeSpace: osfile.FreeSpace, euid: os.Geteuid, temps: newTemps(),
	}
	return r, nil
}

// Progress is a snapshot of what a Restorer has done.
type Progress struct {
	Objects int64 // objects restored, skipped or failed
	Listed  int64 // objects found so far
	Listing bool  // the listing is still running
	Wire    int64 // bytes downloaded
	Raw     int64 // bytes written to outputs, resumed ones included
	Resumed int64 // raw bytes an earlier run had written and this one checked
	// RawTotal is the raw size of the one object a Run restores, 0 for a
	// prefix.
	RawTotal int64
	Elapsed  time.Duration
}

// Progress reports what has been done so far.
func (r *Restorer) Progress() Progress {
	return Progress{Objects: r.objects.Load(), Listed: r.listed.Load(), Listing: r.listing.Load(),
		Wire: r.wire.Load(), Raw: r.raw.Load(), Resumed: r.resumed.Load(), RawTotal: r.total.Load(), Elapsed: time.Since(r.start)}
}

// acquire takes a slot and its share of Memory, or fails when ctx ends.
func (r *Restorer) acquire(ctx context.Context) error {
	select {
	case r.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := r.mem.Acquire(ctx, r.perSlot); err != nil {
		<-r.slots
		return err
	}
	return nil
}

func (r *Restorer) release() {
	r.mem.Release(r.perSlot)
	<-r.slots
}

// admit lets one range of o download: a small object's single request
// through the window (package window: more in flight while the rate
// grows), holding what it needs of Memory (its bytes, its raw bytes'
// decoder history and output buffer, and a bounded overhead); any other
// range through a slot. release gives it back; ok says it downloaded,
// and a small object's bytes then count in the window's rate.
func (r *Restorer) admit(ctx context.Context, o object) (release func(ok bool), err error) {
	if !r.small(o.attrs.Size) {
		if err := r.acquire(ctx); err != nil {
			return nil, err
		}
		return func(bool) { r.release() }, nil
	}
	end, err := r.win.Admit(ctx, r.mem, min(r.perSlot, o.attrs.Size+2*max(o.want.size, o.attrs.Size)+smallOverhead))
	if err != nil {
		return nil, err
	}
	return func(ok bool) {
		if ok {
			end(o.attrs.Size + smallOverhead)
			return
		}
		end(0)
	}, nil
}

// smallOverhead is what a small object's download holds beside its bytes
// (a request's buffers, a decoder's tables), and what its round trip
// counts for in the window's rate.
const smallOverhead = 64 << 10

// buffer returns a readahead buffer of n <= bufSize bytes; only slot
// holders call it, so at most Concurrency exist. Large ones are reused;
// a small object's is its own size.
func (r *Restorer) buffer(n int64) []byte {
	if n < r.bufSize/4 {
		return make([]byte, n)
	}
	select {
	case b := <-r.bufs:
		return b[:n]
	default:
		return make([]byte, n, r.bufSize)
	}
}

func (r *Restorer) putBuffer(b []byte) {
	if int64(cap(b)) != r.bufSize {
		return
	}
	select {
	case r.bufs <- b[:cap(b)]:
	default:
	}
}

// decoder returns a synchronous zstd decoder whose window is bounded by the
// slot's share of Memory.
func (r *Restorer) decoder() (*zstd.Decoder, error) {
	if d, ok := r.decs.Get().(*zstd.Decoder); ok {
		return d, nil
	}
	return zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(r.window), zstd.WithDecoderLowmem(true))
}

func (r *Restorer) putDecoder(d *zstd.Decoder) {
	_ = d.Reset(nil)
	r.decs.Put(d)
}

// streamDecoders is how many goroutines decode one large zstd object that
// has no seek table: the stream is sequential, but blocks decode ahead.
func streamDecoders() int { return min(4, runtime.GOMAXPROCS(0)) }
