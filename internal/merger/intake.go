package merger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/metrics"
	"github.com/ferry-dev/ferry/internal/queue"
)

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
	f, err := t.pages.File(ctx, k.file)
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

// refuse ends a transfer whose event names a bucket the merger may not
// write to: a failed done event and row say which bucket and which
// variable; nothing is read from or written to that bucket (so no done
// marker, and no staging to remove). The event fails permanently.
func (m *Merger) refuse(ctx context.Context, ev message.Event, cause error) error {
	cause = fmt.Errorf("%s event of transfer %s: %w", ev.Type, ev.TransferID, cause)
	if ev.Type == message.EventFailed && ev.Error != "" {
		cause = fmt.Errorf("%w; reported by %s: %s", cause, ev.Worker, ev.Error)
	}
	t := m.cache.acquire(key{ev.Bucket, ev.TransferID})
	defer m.cache.release(t)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.refused {
		return queue.Permanent(cause) // ended already
	}
	man := &message.Manifest{TransferID: ev.TransferID, Bucket: ev.Bucket}
	done, err := m.newDone(ctx, t, man, message.StatusFailed, cause)
	if err != nil {
		return err
	}
	done.StartedAt = done.FinishedAt
	if err := m.writeRow(ctx, Row(done, man, 0, m.o.Version), nil, nil); err != nil {
		done.RowError = message.Truncate(err.Error(), message.MaxErrorBytes)
	}
	if err := m.o.Done.Publish(ctx, message.Encode(done), map[string]string{"transfer_id": done.TransferID, "status": done.Status}); err != nil {
		return fmt.Errorf("publish done event: %w", err)
	}
	t.refused = true
	m.log.Error("transfer refused", "transfer_id", ev.TransferID, "bucket", ev.Bucket, "err", cause)
	metrics.Transfers.WithLabelValues(done.Status).Inc()
	return queue.Permanent(cause)
}

// progressObject is the merger's trace that a transfer is alive.
func progressObject(tid string) string { return message.StagingPrefix(tid) + "progress" }

// noteProgress leaves a trace in GCS that t is alive when a chunk event
// reports final objects: workers write a one-chunk file straight to its
// final name, so a transfer of small files may have nothing under its
// staging prefix until it is sealed, and the sweep would not see it stall.
// It is written at most every quarter of TransferTimeout per transfer and
// process; a failure only delays it. It reports whether it wrote one.
func (m *Merger) noteProgress(ctx context.Context, t *transfer, ev message.Event, log *slog.Logger) bool {
	now := m.o.now()
	if now.Sub(t.progressAt) < m.o.TransferTimeout/4 {
		return false
	}
	final := false
	for _, p := range ev.Parts {
		final = final || !strings.HasPrefix(p.Object, message.StagingRoot)
	}
	if !final {
		return false
	}
	body := fmt.Appendf(nil, `{"transfer_id":%q,"at":%q}`, t.id, now.UTC().Format(time.RFC3339Nano))
	if err := m.put(ctx, t.bucket, progressObject(t.id), body, "application/json"); err != nil {
		log.Warn("could not write the progress marker; the stall sweep may see this transfer late", "err", err)
		return false
	}
	t.progressAt = now
	return true
}
