package merger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/benchrow"
	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/queue"
	"github.com/ferry-dev/ferry/internal/teststack"
)

func TestMain(m *testing.M) { os.Exit(teststack.MainWithGCS(m)) }

var fixtureSeq atomic.Int64

type fixture struct {
	t      *testing.T
	bucket string
	store  *gcs.Store
	done   *teststack.Recorder
	rows   string
	m      *Merger
	man    message.Manifest
	chunks [][]byte
	mu     sync.Mutex
	stored map[int]gcs.Attrs // what upload stored, as a worker reports it
}

// newFixture stages a transfer of one file of n chunks, as workers would have
// uploaded it, without writing the manifest yet.
func newFixture(t *testing.T, bucket string, n int) *fixture {
	// A fresh bucket per run: the fake server outlives one test (-count).
	bucket = fmt.Sprintf("%s-%d", bucket, fixtureSeq.Add(1))
	f := &fixture{t: t, bucket: bucket, store: teststack.Bucket(t, bucket), done: &teststack.Recorder{},
		rows: filepath.Join(t.TempDir(), "rows.ndjson"), stored: map[int]gcs.Attrs{}}
	f.m = f.newMerger()
	tid := "tid-" + bucket
	file := message.File{Path: "data.csv", Object: "out/data.csv.zst"}
	var parts []crc32c.Part
	for i := 0; i < n; i++ {
		b := []byte(fmt.Sprintf("chunk %03d %s|", i, strings.Repeat("x", i)))
		f.chunks = append(f.chunks, b)
		c := message.ChunkInfo{Object: message.ChunkObject(tid, 0, i), RawSize: int64(len(b)), RawCRC32C: crc32c.Checksum(b),
			WireSize: int64(len(b)), WireCRC32C: crc32c.Checksum(b)}
		file.Chunks = append(file.Chunks, c)
		file.Size += c.RawSize
		file.WireSize += c.WireSize
		parts = append(parts, crc32c.Part{CRC32C: c.WireCRC32C, Size: c.WireSize})
	}
	file.WireCRC32, file.RawCRC32C = crc32c.CombineAll(parts), crc32c.CombineAll(parts)
	f.man = message.Manifest{V: message.Version, TransferID: tid, Sealed: true, Bucket: bucket, Prefix: "out", Method: "test",
		Codec: "none", ChunkSize: 1 << 20, Files: []message.File{file}, StartedAt: time.Now().UTC(), ContentType: "text/csv"}
	return f
}

func (f *fixture) newMerger() *Merger {
	sink, err := benchrow.OpenFile(f.rows)
	if err != nil {
		f.t.Fatal(err)
	}
	return New(Options{Store: f.store, Done: f.done, Sink: sink, Version: "test"})
}

func (f *fixture) upload(i int) {
	f.t.Helper()
	b := f.chunks[i]
	a, err := f.store.Upload(context.Background(), f.bucket, f.man.Files[0].Chunks[i].Object, bytes.NewReader(b), gcs.UploadOptions{
		Size: int64(len(b)), CRC32C: crc32c.Checksum(b), IfAbsent: true,
		Metadata: map[string]string{message.MetaTransfer: f.man.TransferID, message.MetaWorker: "w1", message.MetaUploadAt: time.Now().UTC().Format(time.RFC3339Nano)},
	})
	if err != nil {
		f.t.Fatal(err)
	}
	f.mu.Lock()
	f.stored[i] = a
	f.mu.Unlock()
}

func (f *fixture) seal() {
	f.t.Helper()
	if _, err := f.store.PutSmall(context.Background(), f.bucket, message.ManifestObject(f.man.TransferID), message.Encode(f.man), false, ""); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) event(typ string, i int, m *Merger) error {
	ev := message.Event{V: message.Version, Type: typ, TransferID: f.man.TransferID, Bucket: f.bucket, Worker: "w1", At: time.Now()}
	if typ == message.EventChunk {
		// What the worker reports: the object as GCS stored it.
		c := f.man.Files[0].Chunks[i]
		f.mu.Lock()
		a := f.stored[i]
		f.mu.Unlock()
		ev.Parts = []message.EventPart{{File: 0, Index: i, Object: c.Object, Generation: a.Generation, Size: a.Size,
			CRC32C: a.CRC32C, RawBytes: c.RawSize, Created: a.Created}}
	}
	if typ == message.EventFailed {
		ev.Error = "file data.csv chunk 2: spool bytes are corrupt"
	}
	return m.Handle(context.Background(), queue.Message{ID: "e", Data: message.Encode(ev)})
}

