// Package worker uploads chunks. Its handler takes one chunk message — one
// chunk of a large file, or a bundle of many small files — checks the CRC32C
// of every part's bytes (from the message itself, or from a file inside this
// worker's own spool directory) before sending any, uploads the parts in
// parallel, each under a DoesNotExist precondition with the CRC32C sent,
// publishes one chunk-uploaded event listing what GCS stored and only then
// lets the message be acked. Every step is idempotent: an object already
// present with the right CRC32C is a duplicate delivery, not an error, and
// its attributes are read only when the precondition says it exists.
//
// A message never chooses a path or a bucket: a spool name is one file name,
// resolved inside the worker's spool directory without following links out
// of it, and the bucket must be one FERRY_BUCKETS allows.
package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"

	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/iobuf"
	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/metrics"
	"github.com/ferry-dev/ferry/internal/osfile"
	"github.com/ferry-dev/ferry/internal/pacer"
	"github.com/ferry-dev/ferry/internal/queue"
	"github.com/ferry-dev/ferry/internal/ratelimit"
	"github.com/ferry-dev/ferry/internal/window"
)

// objectStore is what a worker needs of GCS.
type objectStore interface {
	Attrs(ctx context.Context, bucket, name string) (gcs.Attrs, error)
	Upload(ctx context.Context, bucket, name string, r io.Reader, opt gcs.UploadOptions) (gcs.Attrs, error)
	ReadAll(ctx context.Context, bucket, name string) ([]byte, error)
}

var _ objectStore = (*gcs.Store)(nil)

// publisher sends one message and returns once it is stored.
type publisher interface {
	Publish(ctx context.Context, data []byte, attrs map[string]string) error
}

var _ publisher = (*queue.Publisher)(nil)

// Options configure a Worker.
type Options struct {
	Store  objectStore
	Events publisher
	// ID names the worker in logs, events and object metadata.
	ID string
	// MaxAttempts is the subscription's dead-letter threshold: on the last
	// delivery a transient error is reported as a failure of the transfer,
	// so the transfer ends instead of waiting for a chunk that is gone.
	MaxAttempts int
	// SpoolDir is the only directory spool files are read from and
	// removed in. Empty: this worker has no spool (FERRY_TRANSPORT=pubsub)
	// and refuses messages that name one.
	SpoolDir string
	// Requests caps the uploads in flight over all messages; default 64.
	// Below it the worker finds its own number (package window): more
	// while the rate grows, fewer when GCS pushes back. A bundle's files
	// are small and their uploads bound by round trips, so they go in
	// parallel, as many as the window admits.
	Requests int
	// RequestMemory bounds what the uploads in flight hold beside their
	// messages, each as gcs.RequestMemory sizes it; default 128 KiB per
	// request of Requests.
	RequestMemory int64
	// Buckets are the buckets this worker may write to (FERRY_BUCKETS;
	// none listed: any) and the KMS key it writes with (FERRY_KMS_KEY).
	Buckets config.Buckets
	// MaxRate bounds the bytes per second this process uploads, over all
	// its uploads (FERRY_MAX_RATE); 0: no limit.
	MaxRate int64
	// Pacer paces this process's uploads when GCS pushes back (429,
	// 503); nil: the Store's pacer of the chunk's bucket, which every
	// other call of this process to that bucket waits on too (a Store
	// without pacers: one New makes with the defaults).
	Pacer *pacer.Pacer
	// DoneCheckEvery is how often, at most, the worker looks for the done
	// marker of a transfer whose chunks it receives, to drop the chunks of
	// a transfer that ended (cancelled, failed) without uploading them;
	// default 5s. DoneCacheSize bounds the transfers remembered; default
	// 4096.
	DoneCheckEvery time.Duration
	DoneCacheSize  int
	Log            *slog.Logger

	limiter ratelimit.Limiter // tests: replaces the one MaxRate makes
	now     func() time.Time  // tests: the clock of the done cache
}

