package merger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/queue"
	"github.com/ferry-dev/ferry/internal/teststack"
	"github.com/ferry-dev/ferry/internal/testutil"
)

// appendStaged stages a transfer that appends two chunks to a file whose
// final object (the first chunk's bytes, written by an earlier transfer)
// exists: the manifest names that object, at its generation, as the first
// chunk. It returns the staged transfer and the object's attributes.
func appendStaged(t *testing.T) (*staged, gcs.Attrs) {
	s := newStaged(t, "m-append", "none", 3)
	f := &s.man.Files[0]
	c := f.Chunks[0]
	old := s.wire[0][0]
	a, err := s.store.Upload(context.Background(), s.bucket, f.Object, bytes.NewReader(old), gcs.UploadOptions{
		Size: int64(len(old)), CRC32C: crc32c.Checksum(old), Metadata: message.FinalMetadata("tid-earlier", c.RawSize, c.RawCRC32C, "none")})
	testutil.OK(t, err)
	f.Chunks[0].Object, f.Chunks[0].Generation = f.Object, a.Generation
	return s, a
}

// Issue 30, the merger's half: an append composes the existing object and
// the tail's chunks into the same name, only at the generation the
// producer proved; the result is the whole file, its metadata the new
// transfer's, and the earlier transfer's bytes are never uploaded again.
func TestAnAppendComposesOntoTheObjectAsProven(t *testing.T) {
	s, _ := appendStaged(t)
	done := &teststack.Recorder{}
	m := New(Options{Store: s.store, Done: done, Sink: sinkAt(t, rowsPath(t)), Version: "test"})
	for j := 1; j < 3; j++ {
		testutil.OK(t, handle(t, m, s.event(message.EventChunk, s.upload(0, j))))
	}
	s.seal()
	testutil.OK(t, handle(t, m, s.event(message.EventSealed)))
	testutil.OK(t, handle(t, m, s.event(message.EventSealed))) // an end handled again
	d := dones(t, done)
	f := s.man.Files[0]
	if len(d) != 1 || d[0].Status != message.StatusOK || d[0].Files != 1 {
		t.Fatalf("done events %+v", d)
	}
	b, err := s.store.ReadAll(context.Background(), s.bucket, f.Object)
	testutil.OK(t, err)
	a, err := s.store.Attrs(context.Background(), s.bucket, f.Object)
	testutil.OK(t, err)
	if !bytes.Equal(b, bytes.Join(s.wire[0], nil)) || a.CRC32C != f.WireCRC32 || a.Metadata[message.MetaTransfer] != s.man.TransferID ||
		a.Metadata[message.MetaRawSize] != strconv.FormatInt(f.Size, 10) {
		t.Fatalf("final object: %d bytes, crc32c %08x (want %08x), metadata %v", len(b), a.CRC32C, f.WireCRC32, a.Metadata)
	}
}

// An object that changed after the producer proved its prefix (another
// writer) is not appended to: the transfer fails naming the file and both
// generations, and the other writer's object stays as it is.
func TestAnAppendToAnObjectThatChangedFailsAndLeavesIt(t *testing.T) {
	s, _ := appendStaged(t)
	f := s.man.Files[0]
	other := []byte("someone else's bytes")
	b, err := s.store.Upload(context.Background(), s.bucket, f.Object, bytes.NewReader(other), gcs.UploadOptions{Size: int64(len(other)), CRC32C: crc32c.Checksum(other)})
	testutil.OK(t, err)
	done := &teststack.Recorder{}
	m := New(Options{Store: s.store, Done: done, Sink: sinkAt(t, rowsPath(t)), Version: "test"})
	for j := 1; j < 3; j++ {
		testutil.OK(t, handle(t, m, s.event(message.EventChunk, s.upload(0, j))))
	}
	s.seal()
	_ = handle(t, m, s.event(message.EventSealed))
	d := dones(t, done)
	if len(d) != 1 || d[0].Status != message.StatusFailed || !strings.Contains(d[0].Error, "changed since the producer proved its prefix") ||
		!strings.Contains(d[0].Error, strconv.FormatInt(b.Generation, 10)) {
		t.Fatalf("done events %+v, want failed naming the object's new generation %d", d, b.Generation)
	}
	got, err := s.store.ReadAll(context.Background(), s.bucket, f.Object)
	if err != nil || !bytes.Equal(got, other) {
		t.Fatalf("the other writer's object is now %q, %v", got, err)
	}
	if _, err := s.store.Attrs(context.Background(), s.bucket, message.ChunkObject(s.man.TransferID, 0, 1)); !errors.Is(err, gcs.ErrNotFound) {
		t.Fatalf("the tail's chunks stayed: %v", err)
	}
}

