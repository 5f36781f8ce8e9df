// Package merger finishes transfers. Its handler acts on events (sealed,
// chunk uploaded, failed). Once a transfer's manifest is sealed and every
// chunk object exists with the CRC32C the manifest gives, it composes each
// file into its final object with a tree of ≤32-source composes, checks the
// final size and CRC32C against the value predicted by combining the chunks'
// CRC32Cs, writes the benchmark row, publishes the done event, leaves a done
// marker and deletes the staging objects.
//
// The merger keeps no state GCS does not have: what it holds in memory is a
// cache, rebuilt after a restart from the manifest and a listing of the
// staging prefix.
package merger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	PutSmall(ctx context.Context, bucket, name string, data []byte, ifAbsent bool, contentType string) (gcs.Attrs, error)
	Compose(ctx context.Context, bucket, dst string, srcs []string, opt gcs.ComposeOptions) (gcs.Attrs, error)
	List(ctx context.Context, bucket, prefix string, fn func(gcs.Attrs) error) error
	Delete(ctx context.Context, bucket, name string) error
}

var _ objectStore = (*gcs.Store)(nil)

// publisher sends one message and returns once it is stored.
type publisher interface {
	Publish(ctx context.Context, data []byte, attrs map[string]string) error
}

// Sink stores benchmark rows; Write must be idempotent per transfer id.
type Sink interface {
	Write(ctx context.Context, r result.Row, chunks []result.ChunkRow) error
}

var _ Sink = (*result.File)(nil)

// MaxComposeSources is GCS's limit of sources per compose call.
const MaxComposeSources = 32

// Options configure a Merger.
type Options struct {
	Store objectStore
	Done  publisher
	Sink  Sink
	// ComposeConcurrency bounds compose calls in flight; default 8.
	ComposeConcurrency int
	Version            string
	// Buckets are the buckets the merger may write to (FERRY_BUCKETS; none
	// listed: any). An event naming another ends its transfer failed
	// without touching that bucket.
	Buckets config.Buckets
	Log     *slog.Logger
}

// Merger handles events. It is safe for concurrent use.
type Merger struct {
	o   Options
	log *slog.Logger

	mu        sync.Mutex
	transfers map[string]*transfer
}

// transfer is the cached view of one transfer in progress.
type transfer struct {
	mu       sync.Mutex // one event of a transfer at a time
	id       string
	checked  bool // done marker looked for
	finished bool // ended by this process; later events are late
	refused  bool // names a bucket FERRY_BUCKETS does not allow; ended
	manifest *message.Manifest
	scanned  bool
	present  map[chunkKey]gcs.Attrs
}

type chunkKey struct{ file, index int }

// New returns a Merger.
func New(o Options) *Merger {
	if o.ComposeConcurrency <= 0 {
		o.ComposeConcurrency = 8
	}
	return &Merger{o: o, log: logging.OrDiscard(o.Log), transfers: map[string]*transfer{}}
}

func (m *Merger) get(id string) *transfer {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.transfers[id]
	if !ok {
		t = &transfer{id: id, present: map[chunkKey]gcs.Attrs{}}
		m.transfers[id] = t
	}
	return t
}

func (m *Merger) forget(id string) {
	m.mu.Lock()
	delete(m.transfers, id)
	m.mu.Unlock()
}

