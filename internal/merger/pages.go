package merger

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/queue"
)

// pages reads a sealed manifest's files a page at a time (message.Page):
// the merger never holds more than pageCache pages of a transfer, whatever
// its size. An inline manifest is one page, its own Files.
type pages struct {
	store  objectStore
	bucket string
	man    *message.Manifest // the header
	// sums are the CRC32Cs of the pages as the first full read (check)
	// found them: a page read again must be the same, or the manifest
	// changed under the merger.
	sums  []uint32
	cache [pageCache]cachedPage
	tick  int
}

// pageCache is how many pages a transfer keeps decoded: reports come
// roughly in file order, so a few serve nearly all of them.
const pageCache = 4

type cachedPage struct {
	k     int
	files []message.File
	used  int
}

func newPages(store objectStore, bucket string, man *message.Manifest) *pages {
	p := &pages{store: store, bucket: bucket, man: man}
	for i := range p.cache {
		p.cache[i].k = -1
	}
	return p
}

// count is the number of pages.
func (p *pages) count() int { return len(p.man.Pages) }

// pageOf is the page that holds file i, or -1.
func (p *pages) pageOf(i int) int {
	ps := p.man.Pages
	k := sort.Search(len(ps), func(k int) bool { return ps[k].First+ps[k].Files > i })
	if k == len(ps) || i < ps[k].First {
		return -1
	}
	return k
}

// page returns page k's files; they must not be changed.
func (p *pages) page(ctx context.Context, k int) ([]message.File, error) {
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
	case k < len(p.sums) && p.sums[k] != sum:
		return nil, queue.Permanent(fmt.Errorf("manifest page gs://%s/%s changed after the merger checked it", p.bucket, message.ManifestPage(p.man.TransferID, p.man.Run, k)))
	}
	p.cache[lru] = cachedPage{k: k, files: files, used: p.tick}
	return files, nil
}

func (p *pages) read(ctx context.Context, k int) ([]message.File, uint32, error) {
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

// file returns file i.
func (p *pages) file(ctx context.Context, i int) (*message.File, error) {
	k := p.pageOf(i)
	if k < 0 {
		return nil, nil
	}
	files, err := p.page(ctx, k)
	if err != nil {
		return nil, err
	}
	return &files[i-p.man.Pages[k].First], nil
}

// each calls fn with every file in order, a page at a time.
func (p *pages) each(ctx context.Context, fn func(i int, f *message.File) error) error {
	for k := range p.count() {
		files, err := p.page(ctx, k)
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

// skipped calls fn with every skipped file of the manifest, in order.
func (p *pages) skipped(ctx context.Context, fn func(s message.Skipped) error) error {
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

// errJoined stops a listing the join no longer needs.
var errJoined = errors.New("every file joined")

// join lists the destination under prefix (GCS lists in name order) beside
// the manifest's files (in the same order, checked when the manifest was
// read) and calls fn once for every file, in order, with the object of its
// name when the listing has one, else nil. One page is held at a time.
func (p *pages) join(ctx context.Context, prefix string, fn func(i int, f *message.File, a *gcs.Attrs) error) error {
	return p.joinExtra(ctx, prefix, fn, nil)
}

// joinExtra is join, also handing extra each listed object that is not
// the manifest's, with the manifest file listed before it (nil: none);
// after the manifest's last file, only the objects in that file's
// directory when it is a Parquet part (the listing goes no further).
func (p *pages) joinExtra(ctx context.Context, prefix string, fn func(i int, f *message.File, a *gcs.Attrs) error,
	extra func(prev *message.File, a gcs.Attrs)) error {
	k, j := 0, 0          // page, file in page
	var prev message.File // the last file passed, copied: its page goes
	var passed bool
	var files []message.File
	at := func() (int, *message.File, error) {
		for k < p.count() {
			if files == nil {
				var err error
				if files, err = p.page(ctx, k); err != nil {
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
	err := p.store.List(ctx, p.bucket, prefix, func(a gcs.Attrs) error {
		for {
			i, f, err := at()
			if err != nil {
				return err
			}
			if f == nil {
				if extra != nil && passed && prev.Table != nil && strings.HasPrefix(a.Name, partsDir(prev.Object)) {
					extra(&prev, a)
					return nil
				}
				return errJoined
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
	if err != nil && !errors.Is(err, errJoined) {
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

// partsDir is the directory of the object named obj, its "/" included.
func partsDir(obj string) string { return obj[:strings.LastIndexByte(obj, '/')+1] }

// bitset is one bit per file.
type bitset []uint64

func newBitset(n int) bitset { return make(bitset, (n+63)/64) }

func (b bitset) has(i int) bool { return b[i/64]&(1<<(i%64)) != 0 }
func (b bitset) set(i int)      { b[i/64] |= 1 << (i % 64) }
func (b bitset) clear(i int)    { b[i/64] &^= 1 << (i % 64) }
