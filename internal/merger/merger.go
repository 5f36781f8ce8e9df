// Package merger finishes transfers. Its handler acts on events (sealed,
// chunk uploaded, failed, cancel). Once a transfer's manifest is sealed and
// every chunk is stored with the size and CRC32C the manifest gives, it
// composes each file of several chunks into its final object with a tree of
// ≤32-source composes (a zstd file's seek table as the last component),
// checks every final object's size and CRC32C against the value predicted by
// combining the chunks' CRC32Cs, writes the benchmark row, publishes the done
// event, leaves a done marker and deletes the staging objects.
//
// What workers report is a claim, not a proof: a report that equals the
// manifest counts a chunk as stored, but no transfer ends ok until one
// listing of the destination (1,000 objects a call) shows every final
// object with the manifest's size and CRC32C and this transfer's
// ferry-transfer metadata. A forged or stale report can delay a transfer,
// never end it ok. The done event counts the objects and names at most
// message.MaxDoneInline of them; a listing object beside the done marker
// names every one, with the generation GCS reported.
//
// Every transfer ends: failed, cancelled or ok. A periodic sweep over the
// staging prefix of each bucket ends transfers that made no progress for
// FERRY_TRANSFER_TIMEOUT, and removes done markers older than
// FERRY_DONE_RETENTION.
//
// The merger keeps no state GCS does not have: what it holds in memory is a
// bounded cache, rebuilt after a restart or an eviction from the done marker,
// the manifest and a listing of the staging prefix. Two mergers may run at
// once (a rolling update): each transfer still gets one set of final objects
// and one row, though its done event may be published twice.
package merger

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/metrics"
	"github.com/ferry-dev/ferry/internal/queue"
	"github.com/ferry-dev/ferry/internal/result"
)

// objectStore is what the merger needs of GCS.
type objectStore interface {
	Attrs(ctx context.Context, bucket, name string) (gcs.Attrs, error)
	ReadAll(ctx context.Context, bucket, name string) ([]byte, error)
	NewReader(ctx context.Context, bucket, name string) (io.ReadCloser, error)
	Upload(ctx context.Context, bucket, name string, r io.Reader, opt gcs.UploadOptions) (gcs.Attrs, error)
	Compose(ctx context.Context, bucket, dst string, srcs []string, opt gcs.ComposeOptions) (gcs.Attrs, error)
	List(ctx context.Context, bucket, prefix string, fn func(gcs.Attrs) error) error
	Delete(ctx context.Context, bucket, name string) error
	DeleteGeneration(ctx context.Context, bucket, name string, gen int64) error
	// Touch renews a lease.
	Touch(ctx context.Context, bucket, name, key, value string) error
}

var _ objectStore = (*gcs.Store)(nil)

// publisher sends one message and returns once it is stored.
type publisher interface {
	Publish(ctx context.Context, data []byte, attrs map[string]string) error
}

var _ publisher = (*queue.Publisher)(nil)

// Sink stores benchmark rows; Write must be idempotent per transfer id.
type Sink interface {
	Write(ctx context.Context, r result.Row, chunks iter.Seq[result.ChunkRow]) error
}

var _ Sink = (*result.File)(nil)

// MaxComposeSources is GCS's limit of sources per compose call.
const MaxComposeSources = 32