// Handle is the queue.Handler for events.
func (m *Merger) Handle(ctx context.Context, msg queue.Message) error {
	var ev message.Event
	if err := message.Decode(msg.Data, &ev); err != nil {
		return queue.Permanent(fmt.Errorf("event %s: %w", msg.ID, err))
	}
	if !message.ValidTransferID(ev.TransferID) || !message.ValidBucket(ev.Bucket) {
		return queue.Permanent(fmt.Errorf("event %s: transfer id %.64q or bucket %.64q is not one ferry makes", msg.ID, ev.TransferID, ev.Bucket))
	}
	if err := m.o.Buckets.Check(ev.Bucket); err != nil {
		return m.refuse(ctx, ev, err)
	}
	metrics.InFlight.WithLabelValues("events").Inc()
	defer metrics.InFlight.WithLabelValues("events").Dec()
	t := m.get(ev.TransferID)
	t.mu.Lock()
	defer t.mu.Unlock()
	log := m.log.With("transfer_id", ev.TransferID)

	if t.finished {
		// Another event of this transfer ended it while this one waited.
		return m.deleteStaging(ctx, ev.Bucket, t.id)
	}
	if !t.checked {
		_, err := m.o.Store.Attrs(ctx, ev.Bucket, message.DoneMarker(t.id))
		if err == nil {
			// Finished before; this is a late or duplicate event. Clean
			// up whatever a late upload may have left.
			m.forget(t.id)
			return m.deleteStaging(ctx, ev.Bucket, t.id)
		}
		if !errors.Is(err, gcs.ErrNotFound) {
			return err
		}
		t.checked = true
	}

	switch ev.Type {
	case message.EventFailed:
		return m.fail(ctx, t, ev.Bucket, errors.New(ev.Error), log)
	case message.EventChunk:
		// What the worker stored, as GCS reported it after the upload
		// committed; ready() holds it against the manifest.
		for _, p := range ev.Parts {
			t.present[chunkKey{p.File, p.Index}] = storedAttrs(ev, p)
		}
	case message.EventSealed:
	default:
		return queue.Permanent(fmt.Errorf("event %s: unknown type %q", msg.ID, ev.Type))
	}

	if t.manifest == nil {
		b, err := m.o.Store.ReadAll(ctx, ev.Bucket, message.ManifestObject(t.id))
		if errors.Is(err, gcs.ErrNotFound) {
			return nil // not sealed yet; the sealed event will come
		}
		if err != nil {
			return err
		}
		var man message.Manifest
		if err := message.Decode(b, &man); err != nil {
			return m.fail(ctx, t, ev.Bucket, fmt.Errorf("manifest: %w", err), log)
		}
		if !man.Sealed {
			return nil
		}
		t.manifest = &man
	}
	if !t.scanned {
		if err := m.scan(ctx, t); err != nil {
			return err
		}
		t.scanned = true
	}
	ready, err := m.ready(t)
	if err != nil {
		return m.fail(ctx, t, ev.Bucket, err, log)
	}
	if !ready {
		return nil
	}
	return m.finish(ctx, t, log)
}

// refuse ends a transfer whose event names a bucket the merger may not
// write to: a failed done event and row say which bucket and which
// variable; nothing is read from or written to that bucket (so no done
// marker, and no staging to remove). The event fails permanently.
func (m *Merger) refuse(ctx context.Context, ev message.Event, cause error) error {
	cause = fmt.Errorf("%s event of transfer %s: %w", ev.Type, ev.TransferID, cause)
	if ev.Type == message.EventFailed && ev.Error != "" {
		cause = fmt.Errorf("%w; reported by %s: %s", cause, ev.Worker, ev.Error)
	}
	t := m.get(ev.TransferID)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.refused {
		return queue.Permanent(cause) // ended already
	}
	man := &message.Manifest{TransferID: ev.TransferID, Bucket: ev.Bucket}
	now := time.Now().UTC()
	done := message.Done{V: message.Version, TransferID: ev.TransferID, Status: message.StatusFailed, Error: cause.Error(),
		Destination: destination(man), StartedAt: now, FinishedAt: now}
	if err := m.o.Sink.Write(ctx, Row(done, man, nil, m.o.Version), nil); err != nil {
		return fmt.Errorf("write benchmark row: %w", err)
	}
	if err := m.o.Done.Publish(ctx, message.Encode(done), map[string]string{"transfer_id": done.TransferID, "status": done.Status}); err != nil {
		return err
	}
	t.refused = true
	m.log.Error("transfer refused", "transfer_id", ev.TransferID, "bucket", ev.Bucket, "err", cause)
	metrics.Transfers.WithLabelValues(done.Status).Inc()
	return queue.Permanent(cause)
}

