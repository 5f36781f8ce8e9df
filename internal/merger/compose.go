package merger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strconv"

	"golang.org/x/sync/errgroup"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/metrics"
	"github.com/ferry-dev/ferry/internal/queue"
)

// wrongFinal is a composed object that is not the one predicted.
type wrongFinal struct {
	f *message.File
	a gcs.Attrs
}

func (e *wrongFinal) Error() string {
	return fmt.Sprintf("file %s: final object %s has %d bytes with crc32c %08x, predicted %d bytes with crc32c %08x: %v",
		e.f.Path, e.f.Object, e.a.Size, e.a.CRC32C, e.f.WireSize, e.f.WireCRC32, gcs.ErrChecksum)
}

// badFinal fails a transfer whose composed object is not the one predicted,
// and removes that object: nothing wrong stays under a final name. An
// object an append or an overwrite composed (message.KeptOnFailure) is the
// exception: what it grew or replaced is in it and nowhere else, so it
// stays, and the done event names it.
func (m *Merger) badFinal(ctx context.Context, t *transfer, w *wrongFinal, log *slog.Logger) error {
	man, f, a := t.manifest, w.f, w.a
	if !message.KeptOnFailure(a.Metadata) {
		del := func() error { return m.o.Store.Delete(ctx, man.Bucket, f.Object) }
		if a.Generation != 0 {
			del = func() error { return m.o.Store.DeleteGeneration(ctx, man.Bucket, f.Object, a.Generation) }
		}
		if err := del(); err != nil && !errors.Is(err, gcs.ErrPrecondition) {
			return err
		}
	}
	return m.end(ctx, t, message.StatusFailed, fmt.Errorf("file %s: final object gs://%s/%s has %d bytes with crc32c %08x, predicted %d bytes with crc32c %08x: %w",
		f.Path, man.Bucket, f.Object, a.Size, a.CRC32C, f.WireSize, f.WireCRC32, gcs.ErrChecksum), log)
}

// tree is one file's way through the compose rounds.
type tree struct {
	file   int
	f      *message.File
	srcs   []string        // the chunks, then the seek table
	levels [][]composeCall // composeTree of srcs
	table  []byte          // seek table, the last component; nil for none
	done   bool
	attrs  gcs.Attrs
	// In a staged overwrite: the generation the compose replaces (0:
	// where nothing is), and a staged Parquet part's own metadata and
	// content type, which the manifest does not hold.
	replaces    int64
	meta        map[string]string
	contentType string
}

// composeAll builds the final object of every file of several chunks, a
// page of the manifest at a time (a page of one-chunk files only is not
// read), and checks each against the size and CRC32C predicted: one that
// differs is returned as a *wrongFinal.
func (m *Merger) composeAll(ctx context.Context, t *transfer) error {
	for k, p := range t.manifest.Pages {
		if p.Chunks == p.Files && !t.manifest.Staged {
			continue
		}
		files, err := t.pages.Page(ctx, k)
		if err != nil {
			return err
		}
		if err := m.composePage(ctx, t, files, p.First); err != nil {
			return err
		}
	}
	return nil
}

