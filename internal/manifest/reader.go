// Package manifest reads a sealed manifest's pages (Reader) and holds
// one to what the merger will act on (Check): the manifest's wire format
// is message.Manifest, its pages message.FilePage and message.SkippedFiles;
// the producer writes them with Writer.
package manifest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/queue"
	"github.com/ferry-dev/ferry/internal/seektable"
)

// Store is what a Reader needs of GCS.
type Store interface {
	ReadAll(ctx context.Context, bucket, name string) ([]byte, error)
	List(ctx context.Context, bucket, prefix string, fn func(gcs.Attrs) error) error
	ListRange(ctx context.Context, bucket, prefix, start, end string, fn func(gcs.Attrs) error) error
}

// Reader reads a sealed manifest's files a page at a time (message.Page):
// the merger never holds more than pageCache pages of a transfer, whatever
// its size. An inline manifest is one page, its own Files.
type Reader struct {
	store  Store
	bucket string
	man    *message.Manifest // the header
	// sums are the CRC32Cs of the pages as the first full read (check)
	// found them: a page read again must be the same, or the manifest
	// changed under the merger.
	sums []uint32
	// firsts are the pages' first objects, as that read found them: the
	// bounds of the parts a join lists at once.
	firsts []string
	cache  [pageCache]cachedPage
	tick   int
}

// pageCache is how many pages a transfer keeps decoded: reports come
// roughly in file order, so a few serve nearly all of them.
const pageCache = 4

type cachedPage struct {
	k     int
	files []message.File
	used  int
}

func NewReader(store Store, bucket string, man *message.Manifest) *Reader {
	p := &Reader{store: store, bucket: bucket, man: man}
	for i := range p.cache {
		p.cache[i].k = -1
	}
	return p
}

// Count is the number of pages.
func (p *Reader) Count() int { return len(p.man.Pages) }

// pageOf is the page that holds file i, or -1.
func (p *Reader) pageOf(i int) int {
	ps := p.man.Pages
	k := sort.Search(len(ps), func(k int) bool { return ps[k].First+ps[k].Files > i })
	if k == len(ps) || i < ps[k].First {
		return -1
	}
	return k
}

// Page returns Page k's files; they must not be changed.
func (p *Reader) Page(ctx context.Context, k int) ([]message.File, error) {
	if p.man.Inline() {
		return p.man.Files, nil
	}
	p.tick++
	lru := 0
	for i := range p.cache {
		c := &p.cache[i]
		if c.k == k {
			c.used = p.tick
			return c.files, nil
		}
		if c.used < p.cache[lru].used {
			lru = i
		}
	}
	files, sum, err := p.read(ctx, k)
	if err != nil {
		return nil, err
	}
	switch {
	case len(p.sums) == k:
		p.sums = append(p.sums, sum) // the first read, in order
		if len(files) > 0 {
			p.firsts = append(p.firsts, files[0].Object)
		}
	case k < len(p.sums) && p.sums[k] != sum:
		return nil, queue.Permanent(fmt.Errorf("manifest page gs://%s/%s changed after the merger checked it", p.bucket, message.ManifestPage(p.man.TransferID, p.man.Run, k)))
	}
	p.cache[lru] = cachedPage{k: k, files: files, used: p.tick}
	return files, nil
}

func (p *Reader) read(ctx context.Context, k int) ([]message.File, uint32, error) {
	name := message.ManifestPage(p.man.TransferID, p.man.Run, k)
	b, err := p.store.ReadAll(ctx, p.bucket, name)
	if errors.Is(err, gcs.ErrNotFound) {
		return nil, 0, queue.Permanent(fmt.Errorf("manifest page gs://%s/%s: %w", p.bucket, name, err))
	}
	if err != nil {
		return nil, 0, fmt.Errorf("manifest page gs://%s/%s: %w", p.bucket, name, err)
	}
	var fp message.FilePage
	if err := message.Decode(b, &fp); err != nil {
		return nil, 0, queue.Permanent(fmt.Errorf("manifest page gs://%s/%s: %w", p.bucket, name, err))
	}
	want := p.man.Pages[k]
	chunks := 0
	for _, f := range fp.Files {
		chunks += len(f.Chunks)
	}
	if len(fp.Files) != want.Files || chunks != want.Chunks {
		return nil, 0, queue.Permanent(fmt.Errorf("manifest page gs://%s/%s holds %d files of %d chunks, the header says %d and %d",
			p.bucket, name, len(fp.Files), chunks, want.Files, want.Chunks))
	}
	return fp.Files, crc32c.Checksum(b), nil
}

