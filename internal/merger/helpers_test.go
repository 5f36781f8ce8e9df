package merger

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/ferry-dev/ferry/internal/benchrow"
	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/queue"
	"github.com/ferry-dev/ferry/internal/seektable"
	"github.com/ferry-dev/ferry/internal/teststack"
)

// spyStore records the merger's calls to GCS and how many were in flight at
// once. With gate set, the first Compose waits (up to 10 s) until gate calls
// are in flight, so a limit that serializes calls shows as a maximum of 1.
type spyStore struct {
	objectStore
	gate int

	mu       sync.Mutex
	calls    []string // "Attrs name", "Compose dst", …
	keys     []string // the KMS key of each Upload and Compose, in call order
	inFlight int
	maxIn    int
	gated    bool
	changed  *sync.Cond
}

func newSpy(s objectStore) *spyStore {
	sp := &spyStore{objectStore: s}
	sp.changed = sync.NewCond(&sp.mu)
	return sp
}

func (s *spyStore) enter(call string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, call)
	s.inFlight++
	s.maxIn = max(s.maxIn, s.inFlight)
	s.changed.Broadcast()
	if s.gate > 0 && !s.gated && strings.HasPrefix(call, "Compose ") {
		s.gated = true
		deadline := time.Now().Add(10 * time.Second)
		wake := time.AfterFunc(10*time.Second, func() { s.mu.Lock(); s.changed.Broadcast(); s.mu.Unlock() })
		defer wake.Stop()
		for s.inFlight < s.gate && time.Now().Before(deadline) {
			s.changed.Wait()
		}
	}
}

func (s *spyStore) key(k string) {
	s.mu.Lock()
	s.keys = append(s.keys, k)
	s.mu.Unlock()
}

func (s *spyStore) leave() {
	s.mu.Lock()
	s.inFlight--
	s.mu.Unlock()
}

func (s *spyStore) Attrs(ctx context.Context, bucket, name string) (gcs.Attrs, error) {
	s.enter("Attrs " + name)
	defer s.leave()
	return s.objectStore.Attrs(ctx, bucket, name)
}

func (s *spyStore) Upload(ctx context.Context, bucket, name string, r io.Reader, opt gcs.UploadOptions) (gcs.Attrs, error) {
	s.enter("Upload " + name)
	defer s.leave()
	s.key(opt.KMSKey)
	return s.objectStore.Upload(ctx, bucket, name, r, opt)
}

func (s *spyStore) Compose(ctx context.Context, bucket, dst string, srcs []string, opt gcs.ComposeOptions) (gcs.Attrs, error) {
	s.enter("Compose " + dst)
	defer s.leave()
	s.key(opt.KMSKey)
	return s.objectStore.Compose(ctx, bucket, dst, srcs, opt)
}

func (s *spyStore) List(ctx context.Context, bucket, prefix string, fn func(gcs.Attrs) error) error {
	s.enter("List " + prefix)
	defer s.leave()
	return s.objectStore.List(ctx, bucket, prefix, fn)
}

func (s *spyStore) ListRange(ctx context.Context, bucket, prefix, start, end string, fn func(gcs.Attrs) error) error {
	s.enter("List " + prefix)
	defer s.leave()
	return s.objectStore.ListRange(ctx, bucket, prefix, start, end, fn)
}

func (s *spyStore) DeleteGeneration(ctx context.Context, bucket, name string, gen int64) error {
	s.enter("Delete " + name)
	defer s.leave()
	return s.objectStore.DeleteGeneration(ctx, bucket, name, gen)
}

func (s *spyStore) DeleteAsSeen(ctx context.Context, bucket string, a gcs.Attrs) error {
	s.enter("Delete " + a.Name)
	defer s.leave()
	return s.objectStore.DeleteAsSeen(ctx, bucket, a)
}

func (s *spyStore) Delete(ctx context.Context, bucket, name string) error {
	s.enter("Delete " + name)
	defer s.leave()
	return s.objectStore.Delete(ctx, bucket, name)
}

// Calls returns the calls whose text starts with prefix.
func (s *spyStore) Calls(prefix string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, c := range s.calls {
		if strings.HasPrefix(c, prefix) {
			out = append(out, c)
		}
	}
	return out
}

func (s *spyStore) Max() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxIn
}

// staged is a transfer of several files, staged as workers would have
// stored it: chunk objects, and one-chunk files under their final names.
type staged struct {
	t      *testing.T
	bucket string
	store  *gcs.Store
	man    message.Manifest
	wire   [][][]byte // file → chunk → wire bytes
	raw    [][]byte   // file → raw bytes
}

