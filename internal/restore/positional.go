package restore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/seektable"
)

// task is one positional range: wire bytes [wireOff, wireOff+wireLen) of
// the object become raw bytes [rawOff, rawOff+rawLen) of the output.
type task struct {
	WireOff int64 `json:"w"`
	WireLen int64 `json:"wl"`
	RawOff  int64 `json:"r"`
	RawLen  int64 `json:"rl"`
	// first and last frame (zstd), for error messages.
	first, last int
}

// taskDone is what a finished task proved: the CRC32Cs of its wire and raw
// bytes.
type taskDone struct {
	WireCRC uint32 `json:"wc"`
	RawCRC  uint32 `json:"rc"`
}

// target is the wire size of a positional range for an object of size
// bytes: at most RangeSize, small enough that the object spreads over
// every slot, never below the single-request size.
func (r *Restorer) target(size int64) int64 {
	per := (size + int64(r.o.Concurrency) - 1) / int64(r.o.Concurrency)
	return max(min(r.o.RangeSize, per), min(r.o.RangeSize, smallObjectMax))
}

// byteTasks cuts a stored object (plain, or ferry's none) into ranges that
// map one to one onto the output.
func (r *Restorer) byteTasks(size int64) []task {
	t := r.target(size)
	var tasks []task
	for off := int64(0); off < size; off += t {
		n := min(t, size-off)
		tasks = append(tasks, task{WireOff: off, WireLen: n, RawOff: off, RawLen: n})
	}
	return tasks
}

// frameTasks groups consecutive frames into ranges of about target wire
// bytes; a frame is never split.
func (r *Restorer) frameTasks(frames []seektable.Frame, size int64) []task {
	t := r.target(size)
	var tasks []task
	cur := task{}
	for i, f := range frames {
		if cur.WireLen == 0 {
			cur.first = i
		}
		cur.WireLen += int64(f.Wire)
		cur.RawLen += int64(f.Raw)
		cur.last = i
		if cur.WireLen >= t || i == len(frames)-1 {
			tasks = append(tasks, cur)
			cur = task{WireOff: cur.WireOff + cur.WireLen, RawOff: cur.RawOff + cur.RawLen}
		}
	}
	return tasks
}

var errNoTable = errors.New("no seek table")

// tailSize is how many of a zstd object's last bytes the first read
// fetches: the seek table of a file of 100 GB in 4 MiB frames fits.
const tailSize = 256 << 10

// seekTable reads and checks the seek table at the end of a zstd object.
// It returns errNoTable when the object does not end with one, and the
// table's own bytes, which count towards the object's CRC32C.
func (r *Restorer) seekTable(ctx context.Context, o object) ([]seektable.Frame, []byte, error) {
	size := o.attrs.Size
	tail := make([]byte, min(size, tailSize))
	if _, err := r.readRange(ctx, o, size-int64(len(tail)), tail); err != nil {
		return nil, nil, err
	}
	n, err := seektable.TableSize(tail)
	if err != nil {
		return nil, nil, errNoTable
	}
	loc := fmt.Sprintf("%s %s (seek table)", o.obj, span(max(0, size-n), n))
	if n > size {
		return nil, nil, fmt.Errorf("%s: %w: the table's footer announces %d bytes, the object has %d", loc, ErrCorrupt, n, size)
	}
	if n > r.bufSize {
		return nil, nil, fmt.Errorf("%s: a table of %d bytes is more than the memory budget allows per range (%d bytes)", loc, n, r.bufSize)
	}
	table := tail[max(0, int64(len(tail))-n):]
	if int64(len(table)) < n {
		table = make([]byte, n)
		if _, err := r.readRange(ctx, o, size-n, table); err != nil {
			return nil, nil, err
		}
	}
	frames, err := seektable.Parse(table)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w: %v", loc, ErrCorrupt, err)
	}
	var wire, raw int64
	for i, f := range frames {
		if f.Wire == 0 {
			return nil, nil, fmt.Errorf("%s: %w: frame %d has no compressed bytes", loc, ErrCorrupt, i)
		}
		wire += int64(f.Wire)
		raw += int64(f.Raw)
	}
	if wire+n != size {
		return nil, nil, fmt.Errorf("%s: %w: its %d frames hold %d bytes, the object has %d before the table (truncated, or not ferry's)",
			loc, ErrCorrupt, len(frames), wire, size-n)
	}
	if raw != o.want.size {
		return nil, nil, fmt.Errorf("%s: %w: its frames decompress to %d bytes, metadata says %d", loc, ErrCorrupt, raw, o.want.size)
	}
	return frames, table, nil
}