// Options configure a Merger.
type Options struct {
	Store objectStore
	Done  publisher
	Sink  Sink
	// Tables load the Parquet parts of transfers that name a BigQuery
	// table (message.Manifest.Load) into datasets Loads allows
	// (FERRY_BQ_LOAD_DATASETS); nil: such a transfer fails at its end.
	Tables TableLoader
	Loads  config.Loads
	// TableBatchWindow is how long an append of Parquet parts waits for
	// others into the same table to share its load job, and TableBatchMax
	// the most transfers one job takes (FERRY_BQ_TABLE_BATCH_WINDOW,
	// FERRY_BQ_TABLE_BATCH); a window of 0 gives every transfer its own
	// job. See batch.go.
	TableBatchWindow time.Duration
	TableBatchMax    int
	// ComposeConcurrency bounds the GCS calls one finishing transfer has
	// in flight — composes, the Attrs of composed objects and seek-table
	// uploads share the one limit; default 8.
	ComposeConcurrency int
	Version            string
	// Buckets are the buckets the merger may write to (FERRY_BUCKETS; none
	// listed: any) and the KMS key it writes with (FERRY_KMS_KEY). An
	// event naming another bucket ends its transfer failed without
	// touching that bucket.
	Buckets config.Buckets
	// TransferTimeout: a transfer with no progress for this long ends
	// failed (FERRY_TRANSFER_TIMEOUT); default 6h.
	TransferTimeout time.Duration
	// DoneRetention: the sweep removes done markers older than this
	// (FERRY_DONE_RETENTION); default 720h.
	DoneRetention time.Duration
	// SweepEvery is how often RunSweeps looks; default a quarter of
	// TransferTimeout, between 1m and 15m.
	SweepEvery time.Duration
	// RecheckEvery: a sealed transfer in the cache that is still
	// incomplete and got no event for this long is looked at again in GCS
	// (the events of its missing chunks may have gone to another merger),
	// then after twice as long, up to SweepEvery; default 5s.
	RecheckEvery time.Duration
	// MaxAttempts is the events and control subscriptions' dead-letter
	// threshold (FERRY_MERGER_MAX_DELIVERY_ATTEMPTS): on that delivery an
	// event whose handling still fails ends its transfer failed with its
	// error, so that no transfer waits for a message that went to the
	// dead-letter topic. 0: never.
	MaxAttempts int
	// CacheTransfers bounds the transfers held in memory; default 1024.
	// An evicted transfer is rebuilt from GCS at its next event.
	CacheTransfers int
	Log            *slog.Logger

	now func() time.Time // tests move the clock
}

func (o *Options) applyDefaults() {
	if o.TableBatchMax <= 0 {
		o.TableBatchMax = 100
	}
	if o.ComposeConcurrency <= 0 {
		o.ComposeConcurrency = 8
	}
	if o.TransferTimeout <= 0 {
		o.TransferTimeout = 6 * time.Hour
	}
	if o.DoneRetention <= 0 {
		o.DoneRetention = 720 * time.Hour
	}
	if o.SweepEvery <= 0 {
		o.SweepEvery = min(max(o.TransferTimeout/4, time.Minute), 15*time.Minute)
	}
	if o.RecheckEvery <= 0 {
		o.RecheckEvery = 5 * time.Second
	}
	if o.CacheTransfers <= 0 {
		o.CacheTransfers = 1024
	}
	if o.now == nil {
		o.now = time.Now
	}
}

// Merger handles events. It is safe for concurrent use.
type Merger struct {
	o     Options
	log   *slog.Logger
	cache *cache

	mu   sync.Mutex
	seen map[string]bool // buckets events named, swept when FERRY_BUCKETS is empty

	batcher batcher // the open shared load jobs, by table

	// The handlers of each topic in their middleware (on), made once.
	anyTopic, workers, control queue.Handler
}

// maxSeenBuckets bounds the buckets swept when FERRY_BUCKETS lists none.
const maxSeenBuckets = 1024

// New returns a Merger.
func New(o Options) *Merger {
	o.applyDefaults()
	m := &Merger{o: o, log: logging.OrDiscard(o.Log), cache: newCache(o.CacheTransfers), seen: map[string]bool{}}
	m.anyTopic, m.workers, m.control = m.on(""), m.on("workers"), m.on("control")
	return m
}

// Handle is a queue.Handler for events of any kind; the merger's own
// subscriptions use HandleEvents and HandleControl, which take only what
// their topic's publishers may say.
func (m *Merger) Handle(ctx context.Context, msg queue.Message) error { return m.anyTopic(ctx, msg) }

// on is the handler of topic's events ("" any): handle in what every
// delivery gets (queue's middleware), panic recovery and the in-flight
// gauge.
func (m *Merger) on(topic string) queue.Handler {
	return queue.Chain(func(ctx context.Context, msg queue.Message) error { return m.handle(ctx, msg, topic) },
		queue.Recover(m.log), queue.InFlight(metrics.InFlight.WithLabelValues("events")))
}

// HandleEvents is the queue.Handler of the workers' events topic
// (FERRY_EVENTS_SUBSCRIPTION): chunk reports and a worker's failures. Only
// workers may publish there, so what a submitter says (sealed, cancel, its
// own failures) is refused on it.
func (m *Merger) HandleEvents(ctx context.Context, msg queue.Message) error {
	return m.workers(ctx, msg)
}