// Worker handles chunk messages. It is safe for concurrent use.
type Worker struct {
	o     Options
	spool *os.Root
	log   *slog.Logger
	limit ratelimit.Limiter // nil: no limit
	done  *doneCache
	// window admits the uploads in flight, mem what they hold.
	window *window.Window
	mem    *semaphore.Weighted

	handler queue.Handler // chain(): handle in its middleware
}

// New returns a Worker. It creates the spool directory if it is missing.
func New(o Options) (*Worker, error) {
	if o.Requests <= 0 {
		o.Requests = defaultRequests
	}
	if o.RequestMemory <= 0 {
		o.RequestMemory = int64(o.Requests) * gcs.RequestMemory(gcs.PlainMax+1)
	}
	if o.DoneCheckEvery <= 0 {
		o.DoneCheckEvery = 5 * time.Second
	}
	if o.DoneCacheSize <= 0 {
		o.DoneCacheSize = 4096
	}
	if o.now == nil {
		o.now = time.Now
	}
	if _, ok := o.Store.(pacers); !ok && o.Pacer == nil {
		o.Pacer = pacer.New(pacer.Options{})
	}
	w := &Worker{o: o, log: logging.OrDiscard(o.Log), limit: o.limiter, mem: semaphore.NewWeighted(o.RequestMemory),
		window: window.New(window.Options{Start: min(window.DefaultStart, o.Requests), Max: o.Requests}),
		done:   &doneCache{store: o.Store, every: o.DoneCheckEvery, max: o.DoneCacheSize, now: o.now, entries: map[doneKey]*doneEntry{}}}
	w.handler = w.chain()
	if w.limit == nil && o.MaxRate > 0 {
		w.limit = ratelimit.New(o.MaxRate)
	}
	if o.SpoolDir != "" {
		if err := os.MkdirAll(o.SpoolDir, 0o755); err != nil {
			return nil, fmt.Errorf("spool directory: %w", err)
		}
		root, err := os.OpenRoot(o.SpoolDir)
		if err != nil {
			return nil, fmt.Errorf("spool directory: %w", err)
		}
		w.spool = root
	}
	return w, nil
}

// Close releases the spool directory.
func (w *Worker) Close() error {
	if w.spool != nil {
		return w.spool.Close()
	}
	return nil
}

// Handle is the queue.Handler for chunk messages: handle, wrapped in what
// every delivery gets (queue's middleware): panic recovery, the in-flight
// gauge, the attempts cap at the dead-letter threshold, and the report of
// a permanent failure to the merger before the message is acked.
func (w *Worker) Handle(ctx context.Context, m queue.Message) error {
	return w.handler(ctx, m)
}

func (w *Worker) chain() queue.Handler {
	return queue.Chain(w.handle,
		queue.Recover(w.log),
		queue.InFlight(metrics.InFlight.WithLabelValues("uploads")),
		queue.OnPermanent(w.permanent),
		queue.GiveUpAfter(w.o.MaxAttempts))
}

// errRefused marks a chunk refused before anything was read or written:
// its spool file, which it may not name honestly, is left alone.
var errRefused = errors.New("refused")

