package restore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/osfile"
)

// metaMTime is the source file's modification time ferry records (RFC 3339,
// UTC); restore gives the output that time when it is present.
const metaMTime = "ferry-mtime"

// kind is how an object is restored, from its metadata.
type kind struct {
	ferry   bool        // written by ferry: decompress and check the raw bytes
	codec   codec.Codec // with ferry
	rawSize int64
	rawCRC  uint32
	mtime   time.Time
}

var crcHex = regexp.MustCompile(`^[0-9a-f]{8}$`)

// classify reads an object's ferry metadata strictly: all of it or none.
func classify(obj string, a gcs.Attrs) (kind, error) {
	m := a.Metadata
	c, hasC := m[message.MetaCodec]
	s, hasS := m[message.MetaRawSize]
	x, hasX := m[message.MetaRawCRC32C]
	if !hasC && !hasS && !hasX {
		return kind{}, nil
	}
	if !hasC || !hasS || !hasX {
		return kind{}, fmt.Errorf("%s: %w: incomplete ferry metadata (%s=%q, %s=%q, %s=%q)", obj, ErrCorrupt,
			message.MetaCodec, c, message.MetaRawSize, s, message.MetaRawCRC32C, x)
	}
	k := kind{ferry: true}
	var err error
	if k.codec, err = codec.Parse(c); err != nil {
		return kind{}, fmt.Errorf("%s: %w: metadata %s: %v", obj, ErrCorrupt, message.MetaCodec, err)
	}
	if k.rawSize, err = strconv.ParseInt(s, 10, 64); err != nil || k.rawSize < 0 {
		return kind{}, fmt.Errorf("%s: %w: metadata %s=%q is not a size", obj, ErrCorrupt, message.MetaRawSize, s)
	}
	if !crcHex.MatchString(x) {
		return kind{}, fmt.Errorf("%s: %w: metadata %s=%q is not 8 hex digits", obj, ErrCorrupt, message.MetaRawCRC32C, x)
	}
	v, _ := strconv.ParseUint(x, 16, 32)
	k.rawCRC = uint32(v)
	if t, ok := m[metaMTime]; ok {
		if k.mtime, err = time.Parse(time.RFC3339Nano, t); err != nil {
			return kind{}, fmt.Errorf("%s: %w: metadata %s=%q is not an RFC 3339 time", obj, ErrCorrupt, metaMTime, t)
		}
	}
	if k.codec == codec.None && (k.rawSize != a.Size || k.rawCRC != a.CRC32C) {
		return kind{}, fmt.Errorf("%s %s (the whole object): %w: codec none, but metadata says %d bytes with crc32c %08x and GCS %d bytes with %s (%08x)",
			obj, span(0, a.Size), ErrCorrupt, k.rawSize, k.rawCRC, a.Size, crc32c.Base64(a.CRC32C), a.CRC32C)
	}
	return k, nil
}

// Result is what became of one object.
type Result struct {
	Object string // gs://bucket/name
	Path   string // output, inside the destination
	// Codec is the codec the object was decompressed with, "" when it was
	// restored as stored.
	Codec string
	// Method is how: "frames" (a seek table's frames, in parallel, at
	// their raw offsets), "ranges" (stored bytes in parallel ranges) or
	// "stream" (parallel downloads, decompressed in order).
	Method    string
	Skipped   bool // the output existed with the same bytes
	WireSize  int64
	RawSize   int64
	RawCRC32C uint32
	Resumed   int64 // raw bytes an interrupted run had written and this one checked
}

// want is the size and CRC32C the output must have.
type want struct {
	size int64
	crc  uint32
}