func (f *fixture) dones() []message.Done {
	var out []message.Done
	for _, p := range f.done.Messages() {
		var d message.Done
		if err := message.Decode(p.Data, &d); err != nil {
			f.t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

func (f *fixture) staging() []string {
	var left []string
	err := f.store.List(context.Background(), f.bucket, message.StagingPrefix(f.man.TransferID), func(a gcs.Attrs) error {
		left = append(left, a.Name)
		return nil
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return left
}

// composeLog records the sources of every compose, by destination.
type composeLog struct {
	objectStore
	mu    sync.Mutex
	calls map[string][]string
}

func (s *composeLog) Compose(ctx context.Context, bucket, dst string, srcs []string, opt gcs.ComposeOptions) (gcs.Attrs, error) {
	s.mu.Lock()
	s.calls[dst] = append([]string(nil), srcs...)
	s.mu.Unlock()
	return s.objectStore.Compose(ctx, bucket, dst, srcs, opt)
}

func TestComposesTwoLevelTreeWhenSealedAndComplete(t *testing.T) {
	f := newFixture(t, "m-tree", 70) // 70 chunks: 3 intermediates, then the final compose
	log := &composeLog{objectStore: f.store, calls: map[string][]string{}}
	sink, err := benchrow.OpenFile(f.rows)
	if err != nil {
		t.Fatal(err)
	}
	f.m = New(Options{Store: log, Done: f.done, Sink: sink, Version: "test"})
	for i := range f.chunks {
		f.upload(i)
	}
	// A chunk event before the manifest exists does nothing yet.
	if err := f.event(message.EventChunk, 0, f.m); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Attrs(context.Background(), f.bucket, "out/data.csv.zst"); !errors.Is(err, gcs.ErrNotFound) {
		t.Fatalf("composed before the manifest was sealed: %v", err)
	}
	f.seal()
	if err := f.event(message.EventSealed, 0, f.m); err != nil {
		t.Fatal(err)
	}
	got, err := f.store.ReadAll(context.Background(), f.bucket, "out/data.csv.zst")
	if err != nil {
		t.Fatal(err)
	}
	if want := bytes.Join(f.chunks, nil); !bytes.Equal(got, want) {
		t.Fatalf("final object is %d bytes, want the %d bytes of the chunks in order", len(got), len(want))
	}
	// The tree's shape (issue 32 §4): two levels, the fewest composes
	// GCS's 32 sources a call allow. Chunks 0–31, 32–63 and 64–69 into
	// three composites, and those into the final object.
	tid := f.man.TransferID
	want := map[string][]string{"out/data.csv.zst": {message.IntermediateObject(tid, 0, 0, 0), message.IntermediateObject(tid, 0, 0, 1), message.IntermediateObject(tid, 0, 0, 2)}}
	for k, lo := range []int{0, 32, 64} {
		for i := lo; i < min(lo+32, 70); i++ {
			want[message.IntermediateObject(tid, 0, 0, k)] = append(want[message.IntermediateObject(tid, 0, 0, k)], message.ChunkObject(tid, 0, i))
		}
	}
	if fmt.Sprint(log.calls) != fmt.Sprint(want) {
		t.Fatalf("composes (destination: sources) %v, want %v", log.calls, want)
	}
	a, _ := f.store.Attrs(context.Background(), f.bucket, "out/data.csv.zst")
	if a.CRC32C != f.man.Files[0].WireCRC32 || a.Metadata[message.MetaTransfer] != f.man.TransferID || a.Metadata[message.MetaCodec] != "none" {
		t.Fatalf("final attrs %+v", a)
	}
	d := f.dones()
	if len(d) != 1 || d[0].Status != message.StatusOK || d[0].Objects[0].CRC32C != a.CRC32C {
		t.Fatalf("done events %+v", d)
	}
	if left := f.staging(); len(left) != 0 {
		t.Fatalf("staging left: %v", left)
	}
	rows, _ := benchrow.ReadFile(f.rows)
	if len(rows) != 1 || rows[0].Chunks != 70 || rows[0].Status != "ok" || rows[0].Workers != 1 {
		t.Fatalf("rows %+v", rows)
	}
	chunkRows, err := benchrow.ReadChunkFile(benchrow.ChunksPath(f.rows))
	if err != nil || len(chunkRows) != 70 || chunkRows[69].Index != 69 || chunkRows[0].Worker != "w1" || chunkRows[0].Bytes != f.man.Files[0].Chunks[0].RawSize {
		t.Fatalf("chunk rows: %v, %d rows, first %+v", err, len(chunkRows), chunkRows)
	}
	// A late duplicate event changes nothing and writes no second row.
	if err := f.event(message.EventChunk, 5, f.m); err != nil {
		t.Fatal(err)
	}
	if rows, _ := benchrow.ReadFile(f.rows); len(rows) != 1 || len(f.dones()) != 1 {
		t.Fatalf("duplicate event produced %d rows, %d done events", len(rows), len(f.dones()))
	}
}

func TestWaitsForEveryChunkAndSurvivesARestart(t *testing.T) {
	f := newFixture(t, "m-restart", 5)
	f.seal()
	for i := 0; i < 4; i++ {
		f.upload(i)
		if err := f.event(message.EventChunk, i, f.m); err != nil {
			t.Fatal(err)
		}
	}
	if len(f.dones()) != 0 {
		t.Fatal("finished with a chunk missing")
	}
	// A new merger (a restart) knows nothing but what GCS has.
	restarted := f.newMerger()
	f.upload(4)
	if err := f.event(message.EventChunk, 4, restarted); err != nil {
		t.Fatal(err)
	}
	if d := f.dones(); len(d) != 1 || d[0].Status != message.StatusOK {
		t.Fatalf("done events %+v", d)
	}
}

func TestFailedEventEndsTransferAndCleansStaging(t *testing.T) {
	f := newFixture(t, "m-fail", 4)
	f.upload(0)
	f.upload(1)
	f.seal()
	if err := f.event(message.EventFailed, 2, f.m); err != nil {
		t.Fatal(err)
	}
	d := f.dones()
	if len(d) != 1 || d[0].Status != message.StatusFailed || !strings.Contains(d[0].Error, "data.csv chunk 2") {
		t.Fatalf("done events %+v", d)
	}
	if left := f.staging(); len(left) != 0 {
		t.Fatalf("staging left: %v", left)
	}
	// A chunk that lands after the failure is removed when its event comes.
	f.upload(3)
	if err := f.event(message.EventChunk, 3, f.m); err != nil {
		t.Fatal(err)
	}
	if left := f.staging(); len(left) != 0 {
		t.Fatalf("late chunk left: %v", left)
	}
	if _, err := f.store.Attrs(context.Background(), f.bucket, "out/data.csv.zst"); !errors.Is(err, gcs.ErrNotFound) {
		t.Fatalf("a failed transfer left a final object: %v", err)
	}
	rows, _ := benchrow.ReadFile(f.rows)
	if len(rows) != 1 || rows[0].Status != "failed" || !strings.Contains(rows[0].Error, "chunk 2") {
		t.Fatalf("rows %+v", rows)
	}
}

func TestWrongChunkChecksumFailsTransfer(t *testing.T) {
	f := newFixture(t, "m-badcrc", 3)
	f.chunks[1] = []byte("not what the manifest says")
	for i := range f.chunks {
		f.upload(i)
	}
	f.seal()
	if err := f.event(message.EventSealed, 0, f.m); err != nil {
		t.Fatal(err)
	}
	d := f.dones()
	if len(d) != 1 || d[0].Status != message.StatusFailed || !strings.Contains(d[0].Error, "chunk 1") {
		t.Fatalf("done events %+v", d)
	}
}

// TestConcurrentEventsEndATransferOnce: events of one transfer that wait for
// each other while it finishes must not finish it again.
func TestConcurrentEventsEndATransferOnce(t *testing.T) {
	f := newFixture(t, "m-concurrent", 6)
	for i := range f.chunks {
		f.upload(i)
	}
	f.seal()
	errs := make(chan error, 7)
	for i := 0; i < 6; i++ {
		go func() { errs <- f.event(message.EventChunk, i, f.m) }()
	}
	go func() { errs <- f.event(message.EventSealed, 0, f.m) }()
	for i := 0; i < 7; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if d := f.dones(); len(d) != 1 {
		t.Fatalf("%d done events for one transfer, want 1", len(d))
	}
}

// Issue 8: an event naming a bucket FERRY_BUCKETS does not list ends its
// transfer failed — done event and row name the bucket and the variable —
// and the merger neither reads nor writes that bucket.
func TestEventForBucketNotAllowedEndsFailedWithoutTouchingIt(t *testing.T) {
	f := newFixture(t, "m-victim", 2)
	f.upload(0)
	f.seal()
	sink, err := benchrow.OpenFile(f.rows)
	if err != nil {
		t.Fatal(err)
	}
	m := New(Options{Store: f.store, Done: f.done, Sink: sink, Version: "test", Buckets: config.Buckets{Allowed: []string{"ferry-only"}}})
	for i, typ := range []string{message.EventChunk, message.EventSealed, message.EventFailed} {
		err := f.event(typ, 0, m)
		if !errors.Is(err, queue.ErrPermanent) || !errors.Is(err, config.ErrBucketNotAllowed) {
			t.Fatalf("event %d (%s): %v, want a permanent error", i, typ, err)
		}
	}
	d := f.dones()
	if len(d) != 1 || d[0].Status != message.StatusFailed ||
		!strings.Contains(d[0].Error, fmt.Sprintf("bucket %q is not in FERRY_BUCKETS (ferry-only)", f.bucket)) {
		t.Fatalf("done events %+v, want one failed event naming the bucket and FERRY_BUCKETS", d)
	}
	rows, _ := benchrow.ReadFile(f.rows)
	if len(rows) != 1 || rows[0].Status != "failed" || !strings.Contains(rows[0].Error, "FERRY_BUCKETS") {
		t.Fatalf("rows %+v", rows)
	}
	if left := f.staging(); len(left) != 2 { // the chunk and the manifest
		t.Fatalf("staging in a bucket the merger may not write to changed: %v", left)
	}
	if _, err := f.store.Attrs(context.Background(), f.bucket, message.DoneMarker(f.man.TransferID)); !errors.Is(err, gcs.ErrNotFound) {
		t.Fatalf("done marker written to a bucket FERRY_BUCKETS does not allow: %v", err)
	}
}

// Issue 13 §4: a cancel event ends the transfer cancelled — done event,
// row, done marker (which workers look for), staging removed — and a chunk
// that lands later is cleaned up, never composed.
func TestCancelEndsTheTransferCancelled(t *testing.T) {
	f := newFixture(t, "m-cancel", 4)
	f.upload(0)
	f.upload(1)
	if err := f.event(message.EventChunk, 0, f.m); err != nil {
		t.Fatal(err)
	}
	ev := message.Event{V: message.Version, Type: message.EventCancel, TransferID: f.man.TransferID, Bucket: f.bucket, Error: "by alice", At: time.Now()}
	if err := f.m.Handle(context.Background(), queue.Message{ID: "c", Data: message.Encode(ev)}); err != nil {
		t.Fatal(err)
	}
	d := f.dones()
	if len(d) != 1 || d[0].Status != message.StatusCancelled || d[0].Error != "cancelled: by alice" {
		t.Fatalf("done events %+v", d)
	}
	if left := f.staging(); len(left) != 0 {
		t.Fatalf("staging left: %v", left)
	}
	if _, err := f.store.Attrs(context.Background(), f.bucket, message.DoneMarker(f.man.TransferID)); err != nil {
		t.Fatalf("no done marker for workers to find: %v", err)
	}
	rows, _ := benchrow.ReadFile(f.rows)
	if len(rows) != 1 || rows[0].Status != message.StatusCancelled || rows[0].RawMBps != nil {
		t.Fatalf("rows %+v, want one cancelled row with null throughput", rows)
	}
	// The producer seals anyway and a worker uploads one more chunk.
	f.seal()
	f.upload(2)
	for _, typ := range []string{message.EventChunk, message.EventSealed} {
		if err := f.event(typ, 2, f.m); err != nil {
			t.Fatal(err)
		}
	}
	if left := f.staging(); len(left) != 0 {
		t.Fatalf("late chunk left: %v", left)
	}
	if len(f.dones()) != 1 {
		t.Fatalf("%d done events, want 1", len(f.dones()))
	}
}