// handle stores one chunk message's parts and announces them.
func (w *Worker) handle(ctx context.Context, m queue.Message) error {
	c, payload, err := message.DecodeChunk(m.Data)
	if err != nil {
		return queue.Permanent(fmt.Errorf("chunk message %s: %w", m.ID, err))
	}
	if err := w.o.Buckets.Check(c.Bucket); err != nil {
		// Refused before anything is read or written: not the bucket, not
		// the spool file the message names.
		return queue.Permanent(fmt.Errorf("chunk message %s of transfer %s: %w: %w", m.ID, c.TransferID, errRefused, err))
	}
	if err := w.done.proves(ctx, c.Bucket, c.TransferID, c.Key); err != nil {
		// Nothing read, written or removed, the spool file it names
		// included: a message is a claim, the key object the proof.
		if !errors.Is(err, errUnproven) {
			return fmt.Errorf("chunk message %s: %w", m.ID, err)
		}
		metrics.Unproven.WithLabelValues(message.EventChunk).Inc()
		w.log.Warn("chunk message not proven; dropped, nothing written", "transfer_id", c.TransferID, "bucket", c.Bucket, "parts", len(c.Parts),
			"first_object", c.Parts[0].Object, "why", err.Error())
		return queue.Permanent(fmt.Errorf("chunk message %s of transfer %s: %w: %w", m.ID, c.TransferID, errRefused, err))
	}
	first := c.Parts[0]
	if w.done.ended(ctx, c.Bucket, c.TransferID) {
		// Cancelled, failed or finished: its remaining chunks are
		// garbage, and uploading them would only cost the merger a
		// cleanup.
		w.log.Info("chunk of a transfer that ended; dropped without uploading", "transfer_id", c.TransferID, "parts", len(c.Parts))
		w.removeSpool(c.Spool)
		return nil
	}
	if sup, _ := w.done.superseded(ctx, c.Bucket, c.TransferID, c.Run, false); sup {
		// The transfer was submitted again: this chunk's run is
		// abandoned, and the new run sends its own.
		w.log.Info("chunk of an earlier run of the transfer; dropped without uploading", "transfer_id", c.TransferID, "run", c.Run, "parts", len(c.Parts))
		w.removeSpool(c.Spool)
		return nil
	}
	log := w.log.With("transfer_id", c.TransferID, "object", first.Object, "chunk", first.Index, "file", first.Path, "parts", len(c.Parts))
	start := time.Now()
	if m.DeliveryAttempt > 1 {
		metrics.Redeliveries.Inc()
	}
	parts, dup, err := w.store(ctx, &c, payload, max(1, m.DeliveryAttempt))
	if errors.Is(err, errFinished) {
		log.Info("chunk of a finished transfer; dropped")
		return nil
	}
	if errors.Is(err, errSuperseded) {
		log.Info("chunk of an earlier run of the transfer; dropped before it replaced anything", "run", c.Run)
		w.removeSpool(c.Spool)
		return nil
	}
	if err != nil {
		if !errors.Is(err, queue.ErrPermanent) {
			metrics.Uploads.WithLabelValues("retry").Inc()
		}
		return err
	}
	ev := message.Event{V: message.Version, Type: message.EventChunk, TransferID: c.TransferID, Bucket: c.Bucket,
		Run: c.Run, Parts: parts, Worker: w.o.ID, At: time.Now().UTC()}
	if err := w.o.Events.Publish(ctx, message.Encode(ev), map[string]string{"transfer_id": c.TransferID, "type": ev.Type}); err != nil {
		metrics.Uploads.WithLabelValues("retry").Inc()
		return err
	}
	_, wire := c.Offsets()
	if dup {
		metrics.Uploads.WithLabelValues("duplicate").Inc()
	} else {
		metrics.Uploads.WithLabelValues("ok").Inc()
		metrics.BytesUploaded.Add(float64(wire))
		metrics.UploadSeconds.Observe(time.Since(start).Seconds())
	}
	// The objects are durable and announced; a redelivery after this point
	// finds them present and only announces them again.
	w.removeSpool(c.Spool)
	log.Debug("chunk uploaded", "bytes", wire, "ms", time.Since(start).Milliseconds(), "worker", w.o.ID)
	return nil
}

// permanent tells the merger that a chunk failed for good, so that its
// transfer ends failed, and removes its spool file unless the chunk was
// refused. A message that does not decode names no transfer: there is
// nobody to tell.
func (w *Worker) permanent(ctx context.Context, m queue.Message, cause error) error {
	c, _, err := message.DecodeChunk(m.Data)
	if err != nil {
		return nil
	}
	if !errors.Is(cause, errRefused) {
		metrics.Uploads.WithLabelValues("failed").Inc()
	}
	if err := w.reportFailure(ctx, &c, cause); err != nil {
		return err
	}
	if !errors.Is(cause, errRefused) {
		w.removeSpool(c.Spool)
	}
	return nil
}