// HandleControl is the queue.Handler of the control topic
// (FERRY_CONTROL_SUBSCRIPTION): sealed, failed and cancel events from
// producers, submitters and producer cancel. A chunk report there is
// refused: it could only be forged.
func (m *Merger) HandleControl(ctx context.Context, msg queue.Message) error {
	return m.control(ctx, msg)
}

// allowedOn says which event types topic ("" any) carries.
func allowedOn(topic, typ string) bool {
	switch topic {
	case "workers":
		return typ == message.EventChunk || typ == message.EventFailed
	case "control":
		return typ == message.EventSealed || typ == message.EventFailed || typ == message.EventCancel
	}
	return true
}

func (m *Merger) handle(ctx context.Context, msg queue.Message, topic string) error {
	var ev message.Event
	if err := message.Decode(msg.Data, &ev); err != nil {
		return queue.Permanent(fmt.Errorf("event %s: %w", msg.ID, err))
	}
	if err := checkEvent(&ev); err != nil {
		return queue.Permanent(fmt.Errorf("event %s: %w: %v", msg.ID, message.ErrMalformed, err))
	}
	// A claim's text is bounded before anything logs, records or
	// publishes it, as the row and the done event bound it.
	ev.Error = message.Truncate(ev.Error, message.MaxErrorBytes)
	if !allowedOn(topic, ev.Type) {
		m.log.Warn("event on a topic whose publishers may not send it; dropped", "type", ev.Type, "topic", topic, "transfer_id", ev.TransferID, "worker", ev.Worker)
		return queue.Permanent(fmt.Errorf("event %s: a %s event on the %s topic, which does not carry it: %w", msg.ID, ev.Type, topic, message.ErrMalformed))
	}
	if err := m.o.Buckets.Check(ev.Bucket); err != nil {
		if topic == "control" {
			// Its key could be checked only by reading a bucket this
			// merger may not touch: unproven, so it may not refuse
			// (end) anything, whatever transfer it names.
			metrics.Unproven.WithLabelValues(ev.Type).Inc()
			m.log.Warn("end event naming a bucket FERRY_BUCKETS does not allow; dropped unproven, nothing changed", "type", ev.Type,
				"transfer_id", ev.TransferID, "bucket", ev.Bucket, "claimed_error", message.Truncate(ev.Error, 256))
			return queue.Permanent(fmt.Errorf("%s event of transfer %s: %w: %w", ev.Type, ev.TransferID, errUnproven, err))
		}
		return m.refuse(ctx, ev, err) // a worker's: the workers topic is theirs alone
	}
	if topic == "control" {
		if err := m.proven(ctx, &ev); err != nil {
			return err
		}
	}
	m.sawBucket(ev.Bucket)
	t := m.cache.acquire(key{ev.Bucket, ev.TransferID})
	defer m.cache.release(t)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lastEvent = m.o.now()
	log := m.log.With("transfer_id", ev.TransferID)

	if ended, err := m.ended(ctx, t); ended || err != nil {
		if ended && err == nil && ev.Type == message.EventChunk {
			return m.lateFinals(ctx, t, ev, log)
		}
		return err
	}
	if ev.Type == message.EventChunk || ev.Type == message.EventFailed {
		stale, err := m.staleRun(ctx, t, ev.Run)
		if err != nil {
			return err
		}
		if stale {
			log.Info("event of an earlier run of the transfer; ignored", "type", ev.Type, "run", ev.Run, "current_run", t.run, "worker", ev.Worker)
			return nil
		}
	}
	switch ev.Type {
	case message.EventFailed:
		if ev.Prefix != "" {
			t.prefix = ev.Prefix
		}
		return m.end(ctx, t, message.StatusFailed, errors.New(ev.Error), log)
	case message.EventCancel:
		cause := "cancelled"
		if ev.Error != "" {
			cause += ": " + ev.Error
		}
		return m.end(ctx, t, message.StatusCancelled, errors.New(cause), log)
	case message.EventChunk:
		if err := m.reported(ctx, t, ev); err != nil {
			return m.failIfPermanent(ctx, t, m.giveUp(ctx, msg, err), log)
		}
		if m.noteProgress(ctx, t, ev, log) {
			// Another merger may have ended the transfer since it was
			// last looked up; then the marker just written must go too.
			t.checked = false
			if ended, err := m.ended(ctx, t); ended || err != nil {
				return err
			}
		}
	}
	return m.failIfPermanent(ctx, t, m.giveUp(ctx, msg, m.advance(ctx, t, log)), log)
}