// Object restores object a of bucket into rel, a slash-separated path
// inside root. The output appears under rel only once its size and CRC32C
// are proven; an existing output with those is left alone, one with other
// content is an ErrExists error unless Options.Overwrite.
func (r *Restorer) Object(ctx context.Context, root *os.Root, rel, bucket string, a gcs.Attrs) (Result, error) {
	obj := "gs://" + bucket + "/" + a.Name
	res := Result{Object: obj, Path: filepath.Join(root.Name(), filepath.FromSlash(rel)), WireSize: a.Size}
	defer r.objects.Add(1)
	if err := checkRel(rel); err != nil {
		return res, fmt.Errorf("%s: %w", obj, err)
	}
	var k kind
	if !r.o.AsStored {
		var err error
		if k, err = classify(obj, a); err != nil {
			return res, err
		}
	}
	w := want{a.Size, a.CRC32C}
	if k.ferry {
		w = want{k.rawSize, k.rawCRC}
		res.Codec = string(k.codec)
	}
	res.RawSize, res.RawCRC32C = w.size, w.crc

	same, err := existing(root, rel, w, r.o.Overwrite)
	if err != nil {
		return res, fmt.Errorf("%s: %w", obj, err)
	}
	if err := r.temps.mkdirAll(root, path.Dir(rel)); err != nil {
		return res, fmt.Errorf("%s: %w", obj, err)
	}
	tmp, release := r.temps.claim(root, rel)
	defer release()
	if same {
		res.Skipped = true
		_ = root.Remove(tmp)
		_ = root.Remove(tmp + logSuffix)
		return res, nil
	}
	if err := r.room(root, tmp, w.size); err != nil {
		_ = root.Remove(tmp)
		_ = root.Remove(tmp + logSuffix)
		return res, fmt.Errorf("%s: %w", obj, err)
	}
	keep, err := r.fetch(ctx, root, tmp, bucket, a, k, w, &res)
	if err != nil {
		// A network failure leaves what was written for the next run; a
		// corrupt object or a failed write (a full disk) leaves nothing.
		if !keep || errors.Is(err, ErrCorrupt) || errors.Is(err, ErrWrite) {
			_ = root.Remove(tmp)
			_ = root.Remove(tmp + logSuffix)
		}
		return res, err
	}
	if r.written != nil {
		r.written(filepath.Join(root.Name(), filepath.FromSlash(tmp)))
	}
	if err := prove(root, tmp, obj, w); err != nil {
		_ = root.Remove(tmp)
		_ = root.Remove(tmp + logSuffix)
		return res, err
	}
	px := posixOf(a.Metadata)
	if err := r.attributes(root, tmp, obj, px); err != nil {
		return res, err
	}
	mtime := k.mtime // ferry's, to the nanosecond; else gcloud's, in seconds
	if mtime.IsZero() {
		mtime = px.mtime
	}
	if !mtime.IsZero() {
		if err := root.Chtimes(tmp, time.Time{}, mtime); err != nil {
			return res, fmt.Errorf("%s: %w", obj, err)
		}
	}
	if err := root.Rename(tmp, rel); err != nil {
		// Its name cannot be had (a directory holds it): nothing of it
		// stays behind.
		_ = root.Remove(tmp)
		_ = root.Remove(tmp + logSuffix)
		return res, fmt.Errorf("%s: %w", obj, err)
	}
	if !r.small(a.Size) { // a small object never has a journal
		_ = root.Remove(tmp + logSuffix)
	}
	return res, nil
}

// tempIn is rel's temporary name in root: tempName, or, where a tree
// ferry sent holds a directory by that name (.q.ferry-part/ beside q),
// the first altTemp that is none.
func tempIn(root *os.Root, rel string) string {
	tmp := tempName(rel)
	for n := 1; isDir(root, tmp); n++ {
		tmp = altTemp(rel, n)
	}
	return tmp
}

// isDir reports whether name is a directory in root (not following a
// last link).
func isDir(root *os.Root, name string) bool {
	fi, err := root.Lstat(name)
	return err == nil && fi.IsDir()
}

// ErrNoSpace: the destination's file system cannot hold what an object
// says it restores to. Nothing is written.
var ErrNoSpace = errors.New("not enough free space")

// ErrWrite: writing the output failed (a full disk, an I/O error); the
// temporary file and its journal are removed.
var ErrWrite = errors.New("write failed")

// room refuses to start an object whose raw size the destination's free
// space (statfs) cannot hold, counting what an earlier run already wrote
// to tmp: a small hostile object that claims terabytes never fills a disk.
func (r *Restorer) room(root *os.Root, tmp string, size int64) error {
	free, err := r.freeSpace(root.Name())
	if err != nil {
		return fmt.Errorf("free space of %s: %w", root.Name(), err)
	}
	if fi, err := root.Lstat(tmp); err == nil {
		free += osfile.Allocated(fi)
	}
	if size > free {
		return fmt.Errorf("%w: it restores to %d bytes, the file system of %s has %d bytes free", ErrNoSpace, size, root.Name(), free)
	}
	return nil
}