// newStaged builds a manifest with one file per entry of chunks (its chunk
// count) in codec ("none" or "zstd": real zstd frames, two per chunk, and
// a seek table for files of several chunks).
func newStaged(t *testing.T, bucket, codec string, chunks ...int) *staged {
	t.Helper()
	bucket = fmt.Sprintf("%s-%d", bucket, fixtureSeq.Add(1))
	s := &staged{t: t, bucket: bucket, store: teststack.Bucket(t, bucket)}
	tid := "tid-" + bucket
	s.man = message.Manifest{V: message.Version, TransferID: tid, Sealed: true, Bucket: bucket, Prefix: "out", Method: "test",
		Codec: codec, ChunkSize: 1 << 20, StartedAt: time.Now().UTC(), ContentType: "application/octet-stream"}
	enc, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault))
	width := max(2, len(strconv.Itoa(len(chunks)-1))) // names in index order
	for i, n := range chunks {
		f := message.File{Path: fmt.Sprintf("dir/f%0*d.csv", width, i), Object: fmt.Sprintf("out/dir/f%0*d.csv", width, i)}
		if codec == "zstd" {
			f.Object += ".zst"
		}
		var wires [][]byte
		var rawAll []byte
		var rawParts, wireParts []crc32c.Part
		for j := 0; j < n; j++ {
			raw := []byte(strings.Repeat(fmt.Sprintf("file %d chunk %d row;", i, j), 20+j))
			rawAll = append(rawAll, raw...)
			c := message.ChunkInfo{Object: message.ChunkObject(tid, i, j), RawSize: int64(len(raw)), RawCRC32C: crc32c.Checksum(raw)}
			wire := raw
			if codec == "zstd" {
				half := len(raw) / 2
				a, b := enc.EncodeAll(raw[:half], nil), enc.EncodeAll(raw[half:], nil)
				wire = append(a, b...)
				c.Frames = []message.Frame{{Wire: uint32(len(a)), Raw: uint32(half)}, {Wire: uint32(len(b)), Raw: uint32(len(raw) - half)}}
			}
			c.WireSize, c.WireCRC32C = int64(len(wire)), crc32c.Checksum(wire)
			f.Chunks = append(f.Chunks, c)
			wires = append(wires, wire)
			rawParts = append(rawParts, crc32c.Part{CRC32C: c.RawCRC32C, Size: c.RawSize})
			wireParts = append(wireParts, crc32c.Part{CRC32C: c.WireCRC32C, Size: c.WireSize})
			f.WireSize += c.WireSize
		}
		f.Size, f.RawCRC32C = int64(len(rawAll)), crc32c.CombineAll(rawParts)
		if n == 1 {
			// A one-chunk file is written straight to its final name; a
			// zstd one's payload would end with its own table.
			f.Chunks[0].Object = f.Object
		} else if codec == "zstd" {
			var frames []message.Frame
			for _, c := range f.Chunks {
				frames = append(frames, c.Frames...)
			}
			table := seektable.Append(nil, frames)
			wireParts = append(wireParts, crc32c.Part{CRC32C: crc32c.Checksum(table), Size: int64(len(table))})
			f.WireSize += int64(len(table))
		}
		f.WireCRC32 = crc32c.CombineAll(wireParts)
		s.man.Files = append(s.man.Files, f)
		s.wire = append(s.wire, wires)
		s.raw = append(s.raw, rawAll)
	}
	return s
}

// upload stores chunk j of file i as a worker would, and returns the event
// part it would report.
func (s *staged) upload(i, j int) message.EventPart {
	s.t.Helper()
	f, c, b := s.man.Files[i], s.man.Files[i].Chunks[j], s.wire[i][j]
	meta := map[string]string{message.MetaWorker: "w1", message.MetaUploadAt: time.Now().UTC().Format(time.RFC3339Nano), message.MetaAttempt: "1"}
	if len(f.Chunks) == 1 {
		for k, v := range message.FinalMetadata(s.man.TransferID, f.Size, f.RawCRC32C, s.man.Codec) {
			meta[k] = v
		}
	} else {
		meta[message.MetaTransfer] = s.man.TransferID
	}
	a, err := s.store.Upload(context.Background(), s.bucket, c.Object, bytes.NewReader(b), gcs.UploadOptions{
		Size: int64(len(b)), CRC32C: crc32c.Checksum(b), IfAbsent: true, Metadata: meta})
	if err != nil {
		s.t.Fatal(err)
	}
	return message.EventPart{File: i, Index: j, Object: c.Object, Generation: a.Generation, Size: a.Size, CRC32C: a.CRC32C,
		RawBytes: c.RawSize, Created: a.Created, Attempt: 1}
}

// uploadAll stores every chunk and returns one chunk event per file.
func (s *staged) uploadAll() []message.Event {
	var evs []message.Event
	for i, f := range s.man.Files {
		ev := s.event(message.EventChunk)
		for j := range f.Chunks {
			ev.Parts = append(ev.Parts, s.upload(i, j))
		}
		evs = append(evs, ev)
	}
	return evs
}

