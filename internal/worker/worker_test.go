package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/queue"
	"github.com/ferry-dev/ferry/internal/teststack"
	"github.com/ferry-dev/ferry/internal/window"
)

func TestMain(m *testing.M) { os.Exit(teststack.MainWithGCS(m)) }

// testChunkKey is the chunk key of every transfer these tests send:
// testBucket's key objects list its hash, as a producer's would.
var testChunkKey = strings.Repeat("c0ffee01", 8)

// testTIDs are the transfers these tests send chunks of.
var testTIDs = []string{"tid1", "tid2", "tid3", "tid4", "tid5", "tid6", "tid7", "tid9", "tid10", "tid11", "tidf", "tid-paced", "tid-paced-503", "tforger"}

// testBucket is teststack.Bucket with the key object of each of testTIDs
// written, listing testChunkKey: what a producer writes before it
// publishes a transfer's first chunk.
func testBucket(t testing.TB, name string) *gcs.Store {
	t.Helper()
	store := teststack.Bucket(t, name)
	for _, tid := range testTIDs {
		k := message.Keys{V: message.Version, TransferID: tid, SHA256: []string{message.KeyHash(testChunkKey)}, Chunks: message.KeyHash(testChunkKey)}
		if _, err := store.PutSmall(context.Background(), name, message.KeyObject(tid), message.Encode(k), false, "application/json"); err != nil {
			t.Fatal(err)
		}
	}
	return store
}

// chunkMsg spools wire bytes and returns the spool directory, the spool
// file's path and the message a producer would send.
func chunkMsg(t *testing.T, bucket string, wire []byte, final bool) (message.Chunk, string, queue.Message) {
	t.Helper()
	dir := t.TempDir()
	c := message.Chunk{V: message.Version, TransferID: "tid1", Bucket: bucket, Codec: "zstd", Spool: "tid1-000000-00003", Key: testChunkKey,
		Parts: []message.Part{{Object: message.ChunkObject("tid1", 0, 3), File: 0, Path: "dir/data.csv", Index: 3, Chunks: 5,
			WireSize: int64(len(wire)), WireCRC32C: crc32c.Checksum(wire)}}}
	if err := os.WriteFile(filepath.Join(dir, c.Spool), wire, 0o644); err != nil {
		t.Fatal(err)
	}
	if final {
		p := &c.Parts[0]
		p.Object, p.Final, p.Chunks, p.Index = "out/data.csv.zst", true, 1, 0
		p.Metadata = message.FinalMetadata("tid1", 10, 1, "zstd")
	}
	return c, dir, queue.Message{ID: "m1", Data: message.EncodeChunk(c, nil)}
}