// A merger that dies after composing an append and before its done event
// (here: the event's publish fails) leaves the new object; the next
// merger finds it composed by this transfer and ends the transfer ok over
// it: the earlier bytes are never lost, and never appended twice.
func TestAnAppendComposedBeforeACrashEndsOnce(t *testing.T) {
	s, _ := appendStaged(t)
	f := s.man.Files[0]
	dying := &teststack.Recorder{Err: errors.New("the merger dies here")}
	m := New(Options{Store: s.store, Done: dying, Sink: sinkAt(t, rowsPath(t)), Version: "test"})
	for j := 1; j < 3; j++ {
		testutil.OK(t, handle(t, m, s.event(message.EventChunk, s.upload(0, j))))
	}
	s.seal()
	if err := handle(t, m, s.event(message.EventSealed)); err == nil {
		t.Fatal("the end went through without its done event")
	}
	a, err := s.store.Attrs(context.Background(), s.bucket, f.Object)
	testutil.OK(t, err)
	if a.Size != f.WireSize || a.CRC32C != f.WireCRC32 {
		t.Fatalf("after the compose: %d bytes, crc32c %08x; want %d, %08x", a.Size, a.CRC32C, f.WireSize, f.WireCRC32)
	}
	done := &teststack.Recorder{}
	next := New(Options{Store: s.store, Done: done, Sink: sinkAt(t, rowsPath(t)), Version: "test"})
	testutil.OK(t, handle(t, next, s.event(message.EventSealed)))
	d := dones(t, done)
	b, err := s.store.ReadAll(context.Background(), s.bucket, f.Object)
	testutil.OK(t, err)
	if len(d) != 1 || d[0].Status != message.StatusOK || d[0].Appended != 1 || !bytes.Equal(b, bytes.Join(s.wire[0], nil)) {
		t.Fatalf("done events %+v; object %d bytes, want %d", d, len(b), len(bytes.Join(s.wire[0], nil)))
	}
}

// heldStore answers a compose onto name as GCS does for an object under a
// hold (403, which the gcs package reports as ErrRetained), or, with
// class set, for sources of different storage classes (400, ErrInvalid).
type heldStore struct {
	objectStore
	name  string
	class bool
}

func (h heldStore) Compose(ctx context.Context, bucket, dst string, srcs []string, opt gcs.ComposeOptions) (gcs.Attrs, error) {
	switch {
	case dst == h.name && h.class:
		return gcs.Attrs{}, fmt.Errorf("compose gs://%s/%s: %w: googleapi: Error 400: The source objects must all have the same storage class as the destination., invalid",
			bucket, dst, gcs.ErrInvalid)
	case dst == h.name:
		return gcs.Attrs{}, fmt.Errorf("compose gs://%s/%s: %w: googleapi: Error 403: Object '%s/%s' is under active Event-Based hold and cannot be deleted, overwritten or archived until hold is removed., objectUnderActiveHold",
			bucket, dst, gcs.ErrRetained, bucket, dst)
	}
	return h.objectStore.Compose(ctx, bucket, dst, srcs, opt)
}