func (s *staged) event(typ string, parts ...message.EventPart) message.Event {
	return message.Event{V: message.Version, Type: typ, TransferID: s.man.TransferID, Bucket: s.bucket, Worker: "w1", Parts: parts, At: time.Now()}
}

func (s *staged) seal() {
	s.t.Helper()
	putManifest(s.t, &s.man, func(name string, body []byte) error {
		_, err := s.store.PutSmall(context.Background(), s.bucket, name, body, false, "")
		return err
	})
}

// putManifest writes man as the producer seals it: its files in object
// order, paged when there are more than message.PageFiles, the header last.
func putManifest(t testing.TB, man *message.Manifest, put func(name string, body []byte) error) {
	t.Helper()
	sort.SliceStable(man.Files, func(i, j int) bool { return man.Files[i].Object < man.Files[j].Object })
	header, pages, skipped := man.Paginate()
	for k, files := range pages {
		if err := put(message.ManifestPage(man.TransferID, man.Run, k), message.Encode(message.FilePage{V: message.Version, Files: files})); err != nil {
			t.Fatal(err)
		}
	}
	for k, s := range skipped {
		if err := put(message.SkippedPage(man.TransferID, man.Run, k), message.Encode(message.SkippedFiles{V: message.Version, Skipped: s})); err != nil {
			t.Fatal(err)
		}
	}
	if err := put(message.ManifestObject(man.TransferID), message.Encode(header)); err != nil {
		t.Fatal(err)
	}
}

// memPut is putManifest's put for a memStore.
func (s *memStore) memPut(name string, body []byte) error {
	s.put(name, body, nil)
	return nil
}

// finish uploads every chunk, seals the manifest and hands m every event,
// the sealed one last, as a transfer that goes well does.
func (s *staged) finish(t *testing.T, m *Merger) {
	t.Helper()
	evs := s.uploadAll()
	s.seal()
	for _, ev := range append(evs, s.event(message.EventSealed)) {
		if err := handle(t, m, ev); err != nil {
			t.Fatal(err)
		}
	}
}

func (s *staged) staging() []string {
	s.t.Helper()
	var left []string
	if err := s.store.List(context.Background(), s.bucket, message.StagingPrefix(s.man.TransferID), func(a gcs.Attrs) error {
		left = append(left, a.Name)
		return nil
	}); err != nil {
		s.t.Fatal(err)
	}
	return left
}

// handle delivers ev to m.
func handle(t *testing.T, m *Merger, ev message.Event) error {
	t.Helper()
	return m.Handle(context.Background(), queue.Message{ID: "e", Data: message.Encode(ev)})
}

