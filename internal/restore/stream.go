package restore

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/crc32c"
)

// stream restores o in order: its ranges download in parallel ahead of one
// decoder that writes tmp from start to end. gzip has no frame index, and a
// zstd object without a seek table none either; a small object is one
// range anyway.
func (r *Restorer) stream(ctx context.Context, root *os.Root, tmp string, o object) (err error) {
	if !r.small(o.attrs.Size) {
		_ = root.Remove(tmp + logSuffix) // an older run's journal describes other ranges
	}
	f, err := root.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("%s: %w", o.obj, err)
	}
	defer f.Close()

	src := r.readAhead(ctx, o)
	defer src.close()
	var dec io.Reader = src
	switch {
	case !o.kind.ferry || o.kind.codec == codec.None:
	case o.kind.codec == codec.Gzip:
		g, err := gzip.NewReader(src)
		if err != nil {
			return src.failure(err, "gzip")
		}
		g.Multistream(true)
		defer func() { _ = g.Close() }()
		dec = g
	case o.kind.codec == codec.Zstd && o.attrs.Size > 4*r.bufSize:
		// A large object without a seek table: one stream, but blocks
		// decode ahead on several goroutines.
		d, err := zstd.NewReader(src, zstd.WithDecoderConcurrency(streamDecoders()), zstd.WithDecoderMaxWindow(r.window))
		if err != nil {
			return fmt.Errorf("%s: %w", o.obj, err)
		}
		defer d.Close()
		dec = d
	case o.kind.codec == codec.Zstd:
		d, err := r.decoder()
		if err != nil {
			return fmt.Errorf("%s: %w", o.obj, err)
		}
		defer r.putDecoder(d)
		if err := d.Reset(src); err != nil {
			return src.failure(err, "zstd")
		}
		dec = d
	}

	out := &limitWriter{w: f, limit: o.want.size, r: r, o: o}
	bw := bufio.NewWriterSize(out, int(min(256<<10, max(4<<10, o.want.size))))
	_, err = io.Copy(bw, dec)
	if err == nil {
		err = bw.Flush()
	}
	switch {
	case out.err != nil:
		return fmt.Errorf("%s: %w to %s: %w", o.obj, ErrWrite, f.Name(), out.err)
	case errors.Is(err, errTooLong):
		return out.tooLong()
	case err != nil:
		return src.failure(err, string(o.kind.codec))
	}
	// Whatever the decoder left unread still counts for the CRC32C.
	if _, err := io.Copy(io.Discard, src); err != nil {
		return src.failure(err, string(o.kind.codec))
	}
	if src.crc != o.attrs.CRC32C {
		return fmt.Errorf("%s %s (the whole object): %w: the bytes downloaded have crc32c %s, GCS says %s",
			o.obj, span(0, o.attrs.Size), ErrCorrupt, crc32c.Base64(src.crc), crc32c.Base64(o.attrs.CRC32C))
	}
	return o.check(out.n, out.crc)
}

// check compares the bytes written with what the object says it holds: a
// CRC32C in the form its source spells it (GCS's base64, the metadata's
// hexadecimal).
func (o object) check(n int64, crc uint32) error {
	if n == o.want.size && crc == o.want.crc {
		return nil
	}
	if o.kind.ferry {
		return fmt.Errorf("%s %s: %w: restores to %d bytes with crc32c %08x, metadata says %d bytes with %08x",
			o.obj, span(0, o.attrs.Size), ErrCorrupt, n, crc, o.want.size, o.want.crc)
	}
	return fmt.Errorf("%s %s: %w: restores to %d bytes with crc32c %s, GCS says %d bytes with %s",
		o.obj, span(0, o.attrs.Size), ErrCorrupt, n, crc32c.Base64(crc), o.want.size, crc32c.Base64(o.want.crc))
}

var errTooLong = errors.New("output longer than announced")

