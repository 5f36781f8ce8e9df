package manifest

import (
	"context"
	"fmt"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/message"
)

// The manifest as the producer writes it. Its header is made before any
// chunk is read; its files are added as the walk plans them, in object
// order, and filled in as their chunks are compressed. A transfer of more
// than message.PageFiles files is paged: a page is written as soon as every
// chunk of its files is recorded, so the producer holds the pages in
// flight, not the transfer (see message.Paginate). The header, written
// last, seals.

// page is one page of the manifest's files being filled.
type page struct {
	k, first int
	files    []message.File
	chunks   int  // planned
	pending  int  // planned chunks not yet recorded
	closed   bool // no file will join it
}

// Writer builds a transfer's manifest pages and writes each one when it
// is whole. Add is the walk's (one goroutine), Record the compress
// goroutines'; both are safe for concurrent use with each other.
type Writer struct {
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
	// ready are pages and skipped pages to write; Run takes them.
	ready chan pageWrite
	// shard: the writer is one page's, an agent's (NewShardWriter).
	shard bool
	// pooled are the pages a pool's agents wrote (Pooled).
	pooled []message.Page
}

// Pooled says that the transfer's files are in pages its agents wrote,
// each a shard's; the writer has only skipped files, and Finish lists
// those pages in the header, with the totals the caller summed from
// what the agents reported.
func (g *Writer) Pooled(pages []message.Page, t message.Totals) {
	g.pooled = pages
	m := g.m
	m.Totals.Files += t.Files
	m.Totals.Chunks += t.Chunks
	m.Totals.Bytes += t.Bytes
	m.Totals.WireBytes += t.WireBytes
}

type pageWrite struct {
	name string
	v    any
}

// NewWriter writes the pages of m, the header of a transfer that has
// started, with write (name, value to encode); Finish completes m.
func NewWriter(m *message.Manifest, write func(ctx context.Context, name string, v any) error) *Writer {
	return &Writer{m: m, write: write, pages: map[int]*page{}, open: &page{}, ready: make(chan pageWrite, 2)}
}

// NewShardWriter writes page k of m, whose files are a shard's: its first
// file's index is first, and every file Add is given joins it. Finish
// writes it once every chunk is recorded, even when its transfer has one
// page: a pooled transfer's manifest is always paged.
func NewShardWriter(m *message.Manifest, k, first int, write func(ctx context.Context, name string, v any) error) *Writer {
	g := NewWriter(m, write)
	g.open, g.n, g.shard = &page{k: k, first: first}, first, true
	return g
}

// File is the entry of file i of a shard writer's page as recorded so far.
func (g *Writer) File(i int) message.File {
	g.mu.Lock()
	defer g.mu.Unlock()
	f := g.open.files[i-g.open.first]
	f.Chunks = append([]message.ChunkInfo(nil), f.Chunks...)
	return f
}

// Full reports whether a page of files files and chunks chunks is full
// before a file of next chunks: the rule Add pages by, which a pool's
// shards are cut by too (with a smaller maxFiles).
func Full(files, chunks, next, maxFiles int) bool {
	return files > 0 && (files >= min(maxFiles, message.PageFiles) || chunks+next > message.PageChunks)
}

// Add puts f, its chunks planned, into the open page and returns its file
// index, closing the page first when f does not fit it (message.PageFiles
// files, message.PageChunks chunks). Its chunks with no object are pending
// until Record fills them; one already named (an append's first, the
// object there) is not. A page closed with nothing pending is sent to the
// writer, waiting while it is busy.
func (g *Writer) Add(ctx context.Context, f message.File) (int, error) {
	chunks, pending := len(f.Chunks), 0
	for _, c := range f.Chunks {
		if c.Object == "" {
			pending++
		}
	}
	g.mu.Lock()
	var full *page
	if o := g.open; !g.shard && Full(len(o.files), o.chunks, chunks, message.PageFiles) {
		full = g.closeOpen()
	}
	o := g.open
	i := g.n
	g.n++
	o.files = append(o.files, f)
	o.chunks += chunks
	o.pending += pending
	g.mu.Unlock()
	return i, g.sendPage(ctx, full)
}

// closeOpen closes the open page and starts the next; it returns the
// closed page when it is whole. g.mu is held.
func (g *Writer) closeOpen() *page {
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

// Skip notes a file that is not sent; every message.PageFiles of them are
// a page of their own, and the manifest is then paged.
func (g *Writer) Skip(ctx context.Context, s message.Skipped) error {
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
func (g *Writer) skippedPage() *pageWrite {
	w := &pageWrite{name: message.SkippedPage(g.m.TransferID, g.m.Run, g.skippedPages), v: &message.SkippedFiles{V: message.Version, Skipped: g.skipped}}
	g.skippedPages++
	g.m.Totals.Skipped += len(g.skipped)
	g.skipped = nil
	return w
}

// Record notes chunk index of file (Add's index), stored, in its entry,
// and the Parquet part it is (nil: none); the page that becomes whole with
// it is sent to the writer.
func (g *Writer) Record(ctx context.Context, file, index int, info message.ChunkInfo, table *message.TablePart) error {
	g.mu.Lock()
	pg := g.open
	if file < pg.first {
		pg = g.pages[g.pageOf(file)]
	}
	f := &pg.files[file-pg.first]
	for len(f.Chunks) <= index {
		f.Chunks = append(f.Chunks, message.ChunkInfo{}) // a stream's grow as they come
	}
	f.Chunks[index] = info
	if table != nil {
		f.Table = table
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
func (g *Writer) pageOf(i int) int {
	for k := len(g.header) - 1; k >= 0; k-- {
		if g.header[k].First <= i {
			return k
		}
	}
	return 0
}

// sendPage seals the files of a whole page and hands it to the writer.
func (g *Writer) sendPage(ctx context.Context, pg *page) error {
	if pg == nil {
		return nil
	}
	g.sealFiles(pg.files)
	return g.send(ctx, pageWrite{name: message.ManifestPage(g.m.TransferID, g.m.Run, pg.k), v: &message.FilePage{V: message.Version, Files: pg.files}})
}

func (g *Writer) send(ctx context.Context, w pageWrite) error {
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
func (g *Writer) sealFiles(files []message.File) {
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

// Close says that nothing more is added, skipped or recorded: Run returns
// once the pages sent are written.
func (g *Writer) Close() { close(g.ready) }

// Run writes the pages as they become whole, pageWriters at once, until
// Close.
func (g *Writer) Run(ctx context.Context) error {
	eg, ctx := errgroup.WithContext(ctx)
	eg.SetLimit(pageWriters)
	for w := range g.ready {
		eg.Go(func() error { return g.write(ctx, w.name, w.v) })
	}
	return eg.Wait()
}

// Finish completes the manifest once every chunk is recorded and the
// writer has stopped: a transfer of one page of files and fewer than a page
// of skipped files keeps them inline in the header; a larger one writes its
// last pages (at least one, perhaps empty) and lists them all in the header.
func (g *Writer) Finish(ctx context.Context) error {
	m := g.m
	if len(g.pooled) > 0 {
		g.header = g.pooled
	}
	if len(g.header) == 0 && g.skippedPages == 0 && !g.shard {
		g.sealFiles(g.open.files)
		m.Files, m.Skipped, m.Totals.Skipped = g.open.files, g.skipped, len(g.skipped)
		return nil
	}
	if len(g.pages) > 0 {
		return fmt.Errorf("manifest: %d pages have chunks that were never recorded", len(g.pages))
	}
	if pg := g.open; len(g.pooled) == 0 && (len(pg.files) > 0 || len(g.header) == 0) {
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