// giveUp makes err, a failure to handle msg, permanent on the delivery
// that is the subscription's dead-letter threshold (Options.MaxAttempts):
// the message would go to the dead-letter topic, where nothing finishes
// its transfer, so the transfer ends failed with the error instead. A
// shutdown's cancelled context gives up nothing.
func (m *Merger) giveUp(ctx context.Context, msg queue.Message, err error) error {
	if err == nil || errors.Is(err, queue.ErrPermanent) || ctx.Err() != nil ||
		m.o.MaxAttempts <= 0 || msg.DeliveryAttempt < m.o.MaxAttempts {
		return err
	}
	return queue.Permanent(fmt.Errorf("gave up after %d deliveries of event %s: %w", msg.DeliveryAttempt, msg.ID, err))
}

// errUnproven: an end event whose key the transfer's key object does not
// list.
var errUnproven = errors.New("not proven by an end key of the transfer")

// proven checks an end event from the control topic, whose publishers
// Pub/Sub does not name: it must carry an end key whose SHA-256 the
// transfer's key object lists (see message.Keys). One that does not is
// logged with what it claimed and dead-lettered, changing nothing.
func (m *Merger) proven(ctx context.Context, ev *message.Event) error {
	why := "it carries no key"
	if ev.Key != "" {
		b, err := m.o.Store.ReadAll(ctx, ev.Bucket, message.KeyObject(ev.TransferID))
		var k message.Keys
		switch {
		case errors.Is(err, gcs.ErrNotFound):
			why = "the transfer has no key object gs://" + ev.Bucket + "/" + message.KeyObject(ev.TransferID)
		case err != nil:
			return fmt.Errorf("reading the key object of transfer %s: %w", ev.TransferID, err)
		case message.Decode(b, &k) != nil || k.Check(ev.TransferID) != nil:
			why = "the transfer's key object is not one ferry wrote"
		case k.Opens(ev.Key):
			return nil
		default:
			why = "its key is not one the transfer's key object lists"
		}
	}
	metrics.Unproven.WithLabelValues(ev.Type).Inc()
	m.log.Warn("end event not proven; dropped, nothing changed", "type", ev.Type, "transfer_id", ev.TransferID, "bucket", ev.Bucket,
		"why", why, "claimed_error", message.Truncate(ev.Error, 256), "claimed_prefix", ev.Prefix, "run", ev.Run)
	return queue.Permanent(fmt.Errorf("%s event of transfer %s: %w: %s", ev.Type, ev.TransferID, errUnproven, why))
}

// staleRun reports whether run (an event's) is an earlier run of t than
// its current one: the sealed manifest's, or before the seal the one its
// RunObject names. What an earlier run says is history: its chunks were
// dropped or replaced, and its failure is not the new run's.
func (m *Merger) staleRun(ctx context.Context, t *transfer, run string) (bool, error) {
	if t.manifest != nil && t.manifest.Run != "" {
		t.run = t.manifest.Run
	}
	switch {
	case run == "" || run == t.run:
		return false, nil
	case slices.Contains(t.oldRuns, run):
		return true, nil
	case t.manifest != nil && t.manifest.Run != "":
		// Sealed by another run: any other is history.
	default:
		b, err := m.o.Store.ReadAll(ctx, t.bucket, message.RunObject(t.id))
		if errors.Is(err, gcs.ErrNotFound) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("reading the current run of transfer %s: %w", t.id, err)
		}
		if !message.ValidRun(string(b)) {
			return false, nil // not a run ferry wrote: it supersedes nothing
		}
		if t.run = string(b); t.run == run {
			return false, nil
		}
	}
	if len(t.oldRuns) == 8 {
		t.oldRuns = t.oldRuns[1:]
	}
	t.oldRuns = append(t.oldRuns, run)
	return true, nil
}