// limitWriter writes in order, hashes and counts, and refuses to write more
// than limit bytes: a decompression bomb stops at the size the metadata
// announced.
type limitWriter struct {
	w     io.Writer
	limit int64
	n     int64
	crc   uint32
	err   error // a write failed: the disk, not the object
	r     *Restorer
	o     object
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if l.n+int64(len(p)) > l.limit {
		return 0, errTooLong
	}
	k, err := l.w.Write(p)
	l.crc = crc32c.Update(l.crc, p[:k])
	l.n += int64(k)
	l.r.raw.Add(int64(k))
	if err != nil {
		l.err = err
	}
	return k, err
}

func (l *limitWriter) tooLong() error {
	return fmt.Errorf("%s: %w: decompresses to more than the %d bytes its metadata announces", l.o.obj, ErrCorrupt, l.limit)
}

// part is one range read ahead.
type part struct {
	off     int64
	buf     []byte
	crc     uint32
	err     error
	done    chan struct{}
	release func(ok bool) // gives back what admitted it
}

// ahead is an io.Reader over an object's ranges, downloaded in parallel in
// the Restorer's slots and handed out in order. A range holds its slot and
// buffer until it is consumed, so readahead is bounded by the slots; ranges
// take slots in order, so the one the reader waits for always has one.
type ahead struct {
	r      *Restorer
	o      object
	parts  chan *part
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	cur    *part
	pos    int
	next   int64  // offset after the last range handed out
	crc    uint32 // of the ranges handed out
	err    error  // the download failure handed to the reader, if any
}

func (r *Restorer) readAhead(ctx context.Context, o object) *ahead {
	ctx, cancel := context.WithCancel(ctx)
	a := &ahead{r: r, o: o, parts: make(chan *part, r.o.Concurrency), ctx: ctx, cancel: cancel}
	a.wg.Go(func() {
		defer close(a.parts)
		for off := int64(0); off < o.attrs.Size; off += r.bufSize {
			release, err := r.admit(ctx, o)
			if err != nil {
				return
			}
			p := &part{off: off, done: make(chan struct{}), release: release}
			p.buf = r.buffer(min(r.bufSize, o.attrs.Size-off))
			a.wg.Go(func() {
				defer close(p.done)
				p.crc, p.err = r.readRange(ctx, o, p.off, p.buf)
			})
			a.parts <- p // never blocks: at most Concurrency parts hold slots
		}
	})
	return a
}

func (a *ahead) Read(p []byte) (int, error) {
	for a.cur == nil || a.pos == len(a.cur.buf) {
		if a.cur != nil {
			a.drop(a.cur)
			a.cur = nil
		}
		next, ok := <-a.parts
		if !ok && a.next < a.o.attrs.Size {
			// Stopped before the end: the restore was cancelled.
			a.err = fmt.Errorf("%s: %w", a.o.obj, a.ctx.Err())
			return 0, a.err
		}
		if !ok {
			return 0, io.EOF
		}
		<-next.done
		if next.err != nil {
			a.err = next.err
			a.drop(next)
			return 0, next.err
		}
		a.crc = crc32c.Combine(a.crc, next.crc, int64(len(next.buf)))
		a.next = next.off + int64(len(next.buf))
		a.cur, a.pos = next, 0
	}
	n := copy(p, a.cur.buf[a.pos:])
	a.pos += n
	return n, nil
}

// drop gives a consumed range's buffer and what admitted it back.
func (a *ahead) drop(p *part) {
	a.r.putBuffer(p.buf)
	p.release(p.err == nil)
}

// failure explains an error met while decoding: a download failure as it
// is, a decoder's complaint as corruption of the range being read.
func (a *ahead) failure(err error, dec string) error {
	if a.err != nil {
		return a.err
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, dec+":") {
		msg = dec + ": " + msg
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		msg += " (the object is truncated)"
	}
	where := span(0, a.o.attrs.Size)
	if b := a.cur; b != nil {
		where = span(b.off, int64(len(b.buf)))
	}
	return fmt.Errorf("%s %s: %w: %s", a.o.obj, where, ErrCorrupt, msg)
}

// close stops the downloads and returns every slot and buffer.
func (a *ahead) close() {
	a.cancel()
	if a.cur != nil {
		a.drop(a.cur)
		a.cur = nil
	}
	for p := range a.parts {
		<-p.done
		a.drop(p)
	}
	a.wg.Wait()
}