// reportFailure tells the merger that c failed permanently, so the transfer
// ends failed and its staging is removed. Only then may the message be
// acked; an error here is transient, and the message is redelivered.
func (w *Worker) reportFailure(ctx context.Context, c *message.Chunk, cause error) error {
	ev := message.Event{V: message.Version, Type: message.EventFailed, TransferID: c.TransferID, Bucket: c.Bucket,
		Run: c.Run, Worker: w.o.ID, Error: message.Truncate(cause.Error(), message.MaxErrorBytes), At: time.Now().UTC()}
	if err := w.o.Events.Publish(ctx, message.Encode(ev), map[string]string{"transfer_id": c.TransferID, "type": ev.Type}); err != nil {
		return fmt.Errorf("report failure (%v): %w", cause, err)
	}
	return nil
}

// errFinished: the chunk belongs to a transfer that already ended.
var errFinished = errors.New("transfer already finished")

// errSuperseded: the chunk belongs to a run of its transfer that a later
// run replaced.
var errSuperseded = errors.New("run superseded")

// store uploads every part of c; dup reports that all were there already.
// The parts are read as sections of the payload or of the spool file, never
// copied, so a bundle costs no more memory than its message.
func (w *Worker) store(ctx context.Context, c *message.Chunk, payload []byte, attempt int) ([]message.EventPart, bool, error) {
	var src io.ReaderAt = bytes.NewReader(payload)
	if c.Spool != "" {
		f, err := w.openSpool(c)
		if errors.Is(err, fs.ErrNotExist) {
			return w.gone(ctx, c)
		}
		if err != nil {
			return nil, false, err
		}
		defer f.Close()
		src = f
	}
	offs, _ := c.Offsets()
	section := func(i int) *io.SectionReader { return io.NewSectionReader(src, offs[i], c.Parts[i].WireSize) }
	// Check every part's bytes before any is sent: a corrupt part can never
	// succeed and must not reach GCS, and a message that cannot succeed
	// writes none of its files.
	for i := range c.Parts {
		if err := check(c, &c.Parts[i], section(i)); err != nil {
			return nil, false, err
		}
	}
	out := make([]message.EventPart, len(c.Parts))
	dup := make([]bool, len(c.Parts))
	g, gctx := errgroup.WithContext(ctx)
	var admitErr error
	for i := range c.Parts {
		p := &c.Parts[i]
		release, err := w.admit(gctx, p.WireSize)
		if err != nil {
			admitErr = fmt.Errorf("%s: waiting for room to upload: %w", where(p), err)
			break // gctx ended: a part failed, or the delivery is over
		}
		g.Go(func() error {
			a, d, paced, err := w.paced(gctx, c, p, section(i), attempt)
			release(err == nil)
			if err != nil {
				return err
			}
			out[i], dup[i] = eventPart(p, a), d
			out[i].Paced = paced
			return nil
		})
	}
	// The first error wins; a permanent one fails the transfer. Parts
	// already stored stay: each is a whole, verified object, and a
	// redelivery finds it present.
	if err := g.Wait(); err != nil {
		return nil, false, err
	}
	if admitErr != nil {
		return nil, false, admitErr
	}
	allDup := true
	for _, d := range dup {
		allDup = allDup && d
	}
	return out, allDup, nil
}

// check reads a part's bytes and compares them with what the producer wrote.
func check(c *message.Chunk, p *message.Part, body io.Reader) error {
	h := crc32c.New()
	n, err := iobuf.Copy(h, body)
	if err != nil {
		return fmt.Errorf("%s: read spool %s: %w", where(p), c.Spool, err)
	}
	if n != p.WireSize || h.Sum32() != p.WireCRC32C {
		return queue.Permanent(fmt.Errorf("%s: chunk bytes are corrupt: %d bytes with crc32c %08x, the producer wrote %d bytes with crc32c %08x: %w",
			where(p), n, h.Sum32(), p.WireSize, p.WireCRC32C, gcs.ErrChecksum))
	}
	return nil
}

