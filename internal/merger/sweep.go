package merger

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
)

// RunSweeps sweeps at once and then every SweepEvery, and rechecks quiet
// transfers every RecheckEvery, until ctx is done. Every merger may run it:
// two sweeping the same bucket end a stalled transfer once each at most, and
// rows are idempotent per transfer.
func (m *Merger) RunSweeps(ctx context.Context) {
	sweep := time.NewTicker(m.o.SweepEvery)
	defer sweep.Stop()
	recheck := time.NewTicker(m.o.RecheckEvery)
	defer recheck.Stop()
	m.sweepLogged(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-recheck.C:
			m.recheck(ctx)
		case <-sweep.C:
			m.sweepLogged(ctx)
		}
	}
}

func (m *Merger) sweepLogged(ctx context.Context) {
	if err := m.Sweep(ctx); err != nil && ctx.Err() == nil {
		m.log.Warn("sweep incomplete; the next one tries again", "err", err)
	}
}

// recheck looks again in GCS at the transfers in the cache that are sealed,
// still incomplete and quiet — no event for RecheckEvery — and finishes
// those that turn out complete. During a rolling update two mergers share
// the events of a transfer, and each sees only its own: without a second
// look, neither would see the transfer complete. A quiet transfer is looked
// at again after twice as long each time nothing new turned up, up to
// SweepEvery, so a transfer waiting for slow workers costs little.
func (m *Merger) recheck(ctx context.Context) {
	for _, k := range m.cache.keys() {
		t := m.cache.lookup(k)
		if t == nil {
			continue
		}
		m.renewLease(ctx, t)
		m.recheckOne(ctx, t)
		m.cache.release(t)
	}
}

// renewLease touches the lease of a transfer this merger holds, every
// message.LeaseRenewEvery until it ends, so that another transfer to the
// same objects is held off while it runs (after its producer has gone) and
// not for long once no process runs it. A transfer without a lease (it
// writes no final object) answers 404, which is no error.
func (m *Merger) renewLease(ctx context.Context, t *transfer) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := m.o.now()
	if t.finished || t.refused || now.Sub(t.renewed) < message.LeaseRenewEvery {
		return
	}
	t.renewed = now
	err := m.o.Store.Touch(ctx, t.bucket, message.LeaseObject(t.id), message.MetaRenewed, now.UTC().Format(time.RFC3339))
	if err != nil && !errors.Is(err, gcs.ErrNotFound) && ctx.Err() == nil {
		m.log.Warn("could not renew the transfer's lease; the next renewal tries again", "transfer_id", t.id, "err", err)
	}
}

func (m *Merger) recheckOne(ctx context.Context, t *transfer) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := m.o.now()
	// An unscanned transfer is looked at too: a compose that found a
	// source gone resets it to be scanned again, and it may get no other
	// event.
	if t.finished || t.manifest == nil || t.scanned && t.have >= t.need ||
		now.Sub(t.lastEvent) < m.o.RecheckEvery || now.Sub(t.lastScan) < max(t.recheckWait, m.o.RecheckEvery) {
		return
	}
	log := m.log.With("transfer_id", t.id)
	// Another merger may have finished it.
	if done, err := m.markerExists(ctx, t); done || err != nil {
		return
	}
	before := t.have
	err := m.scan(ctx, t)
	if err == nil {
		t.scanned, t.reported = true, nil
	}
	if err == nil && t.have == t.need {
		log.Info("a second look found every chunk: finishing", "chunks", t.need)
		err = m.finish(ctx, t, log)
	}
	if err = m.failIfPermanent(ctx, t, err, log); err != nil {
		log.Warn("recheck", "err", err)
	}
	if t.have > before {
		t.recheckWait = m.o.RecheckEvery
	} else {
		t.recheckWait = min(2*max(t.recheckWait, m.o.RecheckEvery), m.o.SweepEvery)
	}
}