// scan rebuilds the set of present chunks from GCS: a listing of the staging
// chunks, and the final objects of one-chunk files.
func (m *Merger) scan(ctx context.Context, t *transfer) error {
	man := t.manifest
	err := m.o.Store.List(ctx, man.Bucket, message.ChunkPrefix(t.id), func(a gcs.Attrs) error {
		if k, ok := parseChunkObject(t.id, a.Name); ok {
			t.present[k] = a
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i, f := range man.Files {
		if len(f.Chunks) != 1 {
			continue
		}
		if _, ok := t.present[chunkKey{i, 0}]; ok {
			continue
		}
		a, err := m.o.Store.Attrs(ctx, man.Bucket, f.Object)
		if errors.Is(err, gcs.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if a.Metadata[message.MetaTransfer] == t.id {
			t.present[chunkKey{i, 0}] = a
		}
	}
	return nil
}

// storedAttrs is a part of a chunk event in the shape a listing gives.
func storedAttrs(ev message.Event, p message.EventPart) gcs.Attrs {
	return gcs.Attrs{Name: p.Object, Size: p.Size, CRC32C: p.CRC32C, Generation: p.Generation, Created: p.Created,
		Metadata: map[string]string{
			message.MetaTransfer: ev.TransferID, message.MetaWorker: ev.Worker,
			message.MetaUploadAt: p.Started.Format(time.RFC3339Nano), message.MetaAttempt: strconv.Itoa(p.Attempt),
		}}
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
	if err1 != nil || err2 != nil {
		return chunkKey{}, false
	}
	return chunkKey{f, i}, true
}

// ready reports whether every chunk of the manifest is present with the size
// and CRC32C the manifest gives. A chunk present with other bytes is an error.
func (m *Merger) ready(t *transfer) (bool, error) {
	all := true
	for i, f := range t.manifest.Files {
		for j, c := range f.Chunks {
			a, ok := t.present[chunkKey{i, j}]
			if !ok {
				all = false
				continue
			}
			if a.Size != c.WireSize || a.CRC32C != c.WireCRC32C {
				return false, fmt.Errorf("file %s chunk %d: object %s has %d bytes with crc32c %08x, the manifest says %d bytes with crc32c %08x: %w",
					f.Path, j, a.Name, a.Size, a.CRC32C, c.WireSize, c.WireCRC32C, gcs.ErrChecksum)
			}
		}
	}
	return all, nil
}

// finish composes, verifies and records a transfer whose chunks are all
// present.
func (m *Merger) finish(ctx context.Context, t *transfer, log *slog.Logger) error {
	man := t.manifest
	composeStart := time.Now()
	sem := make(chan struct{}, m.o.ComposeConcurrency)
	g, gctx := errgroup.WithContext(ctx)
	for i := range man.Files {
		if len(man.Files[i].Chunks) < 2 {
			continue
		}
		g.Go(func() error { return m.composeFile(gctx, man, i, sem) })
	}
	if err := g.Wait(); err != nil {
		if errors.Is(err, queue.ErrPermanent) {
			return m.fail(ctx, t, man.Bucket, err, log)
		}
		return err
	}
	composeMS := time.Since(composeStart).Milliseconds()

	verifyStart := time.Now()
	objs := make([]message.DoneObject, len(man.Files))
	for i, f := range man.Files {
		a, err := m.o.Store.Attrs(ctx, man.Bucket, f.Object)
		if err != nil {
			return err
		}
		if a.Size != f.WireSize || a.CRC32C != f.WireCRC32 || a.Metadata[message.MetaTransfer] != t.id {
			return m.fail(ctx, t, man.Bucket, fmt.Errorf("file %s: final object gs://%s/%s has %d bytes with crc32c %08x, predicted %d bytes with crc32c %08x: %w",
				f.Path, man.Bucket, f.Object, a.Size, a.CRC32C, f.WireSize, f.WireCRC32, gcs.ErrChecksum), log)
		}
		objs[i] = message.DoneObject{Name: "gs://" + man.Bucket + "/" + f.Object, Size: a.Size, CRC32C: a.CRC32C, RawSize: f.Size, RawCRC32C: f.RawCRC32C}
	}
	verifyMS := time.Since(verifyStart).Milliseconds()

	done := message.Done{V: message.Version, TransferID: t.id, Status: message.StatusOK, Destination: destination(man),
		Objects: objs, StartedAt: man.StartedAt, FinishedAt: time.Now().UTC()}
	done.Timings = message.StageTimingMS{Compress: man.CompressMS, Upload: uploadMS(t.present), Compose: composeMS, Verify: verifyMS,
		Total: done.FinishedAt.Sub(man.StartedAt).Milliseconds()}
	if err := m.record(ctx, t, man.Bucket, done, man); err != nil {
		return err
	}
	log.Info("transfer done", "files", len(man.Files), "total_ms", done.Timings.Total)
	return nil
}

// composeFile builds file i's final object from its chunks with a tree of
// composes of at most 32 sources each.
func (m *Merger) composeFile(ctx context.Context, man *message.Manifest, i int, sem chan struct{}) error {
	f := man.Files[i]
	same := func(a gcs.Attrs) bool {
		return a.Size == f.WireSize && a.CRC32C == f.WireCRC32 && a.Metadata[message.MetaTransfer] == man.TransferID
	}
	// fake-gcs-server ignores compose preconditions, so the destination is
	// checked here as well as by the precondition real GCS enforces.
	a, err := m.o.Store.Attrs(ctx, man.Bucket, f.Object)
	switch {
	case err == nil && same(a):
		return nil // composed before a restart or a retry
	case err == nil && !man.Overwrite:
		return queue.Permanent(fmt.Errorf("file %s: destination gs://%s/%s already exists (overwrite was not requested)", f.Path, man.Bucket, f.Object))
	case err != nil && !errors.Is(err, gcs.ErrNotFound):
		return err
	}

	srcs := make([]string, len(f.Chunks), len(f.Chunks)+1)
	for j, c := range f.Chunks {
		srcs[j] = c.Object
	}
	// A zstd file ends with its seek table, built from the manifest as the
	// producer counted it in f.WireSize and f.WireCRC32.
	if table := f.SeekTable(); table != nil {
		name := message.SeekTableObject(man.TransferID, i)
		if _, err := m.o.Store.PutSmall(ctx, man.Bucket, name, table, false, "application/octet-stream"); err != nil {
			return fmt.Errorf("file %s: seek table: %w", f.Path, err)
		}
		srcs = append(srcs, name)
	}
	for level := 0; len(srcs) > MaxComposeSources; level++ {
		next := make([]string, (len(srcs)+MaxComposeSources-1)/MaxComposeSources)
		g, gctx := errgroup.WithContext(ctx)
		for k := range next {
			lo, hi := k*MaxComposeSources, min((k+1)*MaxComposeSources, len(srcs))
			next[k] = message.IntermediateObject(man.TransferID, i, level, k)
			g.Go(func() error {
				sem <- struct{}{}
				defer func() { <-sem }()
				_, err := m.o.Store.Compose(gctx, man.Bucket, next[k], srcs[lo:hi], gcs.ComposeOptions{
					Metadata: map[string]string{message.MetaTransfer: man.TransferID},
				})
				countCompose(err)
				return err
			})
		}
		if err := g.Wait(); err != nil {
			return fmt.Errorf("file %s: %w", f.Path, err)
		}
		srcs = next
	}
	sem <- struct{}{}
	defer func() { <-sem }()
	_, err = m.o.Store.Compose(ctx, man.Bucket, f.Object, srcs, gcs.ComposeOptions{
		IfAbsent:    !man.Overwrite,
		ContentType: man.ContentType,
		Metadata:    message.FinalMetadata(man.TransferID, f.Size, f.RawCRC32C, man.Codec),
	})
	countCompose(err)
	if errors.Is(err, gcs.ErrPrecondition) {
		if a, aerr := m.o.Store.Attrs(ctx, man.Bucket, f.Object); aerr == nil && same(a) {
			return nil
		}
		return queue.Permanent(fmt.Errorf("file %s: destination gs://%s/%s already exists: %w", f.Path, man.Bucket, f.Object, err))
	}
	if err != nil {
		return fmt.Errorf("file %s: %w", f.Path, err)
	}
	return nil
}

// fail ends a transfer as failed: staging removed, row and done event say
// why.
func (m *Merger) fail(ctx context.Context, t *transfer, bucket string, cause error, log *slog.Logger) error {
	man := t.manifest
	if man == nil {
		// The producer may have failed before sealing; a manifest, if
		// any, still tells what the transfer was.
		if b, err := m.o.Store.ReadAll(ctx, bucket, message.ManifestObject(t.id)); err == nil {
			var mm message.Manifest
			if message.Decode(b, &mm) == nil {
				man = &mm
			}
		}
	}
	if man == nil {
		man = &message.Manifest{TransferID: t.id, Bucket: bucket}
	}
	now := time.Now().UTC()
	done := message.Done{V: message.Version, TransferID: t.id, Status: message.StatusFailed, Error: cause.Error(),
		Destination: destination(man), StartedAt: man.StartedAt, FinishedAt: now}
	if !man.StartedAt.IsZero() {
		done.Timings.Total = now.Sub(man.StartedAt).Milliseconds()
	}
	log.Error("transfer failed", "err", cause)
	return m.record(ctx, t, bucket, done, man)
}

// record makes the end of a transfer durable and visible, in an order that
// is safe to repeat: row (idempotent per transfer), done event, done marker,
// staging removed.
func (m *Merger) record(ctx context.Context, t *transfer, bucket string, done message.Done, man *message.Manifest) error {
	present := t.present
	if err := m.o.Sink.Write(ctx, Row(done, man, present, m.o.Version), ChunkRows(man, present)); err != nil {
		return fmt.Errorf("write benchmark row: %w", err)
	}
	body := message.Encode(done)
	if err := m.o.Done.Publish(ctx, body, map[string]string{"transfer_id": done.TransferID, "status": done.Status}); err != nil {
		return err
	}
	if _, err := m.o.Store.PutSmall(ctx, bucket, message.DoneMarker(done.TransferID), body, false, "application/json"); err != nil {
		return err
	}
	if err := m.deleteStaging(ctx, bucket, done.TransferID); err != nil {
		return err
	}
	t.finished = true
	m.forget(done.TransferID)
	metrics.Transfers.WithLabelValues(done.Status).Inc()
	return nil
}

func countCompose(err error) {
	if err != nil {
		metrics.Composes.WithLabelValues("error").Inc()
		return
	}
	metrics.Composes.WithLabelValues("ok").Inc()
}

// deleteStaging removes every object under the transfer's staging prefix.
func (m *Merger) deleteStaging(ctx context.Context, bucket, tid string) error {
	var names []string
	if err := m.o.Store.List(ctx, bucket, message.StagingPrefix(tid), func(a gcs.Attrs) error {
		names = append(names, a.Name)
		return nil
	}); err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(m.o.ComposeConcurrency)
	for _, n := range names {
		g.Go(func() error { return m.o.Store.Delete(gctx, bucket, n) })
	}
	return g.Wait()
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