func where(p *message.Part) string { return fmt.Sprintf("file %s chunk %d", p.Path, p.Index) }

// Budget is what a worker's work in flight may hold: the message bytes
// Pub/Sub's flow control lets it hold (FERRY_WORKER_MAX_OUTSTANDING_BYTES)
// and what its requests in flight hold beside them
// (Options.RequestMemory). The runtime's memory limit is this plus
// setup.MemoryOverhead.
func Budget(maxOutstanding, requestMemory int64) int64 {
	return maxOutstanding + requestMemory
}

// defaultRequests is Options.Requests' default.
const defaultRequests = 64

// requestUnits is what one request counts for in the window's rate beside
// its bytes: a small file's upload costs a round trip whatever its size.
const requestUnits = 16 << 10

// admit waits until the window has room for one more upload and the
// requests in flight can hold one of size bytes. release ends it; ok says
// it succeeded, and its bytes count in the rate the window judges.
func (w *Worker) admit(ctx context.Context, size int64) (release func(ok bool), err error) {
	end, err := w.window.Admit(ctx, w.mem, min(gcs.RequestMemory(size), w.o.RequestMemory))
	if err != nil {
		return nil, err
	}
	return func(ok bool) {
		if ok {
			end(size + requestUnits)
			return
		}
		end(0)
	}, nil
}

// Window is the window of the worker's uploads: its size now and at its
// peak, for logs and rows.
func (w *Worker) Window() *window.Window { return w.window }

// maxRateLimited is how many 429s one part's upload waits out in one
// delivery before the message goes back to Pub/Sub.
const maxRateLimited = 20

// paced uploads p at the pace GCS allows (Options.Pacer). A 429 is GCS
// asking for patience, not a failure of the file: the worker slows down
// and the upload goes again when its turn comes, while the message's lease
// is kept, up to maxRateLimited times. A 503 slows the worker too, and the
// message goes back to Pub/Sub as any transient failure does. paced counts
// the 429s waited out.
func (w *Worker) paced(ctx context.Context, c *message.Chunk, p *message.Part, body io.ReadSeeker, attempt int) (a gcs.Attrs, dup bool, paced int, err error) {
	pc := w.pacer(c.Bucket)
	for {
		if err := pc.Wait(ctx); err != nil {
			return gcs.Attrs{}, false, paced, fmt.Errorf("%s: waiting for its turn to upload: %w", where(p), err)
		}
		a, dup, err = w.upload(ctx, c, p, body, attempt)
		if !errors.Is(err, gcs.ErrThrottled) {
			if err == nil {
				pc.Done()
				metrics.WriteRateLimit.Set(pc.Limit())
			}
			return a, dup, paced, err
		}
		metrics.Throttled.Inc()
		w.window.PushedBack()
		if pc.PushedBack() {
			// The Store's pacer logs its first cut and sets the metric;
			// this names the upload that met it.
			w.log.Debug("GCS asks for fewer writes; pacing uploads", "writes_per_s", fmt.Sprintf("%.1f", pc.Limit()), "bucket", c.Bucket, "err", err)
		}
		if !errors.Is(err, gcs.ErrRateLimited) || paced+1 >= maxRateLimited {
			return gcs.Attrs{}, false, paced, err
		}
		paced++
		if _, err := body.Seek(0, io.SeekStart); err != nil {
			return gcs.Attrs{}, false, paced, err
		}
	}
}

// pacers is a Store that paces every call of this process to a bucket on
// one pacer (gcs.Store): the worker's uploads wait on the same one.
type pacers interface {
	Pacer(bucket string) *pacer.Pacer
}

// pacer is the pacer of the worker's uploads to bucket.
func (w *Worker) pacer(bucket string) *pacer.Pacer {
	if w.o.Pacer != nil {
		return w.o.Pacer
	}
	return w.o.Store.(pacers).Pacer(bucket)
}

