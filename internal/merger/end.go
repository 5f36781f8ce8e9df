package merger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/ferry-dev/ferry/internal/benchrow"
	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/manifest"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/metrics"
	"github.com/ferry-dev/ferry/internal/queue"
)

// end ends a transfer failed or cancelled: the final objects it wrote
// removed (when its destination is known: from the manifest, or from the
// producer's failed event), staging removed, row and done event say why.
func (m *Merger) end(ctx context.Context, t *transfer, status string, cause error, log *slog.Logger) error {
	man, pg := t.manifest, t.pages
	if man == nil {
		// The producer may have failed before sealing, or the manifest
		// was never read; if there is one, it still tells what the
		// transfer was.
		if mm, err := m.readManifest(ctx, t.bucket, t.id); err == nil && mm != nil && mm.TransferID == t.id && mm.Bucket == t.bucket && mm.CheckPages() == nil {
			man = mm
		}
	}
	if man == nil {
		man = &message.Manifest{TransferID: t.id, Bucket: t.bucket}
		man.Unpaged()
	}
	if pg == nil {
		pg = manifest.NewReader(m.o.Store, t.bucket, man)
	}
	// What to list for the objects this transfer wrote: what its
	// manifest's objects share, or the prefix a failed event gave.
	prefix, known, err := finalsPrefix(ctx, pg)
	if err != nil && !errors.Is(err, queue.ErrPermanent) {
		return err
	}
	if !known && t.prefix != "" {
		prefix, known = t.prefix+"/", true
	}
	if !known {
		// Not sealed, and no producer said where (one killed before it
		// sealed): its lease names the scope every final object of it
		// starts with. Only objects of this transfer are removed there,
		// whoever wrote the lease.
		prefix, known = m.leaseScope(ctx, t)
	}
	done, err := m.newDone(ctx, t, man, status, cause)
	if err != nil {
		return err
	}
	sum, err := newSummary()
	if err != nil {
		return err
	}
	defer sum.close()
	if known {
		n, err := m.removeFinals(ctx, t.bucket, prefix, t.id, func(a gcs.Attrs) error {
			return keep(&done, sum, t.bucket, a)
		})
		if err != nil {
			return err
		}
		if n > 0 {
			log.Info("removed the final objects the transfer had created", "objects", n)
		}
	}
	if done.Kept > 0 {
		said := fmt.Sprintf("%d objects it had replaced, appended to or taken over from a dead transfer stay, whole (what they held is in them and nowhere else): the done event and its listing name them", done.Kept)
		if done.Error != "" {
			said = done.Error + "; " + said
		}
		done.Error = message.Truncate(said, message.MaxErrorBytes)
	}
	if status == message.StatusFailed {
		log.Error("transfer failed", "err", done.Error, "objects_kept", done.Kept)
	} else {
		log.Info("transfer "+status, "reason", done.Error, "objects_kept", done.Kept)
	}
	// What workers stored of files of several chunks before the end.
	for k, s := range t.present {
		if f, err := pg.File(ctx, k.file); err == nil && f != nil && k.index < len(f.Chunks) {
			if err := sum.uploaded(t.id, f, k.index, s); err != nil {
				return err
			}
		}
	}
	t.manifest, t.pages = man, pg
	return m.record(ctx, t, man, done, sum)
}

// newDone starts the done event of t: the first skipped files come from
// the manifest's first page of them.
func (m *Merger) newDone(ctx context.Context, t *transfer, man *message.Manifest, status string, cause error) (message.Done, error) {
	now := m.o.now().UTC()
	d := message.Done{V: message.Version, TransferID: t.id, Status: status, Destination: destination(man),
		StartedAt: man.StartedAt, FinishedAt: now, FilesSkipped: man.Totals.Skipped, Agents: man.Agents}
	if cause != nil {
		d.Error = message.Truncate(cause.Error(), message.MaxErrorBytes)
	}
	if man.Totals.Skipped > 0 && t.pages != nil {
		err := t.pages.Skipped(ctx, func(s message.Skipped) error {
			if len(d.Skipped) == message.MaxDoneInline {
				return manifest.ErrJoined
			}
			d.Skipped = append(d.Skipped, "gs://"+man.Bucket+"/"+s.Object)
			return nil
		})
		if err != nil && !errors.Is(err, manifest.ErrJoined) {
			return d, err
		}
	}
	if !man.StartedAt.IsZero() {
		d.Timings.Total = now.Sub(man.StartedAt).Milliseconds()
	}
	return d, nil
}

