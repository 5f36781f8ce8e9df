package localstack

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ferry-dev/ferry/internal/crc32c"
)

// fsMetadataKey is the extended attribute in which fake-gcs-server's
// filesystem backend keeps an object's attributes, as JSON, when the
// directory supports extended attributes (a tmpfs does since Linux 6.6).
const fsMetadataKey = "user.metadata"

// fsAttrs mirrors the JSON that fake-gcs-server's filesystem backend keeps
// in fsMetadataKey: its backend.ObjectAttrs, whose fields carry no JSON
// tags (the name, bucket and size are not stored: the path and the file
// give them).
type fsAttrs struct {
	StorageClass         string
	ContentType          string
	ContentEncoding      string
	ContentDisposition   string
	ContentLanguage      string
	CacheControl         string
	Crc32c               string
	Md5Hash              string
	Etag                 string
	ACL                  json.RawMessage
	Metadata             map[string]string
	Created              string
	Deleted              string
	Updated              string
	CustomTime           string
	Generation           int64
	RetentionMode        string
	RetentionRetainUntil string
}

// composePrefix names the files of composes in progress; listings leave
// them out (see listNames).
const composePrefix = ".ferry-compose-"

// errNotHere means the filesystem compose cannot do this request the way
// the fake would (a name that leaves the bucket's directory, attributes
// kept somewhere else than fsMetadataKey, a missing source): the caller
// hands the request on.
var errNotHere = errors.New("not a filesystem compose")

