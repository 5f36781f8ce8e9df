package producer

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/plan"
)

// The manifest. Its header is made before any chunk is read; its files
// are added as the walk plans them, in object order, and filled in as their
// chunks are compressed. A transfer of more than message.PageFiles files is
// paged: a page is written as soon as every chunk of its files is recorded,
// so the producer holds the pages in flight, not the transfer (see
// message.Paginate). The header, written last, seals.

// newManifest describes a planned transfer before any chunk is read.
func newManifest(req Request, pl *plan.Plan, tid string, started time.Time, producerID string) *message.Manifest {
	return &message.Manifest{
		V: message.Version, TransferID: tid, Bucket: pl.Dest.Bucket, Prefix: pl.Dest.Prefix,
		Sources: req.Sources, Method: req.Method, Labels: req.Labels, Codec: string(pl.Codec), Level: pl.Level,
		ChunkSize: req.ChunkSize, Overwrite: req.Overwrite, Staged: req.Overwrite, StartedAt: started, ProducerID: producerID,
		ContentType: pl.Codec.ContentType(), Symlinks: string(pl.Symlinks), Load: req.Load,
	}
}

// page is one page of the manifest's files being filled.
type page struct {
	k, first int
	files    []message.File
	chunks   int  // planned
	pending  int  // planned chunks not yet recorded
	closed   bool // no file will join it
}

// pager builds the manifest's pages and writes each one when it is whole.
// add is the walk's (one goroutine), record the compress goroutines'; both
// are safe for concurrent use with each other.
type pager struct {
	m     *message.Manifest
	write func(ctx context.Context, name string, v any) error

	mu      sync.Mutex
	open    *page
	pages   map[int]*page // closed pages with chunks pending
	header  []message.Page
	n       int // files added
	skipped []message.Skipped
	// skippedPages counts the pages of skipped files written.
	skippedPages int
	// ready are pages and skipped pages to write; the writer goroutine
	// takes them (run's errgroup).
	ready chan pageWrite
	// rejected counts the records the transfer's conversions left out
	// (--bad-rows is the transfer's, not a part's).
	rejected atomic.Int64
}

type pageWrite struct {
	name string
	v    any
}

func newPager(m *message.Manifest, write func(ctx context.Context, name string, v any) error) *pager {
	return &pager{m: m, write: write, pages: map[int]*page{}, open: &page{}, ready: make(chan pageWrite, 2)}
}

// add puts f into the open page and returns its file index, closing the
// page first when f does not fit it (message.PageFiles files,
// message.PageChunks chunks). A page closed with nothing pending is sent to
// the writer, waiting while it is busy.
func (g *pager) add(ctx context.Context, f *plan.File) (int, error) {
	mf := message.File{Path: f.Rel, Object: f.Object, Size: f.Size, Mtime: time.Unix(0, f.Mod).UTC(), Chunks: make([]message.ChunkInfo, f.Chunks),
		Posix: posixOf(f), Replaces: f.Replaces}
	if f.Stream != nil {
		// Standard input: no mtime; its size and chunks are known at
		// its end (seal).
		mf.Mtime = time.Time{}
	}
	g.mu.Lock()
	var full *page
	if o := g.open; len(o.files) > 0 && (len(o.files) == message.PageFiles || o.chunks+f.Chunks > message.PageChunks) {
		full = g.closeOpen()
	}
	pending := f.Chunks
	if f.Append != nil {
		mf.Chunks[0] = *f.Append // there already
		pending--
	}
	o := g.open
	i := g.n
	g.n++
	o.files = append(o.files, mf)
	o.chunks += f.Chunks
	o.pending += pending
	g.mu.Unlock()
	return i, g.sendPage(ctx, full)
}

// posixOf is f's permission bits, owner and group for its final object,
// nil for standard input or where the platform reports no owner.
func posixOf(f *plan.File) *message.Posix {
	if f.Stream != nil || !f.Owned {
		return nil
	}
	return &message.Posix{Mode: f.Perm & 0o777, UID: f.UID, GID: f.GID}
}

