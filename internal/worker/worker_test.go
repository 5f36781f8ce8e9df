package worker

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/queue"
	"github.com/ferry-dev/ferry/internal/teststack"
)

func TestMain(m *testing.M) { os.Exit(teststack.MainWithGCS(m)) }

// chunkMsg spools wire bytes and returns the message a producer would send.
func chunkMsg(t *testing.T, bucket string, wire []byte, final bool) (message.Chunk, queue.Message) {
	t.Helper()
	spool := filepath.Join(t.TempDir(), "tid1", "000000-00003")
	if err := os.MkdirAll(filepath.Dir(spool), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(spool, wire, 0o644); err != nil {
		t.Fatal(err)
	}
	c := message.Chunk{V: message.Version, TransferID: "tid1", Bucket: bucket, Object: message.ChunkObject("tid1", 0, 3),
		File: 0, Path: "dir/data.csv", Index: 3, Chunks: 5, WireSize: int64(len(wire)), WireCRC32C: crc32c.Checksum(wire),
		Codec: "zstd", Spool: spool}
	if final {
		c.Object, c.Final, c.Chunks, c.Index = "out/data.csv.zst", true, 1, 0
		c.Metadata = message.FinalMetadata("tid1", 10, 1, "zstd")
	}
	return c, queue.Message{ID: "m1", Data: message.Encode(c)}
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
	store := teststack.Bucket(t, "w-upload")
	rec := &teststack.Recorder{}
	w := New(store, rec, "w1", 5, nil)
	wire := bytes.Repeat([]byte("frame-bytes "), 5000)
	c, m := chunkMsg(t, "w-upload", wire, false)

	if err := w.Handle(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	a, err := store.Attrs(context.Background(), "w-upload", c.Object)
	if err != nil {
		t.Fatal(err)
	}
	if a.CRC32C != c.WireCRC32C || a.Size != c.WireSize || a.Metadata[message.MetaWorker] != "w1" {
		t.Fatalf("object attrs %+v", a)
	}
	got, _ := store.ReadAll(context.Background(), "w-upload", c.Object)
	if !bytes.Equal(got, wire) {
		t.Fatal("stored bytes differ from the spooled bytes")
	}
	ev := events(t, rec)
	if len(ev) != 1 || ev[0].Type != message.EventChunk || ev[0].CRC32C != c.WireCRC32C || ev[0].Index != 3 {
		t.Fatalf("events %+v", ev)
	}
	if _, err := os.Stat(c.Spool); !os.IsNotExist(err) {
		t.Fatalf("spool file still there: %v", err)
	}
}

func TestDuplicateDeliveryIsDone(t *testing.T) {
	store := teststack.Bucket(t, "w-dup")
	rec := &teststack.Recorder{}
	w := New(store, rec, "w1", 5, nil)
	c, m := chunkMsg(t, "w-dup", []byte("some compressed frame"), false)
	if err := w.Handle(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	first, _ := store.Attrs(context.Background(), "w-dup", c.Object)
	// Redelivered after the spool file is gone: the object is there, so it
	// is only announced again.
	if err := w.Handle(context.Background(), m); err != nil {
		t.Fatalf("second delivery: %v", err)
	}
	second, _ := store.Attrs(context.Background(), "w-dup", c.Object)
	if first.Generation != second.Generation {
		t.Fatalf("object rewritten on a duplicate delivery: generation %d→%d", first.Generation, second.Generation)
	}
	if ev := events(t, rec); len(ev) != 2 || ev[1].Type != message.EventChunk {
		t.Fatalf("events %+v", ev)
	}
}

func TestCorruptSpoolFailsPermanentlyAndUploadsNothing(t *testing.T) {
	store := teststack.Bucket(t, "w-corrupt")
	rec := &teststack.Recorder{}
	w := New(store, rec, "w1", 5, nil)
	c, m := chunkMsg(t, "w-corrupt", []byte("bytes the producer compressed"), false)
	b, _ := os.ReadFile(c.Spool)
	b[4] ^= 0x01 // one flipped bit after publishing
	if err := os.WriteFile(c.Spool, b, 0o644); err != nil {
		t.Fatal(err)
	}

	err := w.Handle(context.Background(), m)
	if !errors.Is(err, queue.ErrPermanent) || !strings.Contains(err.Error(), "file dir/data.csv chunk 3") {
		t.Fatalf("error = %v, want a permanent one naming file and chunk", err)
	}
	if _, err := store.Attrs(context.Background(), "w-corrupt", c.Object); !errors.Is(err, gcs.ErrNotFound) {
		t.Fatalf("corrupt chunk reached GCS: %v", err)
	}
	ev := events(t, rec)
	if len(ev) != 1 || ev[0].Type != message.EventFailed || !strings.Contains(ev[0].Error, "chunk 3") {
		t.Fatalf("events %+v, want one failed event naming the chunk", ev)
	}
}

func TestExistingFinalObjectIsNotReplaced(t *testing.T) {
	store := teststack.Bucket(t, "w-exists")
	if _, err := store.PutSmall(context.Background(), "w-exists", "out/data.csv.zst", []byte("precious"), false, ""); err != nil {
		t.Fatal(err)
	}
	rec := &teststack.Recorder{}
	w := New(store, rec, "w1", 5, nil)
	_, m := chunkMsg(t, "w-exists", []byte("new content"), true)
	err := w.Handle(context.Background(), m)
	if !errors.Is(err, queue.ErrPermanent) || !strings.Contains(err.Error(), "gs://w-exists/out/data.csv.zst already exists") {
		t.Fatalf("error = %v", err)
	}
	got, _ := store.ReadAll(context.Background(), "w-exists", "out/data.csv.zst")
	if string(got) != "precious" {
		t.Fatalf("existing object replaced with %q", got)
	}
}

func TestMalformedMessageIsPermanent(t *testing.T) {
	w := New(teststack.Bucket(t, "w-bad"), &teststack.Recorder{}, "w1", 5, nil)
	for _, data := range []string{"not json", `{"v":1,"surprise":true}`, `{"v":2}`} {
		if err := w.Handle(context.Background(), queue.Message{ID: "x", Data: []byte(data)}); !errors.Is(err, queue.ErrPermanent) {
			t.Errorf("Handle(%s) = %v, want permanent", data, err)
		}
	}
}

func TestPublishFailureIsRetried(t *testing.T) {
	store := teststack.Bucket(t, "w-pubfail")
	rec := &teststack.Recorder{Err: errors.New("pubsub unavailable")}
	w := New(store, rec, "w1", 5, nil)
	c, m := chunkMsg(t, "w-pubfail", []byte("frame"), false)
	err := w.Handle(context.Background(), m)
	if err == nil || errors.Is(err, queue.ErrPermanent) {
		t.Fatalf("error = %v, want a transient one so the message is redelivered", err)
	}
	if _, err := os.Stat(c.Spool); err != nil {
		t.Fatalf("spool removed before the event was published: %v", err)
	}
}