// newWorker returns a worker with spool directory dir ("" for none).
func newWorker(t *testing.T, store objectStore, events publisher, dir string) *Worker {
	t.Helper()
	w, err := New(Options{Store: store, Events: events, ID: "w1", MaxAttempts: 5, SpoolDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

func events(t *testing.T, r *teststack.Recorder) []message.Event {
	t.Helper()
	var out []message.Event
	for _, p := range r.Messages() {
		var ev message.Event
		if err := message.Decode(p.Data, &ev); err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
	return out
}

func TestUploadsVerifiesAnnouncesAndRemovesSpool(t *testing.T) {
	store := testBucket(t, "w-upload")
	rec := &teststack.Recorder{}
	wire := bytes.Repeat([]byte("frame-bytes "), 5000)
	c, dir, m := chunkMsg(t, "w-upload", wire, false)
	w := newWorker(t, store, rec, dir)
	p := c.Parts[0]

	if err := w.Handle(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	a, err := store.Attrs(context.Background(), "w-upload", p.Object)
	if err != nil {
		t.Fatal(err)
	}
	if a.CRC32C != p.WireCRC32C || a.Size != p.WireSize || a.Metadata[message.MetaWorker] != "w1" {
		t.Fatalf("object attrs %+v", a)
	}
	got, _ := store.ReadAll(context.Background(), "w-upload", p.Object)
	if !bytes.Equal(got, wire) {
		t.Fatal("stored bytes differ from the spooled bytes")
	}
	ev := events(t, rec)
	if len(ev) != 1 || ev[0].Type != message.EventChunk || len(ev[0].Parts) != 1 {
		t.Fatalf("events %+v", ev)
	}
	if ep := ev[0].Parts[0]; ep.CRC32C != p.WireCRC32C || ep.Index != 3 || ep.Generation != a.Generation || ep.Size != a.Size {
		t.Fatalf("event part %+v, stored %+v", ep, a)
	}
	if _, err := os.Stat(filepath.Join(dir, c.Spool)); !os.IsNotExist(err) {
		t.Fatalf("spool file still there: %v", err)
	}
}

func TestDuplicateDeliveryIsDone(t *testing.T) {
	store := testBucket(t, "w-dup")
	rec := &teststack.Recorder{}
	c, dir, m := chunkMsg(t, "w-dup", []byte("some compressed frame"), false)
	w := newWorker(t, store, rec, dir)
	if err := w.Handle(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	obj := c.Parts[0].Object
	first, _ := store.Attrs(context.Background(), "w-dup", obj)
	// Redelivered after the spool file is gone: the object is there, so it
	// is only announced again.
	if err := w.Handle(context.Background(), m); err != nil {
		t.Fatalf("second delivery: %v", err)
	}
	second, _ := store.Attrs(context.Background(), "w-dup", obj)
	if first.Generation != second.Generation {
		t.Fatalf("object rewritten on a duplicate delivery: generation %d→%d", first.Generation, second.Generation)
	}
	if ev := events(t, rec); len(ev) != 2 || ev[1].Type != message.EventChunk {
		t.Fatalf("events %+v", ev)
	}
}

func TestCorruptSpoolFailsPermanentlyAndUploadsNothing(t *testing.T) {
	store := testBucket(t, "w-corrupt")
	rec := &teststack.Recorder{}
	c, dir, m := chunkMsg(t, "w-corrupt", []byte("bytes the producer compressed"), false)
	w := newWorker(t, store, rec, dir)
	b, _ := os.ReadFile(filepath.Join(dir, c.Spool))
	b[4] ^= 0x01 // one flipped bit after publishing
	if err := os.WriteFile(filepath.Join(dir, c.Spool), b, 0o644); err != nil {
		t.Fatal(err)
	}

	err := w.Handle(context.Background(), m)
	if !errors.Is(err, queue.ErrPermanent) || !strings.Contains(err.Error(), "file dir/data.csv chunk 3") {
		t.Fatalf("error = %v, want a permanent one naming file and chunk", err)
	}
	if _, err := store.Attrs(context.Background(), "w-corrupt", c.Parts[0].Object); !errors.Is(err, gcs.ErrNotFound) {
		t.Fatalf("corrupt chunk reached GCS: %v", err)
	}
	ev := events(t, rec)
	if len(ev) != 1 || ev[0].Type != message.EventFailed || !strings.Contains(ev[0].Error, "chunk 3") {
		t.Fatalf("events %+v, want one failed event naming the chunk", ev)
	}
}

func TestExistingFinalObjectIsNotReplaced(t *testing.T) {
	store := testBucket(t, "w-exists")
	if _, err := store.PutSmall(context.Background(), "w-exists", "out/data.csv.zst", []byte("precious"), false, ""); err != nil {
		t.Fatal(err)
	}
	rec := &teststack.Recorder{}
	_, dir, m := chunkMsg(t, "w-exists", []byte("new content"), true)
	w := newWorker(t, store, rec, dir)
	err := w.Handle(context.Background(), m)
	if !errors.Is(err, queue.ErrPermanent) || !strings.Contains(err.Error(), "gs://w-exists/out/data.csv.zst already exists") {
		t.Fatalf("error = %v", err)
	}
	got, _ := store.ReadAll(context.Background(), "w-exists", "out/data.csv.zst")
	if string(got) != "precious" {
		t.Fatalf("existing object replaced with %q", got)
	}
}

// heldStore answers every upload as GCS does onto an object under a hold
// (403, ErrRetained in the gcs package), or with invalid set, as to a
// request it refuses (400, ErrInvalid).
type heldStore struct {
	objectStore
	invalid bool
}

func (h heldStore) Upload(_ context.Context, bucket, name string, _ io.Reader, _ gcs.UploadOptions) (gcs.Attrs, error) {
	if h.invalid {
		return gcs.Attrs{}, fmt.Errorf("upload gs://%s/%s: %w: googleapi: Error 400: Invalid argument., invalid", bucket, name, gcs.ErrInvalid)
	}
	return gcs.Attrs{}, fmt.Errorf("upload gs://%s/%s: %w: googleapi: Error 403: Object '%s/%s' is under active Temporary hold and cannot be deleted, overwritten or archived until hold is removed., objectUnderActiveHold",
		bucket, name, gcs.ErrRetained, bucket, name)
}

// A final object under a hold or a retention policy cannot be replaced,
// and an upload GCS refuses as invalid is refused again, however often it
// is sent: the chunk fails permanently, naming the object and why.
func TestAHeldFinalObjectFailsPermanently(t *testing.T) {
	store := testBucket(t, "w-held")
	for _, tc := range []struct {
		invalid bool
		want    string
	}{{false, "gs://w-held/out/data.csv.zst is under a hold or a retention policy"}, {true, "GCS refused the upload of gs://w-held/out/data.csv.zst as invalid"}} {
		_, dir, m := chunkMsg(t, "w-held", []byte("new content"), true)
		w := newWorker(t, heldStore{store, tc.invalid}, &teststack.Recorder{}, dir)
		err := w.Handle(context.Background(), m)
		if !errors.Is(err, queue.ErrPermanent) || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("error = %v; want permanent, naming %q", err, tc.want)
		}
	}
}

func TestMalformedMessageIsPermanent(t *testing.T) {
	w := newWorker(t, testBucket(t, "w-bad"), &teststack.Recorder{}, t.TempDir())
	for _, data := range []string{"not json", `{"v":1,"surprise":true}`, `{"v":2}`} {
		if err := w.Handle(context.Background(), queue.Message{ID: "x", Data: []byte(data)}); !errors.Is(err, queue.ErrPermanent) {
			t.Errorf("Handle(%s) = %v, want permanent", data, err)
		}
	}
}

func TestPublishFailureIsRetried(t *testing.T) {
	store := testBucket(t, "w-pubfail")
	rec := &teststack.Recorder{Err: errors.New("pubsub unavailable")}
	c, dir, m := chunkMsg(t, "w-pubfail", []byte("frame"), false)
	w := newWorker(t, store, rec, dir)
	err := w.Handle(context.Background(), m)
	if err == nil || errors.Is(err, queue.ErrPermanent) {
		t.Fatalf("error = %v, want a transient one so the message is redelivered", err)
	}
	if _, err := os.Stat(filepath.Join(dir, c.Spool)); err != nil {
		t.Fatalf("spool removed before the event was published: %v", err)
	}
}

// The attacks of issue 8: a chunk message published by hand that names a
// file outside the spool must neither upload it nor delete it.
func TestMessageCannotReachOutsideTheSpool(t *testing.T) {
	store := testBucket(t, "w-confine")
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.txt")
	secretBytes := []byte("the worker's private key")
	if err := os.WriteFile(secret, secretBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	c, dir, _ := chunkMsg(t, "w-confine", secretBytes, false)
	if err := os.Remove(filepath.Join(dir, c.Spool)); err != nil {
		t.Fatal(err)
	}
	// A link inside the spool that points at the secret.
	if err := os.Symlink(secret, filepath.Join(dir, c.Spool)); err != nil {
		t.Fatal(err)
	}
	rec := &teststack.Recorder{}
	w := newWorker(t, store, rec, dir)
	rel, _ := filepath.Rel(dir, secret)
	for name, spool := range map[string]string{
		"absolute path":       secret,
		"relative path up":    rel,
		"link in the spool":   c.Spool,
		"directory traversal": "tid1-../../" + filepath.Base(outside) + "/secret.txt",
	} {
		t.Run(name, func(t *testing.T) {
			c.Spool = spool
			// Encoded by hand, as an attacker would: the envelope with
			// any header it likes.
			data := message.EncodeChunk(c, nil)
			err := w.Handle(context.Background(), queue.Message{ID: "evil", Data: data})
			if !errors.Is(err, queue.ErrPermanent) {
				t.Fatalf("Handle = %v, want a permanent error", err)
			}
			got, rerr := os.ReadFile(secret)
			if rerr != nil || !bytes.Equal(got, secretBytes) {
				t.Fatalf("the file outside the spool was touched: %v", rerr)
			}
			if _, err := store.Attrs(context.Background(), "w-confine", c.Parts[0].Object); !errors.Is(err, gcs.ErrNotFound) {
				t.Fatalf("a file outside the spool reached the bucket: %v", err)
			}
		})
	}
}

func TestWorkerWithoutSpoolRefusesSpoolMessages(t *testing.T) {
	store := testBucket(t, "w-nospool")
	c, dir, m := chunkMsg(t, "w-nospool", []byte("frame"), false)
	w := newWorker(t, store, &teststack.Recorder{}, "")
	err := w.Handle(context.Background(), m)
	if !errors.Is(err, queue.ErrPermanent) || !strings.Contains(err.Error(), "no spool") {
		t.Fatalf("Handle = %v, want a permanent error saying the worker has no spool", err)
	}
	if _, err := os.Stat(filepath.Join(dir, c.Spool)); err != nil {
		t.Fatalf("spool file removed by a worker without a spool: %v", err)
	}
}

// Chunks that travel inside the message need no spool: a bundle of two
// parts lands as two objects and one event.
func TestInlineBundleUploadsEveryPart(t *testing.T) {
	store := testBucket(t, "w-inline")
	rec := &teststack.Recorder{}
	w := newWorker(t, store, rec, "")
	a, b := []byte("first small file"), []byte("second")
	c := message.Chunk{V: message.Version, TransferID: "tid2", Bucket: "w-inline", Codec: "none", Key: testChunkKey, Parts: []message.Part{
		{Object: "p/a", Final: true, File: 0, Path: "a", Chunks: 1, RawSize: int64(len(a)), WireSize: int64(len(a)), WireCRC32C: crc32c.Checksum(a),
			Metadata: message.FinalMetadata("tid2", int64(len(a)), crc32c.Checksum(a), "none")},
		{Object: "p/b", Final: true, File: 1, Path: "b", Chunks: 1, RawSize: int64(len(b)), WireSize: int64(len(b)), WireCRC32C: crc32c.Checksum(b),
			Metadata: message.FinalMetadata("tid2", int64(len(b)), crc32c.Checksum(b), "none")},
	}}
	if err := w.Handle(context.Background(), queue.Message{ID: "m", Data: message.EncodeChunk(c, [][]byte{a, b})}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][]byte{"p/a": a, "p/b": b} {
		got, err := store.ReadAll(context.Background(), "w-inline", name)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s = %q, %v; want %q", name, got, err, want)
		}
	}
	if ev := events(t, rec); len(ev) != 1 || len(ev[0].Parts) != 2 {
		t.Fatalf("events %+v, want one event with two parts", ev)
	}
}

// Issue 8: a message naming a bucket FERRY_BUCKETS does not list fails
// permanently, writes nothing there and leaves its spool file alone; the
// failed event names the bucket and the variable.
func TestBucketNotAllowedFailsPermanently(t *testing.T) {
	store := testBucket(t, "w-victim")
	testBucket(t, "w-allowed")
	rec := &teststack.Recorder{}
	c, dir, m := chunkMsg(t, "w-victim", []byte("frame for a bucket we may not touch"), false)
	w, err := New(Options{Store: store, Events: rec, ID: "w1", MaxAttempts: 5, SpoolDir: dir,
		Buckets: config.Buckets{Allowed: []string{"w-allowed", "w-other"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })

	err = w.Handle(context.Background(), m)
	if !errors.Is(err, queue.ErrPermanent) || !errors.Is(err, config.ErrBucketNotAllowed) {
		t.Fatalf("Handle = %v, want a permanent error", err)
	}
	for _, want := range []string{`"w-victim"`, "FERRY_BUCKETS", "w-allowed,w-other"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if _, err := store.Attrs(context.Background(), "w-victim", c.Parts[0].Object); !errors.Is(err, gcs.ErrNotFound) {
		t.Fatalf("wrote to a bucket FERRY_BUCKETS does not allow: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, c.Spool)); err != nil {
		t.Fatalf("spool file of a refused message was touched: %v", err)
	}
	ev := events(t, rec)
	if len(ev) != 1 || ev[0].Type != message.EventFailed || ev[0].Bucket != "w-victim" ||
		!strings.Contains(ev[0].Error, `bucket "w-victim" is not in FERRY_BUCKETS`) {
		t.Fatalf("events %+v, want one failed event naming the bucket and FERRY_BUCKETS", ev)
	}

	// The same message for an allowed bucket goes through.
	w.o.Buckets.Allowed = append(w.o.Buckets.Allowed, "w-victim")
	if err := w.Handle(context.Background(), m); err != nil {
		t.Fatalf("allowed bucket: %v", err)
	}
}

// countingStore counts the calls a worker makes: Attrs of done markers
// (markers) apart from those of the objects it stores (attrs).
type countingStore struct {
	objectStore
	attrs, markers, uploads atomic.Int64
}

func (s *countingStore) Attrs(ctx context.Context, bucket, name string) (gcs.Attrs, error) {
	if strings.HasPrefix(name, message.DoneRoot) {
		s.markers.Add(1)
	} else {
		s.attrs.Add(1)
	}
	return s.objectStore.Attrs(ctx, bucket, name)
}

func (s *countingStore) Upload(ctx context.Context, bucket, name string, r io.Reader, opt gcs.UploadOptions) (gcs.Attrs, error) {
	s.uploads.Add(1)
	return s.objectStore.Upload(ctx, bucket, name, r, opt)
}

// bundle returns a chunk message of transfer tid carrying files as final
// objects under p/, and one staging chunk (file len(files), chunk 2 of 4).
func bundle(bucket, tid string, files ...[]byte) (message.Chunk, [][]byte) {
	c := message.Chunk{V: message.Version, TransferID: tid, Bucket: bucket, Codec: "none", Key: testChunkKey}
	for i, b := range files {
		c.Parts = append(c.Parts, message.Part{Object: fmt.Sprintf("p/f%d", i), Final: true, File: i, Path: fmt.Sprintf("f%d", i), Chunks: 1,
			RawSize: int64(len(b)), WireSize: int64(len(b)), WireCRC32C: crc32c.Checksum(b),
			Metadata: message.FinalMetadata(tid, int64(len(b)), crc32c.Checksum(b), "none")})
	}
	big := bytes.Repeat([]byte("a chunk of a large file "), 100)
	c.Parts = append(c.Parts, message.Part{Object: message.ChunkObject(tid, len(files), 2), File: len(files), Path: "big", Index: 2, Chunks: 4,
		RawSize: int64(len(big)), WireSize: int64(len(big)), WireCRC32C: crc32c.Checksum(big)})
	return c, append(append([][]byte(nil), files...), big)
}

// Issue 12 §2: upload first under a DoesNotExist precondition; attributes
// are read only when that fails (a redelivery), and a redelivery rewrites
// nothing.
func TestUploadReadsAttrsOnlyAfterAPreconditionFailure(t *testing.T) {
	bucket := "w-precond"
	store := &countingStore{objectStore: testBucket(t, bucket)}
	rec := &teststack.Recorder{}
	w := newWorker(t, store, rec, "")
	c, payload := bundle(bucket, "tid3", []byte("one"), []byte("two two"))
	m := queue.Message{ID: "m", Data: message.EncodeChunk(c, payload)}
	if err := w.Handle(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	if a, u := store.attrs.Load(), store.uploads.Load(); a != 0 || u != 3 {
		t.Fatalf("first delivery: %d Attrs and %d uploads, want 0 and 3", a, u)
	}
	first := events(t, rec)[0].Parts
	if err := w.Handle(context.Background(), m); err != nil {
		t.Fatalf("redelivery: %v", err)
	}
	if a, u := store.attrs.Load(), store.uploads.Load(); a != 3 || u != 6 {
		t.Fatalf("after a redelivery: %d Attrs and %d uploads, want 3 and 6", a, u)
	}
	ev := events(t, rec)
	if len(ev) != 2 || len(ev[1].Parts) != 3 {
		t.Fatalf("events %+v, want two events of three parts", ev)
	}
	for i, p := range ev[1].Parts {
		if p.Generation != first[i].Generation || p.CRC32C != c.Parts[i].WireCRC32C || p.Object != c.Parts[i].Object {
			t.Errorf("part %d redelivered as %+v, first stored as %+v", i, p, first[i])
		}
	}
}

// Issue 12 §1: a bundle in a spool file lands as one object per part, each
// byte-identical, announced by one event listing every part.
func TestBundleFromSpoolUploadsEveryPartInOneEvent(t *testing.T) {
	bucket := "w-bundle"
	store := testBucket(t, bucket)
	rec := &teststack.Recorder{}
	dir := t.TempDir()
	w := newWorker(t, store, rec, dir)
	c, payload := bundle(bucket, "tid4", []byte("alpha"), []byte(""), bytes.Repeat([]byte("gamma"), 999))
	c.Spool = "tid4-bundle-0001"
	if err := os.WriteFile(filepath.Join(dir, c.Spool), bytes.Join(payload, nil), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := w.Handle(context.Background(), queue.Message{ID: "m", Data: message.EncodeChunk(c, nil)}); err != nil {
		t.Fatal(err)
	}
	ev := events(t, rec)
	if len(ev) != 1 || len(ev[0].Parts) != len(c.Parts) {
		t.Fatalf("events %+v, want one event with %d parts", ev, len(c.Parts))
	}
	for i, p := range c.Parts {
		got, err := store.ReadAll(context.Background(), bucket, p.Object)
		if err != nil || !bytes.Equal(got, payload[i]) {
			t.Fatalf("%s: %d bytes, %v; want the %d bytes of part %d", p.Object, len(got), err, len(payload[i]), i)
		}
		a, _ := store.Attrs(context.Background(), bucket, p.Object)
		ep := ev[0].Parts[i]
		if ep.File != p.File || ep.Index != p.Index || ep.Object != p.Object || ep.Generation != a.Generation || ep.Size != a.Size || ep.CRC32C != a.CRC32C {
			t.Errorf("event part %d = %+v, stored %+v", i, ep, a)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, c.Spool)); !os.IsNotExist(err) {
		t.Fatalf("spool file still there: %v", err)
	}
}

// Issue 12 §1: one corrupt file fails the bundle's transfer, naming the
// file, and none of the bundle's objects is written.
func TestBundleWithACorruptPartWritesNothing(t *testing.T) {
	bucket := "w-bundle-corrupt"
	store := testBucket(t, bucket)
	rec := &teststack.Recorder{}
	w := newWorker(t, store, rec, "")
	c, payload := bundle(bucket, "tid5", []byte("fine"), []byte("flipped"), []byte("also fine"))
	payload[1] = []byte("flippeD")
	err := w.Handle(context.Background(), queue.Message{ID: "m", Data: message.EncodeChunk(c, payload)})
	if !errors.Is(err, queue.ErrPermanent) || !strings.Contains(err.Error(), "file f1 chunk 0: chunk bytes are corrupt") {
		t.Fatalf("Handle = %v, want a permanent error naming file f1", err)
	}
	for _, p := range c.Parts {
		if _, err := store.Attrs(context.Background(), bucket, p.Object); !errors.Is(err, gcs.ErrNotFound) {
			t.Errorf("%s was written by a bundle that cannot succeed: %v", p.Object, err)
		}
	}
	if ev := events(t, rec); len(ev) != 1 || ev[0].Type != message.EventFailed || !strings.Contains(ev[0].Error, "file f1") {
		t.Fatalf("events %+v, want one failed event naming f1", ev)
	}
}

// Issue 12 §1: a bundle file whose destination exists fails the transfer
// clearly; the existing object is untouched and no object is partial.
func TestBundleWithAnExistingDestinationFailsClearly(t *testing.T) {
	bucket := "w-bundle-exists"
	store := testBucket(t, bucket)
	if _, err := store.PutSmall(context.Background(), bucket, "p/f1", []byte("precious"), false, ""); err != nil {
		t.Fatal(err)
	}
	rec := &teststack.Recorder{}
	w := newWorker(t, store, rec, "")
	c, payload := bundle(bucket, "tid6", []byte("zero"), []byte("one"), []byte("two"))
	err := w.Handle(context.Background(), queue.Message{ID: "m", Data: message.EncodeChunk(c, payload)})
	if !errors.Is(err, queue.ErrPermanent) || !strings.Contains(err.Error(), "file f1 chunk 0: destination gs://w-bundle-exists/p/f1 already exists") {
		t.Fatalf("Handle = %v", err)
	}
	if got, _ := store.ReadAll(context.Background(), bucket, "p/f1"); string(got) != "precious" {
		t.Fatalf("existing object replaced with %q", got)
	}
	for i, p := range c.Parts {
		if i == 1 {
			continue
		}
		got, err := store.ReadAll(context.Background(), bucket, p.Object)
		if err == nil && !bytes.Equal(got, payload[i]) {
			t.Errorf("%s holds %q, want all of %q or nothing", p.Object, got, payload[i])
		}
	}
	if ev := events(t, rec); len(ev) != 1 || ev[0].Type != message.EventFailed || !strings.Contains(ev[0].Error, "p/f1 already exists") {
		t.Fatalf("events %+v", ev)
	}
}

// Issue 42 §3: a chunk message is a claim. One that asks a worker to
// overwrite a final object another transfer wrote (forged, or an old
// producer's: an overwrite stages its files, and only the merger replaces
// final objects, at the generation its producer found) changes nothing,
// and its error names the transfer whose object it is.
func TestAWorkerNeverReplacesAnotherTransfersFinalObject(t *testing.T) {
	bucket := "w-forged"
	store := testBucket(t, bucket)
	ctx := context.Background()
	victim := []byte("the victim's bytes")
	if _, err := store.Upload(ctx, bucket, "p/f0", bytes.NewReader(victim), gcs.UploadOptions{Size: int64(len(victim)), CRC32C: crc32c.Checksum(victim),
		Metadata: message.FinalMetadata("tvictim", int64(len(victim)), crc32c.Checksum(victim), "none")}); err != nil {
		t.Fatal(err)
	}
	before, err := store.Attrs(ctx, bucket, "p/f0")
	if err != nil {
		t.Fatal(err)
	}
	c, payload := bundle(bucket, "tforger", []byte("forged bytes"))
	c.Overwrite = true
	w := newWorker(t, store, &teststack.Recorder{}, "")
	err = w.Handle(ctx, queue.Message{ID: "m", Data: message.EncodeChunk(c, payload)})
	if !errors.Is(err, queue.ErrPermanent) || !strings.Contains(err.Error(), `written by transfer "tvictim"`) {
		t.Fatalf("got %v, want a permanent error naming the victim's transfer", err)
	}
	got, err := store.ReadAll(ctx, bucket, "p/f0")
	after, _ := store.Attrs(ctx, bucket, "p/f0")
	if err != nil || !bytes.Equal(got, victim) || after.Generation != before.Generation {
		t.Fatalf("p/f0 = %q at generation %d (%v), want the victim's bytes at %d", got, after.Generation, err, before.Generation)
	}
}

// Issue 42 §3: a chunk message is a claim, the transfer's key object the
// proof. A well-formed message for another transfer (every submitter may
// publish chunks) that lacks the chunk key its producer wrote, or names a
// transfer that has no key object, writes no object, final or staging,
// and leaves the spool file it names alone. A key object of an older
// producer (no chunk key) proves its transfer's chunks; a new run's key
// object, written after the worker read the old one, proves the new run's.
func TestAChunkMessageWithoutItsTransfersKeyWritesNothing(t *testing.T) {
	bucket := "w-unproven"
	store := testBucket(t, bucket)
	ctx := context.Background()
	dir := t.TempDir()
	w := newWorker(t, store, &teststack.Recorder{}, dir)
	other := strings.Repeat("0badc0de", 8)
	for _, c := range []struct {
		name, tid, key, why string
	}{
		{"no key", "tid1", "", "its key is not the one the key object"},
		{"another key", "tid1", other, "its key is not the one the key object"},
		{"no key object", "tnokey", testChunkKey, "transfer tnokey has no key object gs://w-unproven/.ferry-keys/tnokey"},
	} {
		msg, payload := bundle(bucket, c.tid, []byte("forged bytes"))
		msg.Key = c.key
		err := w.Handle(ctx, queue.Message{ID: "m", Data: message.EncodeChunk(msg, payload)})
		if !errors.Is(err, queue.ErrPermanent) || !strings.Contains(err.Error(), "not proven by the transfer's chunk key") || !strings.Contains(err.Error(), c.why) {
			t.Fatalf("%s: %v, want it refused unproven: %s", c.name, err, c.why)
		}
		for _, p := range msg.Parts {
			if _, err := store.Attrs(ctx, bucket, p.Object); !errors.Is(err, gcs.ErrNotFound) {
				t.Fatalf("%s: gs://%s/%s written (%v)", c.name, bucket, p.Object, err)
			}
		}
		// In spool mode too: the file it names stays.
		sm, _, _ := chunkMsg(t, bucket, []byte("frame"), true)
		sm.TransferID, sm.Key, sm.Spool = c.tid, c.key, c.tid+"-000000-00003"
		sm.Parts[0].Metadata = message.FinalMetadata(c.tid, 10, 1, "zstd")
		spool := filepath.Join(dir, sm.Spool)
		if err := os.WriteFile(spool, []byte("frame"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := w.Handle(ctx, queue.Message{ID: "s", Data: message.EncodeChunk(sm, nil)}); !errors.Is(err, errUnproven) {
			t.Fatalf("%s, spooled: %v, want it unproven", c.name, err)
		}
		if _, err := os.Stat(spool); err != nil {
			t.Fatalf("%s: the spool file it named: %v", c.name, err)
		}
		if _, err := store.Attrs(ctx, bucket, sm.Parts[0].Object); !errors.Is(err, gcs.ErrNotFound) {
			t.Fatalf("%s: gs://%s/%s written (%v)", c.name, bucket, sm.Parts[0].Object, err)
		}
	}
	// A new run of tid1 writes a new key object: its chunks are proven,
	// though the worker read the old one.
	next := strings.Repeat("5eed0002", 8)
	k := message.Keys{V: message.Version, TransferID: "tid1", SHA256: []string{message.KeyHash(next)}, Chunks: message.KeyHash(next)}
	if _, err := store.PutSmall(ctx, bucket, message.KeyObject("tid1"), message.Encode(k), false, "application/json"); err != nil {
		t.Fatal(err)
	}
	msg, payload := bundle(bucket, "tid1", []byte("the new run's bytes"))
	msg.Key = next
	if err := w.Handle(ctx, queue.Message{ID: "n", Data: message.EncodeChunk(msg, payload)}); err != nil {
		t.Fatalf("the new run's chunk: %v", err)
	}
	// An older producer's key object lists no chunk key: its chunks,
	// which carry none, are taken.
	old := message.Keys{V: message.Version, TransferID: "tid2", SHA256: []string{message.KeyHash(next)}}
	if _, err := store.PutSmall(ctx, bucket, message.KeyObject("tid2"), message.Encode(old), false, "application/json"); err != nil {
		t.Fatal(err)
	}
	msg, payload = bundle(bucket, "tid2", []byte("an older producer's bytes"))
	msg.Key, msg.Parts[0].Object = "", "old/f0"
	if err := w.Handle(ctx, queue.Message{ID: "o", Data: message.EncodeChunk(msg, payload)}); err != nil {
		t.Fatalf("an older producer's chunk: %v", err)
	}
}

// A staging object an earlier attempt left with other bytes is replaced;
// a redelivery is a duplicate, not a second write.
func TestStaleStagingIsReplacedOnce(t *testing.T) {
	bucket := "w-overwrite"
	store := testBucket(t, bucket)
	ctx := context.Background()
	c, payload := bundle(bucket, "tid7", []byte("new content"))
	// A stale staging object of this transfer with the part's size and
	// other bytes (issue 32 §4): only its CRC32C says it is not the part.
	stale := bytes.Clone(payload[1])
	stale[len(stale)/2] ^= 0x01
	if _, err := store.Upload(ctx, bucket, c.Parts[1].Object, bytes.NewReader(stale), gcs.UploadOptions{Size: int64(len(stale)), CRC32C: crc32c.Checksum(stale),
		Metadata: map[string]string{message.MetaTransfer: "tid7"}}); err != nil {
		t.Fatal(err)
	}
	rec := &teststack.Recorder{}
	w := newWorker(t, store, rec, "")
	m := queue.Message{ID: "m", Data: message.EncodeChunk(c, payload)}
	if err := w.Handle(ctx, m); err != nil {
		t.Fatal(err)
	}
	gens := map[string]int64{}
	for i, p := range c.Parts {
		got, _ := store.ReadAll(ctx, bucket, p.Object)
		if !bytes.Equal(got, payload[i]) {
			t.Fatalf("%s = %q, want %q", p.Object, got, payload[i])
		}
		a, _ := store.Attrs(ctx, bucket, p.Object)
		gens[p.Object] = a.Generation
	}
	if err := w.Handle(ctx, m); err != nil {
		t.Fatal(err)
	}
	for _, p := range c.Parts {
		if a, _ := store.Attrs(ctx, bucket, p.Object); a.Generation != gens[p.Object] {
			t.Errorf("%s rewritten on a redelivery: generation %d→%d", p.Object, gens[p.Object], a.Generation)
		}
	}
}

// A spool file that is missing (removed by a producer failing the
// transfer, or lost) is retried, so that the transfer ends with the
// producer's cause; the last delivery attempt fails the transfer.
func TestMissingSpoolFileIsRetriedThenFailsTheTransfer(t *testing.T) {
	store := testBucket(t, "w-missing")
	rec := &teststack.Recorder{}
	c, dir, m := chunkMsg(t, "w-missing", []byte("frame"), false)
	if err := os.Remove(filepath.Join(dir, c.Spool)); err != nil {
		t.Fatal(err)
	}
	w := newWorker(t, store, rec, dir)
	m.DeliveryAttempt = 1
	if err := w.Handle(context.Background(), m); err == nil || errors.Is(err, queue.ErrPermanent) || !strings.Contains(err.Error(), "is missing") {
		t.Fatalf("first attempt: %v, want a transient error", err)
	}
	if ev := events(t, rec); len(ev) != 0 {
		t.Fatalf("events %+v before the last attempt", ev)
	}
	m.DeliveryAttempt = 5
	err := w.Handle(context.Background(), m)
	if !errors.Is(err, queue.ErrPermanent) || !strings.Contains(err.Error(), "gave up after 5 attempts") {
		t.Fatalf("last attempt: %v, want a permanent error", err)
	}
	if ev := events(t, rec); len(ev) != 1 || ev[0].Type != message.EventFailed || !strings.Contains(ev[0].Error, "spool file tid1-000000-00003 is missing") {
		t.Fatalf("events %+v", ev)
	}
}

// keyStore records the KMS key of every upload.
type keyStore struct {
	objectStore
	mu   sync.Mutex
	keys []string
}

func (s *keyStore) Upload(ctx context.Context, bucket, name string, r io.Reader, opt gcs.UploadOptions) (gcs.Attrs, error) {
	s.mu.Lock()
	s.keys = append(s.keys, opt.KMSKey)
	s.mu.Unlock()
	return s.objectStore.Upload(ctx, bucket, name, r, opt)
}

// FERRY_KMS_KEY: every upload names the key, also the second upload that
// replaces an object. (fake-gcs-server ignores keys; the calls are what can
// be checked here.)
func TestEveryUploadCarriesTheKMSKey(t *testing.T) {
	const key = "projects/p/locations/europe-west4/keyRings/ferry/cryptoKeys/objects"
	bucket := "w-kms"
	gs := testBucket(t, bucket)
	store := &keyStore{objectStore: gs}
	w, err := New(Options{Store: store, Events: &teststack.Recorder{}, ID: "w1", MaxAttempts: 5, Buckets: config.Buckets{KMSKey: key}})
	if err != nil {
		t.Fatal(err)
	}
	c, payload := bundle(bucket, "tid11", []byte("one"), []byte("two"))
	// A final object an earlier delivery of this transfer left with
	// other bytes.
	older := []byte("older")
	if _, err := gs.Upload(context.Background(), bucket, "p/f0", bytes.NewReader(older), gcs.UploadOptions{Size: int64(len(older)), CRC32C: crc32c.Checksum(older),
		Metadata: map[string]string{message.MetaTransfer: "tid11"}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Handle(context.Background(), queue.Message{ID: "m", Data: message.EncodeChunk(c, payload)}); err != nil {
		t.Fatal(err)
	}
	if len(store.keys) != 4 { // three parts, one replaced after its 412
		t.Fatalf("%d uploads, want 4", len(store.keys))
	}
	for i, k := range store.keys {
		if k != key {
			t.Errorf("upload %d has KMS key %q, want %q", i, k, key)
		}
	}
}

// Issue 17 §4: a transfer submitted again is a new run. A chunk of the
// earlier run is dropped without uploading, also when the worker last saw
// that run current (the replacing upload looks again first); a chunk of
// the current run replaces what the earlier run left under the
// transfer's own names, final objects included; a final object of another
// transfer is refused, naming that transfer.
func TestChunksOfAnEarlierRunAreDropped(t *testing.T) {
	const bucket = "w-runs"
	store := testBucket(t, bucket)
	ctx := context.Background()
	setRun := func(run string) {
		t.Helper()
		if _, err := store.PutSmall(ctx, bucket, message.RunObject("tid1"), []byte(run), false, ""); err != nil {
			t.Fatal(err)
		}
	}
	const runA, runB = "aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb"
	send := func(w *Worker, rec *teststack.Recorder, dir string, c message.Chunk, wire []byte) error {
		t.Helper()
		c.Parts[0].WireSize, c.Parts[0].WireCRC32C = int64(len(wire)), crc32c.Checksum(wire)
		if err := os.WriteFile(filepath.Join(dir, c.Spool), wire, 0o644); err != nil {
			t.Fatal(err)
		}
		return w.Handle(ctx, queue.Message{ID: "m-" + c.Run, Data: message.EncodeChunk(c, nil), DeliveryAttempt: 1})
	}
	read := func(name string) string {
		t.Helper()
		b, err := store.ReadAll(ctx, bucket, name)
		if err != nil {
			return "<" + err.Error() + ">"
		}
		return string(b)
	}

	for _, final := range []bool{false, true} {
		t.Run(fmt.Sprintf("final=%v", final), func(t *testing.T) {
			c, dir, _ := chunkMsg(t, bucket, nil, final)
			obj := c.Parts[0].Object
			_ = store.Delete(ctx, bucket, obj)
			rec := &teststack.Recorder{}
			w, w2 := newWorker(t, store, rec, dir), newWorker(t, store, rec, dir)

			// Run A is current: its chunk is stored.
			setRun(runA)
			c.Run = runA
			if err := send(w, rec, dir, c, []byte("bytes of run A")); err != nil {
				t.Fatal(err)
			}
			// Run B starts. Its chunk (other bytes: the file changed)
			// replaces run A's object, preconditioned on its generation.
			setRun(runB)
			c.Run = runB
			if err := send(w2, rec, dir, c, []byte("bytes of run B, longer")); err != nil {
				t.Fatalf("run B's chunk over run A's object: %v", err)
			}
			if got := read(obj); got != "bytes of run B, longer" {
				t.Fatalf("after run B: %s holds %q", obj, got)
			}
			// A late chunk of run A at the worker that saw A current a
			// moment ago: dropped before it replaces anything; run B's
			// bytes stay.
			c.Run = runA
			if err := send(w, rec, dir, c, []byte("late bytes of run A")); err != nil {
				t.Fatalf("late chunk of run A: %v", err)
			}
			if got := read(obj); got != "bytes of run B, longer" {
				t.Fatalf("a late chunk of run A replaced run B's object: %q", got)
			}
			evs := events(t, rec)
			if len(evs) != 2 || evs[0].Run != runA || evs[1].Run != runB {
				t.Fatalf("events %+v, want one of run A and one of run B", evs)
			}
		})
	}

	t.Run("another transfer's final object", func(t *testing.T) {
		c, dir, _ := chunkMsg(t, bucket, nil, true)
		c.Parts[0].Object = "out/theirs.csv.zst"
		body := []byte("their bytes")
		if _, err := store.Upload(ctx, bucket, c.Parts[0].Object, bytes.NewReader(body), gcs.UploadOptions{Size: int64(len(body)), CRC32C: crc32c.Checksum(body),
			Metadata: message.FinalMetadata("tother", 11, 1, "zstd")}); err != nil {
			t.Fatal(err)
		}
		setRun(runB)
		c.Run = runB
		rec := &teststack.Recorder{}
		err := send(newWorker(t, store, rec, dir), rec, dir, c, []byte("our bytes"))
		if !errors.Is(err, queue.ErrPermanent) || !strings.Contains(err.Error(), `already exists, written by transfer "tother"`) {
			t.Fatalf("err = %v, want a permanent error naming transfer tother", err)
		}
		if got := read(c.Parts[0].Object); got != "their bytes" {
			t.Fatalf("their object now holds %q", got)
		}
	})
}

// blockingStore holds every upload until release is closed, and tells
// started of each upload it holds.
type blockingStore struct {
	objectStore
	started chan string
	release chan struct{}
}

func (s *blockingStore) Upload(ctx context.Context, bucket, name string, r io.Reader, opt gcs.UploadOptions) (gcs.Attrs, error) {
	s.started <- name
	select {
	case <-s.release:
	case <-ctx.Done():
		return gcs.Attrs{}, ctx.Err()
	}
	return s.objectStore.Upload(ctx, bucket, name, r, opt)
}

// An upload holds what it carries, not a buffer of a fixed size: with
// 1 MiB for requests, more than fifty 1 KiB files are in flight at once (a
// fixed 128 KiB each would allow 8), and large parts hold their copy
// buffers, as gcs.RequestMemory sizes them, and no more than fit.
func TestRequestsInFlightAreSizedToWhatTheyCarry(t *testing.T) {
	for _, tc := range []struct {
		name, bucket string
		size, fits   int
	}{
		{"small files", "w-sized-small", 1 << 10, 50},
		{"large parts", "w-sized-large", gcs.PlainMax + 1, int((1 << 20) / gcs.RequestMemory(gcs.PlainMax+1))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bucket := tc.bucket
			base := testBucket(t, bucket)
			store := &blockingStore{objectStore: base, started: make(chan string, 1000), release: make(chan struct{})}
			w, err := New(Options{Store: store, Events: &teststack.Recorder{}, ID: "w1", MaxAttempts: 5, Requests: 1000, RequestMemory: 1 << 20})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			w.window = window.New(window.Options{Start: 1000, Max: 1000}) // memory, not the window, is the bound here
			var files [][]byte
			for i := range tc.fits + 20 {
				files = append(files, bytes.Repeat([]byte{byte('a' + i%26)}, tc.size))
			}
			c, payload := bundle(bucket, "tid1", files...)
			c.Parts, payload = c.Parts[:len(files)], payload[:len(files)] // the files only
			done := make(chan error, 1)
			go func() {
				done <- w.Handle(context.Background(), queue.Message{ID: "m", Data: message.EncodeChunk(c, payload)})
			}()
			guard := time.After(20 * time.Second) // a hang, not a speed: these goroutines start in milliseconds
			for n := 0; n < tc.fits; n++ {
				select {
				case <-store.started:
				case <-guard:
					t.Fatalf("only %d uploads of %d bytes in flight with 1 MiB for requests, want %d", n, tc.size, tc.fits)
				}
			}
			if tc.size > gcs.PlainMax && w.mem.TryAcquire(1) {
				t.Errorf("%d uploads of %d bytes in flight and memory is left over", tc.fits, tc.size)
			}
			close(store.release)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			for i := range files {
				got, err := base.ReadAll(context.Background(), bucket, c.Parts[i].Object)
				if err != nil || !bytes.Equal(got, files[i]) {
					t.Fatalf("%s: %d bytes, %v; want the file's %d", c.Parts[i].Object, len(got), err, len(files[i]))
				}
			}
		})
	}
}