// checkEvent rejects an event that names what ferry could not have made.
func checkEvent(ev *message.Event) error {
	if !message.ValidTransferID(ev.TransferID) || !message.ValidBucket(ev.Bucket) {
		return fmt.Errorf("transfer id %.64q or bucket %.64q is not one ferry makes", ev.TransferID, ev.Bucket)
	}
	switch ev.Type {
	case message.EventChunk:
		if len(ev.Parts) == 0 || len(ev.Parts) > message.MaxParts {
			return fmt.Errorf("chunk event with %d parts, want 1 to %d", len(ev.Parts), message.MaxParts)
		}
	case message.EventSealed, message.EventFailed, message.EventCancel:
		if len(ev.Parts) > 0 {
			return fmt.Errorf("%s event with parts", ev.Type)
		}
	default:
		return fmt.Errorf("unknown type %.32q", ev.Type)
	}
	if ev.Run != "" && !message.ValidRun(ev.Run) {
		return fmt.Errorf("run %.64q is not one ferry makes", ev.Run)
	}
	if ev.Prefix != "" {
		if ev.Type != message.EventFailed {
			return fmt.Errorf("%s event with a prefix", ev.Type)
		}
		if err := message.CheckObjectName(ev.Prefix); err != nil || message.ReservedPrefix(ev.Prefix) != "" {
			return fmt.Errorf("prefix %.64q is not a destination prefix", ev.Prefix)
		}
	}
	for i, p := range ev.Parts {
		if p.File < 0 || p.Index < 0 || p.Size < 0 || p.RawBytes < 0 {
			return fmt.Errorf("part %d: file %d chunk %d of %d bytes is out of range", i, p.File, p.Index, p.Size)
		}
		if err := message.CheckObjectName(p.Object); err != nil {
			return fmt.Errorf("part %d: %v", i, err)
		}
	}
	return nil
}

// failIfPermanent ends t failed when err can never be fixed by a retry.
func (m *Merger) failIfPermanent(ctx context.Context, t *transfer, err error, log *slog.Logger) error {
	if errors.Is(err, queue.ErrPermanent) {
		return m.end(ctx, t, message.StatusFailed, err, log)
	}
	return err
}

// ended reports whether t has ended, here or (as its done marker says)
// elsewhere. Whatever a late upload left in its staging is removed.
func (m *Merger) ended(ctx context.Context, t *transfer) (bool, error) {
	if !t.finished && !t.checked {
		_, err := m.o.Store.Attrs(ctx, t.bucket, message.DoneMarker(t.id))
		switch {
		case err == nil:
			t.end()
		case errors.Is(err, gcs.ErrNotFound):
			t.checked = true
		default:
			return true, err
		}
	}
	if t.finished {
		return true, m.deleteStaging(ctx, t.bucket, t.id)
	}
	return false, nil
}

// end marks t finished and lets go of what it held.
func (t *transfer) end() {
	t.finished, t.manifest, t.pages, t.singles, t.present, t.reported = true, nil, nil, nil, nil, nil
}

// reported takes in what a worker says it stored. Before the scan the
// reports are kept as they are, up to maxReported; after it, each is held
// against the manifest, and GCS is asked about any that disagrees.
func (m *Merger) reported(ctx context.Context, t *transfer, ev message.Event) error {
	for _, p := range ev.Parts {
		s := stored{Object: p.Object, Size: p.Size, CRC32C: p.CRC32C, Generation: p.Generation, Transfer: ev.TransferID,
			Worker: ev.Worker, Started: p.Started, Created: p.Created, Attempt: p.Attempt}
		k := chunkKey{p.File, p.Index}
		if !t.scanned {
			if len(t.reported) < maxReported {
				t.reported[k] = s
			}
			continue
		}
		if err := m.take(ctx, t, k, s, false); err != nil {
			return err
		}
	}
	return nil
}