// composePage composes the files of several chunks among files (the
// first of which is file first). The work runs in rounds, each a batch of
// independent calls under one limit (ComposeConcurrency) shared by all
// files: first the Attrs of each destination and the upload of each seek
// table, then one level of every file's compose tree per round.
func (m *Merger) composePage(ctx context.Context, t *transfer, files []message.File, first int) error {
	man := t.manifest
	var trees []*tree
	for j := range files {
		f := &files[j]
		if !f.Staged() {
			continue
		}
		i := first + j
		tr := &tree{file: i, f: f}
		for _, c := range f.Chunks {
			tr.srcs = append(tr.srcs, c.Object)
		}
		tr.table = f.SeekTable() // checked with the manifest
		if tr.table != nil {
			tr.srcs = append(tr.srcs, message.SeekTableObject(t.id, i))
		}
		trees = append(trees, tr)
	}
	if len(trees) == 0 {
		return nil
	}

	// fake-gcs-server ignores compose preconditions, so each destination
	// is looked at here as well as guarded by the precondition real GCS
	// enforces.
	g, gctx := m.group(ctx)
	for _, tr := range trees {
		f := tr.f
		g.Go(func() error {
			a, err := m.o.Store.Attrs(gctx, man.Bucket, f.Object)
			gen := f.AppendsTo()
			switch {
			case err == nil && a.Size == f.WireSize && a.CRC32C == f.WireCRC32 && a.Metadata[message.MetaTransfer] == t.id:
				tr.done, tr.attrs = true, a // composed before a restart or a retry
			case gen != 0 && (err == nil && a.Generation != gen || errors.Is(err, gcs.ErrNotFound)):
				now := "gone"
				if err == nil {
					now = fmt.Sprintf("generation %d", a.Generation)
				}
				return queue.Permanent(fmt.Errorf("file %s: gs://%s/%s changed since the producer proved its prefix (generation %d, now %s): nothing was appended; send the file again", f.Path, man.Bucket, f.Object, gen, now))
			case gen != 0:
				// The object the append begins with: composed onto below.
			case man.Staged && err == nil && a.Generation != f.Replaces:
				return queue.Permanent(replacedSince(f, man.Bucket, a, "nothing more is replaced"))
			case man.Staged && err == nil:
				tr.replaces = a.Generation
			case err == nil && !man.Overwrite:
				return queue.Permanent(fmt.Errorf("file %s: destination gs://%s/%s already exists (overwrite was not requested; -n skips objects that exist, --skip-unchanged skips unchanged files, --overwrite replaces)", f.Path, man.Bucket, f.Object))
			case err != nil && !errors.Is(err, gcs.ErrNotFound):
				return err
			}
			if man.Staged && f.Table != nil && !tr.done {
				// A part's metadata says what it holds of its source;
				// its staged object carries it.
				c, err := m.o.Store.Attrs(gctx, man.Bucket, f.Chunks[0].Object)
				if err != nil {
					return fmt.Errorf("file %s: %w", f.Path, err)
				}
				tr.meta, tr.contentType = c.Metadata, c.ContentType
			}
			return nil
		})
		if tr.table != nil {
			g.Go(func() error {
				_, err := m.o.Store.Upload(gctx, man.Bucket, message.SeekTableObject(t.id, tr.file), bytes.NewReader(tr.table), gcs.UploadOptions{
					Size: int64(len(tr.table)), CRC32C: crc32c.Checksum(tr.table), ContentType: "application/octet-stream",
					Metadata: map[string]string{message.MetaTransfer: t.id}, KMSKey: m.o.Buckets.KMSKey,
				})
				if err != nil {
					return fmt.Errorf("file %s: seek table: %w", f.Path, err)
				}
				return nil
			})
		}
	}
	if err := g.Wait(); err != nil {
		return err
	}

	for _, tr := range trees {
		tr.levels = composeTree(tr.srcs, MaxComposeSources, func(level, k int) string { return message.IntermediateObject(t.id, tr.file, level, k) })
	}
	for level := 0; ; level++ {
		g, gctx := m.group(ctx)
		pending := 0
		for _, tr := range trees {
			if tr.done || level >= len(tr.levels) {
				continue
			}
			pending++
			for _, c := range tr.levels[level] {
				if c.dst == "" {
					g.Go(func() error { return m.composeFinal(gctx, t, tr, c.srcs) })
					continue
				}
				g.Go(func() error {
					_, err := m.o.Store.Compose(gctx, man.Bucket, c.dst, c.srcs, gcs.ComposeOptions{
						Metadata: map[string]string{message.MetaTransfer: t.id}, KMSKey: m.o.Buckets.KMSKey,
					})
					countCompose(err)
					if err != nil {
						return fmt.Errorf("file %s: %w", tr.f.Path, err)
					}
					return nil
				})
			}
		}
		if pending == 0 {
			break
		}
		if err := g.Wait(); err != nil {
			return err
		}
	}
	for _, tr := range trees {
		if a := tr.attrs; a.Size != tr.f.WireSize || a.CRC32C != tr.f.WireCRC32 {
			return &wrongFinal{f: tr.f, a: a}
		}
	}
	return nil
}

