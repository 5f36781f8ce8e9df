package merger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/manifest"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/queue"
)

// advance is the reconcile step: from what it knows of transfer t (and
// reads from GCS when it knows too little), it takes the next step the
// transfer's state calls for, whatever event or recheck brought it here:
// read and check the sealed manifest, rebuild what is stored from GCS
// (scan), and once every chunk is there finish: compose, confirm, end.
// The intake (intake.go) only records what events say; everything the
// merger does to GCS starts here, in the order this file reads.
func (m *Merger) advance(ctx context.Context, t *transfer, log *slog.Logger) error {
	if t.manifest == nil {
		man, err := m.readManifest(ctx, t.bucket, t.id)
		if err != nil || man == nil || !man.Sealed {
			return err // not sealed yet; the sealed event will come
		}
		pg := manifest.NewReader(m.o.Store, t.bucket, man)
		finals, err := manifest.Check(ctx, man, pg, t.bucket, t.id)
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
	err := t.pages.Each(ctx, func(i int, f *message.File) error {
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
		return t.pages.Join(ctx, t.finals, func(i int, f *message.File, a *gcs.Attrs) error {
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
	return t.pages.Join(ctx, t.finals, func(i int, f *message.File, a *gcs.Attrs) error {
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

// finish composes, verifies and records a transfer whose chunks are all
// stored.
func (m *Merger) finish(ctx context.Context, t *transfer, log *slog.Logger) error {
	// Another merger (a rolling update runs two) may have ended it while
	// this one gathered events.
	if done, err := m.markerExists(ctx, t); done || err != nil {
		return err
	}
	man := t.manifest
	composeStart := time.Now()
	if man.Staged {
		if err := m.checkReplaces(ctx, t); err != nil {
			return err
		}
	}
	// Said before the first final compose deletes its chunks: a merger that
	// finds chunks gone then looks for the final objects (composed).
	if err := m.put(ctx, t.bucket, message.ComposingMarker(t.id), nil, "text/plain"); err != nil {
		return err
	}
	err := m.composeAll(ctx, t)
	var wrong *wrongFinal
	switch {
	case errors.As(err, &wrong):
		return m.badFinal(ctx, t, wrong, log)
	case errors.Is(err, gcs.ErrNotFound):
		// A source is gone: another merger ended the transfer and removed
		// its staging, or the staging was lost. Look again from GCS.
		if done, merr := m.markerExists(ctx, t); done || merr != nil {
			return merr
		}
		t.reset()
		t.scanned = false
		return err
	case err != nil:
		return err
	}
	composeMS := time.Since(composeStart).Milliseconds()

	// Verify: every final object as a listing of the destination shows it
	// (a composed one was also checked as GCS described it after its
	// compose).
	verifyStart := time.Now()
	sum, err := m.confirm(ctx, t)
	if err != nil {
		return err
	}
	defer sum.close()
	if sum.missing > 0 {
		return m.unconfirmed(ctx, t, sum, log)
	}
	verifyMS := time.Since(verifyStart).Milliseconds()

	done, err := m.newDone(ctx, t, man, message.StatusOK, nil)
	if err != nil {
		return err
	}
	if err := sum.rejects.tooMany(); err != nil {
		done.Status, done.Error = message.StatusFailed, err.Error()
		log.Error("transfer failed: its manifest lists too many rejects; its objects stay", "err", err)
	} else {
		m.removeStale(ctx, t, sum)
		if err := m.writeRejects(ctx, t, sum); err != nil {
			return err
		}
	}
	done.Rejected = int64(sum.rejects.n)
	done.Appended, done.AppendedBytes = sum.appended, sum.appendedBytes
	done.BytesRead, done.BytesSent, done.FilesWhole, done.FilesConverted = sum.read, sum.sent, sum.whole, sum.converted
	done.Files, done.Bytes, done.WireBytes, done.Objects = sum.files, sum.bytes, sum.wire, sum.objects
	if man.Load != nil && done.Status == message.StatusOK {
		var lf *loadFailed
		done.Load, err = m.loadTable(ctx, t, sum)
		switch {
		case errors.As(err, &lf):
			// The parts are complete and stay; the transfer did not
			// do what it was asked.
			done.Status, done.Error = message.StatusFailed, message.Truncate(err.Error(), message.MaxErrorBytes)
			log.Error("transfer failed in its table load; its objects stay", "table", man.Load.Table, "err", err)
		case err != nil:
			return err
		}
		done.FinishedAt = m.o.now().UTC()
	}
	done.Timings = message.StageTimingMS{Compress: man.CompressMS, Upload: sum.uploadMS(), Compose: composeMS, Verify: verifyMS,
		Total: done.FinishedAt.Sub(man.StartedAt).Milliseconds()}
	if err := m.record(ctx, t, man, done, sum); err != nil {
		return err
	}
	log.Info("transfer done", "files", sum.files, "total_ms", done.Timings.Total)
	return nil
}

// unconfirmed takes back what workers reported for files GCS does not
// hold as reported: a forged or replayed event, or an object replaced since.
// The transfer waits for real uploads (the recheck asks GCS again) and, if
// none comes, ends failed at FERRY_TRANSFER_TIMEOUT. A composed file that
// the listing does not show is retried.
func (m *Merger) unconfirmed(ctx context.Context, t *transfer, sum *summary, log *slog.Logger) error {
	man := t.manifest
	if sum.missing > len(sum.unconfirmed) {
		// More than a summary names: forget what was reported and look
		// again at what GCS holds.
		log.Warn("the listing of the destination does not show many reported final objects; looking again", "files", sum.missing)
		t.reset()
		return m.scan(ctx, t)
	}
	for _, i := range sum.unconfirmed {
		f, err := t.pages.File(ctx, i)
		if err != nil {
			return err
		}
		if f.Staged() {
			return fmt.Errorf("file %s: composed object gs://%s/%s is not in the listing of the destination with its size, crc32c and transfer", f.Path, man.Bucket, f.Object)
		}
		log.Warn("a report names a final object GCS does not hold as reported; not counted", "file", f.Path,
			"object", "gs://"+man.Bucket+"/"+f.Object)
		t.unmark(chunkKey{i, 0}, f)
	}
	return nil
}

// markerExists reports whether t's done marker exists, and if so marks t
// ended.
func (m *Merger) markerExists(ctx context.Context, t *transfer) (bool, error) {
	_, err := m.o.Store.Attrs(ctx, t.bucket, message.DoneMarker(t.id))
	switch {
	case err == nil:
		t.end()
		return true, nil
	case errors.Is(err, gcs.ErrNotFound):
		return false, nil
	default:
		return false, err
	}
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