// existing reports whether rel already holds the wanted bytes. Another
// regular file there is an error unless overwrite; anything else (a
// directory, a symbolic link) always is.
func existing(root *os.Root, rel string, w want, overwrite bool) (bool, error) {
	fi, err := root.Lstat(rel)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		// Nothing there; with ENOTDIR, a file where a directory of rel
		// would be: a temporary file an interrupted restore left at that
		// name (temps.mkdirAll removes it), or an error when made.
		return false, nil
	}
	if err != nil {
		return false, err
	}
	out := filepath.Join(root.Name(), filepath.FromSlash(rel))
	if !fi.Mode().IsRegular() {
		return false, fmt.Errorf("%s exists and is not a regular file (%s); it is never replaced", out, fi.Mode().Type())
	}
	if fi.Size() == w.size {
		_, crc, err := fileCRC(root, rel)
		if err != nil {
			return false, fmt.Errorf("%s: %w", out, err)
		}
		if crc == w.crc {
			return true, nil
		}
	}
	if overwrite {
		return false, nil
	}
	return false, fmt.Errorf("%w: %s (%d bytes) is not this object's %d bytes; --overwrite replaces it",
		ErrExists, out, fi.Size(), w.size)
}

// fileCRC reads name in root whole: its size and CRC32C.
func fileCRC(root *os.Root, name string) (int64, uint32, error) {
	f, err := root.Open(name)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	buf := readBufs.Get().(*[]byte)
	defer readBufs.Put(buf)
	h := crc32c.New()
	n, err := io.CopyBuffer(h, struct{ io.Reader }{f}, *buf) // not os.File's WriteTo, which brings its own buffer
	return n, h.Sum32(), err
}

// readBufs hold fileCRC's buffers: thousands of small files read back
// allocate none.
var readBufs = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// prove reads tmp back as it lies on disk before it is given its name: the
// downloads' checksums cover the bytes as they were written, and this the
// file that is renamed, whatever else wrote to it in between.
func prove(root *os.Root, tmp, obj string, w want) error {
	n, crc, err := fileCRC(root, tmp)
	if err != nil {
		return fmt.Errorf("%s: reading back %s: %w", obj, tmp, err)
	}
	if n != w.size || crc != w.crc {
		return fmt.Errorf("%s: %w: the file written, read back, is %d bytes with crc32c %08x, the object restores to %d bytes with %08x (did another process write to %s?)",
			obj, ErrCorrupt, n, crc, w.size, w.crc, tmp)
	}
	return nil
}

// fetch writes the object's restored bytes to tmp and proves them. keep
// reports whether tmp is worth keeping for the next run after an error.
func (r *Restorer) fetch(ctx context.Context, root *os.Root, tmp, bucket string, a gcs.Attrs, k kind, w want, res *Result) (keep bool, err error) {
	o := object{bucket: bucket, name: a.Name, attrs: a, kind: k, want: w}
	o.obj = "gs://" + bucket + "/" + a.Name
	small := r.small(a.Size)
	switch {
	case k.ferry && k.codec == codec.Zstd && !small:
		frames, table, err := r.seekTable(ctx, o)
		if errors.Is(err, errNoTable) {
			break // a zstd object from before seek tables: decompress in order
		}
		if err != nil {
			return false, err
		}
		res.Method = "frames"
		return r.positional(ctx, root, tmp, o, r.frameTasks(frames, a.Size), table, res)
	case (!k.ferry || k.codec == codec.None) && !small:
		res.Method = "ranges"
		return r.positional(ctx, root, tmp, o, r.byteTasks(a.Size), nil, res)
	}
	res.Method = "stream"
	return false, r.stream(ctx, root, tmp, o)
}

// small reports whether an object of size bytes is read in one request.
func (r *Restorer) small(size int64) bool { return size <= min(r.o.RangeSize, smallObjectMax) }

// object is one object being restored.
type object struct {
	bucket, name, obj string
	attrs             gcs.Attrs
	kind              kind
	want              want
}

// span formats bytes [off, off+n) of the object as an HTTP Range does.
func span(off, n int64) string {
	if n <= 0 {
		return fmt.Sprintf("bytes %d-", off)
	}
	return fmt.Sprintf("bytes %d-%d", off, off+n-1)
}