// File returns File i.
func (p *Reader) File(ctx context.Context, i int) (*message.File, error) {
	k := p.pageOf(i)
	if k < 0 {
		return nil, nil
	}
	files, err := p.Page(ctx, k)
	if err != nil {
		return nil, err
	}
	return &files[i-p.man.Pages[k].First], nil
}

// Each calls fn with every file in order, a page at a time.
func (p *Reader) Each(ctx context.Context, fn func(i int, f *message.File) error) error {
	for k := range p.Count() {
		files, err := p.Page(ctx, k)
		if err != nil {
			return err
		}
		first := p.man.Pages[k].First
		for j := range files {
			if err := fn(first+j, &files[j]); err != nil {
				return err
			}
		}
	}
	return nil
}

// Skipped calls fn with every Skipped file of the manifest, in order.
func (p *Reader) Skipped(ctx context.Context, fn func(s message.Skipped) error) error {
	if p.man.Inline() {
		for _, s := range p.man.Skipped {
			if err := fn(s); err != nil {
				return err
			}
		}
		return nil
	}
	n := 0
	for k := range p.man.SkippedPages {
		name := message.SkippedPage(p.man.TransferID, p.man.Run, k)
		b, err := p.store.ReadAll(ctx, p.bucket, name)
		if err != nil {
			return fmt.Errorf("skipped files gs://%s/%s: %w", p.bucket, name, err)
		}
		var sp message.SkippedFiles
		if err := message.Decode(b, &sp); err != nil {
			return queue.Permanent(fmt.Errorf("skipped files gs://%s/%s: %w", p.bucket, name, err))
		}
		for _, s := range sp.Skipped {
			if n++; n > p.man.Totals.Skipped {
				return queue.Permanent(fmt.Errorf("skipped files gs://%s/%s: more than the %d the header counts", p.bucket, name, p.man.Totals.Skipped))
			}
			if err := fn(s); err != nil {
				return err
			}
		}
	}
	return nil
}

// ErrJoined stops a listing the join no longer needs.
var ErrJoined = errors.New("every file joined")

// Join lists the destination under prefix (GCS lists in name order) beside
// the manifest's files (in the same order, checked when the manifest was
// read) and calls fn once for every file, in order, with the object of its
// name when the listing has one, else nil. One page is held at a time.
func (p *Reader) Join(ctx context.Context, prefix string, fn func(i int, f *message.File, a *gcs.Attrs) error) error {
	return p.JoinExtra(ctx, prefix, fn, nil)
}

// JoinExtra is join, also handing extra each listed object that is not
// the manifest's, with the manifest file listed before it (nil: none);
// after the manifest's last file, only the objects in that file's
// directory when it is a Parquet part (the listing goes no further).
func (p *Reader) JoinExtra(ctx context.Context, prefix string, fn func(i int, f *message.File, a *gcs.Attrs) error,
	extra func(prev *message.File, a gcs.Attrs)) error {
	k, j := 0, 0          // page, file in page
	var prev message.File // the last file passed, copied: its page goes
	var passed bool
	var files []message.File
	at := func() (int, *message.File, error) {
		for k < p.Count() {
			if files == nil {
				var err error
				if files, err = p.Page(ctx, k); err != nil {
					return 0, nil, err
				}
			}
			if j < len(files) {
				return p.man.Pages[k].First + j, &files[j], nil
			}
			k, j, files = k+1, 0, nil
		}
		return 0, nil, nil
	}
	err := p.list(ctx, prefix, func(a gcs.Attrs) error {
		for {
			i, f, err := at()
			if err != nil {
				return err
			}
			if f == nil {
				if extra != nil && passed && prev.Table != nil && strings.HasPrefix(a.Name, PartsDir(prev.Object)) {
					extra(&prev, a)
					return nil
				}
				return ErrJoined
			}
			switch c := strings.Compare(f.Object, a.Name); {
			case c < 0:
				j++
				prev, passed = *f, true
				if err := fn(i, f, nil); err != nil {
					return err
				}
			case c == 0:
				j++
				prev, passed = *f, true
				return fn(i, f, &a)
			default:
				if extra != nil {
					if passed {
						extra(&prev, a)
					} else {
						extra(nil, a)
					}
				}
				return nil // not one of the manifest's objects
			}
		}
	})
	if err != nil && !errors.Is(err, ErrJoined) {
		return err
	}
	for {
		i, f, err := at()
		if err != nil || f == nil {
			return err
		}
		j++
		if err := fn(i, f, nil); err != nil {
			return err
		}
	}
}