// sinkAt opens the rows file at path.
func sinkAt(t *testing.T, path string) *benchrow.File {
	t.Helper()
	f, err := benchrow.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func rowsPath(t *testing.T) string { return filepath.Join(t.TempDir(), "rows.ndjson") }

// dones decodes the done events r recorded.
func dones(t *testing.T, r *teststack.Recorder) []message.Done {
	t.Helper()
	var out []message.Done
	for _, p := range r.Messages() {
		var d message.Done
		if err := message.Decode(p.Data, &d); err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

// memStore is an in-memory objectStore for transfers too large for
// fake-gcs-server's memory backend: names, bytes, metadata and
// generations, listed in name order as GCS lists them. It is safe for
// concurrent use.
type memStore struct {
	mu   sync.Mutex
	gen  int64
	objs map[string]memObject
	// bodiless keeps only the attributes of what is uploaded under these
	// prefixes: a heap test measures the merger, not the store.
	bodiless []string
}

type memObject struct {
	body []byte
	a    gcs.Attrs
}

func newMemStore() *memStore { return &memStore{objs: map[string]memObject{}} }

// newMemStoreFor is a memStore with room for n objects and more, so that
// its map does not grow (doubling, old and new tables live at once) while
// a heap test measures the merger.
func newMemStoreFor(n int) *memStore { return &memStore{objs: make(map[string]memObject, 2*n+4096)} }

func (s *memStore) put(name string, body []byte, md map[string]string) gcs.Attrs {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen++
	a := gcs.Attrs{Name: name, Size: int64(len(body)), CRC32C: crc32c.Checksum(body), Generation: s.gen, Metadata: md, Created: time.Now()}
	s.objs[name] = memObject{body, a}
	return a
}

func (s *memStore) get(name string) (memObject, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.objs[name]
	if !ok {
		return o, fmt.Errorf("%s: %w", name, gcs.ErrNotFound)
	}
	return o, nil
}

func (s *memStore) Attrs(_ context.Context, _, name string) (gcs.Attrs, error) {
	o, err := s.get(name)
	return o.a, err
}

func (s *memStore) ReadAll(_ context.Context, _, name string) ([]byte, error) {
	o, err := s.get(name)
	return o.body, err
}

func (s *memStore) NewReader(_ context.Context, _, name string) (io.ReadCloser, error) {
	o, err := s.get(name)
	if err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(o.body)), nil
}

func (s *memStore) Upload(_ context.Context, _, name string, r io.Reader, opt gcs.UploadOptions) (gcs.Attrs, error) {
	if _, err := s.get(name); err == nil && opt.IfAbsent {
		return gcs.Attrs{}, fmt.Errorf("upload %s: %w", name, gcs.ErrPrecondition)
	}
	for _, p := range s.bodiless {
		if strings.HasPrefix(name, p) {
			// Counted and checked as it is read, never held.
			h := crc32c.New()
			n, err := io.Copy(h, r)
			if err != nil {
				return gcs.Attrs{}, err
			}
			if n != opt.Size || h.Sum32() != opt.CRC32C {
				return gcs.Attrs{}, fmt.Errorf("upload %s: %w", name, gcs.ErrChecksum)
			}
			a := s.put(name, nil, opt.Metadata)
			a.Size, a.CRC32C = n, h.Sum32()
			s.mu.Lock()
			s.objs[name] = memObject{a: a}
			s.mu.Unlock()
			return a, nil
		}
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return gcs.Attrs{}, err
	}
	if int64(len(b)) != opt.Size || crc32c.Checksum(b) != opt.CRC32C {
		return gcs.Attrs{}, fmt.Errorf("upload %s: %w", name, gcs.ErrChecksum)
	}
	return s.put(name, b, opt.Metadata), nil
}

func (s *memStore) Compose(_ context.Context, _, dst string, srcs []string, opt gcs.ComposeOptions) (gcs.Attrs, error) {
	var b []byte
	for _, src := range srcs {
		o, err := s.get(src)
		if err != nil {
			return gcs.Attrs{}, err
		}
		b = append(b, o.body...)
	}
	return s.put(dst, b, opt.Metadata), nil
}

func (s *memStore) List(ctx context.Context, bucket, prefix string, fn func(gcs.Attrs) error) error {
	return s.ListRange(ctx, bucket, prefix, "", "", fn)
}

func (s *memStore) ListRange(_ context.Context, _, prefix, start, end string, fn func(gcs.Attrs) error) error {
	// Names only, then one object at a time, as GCS pages through a
	// listing: the store's own copy must not be what a heap test measures.
	s.mu.Lock()
	var names []string
	for n := range s.objs {
		if strings.HasPrefix(n, prefix) && n >= start && (end == "" || n < end) {
			names = append(names, n)
		}
	}
	s.mu.Unlock()
	sort.Strings(names)
	for _, n := range names {
		o, err := s.get(n)
		if err != nil {
			continue // deleted since
		}
		if err := fn(o.a); err != nil {
			return err
		}
	}
	return nil
}

func (s *memStore) Delete(_ context.Context, _, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.objs[name]; !ok {
		return fmt.Errorf("%s: %w", name, gcs.ErrNotFound)
	}
	delete(s.objs, name)
	return nil
}

var _ objectStore = (*memStore)(nil)

// Touch sets a metadata key, as a lease's renewal does.
func (s *memStore) Touch(_ context.Context, _, name, key, value string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.objs[name]
	if !ok {
		return fmt.Errorf("%s: %w", name, gcs.ErrNotFound)
	}
	o.a.Metadata = maps.Clone(o.a.Metadata)
	if o.a.Metadata == nil {
		o.a.Metadata = map[string]string{}
	}
	o.a.Metadata[key] = value
	o.a.Updated = time.Now()
	s.objs[name] = o
	return nil
}

func (s *memStore) DeleteAsSeen(ctx context.Context, bucket string, a gcs.Attrs) error {
	return s.DeleteGeneration(ctx, bucket, a.Name, a.Generation)
}

func (s *memStore) DeleteGeneration(_ context.Context, _, name string, gen int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.objs[name]
	switch {
	case !ok:
		return nil
	case o.a.Generation != gen:
		return fmt.Errorf("%s#%d: %w", name, gen, gcs.ErrPrecondition)
	}
	delete(s.objs, name)
	return nil
}

// endKey writes the transfer's key object listing one fresh end key, as
// its producer does first, and returns the key.
func (s *staged) endKey() string {
	s.t.Helper()
	key := message.NewEndKey()
	k := message.Keys{V: message.Version, TransferID: s.man.TransferID, SHA256: []string{message.KeyHash(key)}}
	if _, err := s.store.PutSmall(context.Background(), s.bucket, message.KeyObject(s.man.TransferID), message.Encode(k), false, "application/json"); err != nil {
		s.t.Fatal(err)
	}
	return key
}