// upload stores one part whose bytes were checked; dup reports that it was
// there already. It uploads first, under a DoesNotExist precondition, and
// asks for the object's attributes only when that fails: a redelivery or a
// retry costs a round trip, a first upload none.
func (w *Worker) upload(ctx context.Context, c *message.Chunk, p *message.Part, body io.ReadSeeker, attempt int) (gcs.Attrs, bool, error) {
	meta := map[string]string{}
	for k, v := range p.Metadata {
		meta[k] = v
	}
	meta[message.MetaWorker] = w.o.ID
	meta[message.MetaUploadAt] = time.Now().UTC().Format(time.RFC3339Nano)
	meta[message.MetaAttempt] = strconv.Itoa(attempt)
	if !p.Final {
		meta[message.MetaTransfer] = c.TransferID
	}
	opt := gcs.UploadOptions{Size: p.WireSize, CRC32C: p.WireCRC32C, IfAbsent: true, ContentType: p.ContentType, Metadata: meta,
		KMSKey: w.o.Buckets.KMSKey, CallerPaces: true}
	a, err := w.o.Store.Upload(ctx, c.Bucket, p.Object, w.limited(ctx, body), opt)
	if err == nil {
		return a, false, nil
	}
	if errors.Is(err, gcs.ErrRetained) {
		return gcs.Attrs{}, false, queue.Permanent(fmt.Errorf("%s: gs://%s/%s is under a hold or a retention policy, so it cannot be replaced until it is released: %w", where(p), c.Bucket, p.Object, err))
	}
	if errors.Is(err, gcs.ErrInvalid) {
		return gcs.Attrs{}, false, queue.Permanent(fmt.Errorf("%s: GCS refused the upload of gs://%s/%s as invalid: %w", where(p), c.Bucket, p.Object, err))
	}
	if !errors.Is(err, gcs.ErrPrecondition) {
		return gcs.Attrs{}, false, fmt.Errorf("%s: %w", where(p), err)
	}
	// The object exists: a duplicate delivery, a staging object an earlier
	// attempt left, or a final object that was there before or appeared
	// under our feet.
	b, err := w.o.Store.Attrs(ctx, c.Bucket, p.Object)
	switch {
	case errors.Is(err, gcs.ErrNotFound):
		return gcs.Attrs{}, false, fmt.Errorf("%s: gs://%s/%s existed at upload and is gone now; retry: %w", where(p), c.Bucket, p.Object, err)
	case err != nil:
		return gcs.Attrs{}, false, fmt.Errorf("%s: %w", where(p), err)
	case same(c, p, b):
		return b, true, nil
	case p.Final && b.Metadata[message.MetaTransfer] != c.TransferID:
		// A worker never replaces another's final object: an overwrite
		// stages its files, and the merger replaces each at the end,
		// at the generation its producer found (message.Manifest.Staged).
		// A message that asks otherwise is an old producer's or forged.
		return gcs.Attrs{}, false, queue.Permanent(fmt.Errorf("%s: destination gs://%s/%s already exists, %s (a worker writes a final object only where none is; -n skips objects that exist, --skip-unchanged skips unchanged files, --overwrite replaces at the transfer's end)",
			where(p), c.Bucket, p.Object, message.WrittenBy(b.Metadata)))
	}
	// Replace it: an object of an earlier run or delivery of this
	// transfer (its staging names are its own, and so is a final object
	// carrying its id), unless this chunk's own run is the earlier one.
	// The upload is atomic, and replaces only the version just read.
	if sup, err := w.done.superseded(ctx, c.Bucket, c.TransferID, c.Run, true); err != nil || sup {
		if err == nil {
			err = errSuperseded
		}
		return gcs.Attrs{}, false, fmt.Errorf("%s: %w", where(p), err)
	}
	if _, err := body.Seek(0, io.SeekStart); err != nil {
		return gcs.Attrs{}, false, err
	}
	opt.IfAbsent, opt.IfGeneration = false, b.Generation
	a, err = w.o.Store.Upload(ctx, c.Bucket, p.Object, w.limited(ctx, body), opt)
	if err != nil {
		// A precondition failure: it changed again since; the
		// redelivery looks again.
		return gcs.Attrs{}, false, fmt.Errorf("%s: %w", where(p), err)
	}
	return a, false, nil
}