// composeFile composes on fake-gcs-server's filesystem backend the way
// Cloud Storage does, without reading a byte of the sources into this
// process and without hashing them:
//   - the sources' files are copied into a new file by the kernel
//     (copy_file_range, which Go's io.Copy between two files uses);
//   - the CRC32C is combined from the sources' (crc32c.Combine), which the
//     fake computed from their bytes when it stored them;
//   - there is no MD5: Cloud Storage gives composite objects none, and
//     computing one is what made the fake's compose (and the shim's first
//     fast path) cost a pass over every byte;
//   - the attributes are set on the new file before it is renamed into
//     place, so a reader sees the old object or the whole new one.
//
// It returns errNotHere (wrapped) when the fake should answer instead.
func (s *shim) composeFile(bucket, dest string, req composeRequest) (gen, size int64, err error) {
	path := func(name string) (string, error) { return s.objectFile(bucket, name) }
	destPath, err := path(dest)
	if err != nil {
		return 0, 0, err
	}
	var srcs []*os.File
	defer func() {
		for _, f := range srcs {
			_ = f.Close()
		}
	}()
	var crc uint32
	var sizes []int64
	for _, so := range req.SourceObjects {
		p, err := path(so.Name)
		if err != nil {
			return 0, 0, err
		}
		f, err := os.Open(p)
		if err != nil {
			return 0, 0, fmt.Errorf("%w: source %s: %v", errNotHere, so.Name, err)
		}
		srcs = append(srcs, f)
		// The attributes and the size of the file opened, not of one that
		// may have replaced it since.
		a, err := readFSAttrs(f)
		if err != nil {
			return 0, 0, err
		}
		st, err := f.Stat()
		if err != nil {
			return 0, 0, fmt.Errorf("%w: source %s: %v", errNotHere, so.Name, err)
		}
		c, err := decodeCRC32C(a.Crc32c)
		if err != nil {
			return 0, 0, fmt.Errorf("%w: source %s: %v", errNotHere, so.Name, err)
		}
		crc = crc32c.Combine(crc, c, st.Size())
		sizes = append(sizes, st.Size())
		size += st.Size()
	}

	// The new object keeps the destination's attributes when it exists
	// (the fake's compose takes only the metadata from the request), else
	// takes the request's.
	now := time.Now().UTC()
	stamp := now.Format("2006-01-02T15:04:05.999999Z07:00")
	a := fsAttrs{
		StorageClass: req.Destination.StorageClass, ContentType: req.Destination.ContentType,
		ContentEncoding: req.Destination.ContentEncoding, ContentDisposition: req.Destination.ContentDisposition,
		ContentLanguage: req.Destination.ContentLanguage, CacheControl: req.Destination.CacheControl,
		Created: stamp,
	}
	if old, err := os.Open(destPath); err == nil {
		prev, err := readFSAttrs(old)
		_ = old.Close()
		if err != nil {
			return 0, 0, err
		}
		a = prev
		a.Deleted = ""
	}
	if a.StorageClass == "" {
		a.StorageClass = "STANDARD"
	}
	// A generation is the time in microseconds, as the fake gives, and
	// always newer than the one it replaces.
	gen = max(now.UnixNano()/1000, a.Generation+1)
	a.Generation, a.Updated = gen, stamp
	a.Crc32c, a.Md5Hash = encodeCRC32C(crc), ""
	a.Etag = fmt.Sprintf("%x", gen)
	a.Metadata = req.Destination.Metadata
	encoded, err := json.Marshal(a)
	if err != nil {
		return 0, 0, err
	}

	if appendsInPlace(dest, req) {
		if err := appendInPlace(destPath, srcs, sizes, encoded); err != nil {
			return 0, 0, fmt.Errorf("compose %s: %w", dest, err)
		}
		return gen, size, nil
	}
	if err := os.MkdirAll(filepath.Dir(destPath), 0o700); err != nil {
		return 0, 0, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(destPath), composePrefix+"*")
	if err != nil {
		return 0, 0, err
	}
	done := false
	defer func() {
		if !done {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	for i, f := range srcs {
		n, err := io.Copy(tmp, io.LimitReader(f, sizes[i]))
		if err != nil {
			return 0, 0, fmt.Errorf("compose %s: copying %s: %w", dest, req.SourceObjects[i].Name, err)
		}
		if n != sizes[i] {
			return 0, 0, fmt.Errorf("compose %s: source %s gave %d bytes, want %d", dest, req.SourceObjects[i].Name, n, sizes[i])
		}
	}
	if err := unix.Fsetxattr(int(tmp.Fd()), fsMetadataKey, encoded, 0); err != nil {
		return 0, 0, fmt.Errorf("%w: setting %s on %s: %v", errNotHere, fsMetadataKey, tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return 0, 0, err
	}
	if err := os.Rename(tmp.Name(), destPath); err != nil {
		return 0, 0, err
	}
	done = true
	return gen, size, nil
}

// readFSAttrs reads the attributes the filesystem backend keeps on f.
func readFSAttrs(f *os.File) (fsAttrs, error) {
	var a fsAttrs
	buf := make([]byte, 4096)
	for {
		n, err := unix.Fgetxattr(int(f.Fd()), fsMetadataKey, buf)
		if errors.Is(err, unix.ERANGE) {
			buf = make([]byte, 2*len(buf))
			continue
		}
		if err != nil {
			return a, fmt.Errorf("%w: %s has no %s: %v", errNotHere, f.Name(), fsMetadataKey, err)
		}
		if err := json.Unmarshal(buf[:n], &a); err != nil {
			return a, fmt.Errorf("%w: %s: %s: %v", errNotHere, f.Name(), fsMetadataKey, err)
		}
		return a, nil
	}
}

// appendsInPlace reports whether a compose appends to its destination:
// the destination is the first source and no other, and the sources stay.
func appendsInPlace(dest string, req composeRequest) bool {
	if len(req.SourceObjects) < 2 || req.SourceObjects[0].Name != dest || req.DeleteSourceObjects {
		return false
	}
	for _, so := range req.SourceObjects[1:] {
		if so.Name == dest {
			return false
		}
	}
	return true
}

// appendInPlace composes [dest, others...] into dest (its file at path,
// srcs[0], of sizes[0] bytes) by writing the other sources' bytes after
// dest's own, in dest's file, and then its new attributes. Cloud Storage
// composes without copying its sources; copying a large object to append
// a little to it made the stand-in, not the client, the cost of an append
// (half of it for a large file grown by 1 %). The one
// departure: a reader of the old generation that reads while this writes
// may see the new bytes after the old ones, and the new attributes come
// just after the bytes; no ferry flow reads an object it is appending to.
// A failed write cuts the file back to the old object.
func appendInPlace(path string, srcs []*os.File, sizes []int64, encoded []byte) (err error) {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = f.Truncate(sizes[0])
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	if st, err := f.Stat(); err != nil || st.Size() != sizes[0] || !os.SameFile(st, mustStat(srcs[0])) {
		return fmt.Errorf("%w: %s changed while it was composed", errNotHere, path)
	}
	if _, err := f.Seek(sizes[0], io.SeekStart); err != nil {
		return err
	}
	for i := 1; i < len(srcs); i++ {
		n, err := io.Copy(f, io.LimitReader(srcs[i], sizes[i]))
		if err != nil {
			return fmt.Errorf("copying %s: %w", srcs[i].Name(), err)
		}
		if n != sizes[i] {
			return fmt.Errorf("source %s gave %d bytes, want %d", srcs[i].Name(), n, sizes[i])
		}
	}
	if err := unix.Fsetxattr(int(f.Fd()), fsMetadataKey, encoded, 0); err != nil {
		return fmt.Errorf("setting %s on %s: %w", fsMetadataKey, path, err)
	}
	return nil
}

// mustStat is f's FileInfo, nil when it cannot be had (then SameFile is
// false).
func mustStat(f *os.File) os.FileInfo {
	st, err := f.Stat()
	if err != nil {
		return nil
	}
	return st
}