// positional restores o by tasks that run in parallel and write at their
// raw offsets. A journal beside tmp lists the tasks done, so an interrupted
// run's work is checked and kept. table is the zstd seek table's bytes,
// the object's last.
func (r *Restorer) positional(ctx context.Context, root *os.Root, tmp string, o object, tasks []task, table []byte, res *Result) (keep bool, err error) {
	j, prior, err := openJournal(root, tmp, o)
	if err != nil {
		return false, err
	}
	defer j.close()
	f, err := root.OpenFile(tmp, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return false, fmt.Errorf("%s: %w", o.obj, err)
	}
	defer f.Close()
	if len(prior) == 0 {
		if err := f.Truncate(0); err != nil {
			return false, fmt.Errorf("%s: %w", o.obj, err)
		}
	}

	done := make([]taskDone, len(tasks))
	g, gctx := errgroup.WithContext(ctx)
	for i, t := range tasks {
		if p, ok := prior[key(t)]; ok && r.checkWritten(f, t, p) {
			done[i] = p
			res.Resumed += t.RawLen
			r.resumed.Add(t.RawLen)
			r.raw.Add(t.RawLen)
			continue
		}
		if err := r.acquire(gctx); err != nil {
			break
		}
		g.Go(func() error {
			defer r.release()
			d, err := r.task(gctx, f, o, t)
			if err != nil {
				return err
			}
			done[i] = d
			return j.add(t, d)
		})
	}
	if err := g.Wait(); err != nil {
		return true, err
	}
	if err := ctx.Err(); err != nil {
		return true, fmt.Errorf("%s: %w", o.obj, err)
	}

	var wire, raw uint32
	for i, t := range tasks {
		wire = crc32c.Combine(wire, done[i].WireCRC, t.WireLen)
		raw = crc32c.Combine(raw, done[i].RawCRC, t.RawLen)
	}
	wire = crc32c.Combine(wire, crc32c.Checksum(table), int64(len(table)))
	if wire != o.attrs.CRC32C {
		return false, fmt.Errorf("%s %s (the whole object): %w: the bytes downloaded have crc32c %s, GCS says %s",
			o.obj, span(0, o.attrs.Size), ErrCorrupt, crc32c.Base64(wire), crc32c.Base64(o.attrs.CRC32C))
	}
	fi, err := f.Stat()
	if err != nil {
		return false, fmt.Errorf("%s: %w", o.obj, err)
	}
	return false, o.check(fi.Size(), raw)
}

// task downloads one range, decompresses it if it is zstd, and writes it at
// its raw offset, retrying network failures.
func (r *Restorer) task(ctx context.Context, f *os.File, o object, t task) (taskDone, error) {
	var d taskDone
	err := r.retry(ctx, func() error {
		b, err := r.openRange(ctx, o, t.WireOff, t.WireLen)
		if err != nil {
			return err
		}
		defer b.close()
		w := &offsetWriter{f: f, off: t.RawOff, end: t.RawOff + t.RawLen, r: r}
		if o.kind.ferry && o.kind.codec == codec.Zstd {
			dec, derr := r.decoder()
			if derr != nil {
				return derr
			}
			if err = dec.Reset(b); err == nil {
				_, err = dec.WriteTo(w)
			}
			r.putDecoder(dec)
		} else {
			buf := copyBufs.Get().(*[]byte)
			_, err = io.CopyBuffer(w, b, *buf)
			copyBufs.Put(buf)
		}
		loc := fmt.Sprintf("%s %s", o.obj, span(t.WireOff, t.WireLen))
		if o.kind.codec == codec.Zstd {
			loc += fmt.Sprintf(" (frames %d-%d)", t.first, t.last)
		}
		switch {
		case b.err != nil:
			return b.err
		case w.err != nil:
			return fmt.Errorf("%s: %w to %s: %w", loc, ErrWrite, f.Name(), w.err)
		case errors.Is(err, errTooLong):
			return fmt.Errorf("%s: %w: decompresses to more than the %d bytes its seek table gives", loc, ErrCorrupt, t.RawLen)
		case err != nil:
			return fmt.Errorf("%s: %w: zstd: %v", loc, ErrCorrupt, err)
		}
		if err := b.finish(); err != nil {
			return err
		}
		if w.off != w.end {
			return fmt.Errorf("%s: %w: decompresses to %d bytes, its seek table says %d", loc, ErrCorrupt, w.off-t.RawOff, t.RawLen)
		}
		d = taskDone{WireCRC: b.crc, RawCRC: w.crc}
		return nil
	})
	return d, err
}

var copyBufs = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// offsetWriter writes sequentially from off, up to end, hashing.
type offsetWriter struct {
	f        *os.File
	off, end int64
	crc      uint32
	err      error
	r        *Restorer
}

func (w *offsetWriter) Write(p []byte) (int, error) {
	if w.off+int64(len(p)) > w.end {
		return 0, errTooLong
	}
	k, err := w.f.WriteAt(p, w.off)
	w.crc = crc32c.Update(w.crc, p[:k])
	w.off += int64(k)
	w.r.raw.Add(int64(k))
	if err != nil {
		w.err = err
	}
	return k, err
}

// checkWritten reports whether an earlier run's bytes of t are on disk with
// the CRC32C its journal recorded.
func (r *Restorer) checkWritten(f *os.File, t task, d taskDone) bool {
	buf := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(buf)
	h := crc32c.New()
	n, err := io.CopyBuffer(h, io.NewSectionReader(f, t.RawOff, t.RawLen), *buf)
	return err == nil && n == t.RawLen && h.Sum32() == d.RawCRC
}