// same reports whether a is the object p describes, written by c's transfer.
func same(c *message.Chunk, p *message.Part, a gcs.Attrs) bool {
	return a.Size == p.WireSize && a.CRC32C == p.WireCRC32C && a.Metadata[message.MetaTransfer] == c.TransferID
}

// openSpool opens the chunk's spool file inside the spool directory. The
// name was checked when the message was decoded; the root refuses anything
// that would resolve outside the directory, and the file itself must not be
// a link. A missing file is fs.ErrNotExist.
func (w *Worker) openSpool(c *message.Chunk) (*os.File, error) {
	where := where(&c.Parts[0])
	if w.spool == nil {
		return nil, queue.Permanent(fmt.Errorf("%s: message names spool file %s, but this worker has no spool (FERRY_TRANSPORT=pubsub)", where, c.Spool))
	}
	f, err := w.spool.OpenFile(c.Spool, os.O_RDONLY|osfile.NoFollow, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.ENOMEM) {
		// The process or the system is out of descriptors for now:
		// the message comes back, the file is not at fault.
		return nil, fmt.Errorf("%s: spool file %s: %w (out of file descriptors for now)", where, c.Spool, err)
	}
	if err != nil {
		return nil, queue.Permanent(fmt.Errorf("%s: spool file %s: %w", where, c.Spool, err))
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, queue.Permanent(fmt.Errorf("%s: spool file %s is not a regular file", where, c.Spool))
	}
	return f, nil
}

// gone handles a chunk whose spool file is missing: removed after its
// objects were stored (a redelivery), or by the end of its transfer, or
// lost. The last is retried until the last delivery attempt.
func (w *Worker) gone(ctx context.Context, c *message.Chunk) ([]message.EventPart, bool, error) {
	out := make([]message.EventPart, len(c.Parts))
	for i := range c.Parts {
		p := &c.Parts[i]
		a, err := w.o.Store.Attrs(ctx, c.Bucket, p.Object)
		if err != nil && !errors.Is(err, gcs.ErrNotFound) {
			return nil, false, err
		}
		if err != nil || !same(c, p, a) {
			if _, derr := w.o.Store.Attrs(ctx, c.Bucket, message.DoneMarker(c.TransferID)); derr == nil {
				return nil, false, errFinished
			}
			// The producer removes the spool files of a transfer it
			// fails, before the merger has ended it: retry, so that a
			// later delivery finds the done marker and the transfer
			// ends with the producer's cause. The last delivery
			// attempt fails the transfer (see Handle).
			return nil, false, fmt.Errorf("%s: spool file %s is missing", where(p), c.Spool)
		}
		out[i] = eventPart(p, a)
	}
	return out, true, nil
}

// eventPart reports a stored part as GCS described it, with what the chunk
// rows need from its metadata.
func eventPart(p *message.Part, a gcs.Attrs) message.EventPart {
	ep := message.EventPart{File: p.File, Index: p.Index, Object: p.Object, Generation: a.Generation,
		Size: a.Size, CRC32C: a.CRC32C, RawBytes: p.RawSize, Created: a.Created.UTC()}
	ep.Started, _ = time.Parse(time.RFC3339Nano, a.Metadata[message.MetaUploadAt])
	ep.Attempt, _ = strconv.Atoi(a.Metadata[message.MetaAttempt])
	return ep
}

// removeSpool deletes a spool file, inside the spool directory only.
func (w *Worker) removeSpool(name string) {
	if name != "" && w.spool != nil {
		_ = w.spool.Remove(name)
	}
}