// take records chunk k as stored when s matches the manifest. truth says s
// is what GCS itself reported; otherwise (a worker's report) a mismatch is
// checked with GCS. A stored object that differs from the manifest fails
// the transfer.
func (m *Merger) take(ctx context.Context, t *transfer, k chunkKey, s stored, truth bool) error {
	f, err := t.pages.file(ctx, k.file)
	if err != nil {
		return err
	}
	if f == nil || k.index >= len(f.Chunks) || s.Object != f.Chunks[k.index].Object {
		m.log.Warn("event names an object the manifest does not", "transfer_id", t.id, "object", s.Object, "file", k.file, "chunk", k.index)
		return nil
	}
	want := f.Chunks[k.index]
	if t.has(k, f) && !truth {
		return nil
	}
	if s.Size == want.WireSize && s.CRC32C == want.WireCRC32C {
		t.mark(k, f, s)
		return nil
	}
	if !truth {
		a, err := m.o.Store.Attrs(ctx, t.bucket, want.Object)
		if errors.Is(err, gcs.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return m.take(ctx, t, k, fromAttrs(a), true)
	}
	return queue.Permanent(fmt.Errorf("file %s chunk %d: object %s has %d bytes with crc32c %08x, the manifest says %d bytes with crc32c %08x: %w",
		f.Path, k.index, s.Object, s.Size, s.CRC32C, want.WireSize, want.WireCRC32C, gcs.ErrChecksum))
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

// advance reads the manifest once it is sealed, rebuilds what is stored
// from GCS once, and finishes the transfer when every chunk is there.
func (m *Merger) advance(ctx context.Context, t *transfer, log *slog.Logger) error {
	if t.manifest == nil {
		man, err := m.readManifest(ctx, t.bucket, t.id)
		if err != nil || man == nil || !man.Sealed {
			return err // not sealed yet; the sealed event will come
		}
		pg := newPages(m.o.Store, t.bucket, man)
		finals, err := checkManifest(ctx, man, pg, t.bucket, t.id)
		if err != nil {
			return err
		}
		t.manifest, t.pages, t.finals = man, pg, finals
		t.need = man.Totals.Chunks
		t.reset()
	}
	if !t.scanned {
		if err := m.scan(ctx, t); err != nil {
			return err
		}
		t.scanned, t.reported = true, nil
	}
	if t.have < t.need {
		return nil
	}
	return m.finish(ctx, t, log)
}

// readManifest reads the header of t's manifest; nil when there is none.
// Its files stay in their pages (an inline one's are made its one page).
func (m *Merger) readManifest(ctx context.Context, bucket, tid string) (*message.Manifest, error) {
	name := message.ManifestObject(tid)
	r, err := m.o.Store.NewReader(ctx, bucket, name)
	if errors.Is(err, gcs.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var man message.Manifest
	err = message.DecodeFrom(r, &man)
	_ = r.Close()
	switch {
	case errors.Is(err, message.ErrMalformed):
		return nil, queue.Permanent(fmt.Errorf("manifest: %w", err))
	case err != nil:
		return nil, fmt.Errorf("manifest gs://%s/%s: %w", bucket, name, err)
	}
	man.Unpaged()
	return &man, nil
}

// askMax is how many one-chunk files the scan asks GCS about one by one;
// for more, one listing of the destination (1,000 objects a call) costs
// fewer calls.
const askMax = 64

// scan fills in the chunks t does not yet know to be stored, from GCS and
// the workers' reports: a listing of the staging chunks (the truth for files
// of several chunks), the reports of one-chunk files that match the
// manifest, and the other one-chunk final objects, asked one by one when
// there are few and by a listing of the destination otherwise. It runs when
// the manifest is first read, and again for a quiet transfer that is still
// incomplete (recheck): the events of its missing chunks may have gone to
// another merger.
func (m *Merger) scan(ctx context.Context, t *transfer) error {
	t.lastScan = m.o.now()
	staged := false // a chunk of a file composed at the end is missing
	unknown := 0    // one-chunk files not known to be stored
	type asked struct {
		file   int
		object string
	}
	var ask []asked
	err := t.pages.each(ctx, func(i int, f *message.File) error {
		for j := range f.Chunks {
			k := chunkKey{i, j}
			if t.has(k, f) {
				continue
			}
			if j == 0 && f.AppendsTo() != 0 {
				// The object an append begins with is there from the
				// start; the compose holds it to its generation.
				c := f.Chunks[0]
				t.mark(k, f, stored{Object: c.Object, Size: c.WireSize, CRC32C: c.WireCRC32C, Generation: c.Generation})
				continue
			}
			if f.Staged() {
				staged = true
				continue
			}
			if s, ok := t.reported[k]; ok && s.Object == f.Object && s.Size == f.WireSize && s.CRC32C == f.WireCRC32 {
				t.mark(k, f, s)
				continue
			}
			if unknown++; len(ask) < askMax {
				ask = append(ask, asked{i, f.Object})
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if staged {
		var bad error
		err := m.o.Store.List(ctx, t.bucket, message.ChunkPrefix(t.id), func(a gcs.Attrs) error {
			k, ok := parseChunkObject(t.id, a.Name)
			if !ok || k.file >= t.manifest.Totals.Files {
				return nil
			}
			if err := m.take(ctx, t, k, fromAttrs(a), true); err != nil && bad == nil {
				bad = err
			}
			return nil
		})
		if err != nil {
			return err
		}
		if bad != nil {
			return bad
		}
		if err := m.composed(ctx, t); err != nil {
			return err
		}
	}
	if unknown > len(ask) {
		// A final object another transfer (or a person) wrote is not
		// this transfer's: its worker reports the conflict.
		return t.pages.join(ctx, t.finals, func(i int, f *message.File, a *gcs.Attrs) error {
			k := chunkKey{i, 0}
			if a == nil || f.Staged() || t.has(k, f) || a.Metadata[message.MetaTransfer] != t.id {
				return nil
			}
			return m.take(ctx, t, k, fromAttrs(*a), true)
		})
	}
	found := make([]*gcs.Attrs, len(ask))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(m.o.ComposeConcurrency)
	for j, q := range ask {
		g.Go(func() error {
			a, err := m.o.Store.Attrs(gctx, t.bucket, q.object)
			if errors.Is(err, gcs.ErrNotFound) {
				return nil
			}
			if err != nil {
				return err
			}
			found[j] = &a
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for j, q := range ask {
		if a := found[j]; a != nil && a.Metadata[message.MetaTransfer] == t.id {
			if err := m.take(ctx, t, chunkKey{q.file, 0}, fromAttrs(*a), true); err != nil {
				return err
			}
		}
	}
	return nil
}

// composed credits the chunks of files whose final compose already ran: it
// deleted them (gcs.ComposeOptions.DeleteSources), so a merger that
// restarted, or the second of two, would otherwise wait for them for ever.
// It looks only when chunks are still missing and the transfer's
// ComposingMarker says that composing began (every chunk was stored then),
// and believes a final object only with the manifest's size and CRC32C and
// this transfer's metadata.
func (m *Merger) composed(ctx context.Context, t *transfer) error {
	if t.have >= t.need {
		return nil
	}
	if _, err := m.o.Store.Attrs(ctx, t.bucket, message.ComposingMarker(t.id)); err != nil {
		if errors.Is(err, gcs.ErrNotFound) {
			return nil
		}
		return err
	}
	return t.pages.join(ctx, t.finals, func(i int, f *message.File, a *gcs.Attrs) error {
		if a == nil || !f.Staged() || a.Size != f.WireSize || a.CRC32C != f.WireCRC32 || a.Metadata[message.MetaTransfer] != t.id {
			return nil
		}
		// What the chunk objects said of their upload (worker, times) went
		// with them: their rows carry the final object's creation instead.
		for j, c := range f.Chunks {
			if k := (chunkKey{i, j}); !t.has(k, f) {
				t.mark(k, f, stored{Object: c.Object, Size: c.WireSize, CRC32C: c.WireCRC32C, Transfer: t.id, Created: a.Created})
			}
		}
		return nil
	})
}

func parseChunkObject(tid, name string) (chunkKey, bool) {
	rest, ok := strings.CutPrefix(name, message.ChunkPrefix(tid))
	if !ok {
		return chunkKey{}, false
	}
	fs, is, ok := strings.Cut(rest, "/")
	if !ok {
		return chunkKey{}, false
	}
	f, err1 := strconv.Atoi(fs)
	i, err2 := strconv.Atoi(is)
	if err1 != nil || err2 != nil || f < 0 || i < 0 || message.ChunkObject(tid, f, i) != name {
		return chunkKey{}, false
	}
	return chunkKey{f, i}, true
}

// sawBucket remembers a bucket to sweep when FERRY_BUCKETS lists none.
func (m *Merger) sawBucket(b string) {
	if len(m.o.Buckets.Allowed) > 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.seen) < maxSeenBuckets {
		m.seen[b] = true
	}
}

func destination(man *message.Manifest) string {
	if man.Bucket == "" {
		return ""
	}
	if man.Prefix == "" {
		return "gs://" + man.Bucket
	}
	return "gs://" + man.Bucket + "/" + man.Prefix
}