// An append onto an object under a hold or a retention policy fails the
// transfer the first time, naming the file and why, instead of being sent
// again until the transfer's timeout; the object stays as it was.
func TestAnAppendOntoAHeldObjectFailsAtOnce(t *testing.T) {
	for _, tc := range []struct {
		class bool
		want  string
	}{{false, "under a hold or a retention policy"}, {true, "send the file with --no-append"}} {
		appendRefused(t, tc.class, tc.want)
	}
}

// appendRefused runs an append whose compose GCS refuses (heldStore) and
// checks that the transfer failed at once, naming the file and want, the
// object as it was.
func appendRefused(t *testing.T, class bool, want string) {
	t.Helper()
	s, _ := appendStaged(t)
	f := s.man.Files[0]
	before, err := s.store.ReadAll(context.Background(), s.bucket, f.Object)
	testutil.OK(t, err)
	done := &teststack.Recorder{}
	m := New(Options{Store: heldStore{objectStore: s.store, name: f.Object, class: class}, Done: done, Sink: sinkAt(t, rowsPath(t)), Version: "test"})
	for j := 1; j < 3; j++ {
		testutil.OK(t, handle(t, m, s.event(message.EventChunk, s.upload(0, j))))
	}
	s.seal()
	err = handle(t, m, s.event(message.EventSealed))
	d := dones(t, done)
	if err != nil || len(d) != 1 || d[0].Status != message.StatusFailed ||
		!strings.Contains(d[0].Error, want) || !strings.Contains(d[0].Error, f.Path) {
		t.Fatalf("handle: %v; done events %+v; want the event handled and the transfer failed at once, naming %s and %q", err, d, f.Path, want)
	}
	got, err := s.store.ReadAll(context.Background(), s.bucket, f.Object)
	if err != nil || !bytes.Equal(got, before) {
		t.Fatalf("the held object is now %d bytes (%v), want it as it was", len(got), err)
	}
}

// A transfer cancelled after its append was composed (cp killed right
// after the compose, then Ctrl-C on the rerun) keeps the file's object:
// the earlier transfers' bytes are in it and nowhere else. It stays whole,
// and the done event counts and names it.
func TestACancelledAppendKeepsTheObjectItGrew(t *testing.T) {
	s, _ := appendStaged(t)
	f := s.man.Files[0]
	dying := &teststack.Recorder{Err: errors.New("the merger dies here")}
	m := New(Options{Store: s.store, Done: dying, Sink: sinkAt(t, rowsPath(t)), Version: "test"})
	for j := 1; j < 3; j++ {
		testutil.OK(t, handle(t, m, s.event(message.EventChunk, s.upload(0, j))))
	}
	s.seal()
	if err := handle(t, m, s.event(message.EventSealed)); err == nil {
		t.Fatal("the end went through without its done event")
	}
	done := &teststack.Recorder{}
	next := New(Options{Store: s.store, Done: done, Sink: sinkAt(t, rowsPath(t)), Version: "test"})
	ev := s.event(message.EventCancel)
	ev.Key = s.endKey()
	testutil.OK(t, next.HandleControl(context.Background(), queue.Message{ID: "c", Data: message.Encode(ev)}))
	d := dones(t, done)
	if len(d) != 1 || d[0].Status != message.StatusCancelled || d[0].Kept != 1 || len(d[0].Objects) != 1 ||
		d[0].Objects[0].Name != "gs://"+s.bucket+"/"+f.Object || !strings.Contains(d[0].Error, "1 objects it had replaced, appended to or taken over") {
		t.Fatalf("done events %+v, want cancelled keeping and naming gs://%s/%s", d, s.bucket, f.Object)
	}
	b, err := s.store.ReadAll(context.Background(), s.bucket, f.Object)
	if err != nil || !bytes.Equal(b, bytes.Join(s.wire[0], nil)) || crc32c.Checksum(b) != f.WireCRC32 {
		t.Fatalf("the appended object after the cancel: %d bytes, %v; want the whole file of %d bytes", len(b), err, f.WireSize)
	}
}