// closeOpen closes the open page and starts the next; it returns the
// closed page when it is whole. g.mu is held.
func (g *pager) closeOpen() *page {
	o := g.open
	o.closed = true
	g.header = append(g.header, message.Page{First: o.first, Files: len(o.files), Chunks: o.chunks})
	g.open = &page{k: o.k + 1, first: o.first + len(o.files)}
	if o.pending == 0 {
		return o
	}
	g.pages[o.k] = o
	return nil
}

// skip notes a file that is not sent; every message.PageFiles of them are
// a page of their own, and the manifest is then paged.
func (g *pager) skip(ctx context.Context, s message.Skipped) error {
	g.mu.Lock()
	g.skipped = append(g.skipped, s)
	var w *pageWrite
	if len(g.skipped) == message.PageFiles {
		w = g.skippedPage()
	}
	g.mu.Unlock()
	if w == nil {
		return nil
	}
	return g.send(ctx, *w)
}

// skippedPage takes the skipped files noted so far as the next page. g.mu
// is held.
func (g *pager) skippedPage() *pageWrite {
	w := &pageWrite{name: message.SkippedPage(g.m.TransferID, g.m.Run, g.skippedPages), v: &message.SkippedFiles{V: message.Version, Skipped: g.skipped}}
	g.skippedPages++
	g.m.Totals.Skipped += len(g.skipped)
	g.skipped = nil
	return w
}

// record notes a stored part in its file's entry; the page that becomes
// whole with it is sent to the writer.
func (g *pager) record(ctx context.Context, p *encodedPart) error {
	info := message.ChunkInfo{Object: p.part.Object, RawSize: p.part.RawSize, RawCRC32C: p.part.RawCRC32C,
		WireSize: p.part.WireSize, WireCRC32C: p.part.WireCRC32C}
	if p.part.Chunks > 1 {
		// A composed file's seek table is written by the merger from
		// these (message.File.SeekTable); a one-chunk file carries its
		// own in its payload, staged or not.
		info.Frames = p.seek
	}
	g.mu.Lock()
	pg := g.open
	if p.file < pg.first {
		pg = g.pages[g.pageOf(p.file)]
	}
	f := &pg.files[p.file-pg.first]
	for len(f.Chunks) <= p.index {
		f.Chunks = append(f.Chunks, message.ChunkInfo{}) // a stream's grow as they come
	}
	f.Chunks[p.index] = info
	if p.table != nil {
		f.Table = p.table
	}
	pg.pending--
	var whole *page
	if pg.closed && pg.pending == 0 {
		delete(g.pages, pg.k)
		whole = pg
	}
	g.mu.Unlock()
	return g.sendPage(ctx, whole)
}

// pageOf is the page of file i among the closed ones. g.mu is held.
func (g *pager) pageOf(i int) int {
	for k := len(g.header) - 1; k >= 0; k-- {
		if g.header[k].First <= i {
			return k
		}
	}
	return 0
}

// sendPage seals the files of a whole page and hands it to the writer.
func (g *pager) sendPage(ctx context.Context, pg *page) error {
	if pg == nil {
		return nil
	}
	g.sealFiles(pg.files)
	return g.send(ctx, pageWrite{name: message.ManifestPage(g.m.TransferID, g.m.Run, pg.k), v: &message.FilePage{V: message.Version, Files: pg.files}})
}