// record makes the end of a transfer durable and visible, in an order that
// is safe to repeat: row (idempotent per transfer), listing, done event,
// done marker, staging removed. A crash between two steps repeats the
// earlier ones, so a done event may be published twice; batch systems
// deduplicate done events by transfer_id. sum holds the confirmed final
// objects of an ok transfer (none otherwise) and the chunk rows.
func (m *Merger) record(ctx context.Context, t *transfer, man *message.Manifest, done message.Done, sum *summary) error {
	rows, err := sum.rows.Finish()
	if err != nil {
		return err
	}
	defer func() { _ = rows.Close() }()
	chunks, rowsErr := benchrow.Lines[benchrow.ChunkRow](rows)
	if err := m.writeRow(ctx, Row(done, man, len(sum.workers), m.o.Version), chunks, rowsErr); err != nil {
		done.RowError = message.Truncate(err.Error(), message.MaxErrorBytes)
	}
	listed, err := m.writeListing(ctx, t, t.pages, sum)
	if err != nil {
		return err
	}
	if listed {
		done.Listing = "gs://" + t.bucket + "/" + message.ListingObject(done.TransferID)
	}
	// The destination is free before anyone hears of the end: a batch
	// system that sends its next transfer on the done event is not refused
	// for this one's lease.
	if err := m.o.Store.Delete(ctx, t.bucket, message.LeaseObject(done.TransferID)); err != nil && !errors.Is(err, gcs.ErrNotFound) {
		return fmt.Errorf("remove lease: %w", err)
	}
	body := message.Encode(done)
	if err := m.o.Done.Publish(ctx, body, map[string]string{"transfer_id": done.TransferID, "status": done.Status}); err != nil {
		return fmt.Errorf("publish done event: %w", err)
	}
	if err := m.put(ctx, t.bucket, message.DoneMarker(done.TransferID), body, "application/json"); err != nil {
		return fmt.Errorf("write done marker: %w", err)
	}
	if err := m.deleteStaging(ctx, t.bucket, done.TransferID); err != nil {
		return err
	}
	t.end()
	t.status, t.kept = done.Status, done.Files > 0
	metrics.Transfers.WithLabelValues(done.Status).Inc()
	return nil
}

// Row writes are tried rowAttempts times, rowBackoff apart and doubling,
// before the transfer ends without its row.
const (
	rowAttempts = 3
	rowBackoff  = 500 * time.Millisecond
)

// writeRow stores a transfer's benchmark row. A row is a record of the
// transfer, not part of it: a sink that cannot take it (the results file's
// disk full, BigQuery's staging refused) is tried a few times, then logged,
// counted and returned, and the caller goes on to end the transfer. It never
// holds back or deletes the objects the row describes. chunks may be read
// once only, so a retry sends the row without them.
func (m *Merger) writeRow(ctx context.Context, r benchrow.Row, chunks iter.Seq[benchrow.ChunkRow], chunksErr func() error) error {
	var err error
	wait := rowBackoff
	for attempt := 1; attempt <= rowAttempts; attempt++ {
		if err = m.o.Sink.Write(ctx, r, chunks); err == nil && chunksErr != nil {
			err = chunksErr()
		}
		if err == nil {
			return nil
		}
		chunks, chunksErr = nil, nil
		if attempt == rowAttempts {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("write benchmark row: %w (%v)", err, ctx.Err())
		case <-time.After(wait):
		}
		wait *= 2
	}
	metrics.RowErrors.Inc()
	m.log.Error("the benchmark row could not be written; the transfer ends without it", "transfer_id", r.TransferID, "status", r.Status, "err", err)
	return fmt.Errorf("write benchmark row: %w", err)
}

// put writes a small object of the merger's own.
func (m *Merger) put(ctx context.Context, bucket, name string, body []byte, contentType string) error {
	_, err := m.o.Store.Upload(ctx, bucket, name, bytes.NewReader(body), gcs.UploadOptions{
		Size: int64(len(body)), CRC32C: crc32c.Checksum(body), ContentType: contentType, KMSKey: m.o.Buckets.KMSKey,
	})
	return err
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
	g, gctx := m.group(ctx)
	for _, n := range names {
		g.Go(func() error { return m.o.Store.Delete(gctx, bucket, n) })
	}
	return g.Wait()
}

// leaseScope is the scope t's lease gives, if it has one.
func (m *Merger) leaseScope(ctx context.Context, t *transfer) (string, bool) {
	name := message.LeaseObject(t.id)
	b, err := m.o.Store.ReadAll(ctx, t.bucket, name)
	var l message.Lease
	if err != nil || message.Decode(b, &l) != nil || l.Check(name) != nil {
		return "", false
	}
	return l.Scope, true
}

