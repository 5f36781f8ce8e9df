package restore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/googleapis/gax-go/v2"

	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/gcs"
)

// body is one ranged read of an object: it hashes and counts what it
// returns, and tells a network failure (worth retrying) from an object that
// ends early or runs long (corrupt, or changed under us).
type body struct {
	r      *Restorer
	rc     io.ReadCloser
	cancel context.CancelFunc
	o      object
	off    int64
	want   int64
	n      int64
	crc    uint32
	// err is the first failure Read returned: a network error, or an
	// ErrCorrupt one when the object ended early or ran long. Decoders
	// do not always pass on their reader's error; this keeps it.
	err error
}

// openRange opens bytes [off, off+n) of o, under Options.Timeout.
func (r *Restorer) openRange(ctx context.Context, o object, off, n int64) (*body, error) {
	ctx, cancel := context.WithTimeout(ctx, r.o.Timeout)
	rc, err := r.store.NewRangeReader(ctx, o.bucket, o.name, off, n)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("%s %s: %w", o.obj, span(off, n), err)
	}
	return &body{r: r, rc: rc, cancel: cancel, o: o, off: off, want: n}, nil
}

func (b *body) Read(p []byte) (int, error) {
	k, err := b.rc.Read(p)
	b.crc = crc32c.Update(b.crc, p[:k])
	b.n += int64(k)
	b.r.wire.Add(int64(k))
	switch {
	case b.err != nil:
		return k, b.err
	case b.n > b.want:
		b.err = fmt.Errorf("%s %s: %w: the server sent more bytes than asked for", b.o.obj, span(b.off, b.want), ErrCorrupt)
	case errors.Is(err, io.EOF) && b.n < b.want:
		b.err = fmt.Errorf("%s %s: %w: the object ends after %d bytes of this range (GCS said %d bytes in all): truncated, or replaced meanwhile",
			b.o.obj, span(b.off, b.want), ErrCorrupt, b.n, b.o.attrs.Size)
	case err != nil && !errors.Is(err, io.EOF):
		b.err = fmt.Errorf("%s %s: read: %w", b.o.obj, span(b.off, b.want), err)
	default:
		return k, err
	}
	return k, b.err
}

// finish reads what the consumer left (nothing, for a well-formed range)
// and checks that the range was complete.
func (b *body) finish() error {
	if _, err := io.Copy(io.Discard, b); err != nil {
		return err
	}
	if b.n != b.want {
		return fmt.Errorf("%s %s: %w: got %d bytes", b.o.obj, span(b.off, b.want), ErrCorrupt, b.n)
	}
	return nil
}

func (b *body) close() {
	_ = b.rc.Close()
	b.cancel()
}

// readRange reads bytes [off, off+len(buf)) of o into buf and returns their
// CRC32C, retrying network failures.
func (r *Restorer) readRange(ctx context.Context, o object, off int64, buf []byte) (uint32, error) {
	var crc uint32
	err := r.retry(ctx, func() error {
		b, err := r.openRange(ctx, o, off, int64(len(buf)))
		if err != nil {
			return err
		}
		defer b.close()
		if _, err := io.ReadFull(b, buf); err != nil {
			return err
		}
		if err := b.finish(); err != nil {
			return err
		}
		crc = b.crc
		return nil
	})
	return crc, err
}

// retry runs fn up to Options.Attempts times while it fails for a reason
// worth retrying: not a corrupt object, not a missing one, not the end of
// ctx.
func (r *Restorer) retry(ctx context.Context, fn func() error) error {
	bo := gax.Backoff{Initial: 400 * time.Millisecond, Max: 30 * time.Second, Multiplier: 4}
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil || errors.Is(err, ErrCorrupt) || errors.Is(err, ErrWrite) || errors.Is(err, gcs.ErrNotFound) || ctx.Err() != nil || attempt >= r.o.Attempts {
			return err
		}
		t := time.NewTimer(bo.Pause())
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
	}
}