func (g *pager) send(ctx context.Context, w pageWrite) error {
	select {
	case g.ready <- w:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// sealFiles completes each file once all its chunks are recorded: its raw
// size (a stream's is known only now) and CRC32C, and its final object's
// wire size and CRC32C, seek table included; and adds them to the totals.
// g.mu must not be held.
func (g *pager) sealFiles(files []message.File) {
	var t message.Totals
	for i := range files {
		f := &files[i]
		raw := make([]crc32c.Part, len(f.Chunks))
		f.Size = 0
		for j, c := range f.Chunks {
			raw[j] = crc32c.Part{CRC32C: c.RawCRC32C, Size: c.RawSize}
			f.Size += c.RawSize
		}
		f.RawCRC32C = crc32c.CombineAll(raw)
		f.SealWire()
		t.Files++
		t.Chunks += len(f.Chunks)
		t.Bytes += f.Size
		t.WireBytes += f.WireSize
		if f.Table != nil {
			t.Rows += f.Table.Rows
			t.TableBytes += f.Table.Size
			t.Rejected += int64(len(f.Table.Rejects))
		}
	}
	g.mu.Lock()
	g.m.Totals.Files += t.Files
	g.m.Totals.Chunks += t.Chunks
	g.m.Totals.Bytes += t.Bytes
	g.m.Totals.WireBytes += t.WireBytes
	g.m.Totals.Rows += t.Rows
	g.m.Totals.TableBytes += t.TableBytes
	g.m.Totals.Rejected += t.Rejected
	g.mu.Unlock()
}

// writePages writes the pages sent to it until ready is closed; it runs in
// the pipeline's errgroup.
func (g *pager) writePages(ctx context.Context) error {
	eg, ctx := errgroup.WithContext(ctx)
	eg.SetLimit(pageWriters)
	for w := range g.ready {
		eg.Go(func() error { return g.write(ctx, w.name, w.v) })
	}
	return eg.Wait()
}

// finish completes the manifest once every chunk is recorded and the
// writer has stopped: a transfer of one page of files and fewer than a page
// of skipped files keeps them inline in the header; a larger one writes its
// last pages (at least one, perhaps empty) and lists them all in the header.
func (g *pager) finish(ctx context.Context) error {
	m := g.m
	if len(g.header) == 0 && g.skippedPages == 0 {
		g.sealFiles(g.open.files)
		m.Files, m.Skipped, m.Totals.Skipped = g.open.files, g.skipped, len(g.skipped)
		return nil
	}
	if len(g.pages) > 0 {
		return fmt.Errorf("manifest: %d pages have chunks that were never recorded", len(g.pages))
	}
	if pg := g.open; len(pg.files) > 0 || len(g.header) == 0 {
		g.header = append(g.header, message.Page{First: pg.first, Files: len(pg.files), Chunks: pg.chunks})
		g.sealFiles(pg.files)
		if err := g.write(ctx, message.ManifestPage(m.TransferID, m.Run, pg.k), &message.FilePage{V: message.Version, Files: pg.files}); err != nil {
			return err
		}
	}
	if len(g.skipped) > 0 {
		w := g.skippedPage()
		if err := g.write(ctx, w.name, w.v); err != nil {
			return err
		}
	}
	m.Pages, m.SkippedPages = g.header, g.skippedPages
	return nil
}

// pageWriters is how many manifest pages are written at once.
const pageWriters = 8

func (p *Producer) putPage(ctx context.Context, bucket, name string, v any) error {
	if _, err := p.o.Store.PutSmall(ctx, bucket, name, message.Encode(v), false, "application/json"); err != nil {
		return fmt.Errorf("write manifest page gs://%s/%s: %w", bucket, name, err)
	}
	return nil
}

// announceError: the manifest is sealed and written, but the sealed event
// could not be published. The transfer is not failed for it: a later event
// of the transfer still finds the manifest, though none may come.
type announceError struct{ err error }

func (e *announceError) Error() string { return "announce sealed manifest: " + e.err.Error() }
func (e *announceError) Unwrap() error { return e.err }

// seal writes the manifest's last pages and its header, which seals it, to
// the transfer's staging prefix and announces it.
func (p *Producer) seal(ctx context.Context, m *message.Manifest, g *pager) error {
	if err := g.finish(ctx); err != nil {
		return err
	}
	m.Sealed, m.SealedAt = true, time.Now().UTC()
	if _, err := p.o.Store.PutSmall(ctx, m.Bucket, message.ManifestObject(m.TransferID), message.Encode(m), false, "application/json"); err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	ev := message.Event{V: message.Version, Type: message.EventSealed, TransferID: m.TransferID, Bucket: m.Bucket, Run: m.Run, Key: m.EndKey, At: m.SealedAt}
	if err := p.o.Events.Publish(ctx, message.Encode(ev), map[string]string{"transfer_id": m.TransferID, "type": ev.Type}); err != nil {
		return &announceError{err}
	}
	return nil
}