// Sweep looks at every bucket the merger writes to — those FERRY_BUCKETS
// lists, or, when it lists none (the local stack), those events named since
// the process started. It ends transfers whose staging prefix saw no new
// object for TransferTimeout (also those the merger never got an event
// for, and those of a merger that restarted), and removes done markers
// older than DoneRetention. It knows only what GCS says.
func (m *Merger) Sweep(ctx context.Context) error {
	var errs []error
	for _, b := range m.sweepBuckets() {
		if err := m.sweepStalled(ctx, b); err != nil {
			errs = append(errs, err)
		}
		if err := m.sweepDone(ctx, b); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (m *Merger) sweepBuckets() []string {
	if len(m.o.Buckets.Allowed) > 0 {
		return m.o.Buckets.Allowed
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.seen))
	for b := range m.seen {
		out = append(out, b)
	}
	sort.Strings(out)
	return out
}

// sweepStalled ends the transfers of bucket whose newest staging object is
// older than TransferTimeout.
func (m *Merger) sweepStalled(ctx context.Context, bucket string) error {
	newest := map[string]time.Time{}
	err := m.o.Store.List(ctx, bucket, message.StagingRoot, func(a gcs.Attrs) error {
		if tid, ok := stagingTransfer(a.Name); ok && a.Created.After(newest[tid]) {
			newest[tid] = a.Created
		}
		return nil
	})
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(newest))
	for tid := range newest {
		ids = append(ids, tid)
	}
	sort.Strings(ids)
	var errs []error
	for _, tid := range ids {
		if m.o.now().Sub(newest[tid]) < m.o.TransferTimeout {
			continue
		}
		if err := m.expire(ctx, bucket, tid, newest[tid]); err != nil {
			errs = append(errs, fmt.Errorf("transfer %s: %w", tid, err))
		}
	}
	return errors.Join(errs...)
}

// stagingTransfer returns the transfer a staging object belongs to. Only the
// objects a transfer has count (manifest, chunks, composites, seek tables,
// the progress marker): other tools' objects under the prefix (the loader's
// staged rows, say) are not transfers.
func stagingTransfer(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, message.StagingRoot)
	if !ok {
		return "", false
	}
	tid, kind, ok := strings.Cut(rest, "/")
	if !ok || !message.ValidTransferID(tid) {
		return "", false
	}
	if kind == "progress" || message.TransferObject(kind) {
		return tid, true
	}
	return "", false
}

// expire ends a transfer that made no progress since last.
func (m *Merger) expire(ctx context.Context, bucket, tid string, last time.Time) error {
	t := m.cache.acquire(key{bucket, tid})
	defer m.cache.release(t)
	t.mu.Lock()
	defer t.mu.Unlock()
	now := m.o.now()
	if now.Sub(t.lastEvent) < m.o.TransferTimeout {
		return nil // an event came since the listing
	}
	if ended, err := m.ended(ctx, t); ended || err != nil {
		return err // ended before; a late upload left staging, now removed
	}
	log := m.log.With("transfer_id", tid)
	cause := fmt.Errorf("no progress for %s, longer than FERRY_TRANSFER_TIMEOUT=%s: the newest object under gs://%s/%s was written at %s",
		now.Sub(last).Round(time.Second), m.o.TransferTimeout, bucket, message.StagingPrefix(tid), last.UTC().Format(time.RFC3339))
	return m.end(ctx, t, message.StatusFailed, cause, log)
}

// sweepDone removes done markers older than DoneRetention.
func (m *Merger) sweepDone(ctx context.Context, bucket string) error {
	var old []string
	err := m.o.Store.List(ctx, bucket, message.DoneRoot, func(a gcs.Attrs) error {
		if m.o.now().Sub(a.Created) > m.o.DoneRetention {
			old = append(old, a.Name)
		}
		return nil
	})
	if err != nil {
		return err
	}
	g, gctx := m.group(ctx)
	for _, n := range old {
		g.Go(func() error { return m.o.Store.Delete(gctx, bucket, n) })
	}
	return g.Wait()
}