// listAhead is how many parts of a join's listing are listed at once,
// and listBuffer how many entries each holds ahead of the join: a
// listing page of GCS (1,000 entries) takes a round trip and, at a
// million files, a sequential listing takes a thousand of them.
const (
	listAhead  = 4
	listBuffer = 256
)

// list calls fn with every object under prefix, in name order, as
// Store.List does. Once every page was read (Check), it lists the parts
// between the pages' first objects at once, listAhead of them, each a
// listing of its own, and hands them to fn in order.
func (p *Reader) list(ctx context.Context, prefix string, fn func(gcs.Attrs) error) error {
	n := len(p.firsts)
	if n < 2 || n != p.Count() {
		return p.store.List(ctx, p.bucket, prefix, fn)
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }() // parts still listing stop first
	type part struct {
		entries chan gcs.Attrs
		err     error // set before entries is closed
	}
	parts := make([]*part, n)
	slots := make(chan struct{}, listAhead)
	start := func(k int) {
		pt := &part{entries: make(chan gcs.Attrs, listBuffer)}
		parts[k] = pt
		from, to := "", ""
		if k > 0 {
			from = p.firsts[k]
		}
		if k+1 < n {
			to = p.firsts[k+1]
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			defer close(pt.entries)
			pt.err = p.store.ListRange(ctx, p.bucket, prefix, from, to, func(a gcs.Attrs) error {
				select {
				case pt.entries <- a:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			})
		}()
	}
	next := 0 // the next part to start
	for k := range n {
		for next < n && (next <= k || len(slots) < cap(slots)) {
			slots <- struct{}{}
			start(next)
			next++
		}
		for a := range parts[k].entries {
			if err := fn(a); err != nil {
				return err
			}
		}
		if err := parts[k].err; err != nil {
			return err
		}
	}
	return nil
}

// PartsDir is the directory of the object named obj, its "/" included.
func PartsDir(obj string) string { return obj[:strings.LastIndexByte(obj, '/')+1] }

// Check holds a sealed manifest to what the merger will act on:
// it is this transfer's, its pages add up to its header, its files are in
// strictly increasing object order, every object name is the one ferry
// gives, and each file's predicted size and CRC32C are what its chunks (and
// seek table) combine to. It reads every page once, in order, and returns
// the prefix all final objects share. A manifest that fails is never
// composed.
func Check(ctx context.Context, man *message.Manifest, pg *Reader, bucket, tid string) (string, error) {
	where := fmt.Sprintf("manifest gs://%s/%s", bucket, message.ManifestObject(tid))
	if man.TransferID != tid || man.Bucket != bucket {
		return "", queue.Permanent(fmt.Errorf("%s: written for transfer %.64q in bucket %.64q", where, man.TransferID, man.Bucket))
	}
	if man.Run != "" && !message.ValidRun(man.Run) {
		return "", queue.Permanent(fmt.Errorf("%s: run %.64q is not one ferry makes", where, man.Run))
	}
	if err := man.CheckPages(); err != nil {
		return "", queue.Permanent(fmt.Errorf("%s: %w", where, err))
	}
	var first, last string
	var bytes, wire, rows int64
	err := pg.Each(ctx, func(i int, f *message.File) error {
		if i > 0 && f.Object <= last {
			return queue.Permanent(fmt.Errorf("%s: file %.64q: object %.64q does not come after %.64q (files are in object order)", where, f.Path, f.Object, last))
		}
		if i == 0 {
			first = f.Object
		}
		last = f.Object
		bytes += f.Size
		wire += f.WireSize
		if tp := f.Table; tp != nil {
			if tp.Rows < 0 || tp.Part < 0 || tp.Part >= tp.Parts || len(f.Chunks) != 1 {
				return queue.Permanent(fmt.Errorf("%s: file %.64q: Parquet part %d of %d, %d rows, %d chunks", where, f.Path, tp.Part, tp.Parts, tp.Rows, len(f.Chunks)))
			}
			rows += tp.Rows
		}
		if err := CheckFile(f, i, tid, man.Staged); err != nil {
			return queue.Permanent(fmt.Errorf("%s: file %.64q: %v", where, f.Path, err))
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	if !man.Inline() && (bytes != man.Totals.Bytes || wire != man.Totals.WireBytes || rows != man.Totals.Rows) {
		return "", queue.Permanent(fmt.Errorf("%s: files of %d bytes (%d stored, %d rows), the totals say %d (%d, %d rows)",
			where, bytes, wire, rows, man.Totals.Bytes, man.Totals.WireBytes, man.Totals.Rows))
	}
	if err := man.CheckLevels(); err != nil {
		return "", queue.Permanent(fmt.Errorf("%s: %w", where, err))
	}
	return SharedPrefix(first, last), nil
}

// CheckFile holds file i of a manifest to the names and sizes ferry gives;
// staged is the manifest's Staged.
func CheckFile(f *message.File, i int, tid string, staged bool) error {
	if err := message.CheckObjectName(f.Object); err != nil {
		return err
	}
	if root := message.ReservedRoot(f.Object); root != "" {
		return fmt.Errorf("final object %.64q is under ferry's own prefix %s", f.Object, root)
	}
	if f.Posix != nil && f.Posix.Mode > 0o777 {
		return fmt.Errorf("posix mode %o: want permission bits only (at most 777)", f.Posix.Mode)
	}
	if f.Replaces < 0 || f.Replaces != 0 && !staged {
		return fmt.Errorf("replaces generation %d in a manifest that does not stage its overwrite", f.Replaces)
	}
	switch len(f.Chunks) {
	case 0:
		return errors.New("no chunks")
	case 1:
		// Written to its final name, or staged in an overwrite.
		c, object := f.Chunks[0], f.Object
		if staged {
			object = message.ChunkObject(tid, i, 0)
		}
		if c.Object != object || c.WireSize != f.WireSize || c.WireCRC32C != f.WireCRC32 {
			return fmt.Errorf("of one chunk: the chunk (%s, %d bytes, crc32c %08x) is not %s of %d bytes, crc32c %08x",
				c.Object, c.WireSize, c.WireCRC32C, object, f.WireSize, f.WireCRC32)
		}
		return nil
	}
	for j, c := range f.Chunks {
		if j == 0 && f.AppendsTo() != 0 {
			continue // the final object as it is: an append's first chunk
		}
		if want := message.ChunkObject(tid, i, j); c.Object != want || c.Generation != 0 {
			return fmt.Errorf("chunk %d: object %.64q (generation %d), want %s", j, c.Object, c.Generation, want)
		}
	}
	if err := checkFrames(f); err != nil {
		return err
	}
	// What the chunks and the seek table combine to, computed as the
	// producer did (message.File.SealWire).
	want := *f
	want.SealWire()
	if want.WireSize != f.WireSize || want.WireCRC32 != f.WireCRC32 {
		return fmt.Errorf("its chunks and seek table make %d bytes with crc32c %08x, the manifest predicts %d bytes with crc32c %08x",
			want.WireSize, want.WireCRC32, f.WireSize, f.WireCRC32)
	}
	return nil
}

// checkFrames holds the frames a manifest lists for a composed file to its
// chunks: listed for every chunk or none, each chunk's adding up to its
// sizes, no more than a seek table holds. The table itself is
// message.File.SeekTable, the same bytes the producer counted.
func checkFrames(f *message.File) error {
	listed, frames := 0, 0
	for j, c := range f.Chunks {
		if len(c.Frames) == 0 {
			continue
		}
		listed++
		frames += len(c.Frames)
		var wire, raw int64
		for _, fr := range c.Frames {
			wire += int64(fr.Wire)
			raw += int64(fr.Raw)
		}
		if wire != c.WireSize || raw != c.RawSize {
			return fmt.Errorf("chunk %d: its frames hold %d wire and %d raw bytes, the chunk %d and %d", j, wire, raw, c.WireSize, c.RawSize)
		}
	}
	switch {
	case listed != 0 && listed != len(f.Chunks):
		return fmt.Errorf("frames listed for %d of %d chunks", listed, len(f.Chunks))
	case frames > seektable.MaxFrames:
		return fmt.Errorf("%d frames; a seek table holds at most %d", frames, seektable.MaxFrames)
	}
	return nil
}

// SharedPrefix is the longest prefix a and b share.
func SharedPrefix(a, b string) string {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return a[:i]
		}
	}
	return a[:n]
}