// composeFinal composes srcs, at most 32, into tr's final object. The
// compose deletes its sources (chunks, or the composites of the level
// below) as part of the call: a hard delete, so staging never lingers as
// soft-deleted objects in the user's bucket. Once the final object exists
// nothing reads them again (a retry finds it and confirms it; a restarted
// merger credits its chunks, see composed). Intermediate composes keep
// theirs: a tree interrupted halfway is composed again from its chunks.
func (m *Merger) composeFinal(ctx context.Context, t *transfer, tr *tree, srcs []string) error {
	man, f := t.manifest, tr.f
	opt := gcs.ComposeOptions{
		IfAbsent:      !man.Overwrite,
		ContentType:   codec.ContentTypeOf(codec.Codec(man.Codec), f.Object),
		Metadata:      f.Metadata(t.id, man.Codec),
		KMSKey:        m.o.Buckets.KMSKey,
		DeleteSources: true,
	}
	if gen := f.AppendsTo(); gen != 0 {
		// Onto the object itself, only as the producer proved it; its
		// chunks go with the staging, not with the compose (the object
		// is a source, and must stay).
		opt.IfAbsent, opt.IfGeneration, opt.DeleteSources = false, gen, false
		opt.Metadata[message.MetaAppended] = strconv.FormatInt(gen, 10)
	} else if man.Staged {
		// Replaces only what the producer found, and says so.
		opt.IfAbsent, opt.IfGeneration = tr.replaces == 0, tr.replaces
		if tr.meta != nil {
			opt.Metadata, opt.ContentType = maps.Clone(tr.meta), tr.contentType
			delete(opt.Metadata, message.MetaReplaced)
			delete(opt.Metadata, message.MetaAppended)
		}
		if tr.replaces != 0 {
			opt.Metadata[message.MetaReplaced] = strconv.FormatInt(tr.replaces, 10)
		}
	}
	a, err := m.o.Store.Compose(ctx, man.Bucket, f.Object, srcs, opt)
	countCompose(err)
	if errors.Is(err, gcs.ErrPrecondition) || errors.Is(err, gcs.ErrNotFound) {
		// It appeared meanwhile: composed by another merger of this
		// transfer, by an earlier try of this compose whose answer was
		// lost or a 503 (its retry then meets its own object, or finds
		// the sources it deleted gone), or written by someone else. The
		// destination's size, CRC32C and transfer settle which.
		b, aerr := m.o.Store.Attrs(ctx, man.Bucket, f.Object)
		if aerr == nil && b.Size == f.WireSize && b.CRC32C == f.WireCRC32 && b.Metadata[message.MetaTransfer] == t.id {
			tr.done, tr.attrs = true, b
			return nil
		}
		if errors.Is(err, gcs.ErrNotFound) {
			return fmt.Errorf("file %s: %w", f.Path, err) // a source is gone: finish looks again
		}
		if man.Staged && f.AppendsTo() == 0 && aerr == nil {
			return queue.Permanent(replacedSince(f, man.Bucket, b, "what was composed before stays"))
		}
		if gen := f.AppendsTo(); gen != 0 {
			return queue.Permanent(fmt.Errorf("file %s: gs://%s/%s changed while it was appended to (it is no longer generation %d): nothing was appended; send the file again: %w",
				f.Path, man.Bucket, f.Object, gen, err))
		}
		return queue.Permanent(fmt.Errorf("file %s: destination gs://%s/%s already exists: %w", f.Path, man.Bucket, f.Object, err))
	}
	if errors.Is(err, gcs.ErrRetained) {
		// Retrying changes nothing until someone releases the object;
		// the transfer fails now, naming it, rather than at its timeout.
		return queue.Permanent(fmt.Errorf("file %s: gs://%s/%s is under a hold or a retention policy, so it cannot be replaced or appended to until it is released: %w",
			f.Path, man.Bucket, f.Object, err))
	}
	if errors.Is(err, gcs.ErrInvalid) {
		hint := ""
		if f.AppendsTo() != 0 {
			hint = " (an append needs the object in the storage class its new chunks get: send the file with --no-append)"
		}
		return queue.Permanent(fmt.Errorf("file %s: GCS refused to compose gs://%s/%s%s: %w", f.Path, man.Bucket, f.Object, hint, err))
	}
	if err != nil {
		return fmt.Errorf("file %s: %w", f.Path, err)
	}
	tr.done, tr.attrs = true, a
	return nil
}

// group is an errgroup under the merger's one limit on GCS calls.
func (m *Merger) group(ctx context.Context) (*errgroup.Group, context.Context) {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(m.o.ComposeConcurrency)
	return g, gctx
}

func countCompose(err error) {
	if err != nil {
		metrics.Composes.WithLabelValues("error").Inc()
		return
	}
	metrics.Composes.WithLabelValues("ok").Inc()
}

// checkReplaces holds a staged overwrite (message.Manifest.Staged) to what
// its producer found, before it replaces anything: every final object it
// replaces is still at the generation the producer's listing saw, gone, or
// already this transfer's (composed before a restart). One listing of the
// destination beside the manifest's pages. A transfer that another writer
// (a newer transfer, a person) overtook fails here, leaving that writer's
// objects and everything else it found as they are.
func (m *Merger) checkReplaces(ctx context.Context, t *transfer) error {
	changed := 0
	var first error
	err := t.pages.Join(ctx, t.finals, func(_ int, f *message.File, a *gcs.Attrs) error {
		if a == nil || a.Generation == f.Replaces || f.AppendsTo() != 0 ||
			a.Metadata[message.MetaTransfer] == t.id && a.Size == f.WireSize && a.CRC32C == f.WireCRC32 {
			return nil
		}
		if changed++; first == nil {
			first = replacedSince(f, t.bucket, *a, "nothing was replaced")
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("check what the overwrite replaces: list gs://%s/%s: %w", t.bucket, t.finals, err)
	}
	if changed > 1 {
		return queue.Permanent(fmt.Errorf("%w; %d objects in all changed since", first, changed))
	}
	if changed == 1 {
		return queue.Permanent(first)
	}
	return nil
}

// replacedSince is the error of a staged overwrite that found f's final
// object changed since its producer listed it: a is the object now; then
// says what the transfer leaves.
func replacedSince(f *message.File, bucket string, a gcs.Attrs, then string) error {
	was := "no object"
	if f.Replaces != 0 {
		was = fmt.Sprintf("generation %d", f.Replaces)
	}
	return fmt.Errorf("file %s: gs://%s/%s changed since this transfer began (it found %s, now generation %d, %s): an overwrite replaces only what it found, so %s; send it again to replace the new object",
		f.Path, bucket, f.Object, was, a.Generation, message.WrittenBy(a.Metadata), then)
}