// keep names object a, which a failed or cancelled transfer leaves, in its
// done event (the first message.MaxDoneInline) and its listing.
func keep(done *message.Done, sum *summary, bucket string, a gcs.Attrs) error {
	raw, _ := strconv.ParseInt(a.Metadata[message.MetaRawSize], 10, 64)
	rawCRC, _ := strconv.ParseUint(a.Metadata[message.MetaRawCRC32C], 16, 32)
	o := message.DoneObject{Name: "gs://" + bucket + "/" + a.Name, Size: a.Size, CRC32C: a.CRC32C, Generation: a.Generation,
		RawSize: raw, RawCRC32C: uint32(rawCRC)}
	done.Kept++
	if len(done.Objects) < message.MaxDoneInline {
		done.Objects = append(done.Objects, o)
	}
	return sum.listing.Add(message.ListingEntry{DoneObject: o})
}

// removeFinals deletes every object under prefix whose ferry-transfer
// metadata names tid, at the generation the listing showed, as the listing
// goes (no list of them is held):
// a version written since, by another transfer or a person, is never
// touched. A failed or cancelled transfer leaves nothing half-done, and a
// re-run does not meet its own earlier attempt's objects. An object that
// holds more than this transfer created (message.KeptOnFailure: a staged
// overwrite composed it over one it found, or an append composed onto
// one) stays, passed to kept: what it replaced or grew is in it and
// nowhere else, and it is whole (a compose of checked chunks). It returns
// how many it removed.
func (m *Merger) removeFinals(ctx context.Context, bucket, prefix, tid string, kept func(gcs.Attrs) error) (int, error) {
	g, gctx := m.group(ctx)
	n := 0
	err := m.o.Store.List(ctx, bucket, prefix, func(a gcs.Attrs) error {
		if a.Metadata[message.MetaTransfer] != tid || message.ReservedRoot(a.Name) != "" {
			return nil
		}
		if message.KeptOnFailure(a.Metadata) {
			return kept(a)
		}
		n++
		g.Go(func() error { // waits while the limit's calls are in flight
			err := m.o.Store.DeleteAsSeen(gctx, bucket, a)
			if errors.Is(err, gcs.ErrPrecondition) {
				return nil // replaced or adopted since: not this transfer's any more
			}
			return err
		})
		return gctx.Err()
	})
	if werr := g.Wait(); err == nil {
		err = werr
	}
	if err != nil {
		return n, fmt.Errorf("remove the final objects of transfer %s under gs://%s/%s: %w", tid, bucket, prefix, err)
	}
	return n, nil
}

// lateFinals handles a chunk event that arrives after its transfer ended:
// a worker that uploaded a one-chunk file's final object after a failure
// or cancel. Unless the transfer ended with its objects confirmed (ok, or
// failed in its table load, which leaves them), the objects it reports go,
// at the generation reported, if they are this transfer's.
func (m *Merger) lateFinals(ctx context.Context, t *transfer, ev message.Event, log *slog.Logger) error {
	var finals []message.EventPart
	for _, p := range ev.Parts {
		if !strings.HasPrefix(p.Object, message.StagingRoot) {
			finals = append(finals, p)
		}
	}
	if len(finals) == 0 {
		return nil
	}
	if t.status == "" {
		b, err := m.o.Store.ReadAll(ctx, t.bucket, message.DoneMarker(t.id))
		if errors.Is(err, gcs.ErrNotFound) {
			return nil // ended here without a marker: a refused bucket
		}
		if err != nil {
			return err
		}
		var d message.Done
		if err := message.Decode(b, &d); err != nil {
			return nil
		}
		t.status, t.kept = d.Status, d.Files > 0
	}
	if t.status == message.StatusOK || t.kept {
		return nil // its objects are the done event's
	}
	for _, p := range finals {
		a, err := m.o.Store.Attrs(ctx, t.bucket, p.Object)
		if errors.Is(err, gcs.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if a.Metadata[message.MetaTransfer] != t.id {
			continue
		}
		if err := m.o.Store.DeleteGeneration(ctx, t.bucket, p.Object, a.Generation); err != nil && !errors.Is(err, gcs.ErrPrecondition) {
			return err
		}
		log.Info("removed a final object uploaded after the transfer ended", "object", p.Object, "status", t.status)
	}
	return nil
}
