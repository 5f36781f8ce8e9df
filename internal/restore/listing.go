package restore

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
)

// ErrNotAsListed: an object that is not the object its transfer's listing
// recorded under its name (another generation or CRC32C): it was replaced
// after the transfer ended, by something that wrote the transfer's id
// into its metadata. It is not restored.
var ErrNotAsListed = errors.New("not the object its transfer's listing recorded")

// maxListings bounds the transfers whose listings are read at once; the
// objects of further transfers are restored unchecked, as those of a
// transfer that has no listing (still running, failed, or older).
const maxListings = 64

// listings compares each object ferry wrote with the entry its transfer's
// listing (message.ListingObject, written when the transfer ended) has
// under its name. A listing's objects are in name order, as the bucket's
// listing is, so each is read as a stream beside it: a million objects
// cost one line of each at a time. Names the listing does not have are
// not compared. Not safe for concurrent use: the bucket's listing calls it
// in order.
type listings struct {
	store  Store
	bucket string
	open   map[string]*cursor // by transfer id; nil: no listing to read
}

// cursor is a listing read as far as the last name asked about.
type cursor struct {
	rc   io.ReadCloser
	sc   *bufio.Scanner
	cur  message.ListingEntry
	done bool
}

func newListings(store Store, bucket string) *listings {
	return &listings{store: store, bucket: bucket, open: map[string]*cursor{}}
}

// check returns an error wrapping ErrNotAsListed when a, an object the
// listing of its transfer (its ferry-transfer metadata) recorded, is not
// that object any more. Objects must come in name order.
func (l *listings) check(ctx context.Context, a gcs.Attrs) error {
	tid := a.Metadata[message.MetaTransfer]
	if !message.ValidTransferID(tid) {
		return nil
	}
	c, ok := l.open[tid]
	if !ok {
		c = l.openCursor(ctx, tid)
		l.open[tid] = c
	}
	if c == nil {
		return nil
	}
	want := "gs://" + l.bucket + "/" + a.Name
	for !c.done && c.cur.Name < want {
		c.next()
	}
	if c.done || c.cur.Name != want {
		return nil
	}
	if (c.cur.Generation != 0 && c.cur.Generation != a.Generation) || c.cur.CRC32C != a.CRC32C || c.cur.Size != a.Size {
		return fmt.Errorf("%s: generation %d, %d bytes, crc32c %08x; transfer %s's listing gs://%s/%s recorded generation %d, %d bytes, crc32c %08x: %w (replaced after the transfer ended)",
			want, a.Generation, a.Size, a.CRC32C, tid, l.bucket, message.ListingObject(tid), c.cur.Generation, c.cur.Size, c.cur.CRC32C, ErrNotAsListed)
	}
	return nil
}

// openCursor opens tid's listing at its first object, or returns nil: no
// listing, one that cannot be read, or too many open.
func (l *listings) openCursor(ctx context.Context, tid string) *cursor {
	if len(l.open) >= maxListings {
		return nil
	}
	rc, err := l.store.NewRangeReader(ctx, l.bucket, message.ListingObject(tid), 0, -1)
	if err != nil {
		return nil
	}
	c := &cursor{rc: rc, sc: bufio.NewScanner(rc)}
	c.sc.Buffer(make([]byte, 64<<10), 1<<20)
	c.next()
	return c
}

// next reads the listing's next object; a skipped file's line, which
// follow the objects, or the end, ends it.
func (c *cursor) next() {
	if c.done {
		return
	}
	var e message.ListingEntry
	switch {
	case !c.sc.Scan(), json.Unmarshal(c.sc.Bytes(), &e) != nil, e.Skipped != "":
		c.close()
	case e.Name <= c.cur.Name:
		c.close() // not in name order: compared no further
	default:
		c.cur = e
	}
}

func (c *cursor) close() {
	c.done = true
	_ = c.rc.Close()
}

// closeAll closes every listing still open.
func (l *listings) closeAll() {
	for _, c := range l.open {
		if c != nil && !c.done {
			c.close()
		}
	}
}
