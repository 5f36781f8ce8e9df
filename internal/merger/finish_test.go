package merger

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/ferry-dev/ferry/internal/benchrow"
	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/manifest"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/queue"
	"github.com/ferry-dev/ferry/internal/seektable"
	"github.com/ferry-dev/ferry/internal/teststack"
	"github.com/ferry-dev/ferry/internal/testutil"
)

// Issue 12 §2, issue 17 §1: files of one chunk, which workers write to their
// final names, cost no call of their own: one listing of the destination
// confirms them all (only the done marker is looked up besides).
func TestOneChunkFilesAreVerifiedFromWorkerReports(t *testing.T) {
	s := newStaged(t, "m-reports", "none", 1, 1, 1, 1, 1, 1)
	spy := newSpy(s.store)
	done := &teststack.Recorder{}
	rows := rowsPath(t)
	m := New(Options{Store: spy, Done: done, Sink: sinkAt(t, rows), Version: "test"})
	// Two bundles of three files each, announced before the seal.
	var parts []message.EventPart
	for i := range s.man.Files {
		parts = append(parts, s.upload(i, 0))
	}
	for _, ev := range []message.Event{s.event(message.EventChunk, parts[:3]...), s.event(message.EventChunk, parts[3:]...)} {
		if err := handle(t, m, ev); err != nil {
			t.Fatal(err)
		}
	}
	s.seal()
	if err := handle(t, m, s.event(message.EventSealed)); err != nil {
		t.Fatal(err)
	}
	d := dones(t, done)
	if len(d) != 1 || d[0].Status != message.StatusOK || len(d[0].Objects) != 6 {
		t.Fatalf("done events %+v", d)
	}
	for i, o := range d[0].Objects {
		f := s.man.Files[i]
		if o.Name != "gs://"+s.bucket+"/"+f.Object || o.Size != int64(len(s.wire[i][0])) || o.CRC32C != crc32c.Checksum(s.wire[i][0]) {
			t.Errorf("done object %+v, want %s with crc32c %08x", o, f.Object, crc32c.Checksum(s.wire[i][0]))
		}
	}
	for _, c := range spy.Calls("Attrs ") {
		if c != "Attrs "+message.DoneMarker(s.man.TransferID) {
			t.Errorf("unexpected call %q: one-chunk files are verified from the workers' reports", c)
		}
	}
	if c := spy.Calls("Compose "); len(c) != 0 {
		t.Errorf("composes for one-chunk files: %v", c)
	}
	if c := spy.Calls("List out/"); len(c) != 1 {
		t.Errorf("listings of the destination %v, want 1", c)
	}
	r, _ := benchrow.ReadFile(rows)
	if len(r) != 1 || r[0].Files != 6 || r[0].Workers != 1 || r[0].RawMBps == nil {
		t.Fatalf("rows %+v", r)
	}
}

// Issue 12 §2: a report that disagrees with the manifest is not trusted:
// GCS is asked, and what GCS says decides.
func TestReportThatDisagreesWithTheManifestIsCheckedInGCS(t *testing.T) {
	s := newStaged(t, "m-forged", "none", 1, 3)
	spy := newSpy(s.store)
	done := &teststack.Recorder{}
	m := New(Options{Store: spy, Done: done, Sink: sinkAt(t, rowsPath(t)), Version: "test"})
	s.seal()
	if err := handle(t, m, s.event(message.EventSealed)); err != nil {
		t.Fatal(err)
	}
	// The scan asked about the one-chunk file once (not there yet).
	before := len(spy.Calls("Attrs " + s.man.Files[0].Object))
	p := s.upload(0, 0)
	p.CRC32C ^= 1 // a wrong report of a right object
	if err := handle(t, m, s.event(message.EventChunk, p)); err != nil {
		t.Fatal(err)
	}
	if c := spy.Calls("Attrs " + s.man.Files[0].Object); len(c) != before+1 {
		t.Fatalf("calls %v: want one more Attrs, of the object whose report disagreed", c)
	}
	for j := 0; j < 3; j++ {
		if err := handle(t, m, s.event(message.EventChunk, s.upload(1, j))); err != nil {
			t.Fatal(err)
		}
	}
	if d := dones(t, done); len(d) != 1 || d[0].Status != message.StatusOK {
		t.Fatalf("done events %+v", d)
	}
}

// Issue 8 §3, issue 12 §2: compose calls and the Attrs of composed objects
// run in parallel under one limit shared by both.
func TestComposeAndAttrsShareOneLimit(t *testing.T) {
	s := newStaged(t, "m-limit", "none", 40, 40, 40, 40, 1)
	spy := newSpy(s.store)
	spy.gate = 3
	done := &teststack.Recorder{}
	m := New(Options{Store: spy, Done: done, Sink: sinkAt(t, rowsPath(t)), Version: "test", ComposeConcurrency: 3})
	for _, ev := range s.uploadAll() {
		if err := handle(t, m, ev); err != nil {
			t.Fatal(err)
		}
	}
	s.seal()
	if err := handle(t, m, s.event(message.EventSealed)); err != nil {
		t.Fatal(err)
	}
	d := dones(t, done)
	if len(d) != 1 || d[0].Status != message.StatusOK {
		t.Fatalf("done events %+v", d)
	}
	if got := spy.Max(); got != 3 {
		t.Fatalf("at most %d GCS calls in flight, want exactly the limit of 3", got)
	}
	// One Attrs per composed object (fake-gcs-server ignores compose
	// preconditions), none for the one-chunk file or for chunks.
	var finals []string
	for _, c := range spy.Calls("Attrs ") {
		if !strings.HasPrefix(c, "Attrs "+message.DoneRoot) {
			finals = append(finals, c)
		}
	}
	if len(finals) != 4 || strings.Contains(strings.Join(finals, " "), "f04") {
		t.Fatalf("Attrs calls %v, want one per composed file", finals)
	}
	// 4 files × (2 intermediates + 1 final).
	if c := spy.Calls("Compose "); len(c) != 12 {
		t.Fatalf("%d composes, want 12", len(c))
	}
	for i := 0; i < 4; i++ {
		got, _ := s.store.ReadAll(context.Background(), s.bucket, s.man.Files[i].Object)
		if !bytes.Equal(got, bytes.Join(s.wire[i], nil)) {
			t.Fatalf("file %d: final object is not its chunks in order", i)
		}
	}
}

// Issue 12 (frame index): a zstd file of several chunks ends with the seek
// table of all its frames, composed as the last component (here across a
// two-level tree); the stock decoders pass over it.
func TestSeekTableIsTheLastComponentOfAZstdFile(t *testing.T) {
	s := newStaged(t, "m-seek", "zstd", 40, 1)
	done := &teststack.Recorder{}
	m := New(Options{Store: s.store, Done: done, Sink: sinkAt(t, rowsPath(t)), Version: "test"})
	s.finish(t, m)
	d := dones(t, done)
	if len(d) != 1 || d[0].Status != message.StatusOK {
		t.Fatalf("done events %+v", d)
	}
	f := s.man.Files[0]
	got, err := s.store.ReadAll(context.Background(), s.bucket, f.Object)
	if err != nil {
		t.Fatal(err)
	}
	var frames []message.Frame
	for _, c := range f.Chunks {
		frames = append(frames, c.Frames...)
	}
	want := append(bytes.Join(s.wire[0], nil), seektable.Append(nil, frames)...)
	if !bytes.Equal(got, want) || int64(len(got)) != f.WireSize || crc32c.Checksum(got) != f.WireCRC32 || d[0].Objects[0].CRC32C != f.WireCRC32 {
		t.Fatalf("final object: %d bytes with crc32c %08x, want the chunks and the seek table: %d bytes with crc32c %08x",
			len(got), crc32c.Checksum(got), f.WireSize, f.WireCRC32)
	}
	n, err := seektable.TableSize(got)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := seektable.Parse(got[int64(len(got))-n:])
	if err != nil || len(parsed) != len(frames) || parsed[0] != frames[0] || parsed[len(parsed)-1] != frames[len(frames)-1] {
		t.Fatalf("seek table: %v, %d frames, want %d", err, len(parsed), len(frames))
	}
	dec, _ := zstd.NewReader(nil)
	defer dec.Close()
	raw, err := dec.DecodeAll(got, nil)
	if err != nil || !bytes.Equal(raw, s.raw[0]) {
		t.Fatalf("Go zstd decoder: %v; %d bytes, want the %d raw bytes", err, len(raw), len(s.raw[0]))
	}
	if path, err := exec.LookPath("zstd"); err == nil {
		cmd := exec.Command(path, "-d", "-c")
		cmd.Stdin = bytes.NewReader(got)
		out, err := cmd.Output()
		if err != nil || !bytes.Equal(out, s.raw[0]) {
			t.Fatalf("stock zstd -d: %v; %d bytes, want the %d raw bytes", err, len(out), len(s.raw[0]))
		}
	} else {
		t.Log("zstd CLI not on PATH; checked with the Go decoder only")
	}
	if left := s.staging(); len(left) != 0 {
		t.Fatalf("staging left (the seek table object too?): %v", left)
	}
}

// A manifest whose frames do not add up to their chunk is never composed:
// the transfer fails naming the file.
func TestManifestWhoseFramesDoNotAddUpFailsTheTransfer(t *testing.T) {
	s := newStaged(t, "m-frames", "zstd", 3)
	s.man.Files[0].Chunks[1].Frames[0].Wire++
	done := &teststack.Recorder{}
	m := New(Options{Store: s.store, Done: done, Sink: sinkAt(t, rowsPath(t)), Version: "test"})
	s.finish(t, m)
	d := dones(t, done)
	if len(d) != 1 || d[0].Status != message.StatusFailed || !strings.Contains(d[0].Error, `file "dir/f00.csv": chunk 1: its frames hold`) {
		t.Fatalf("done events %+v", d)
	}
	if _, err := s.store.Attrs(context.Background(), s.bucket, s.man.Files[0].Object); !errors.Is(err, gcs.ErrNotFound) {
		t.Fatalf("composed from an inconsistent manifest: %v", err)
	}
	if left := s.staging(); len(left) != 0 {
		t.Fatalf("staging left: %v", left)
	}
}

// Skipped files (-n, --skip-unchanged) appear in the done event and the row.
func TestSkippedFilesAppearInDoneEventAndRow(t *testing.T) {
	s := newStaged(t, "m-skipped", "none", 2)
	s.man.Skipped = []message.Skipped{{Path: "dir/old.csv", Object: "out/dir/old.csv", Reason: "unchanged"},
		{Path: "dir/there.csv", Object: "out/dir/there.csv", Reason: "exists"}}
	done := &teststack.Recorder{}
	rows := rowsPath(t)
	m := New(Options{Store: s.store, Done: done, Sink: sinkAt(t, rows), Version: "test"})
	s.finish(t, m)
	d := dones(t, done)
	want := []string{"gs://" + s.bucket + "/out/dir/old.csv", "gs://" + s.bucket + "/out/dir/there.csv"}
	if len(d) != 1 || d[0].FilesSkipped != 2 || strings.Join(d[0].Skipped, " ") != strings.Join(want, " ") {
		t.Fatalf("done events %+v, want 2 skipped: %v", d, want)
	}
	if r, _ := benchrow.ReadFile(rows); len(r) != 1 || r[0].FilesSkipped != 2 || r[0].Files != 1 {
		t.Fatalf("rows %+v", r)
	}
}

// FERRY_KMS_KEY: every object the merger writes — seek tables, intermediate
// and final composites, done and progress markers — names the key.
// (fake-gcs-server ignores keys, so the calls are what can be checked here.)
func TestEveryWriteCarriesTheKMSKey(t *testing.T) {
	const key = "projects/p/locations/europe-west4/keyRings/ferry/cryptoKeys/objects"
	s := newStaged(t, "m-kms", "zstd", 40, 1)
	spy := newSpy(s.store)
	done := &teststack.Recorder{}
	m := New(Options{Store: spy, Done: done, Sink: sinkAt(t, rowsPath(t)), Version: "test", Buckets: config.Buckets{KMSKey: key}})
	for _, ev := range s.uploadAll() {
		if err := handle(t, m, ev); err != nil {
			t.Fatal(err)
		}
	}
	s.seal()
	if err := handle(t, m, s.event(message.EventSealed)); err != nil {
		t.Fatal(err)
	}
	if d := dones(t, done); len(d) != 1 || d[0].Status != message.StatusOK {
		t.Fatalf("done events %+v", d)
	}
	writes := append(spy.Calls("Upload "), spy.Calls("Compose ")...)
	// progress marker, composing marker, seek table, listing, done marker;
	// 2 intermediates, 1 final.
	if len(writes) != 8 || len(spy.keys) != len(writes) {
		t.Fatalf("writes %v", writes)
	}
	for i, k := range spy.keys {
		if k != key {
			t.Errorf("write %d of %v has KMS key %q, want %q", i, writes, k, key)
		}
	}
}

// Issue 13 §2: a composed final object carries the metadata a one-chunk
// file's worker writes, the source's mtime included, so --skip-unchanged
// can compare it with the source without reading anything.
func TestComposedObjectCarriesTheSourceMtime(t *testing.T) {
	s := newStaged(t, "m-mtime", "zstd", 3)
	mtime := time.Date(2026, 11, 29, 22, 23, 27, 123456789, time.UTC)
	s.man.Files[0].Mtime = mtime
	m := New(Options{Store: s.store, Done: &teststack.Recorder{}, Sink: sinkAt(t, rowsPath(t)), Version: "test"})
	s.finish(t, m)
	f := s.man.Files[0]
	a, err := s.store.Attrs(context.Background(), s.bucket, f.Object)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{message.MetaMtime: "2026-11-29T22:23:27.123456789Z", message.MetaRawSize: fmt.Sprint(f.Size),
		message.MetaRawCRC32C: fmt.Sprintf("%08x", f.RawCRC32C), message.MetaCodec: "zstd", message.MetaTransfer: s.man.TransferID}
	for k, v := range want {
		if a.Metadata[k] != v {
			t.Errorf("metadata %s = %q, want %q (all: %v)", k, a.Metadata[k], v, a.Metadata)
		}
	}
}

// Issue 16 §2: a transfer of more files than a manifest page holds, with
// composed files on its first and last page and more skipped files than a
// done event names, ends ok from its pages: every object confirmed and
// listed, the composed ones as predicted, the skipped ones counted.
func TestPagedManifestEndsOK(t *testing.T) {
	counts := make([]int, message.PageFiles+50)
	for i := range counts {
		counts[i] = 1
	}
	counts[0], counts[len(counts)-1] = 3, 4
	s := newStaged(t, "m-paged", "zstd", counts...)
	for i := range 150 {
		s.man.Skipped = append(s.man.Skipped, message.Skipped{Path: fmt.Sprintf("old/%03d", i), Object: fmt.Sprintf("out/old/%03d.zst", i), Reason: "unchanged"})
	}
	done := &teststack.Recorder{}
	rows := rowsPath(t)
	m := New(Options{Store: s.store, Done: done, Sink: sinkAt(t, rows), Version: "test"})
	s.finish(t, m)
	if _, err := s.store.Attrs(context.Background(), s.bucket, message.ManifestPage(s.man.TransferID, s.man.Run, 1)); err == nil {
		t.Fatal("the manifest's pages outlived the transfer")
	}
	d := dones(t, done)
	if len(d) != 1 || d[0].Status != message.StatusOK || d[0].Files != len(counts) || d[0].FilesSkipped != 150 || len(d[0].Skipped) != message.MaxDoneInline {
		t.Fatalf("done events %+v", d)
	}
	body, err := s.store.ReadAll(context.Background(), s.bucket, message.ListingObject(s.man.TransferID))
	if err != nil {
		t.Fatal(err)
	}
	objects, skipped := 0, 0
	for line := range strings.Lines(string(body)) {
		var e message.ListingEntry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		if e.Skipped != "" {
			skipped++
			continue
		}
		objects++
		if e.Generation == 0 {
			t.Fatalf("listing entry without generation: %+v", e)
		}
	}
	if objects != len(counts) || skipped != 150 {
		t.Fatalf("listing names %d objects and %d skipped, want %d and 150", objects, skipped, len(counts))
	}
	for _, i := range []int{0, len(counts) - 1} {
		f := s.man.Files[i]
		a, err := s.store.Attrs(context.Background(), s.bucket, f.Object)
		if err != nil || a.Size != f.WireSize || a.CRC32C != f.WireCRC32 {
			t.Fatalf("composed %s: %+v %v, want %d bytes crc32c %08x", f.Object, a, err, f.WireSize, f.WireCRC32)
		}
	}
	r, err := benchrow.ReadFile(rows)
	if err != nil || len(r) != 1 || r[0].Files != len(counts) || r[0].Chunks != len(counts)+5 || r[0].FilesSkipped != 150 || r[0].Workers != 1 {
		t.Fatalf("rows %+v %v", r, err)
	}
	chunks, err := benchrow.ReadChunkFile(benchrow.ChunksPath(rows))
	if err != nil || len(chunks) != len(counts)+5 {
		t.Fatalf("%d chunk rows (%v), want %d", len(chunks), err, len(counts)+5)
	}
}

// A manifest whose files are not in object order cannot be joined with a
// listing: it is refused, naming the file, and nothing is composed.
func TestManifestOutOfObjectOrderIsRefused(t *testing.T) {
	s := newStaged(t, "m-order", "none", 1, 1)
	done := &teststack.Recorder{}
	m := New(Options{Store: s.store, Done: done, Sink: sinkAt(t, rowsPath(t)), Version: "test"})
	evs := s.uploadAll()
	s.man.Files[0], s.man.Files[1] = s.man.Files[1], s.man.Files[0]
	header := s.man // putManifest would sort them back
	if _, err := s.store.PutSmall(context.Background(), s.bucket, message.ManifestObject(s.man.TransferID), message.Encode(header), false, ""); err != nil {
		t.Fatal(err)
	}
	for _, ev := range append(evs, s.event(message.EventSealed)) {
		_ = handle(t, m, ev)
	}
	d := dones(t, done)
	if len(d) != 1 || d[0].Status != message.StatusFailed || !strings.Contains(d[0].Error, `object "out/dir/f00.csv" does not come after "out/dir/f01.csv"`) {
		t.Fatalf("done events %+v", d)
	}
}

// TestAManifestMayNotNameAFinalObjectUnderFerrysOwnPrefixes walks
// message's one list of reserved roots: a manifest whose file's final
// object lies under any of them (another transfer's key object, say) is
// never composed.
func TestAManifestMayNotNameAFinalObjectUnderFerrysOwnPrefixes(t *testing.T) {
	for _, root := range message.ReservedRoots() {
		f := &message.File{Path: "victim", Object: root + "victim", Size: 1, WireSize: 1}
		f.Chunks = []message.ChunkInfo{{Object: f.Object, WireSize: 1, RawSize: 1}}
		err := manifest.CheckFile(f, 0, "t1", false)
		if err == nil || !strings.Contains(err.Error(), root) {
			t.Errorf("checkFile of a final object %s = %v, want an error naming %s", f.Object, err, root)
		}
	}
}

// fullSink refuses every row, as a results file on a full disk does.
type fullSink struct{ tries int }

func (s *fullSink) Write(context.Context, benchrow.Row, iter.Seq[benchrow.ChunkRow]) error {
	s.tries++
	return errors.New("write .run/results.ndjson: no space left on device")
}

// A row is a record of the transfer, not part of it: a sink that refuses
// it every time ends the transfer ok all the same, its objects whole and
// in place, the done event saying why there is no row.
func TestATransferWhoseRowCannotBeWrittenEndsOKWithItsObjects(t *testing.T) {
	s := newStaged(t, "m-norow", "none", 1, 3)
	done := &teststack.Recorder{}
	sink := &fullSink{}
	m := New(Options{Store: s.store, Done: done, Sink: sink, Version: "test"})
	s.finish(t, m)
	d := dones(t, done)
	if len(d) != 1 || d[0].Status != message.StatusOK || !strings.Contains(d[0].RowError, "no space left on device") || sink.tries != rowAttempts {
		t.Fatalf("done events %+v after %d tries of the row, want ok with a row_error after %d", d, sink.tries, rowAttempts)
	}
	for _, f := range s.man.Files {
		b, err := s.store.ReadAll(context.Background(), s.bucket, f.Object)
		if err != nil || crc32c.Checksum(b) != f.WireCRC32 {
			t.Errorf("file %s: object %s: %d bytes, %v; want it whole", f.Path, f.Object, len(b), err)
		}
	}
	if left := s.staging(); len(left) != 0 {
		t.Errorf("staging left: %v", left)
	}
}

// answeredLost carries out the final compose of name, deleting its sources
// as GCS does, then answers it as lost (GCS's 503 after the effect); the
// Store's retry of such a compose finds its sources gone (404), which is
// what the merger then sees.
type answeredLost struct {
	objectStore
	name string
	hit  int
}

func (s *answeredLost) Compose(ctx context.Context, bucket, dst string, srcs []string, opt gcs.ComposeOptions) (gcs.Attrs, error) {
	if dst != s.name || !opt.DeleteSources {
		return s.objectStore.Compose(ctx, bucket, dst, srcs, opt)
	}
	s.hit++
	if _, err := s.objectStore.Compose(ctx, bucket, dst, srcs, opt); err != nil {
		return gcs.Attrs{}, err
	}
	for _, src := range srcs {
		_ = s.Delete(ctx, bucket, src)
	}
	return gcs.Attrs{}, fmt.Errorf("compose gs://%s/%s: retried after a 503: %w", bucket, dst, gcs.ErrNotFound)
}

// A compose that GCS carried out and answered 503, whose retry got 404 (it
// had deleted its sources), is settled by reading the destination: its size,
// CRC32C and transfer show it composed, and the transfer ends ok at once
// instead of waiting for a sweep that would fail it and delete the object.
func TestAComposeCarriedOutButAnswered503EndsOK(t *testing.T) {
	s := newStaged(t, "m-lost", "none", 3)
	f := s.man.Files[0]
	store := &answeredLost{objectStore: s.store, name: f.Object}
	done := &teststack.Recorder{}
	m := New(Options{Store: store, Done: done, Sink: sinkAt(t, rowsPath(t)), Version: "test"})
	s.finish(t, m)
	d := dones(t, done)
	if store.hit != 1 || len(d) != 1 || d[0].Status != message.StatusOK || d[0].Files != 1 {
		t.Fatalf("composes of the final object %d, done events %+v; want one compose and the transfer ok", store.hit, d)
	}
	b, err := s.store.ReadAll(context.Background(), s.bucket, f.Object)
	if err != nil || crc32c.Checksum(b) != f.WireCRC32 {
		t.Fatalf("final object: %d bytes, %v", len(b), err)
	}
}

// failingCompose answers every compose with an error GCS keeps answering.
type failingCompose struct{ objectStore }

func (failingCompose) Compose(_ context.Context, bucket, dst string, _ []string, _ gcs.ComposeOptions) (gcs.Attrs, error) {
	return gcs.Attrs{}, fmt.Errorf("compose gs://%s/%s: googleapi: Error 500: Internal Error, backendError", bucket, dst)
}

// An event whose handling fails on every delivery ends its transfer
// failed, with its error, on the delivery that is the dead-letter threshold:
// earlier ones are left to redelivery, and nothing waits for a message in
// the dead-letter topic.
func TestAnEventOnItsLastDeliveryEndsItsTransfer(t *testing.T) {
	s := newStaged(t, "m-last", "none", 3)
	done := &teststack.Recorder{}
	m := New(Options{Store: failingCompose{s.store}, Done: done, Sink: sinkAt(t, rowsPath(t)), Version: "test", MaxAttempts: 5})
	for _, ev := range s.uploadAll() {
		testutil.OK(t, handle(t, m, ev))
	}
	s.seal()
	sealed := message.Encode(s.event(message.EventSealed))
	for attempt := 1; attempt <= 5; attempt++ {
		err := m.Handle(context.Background(), queue.Message{ID: "s", Data: sealed, DeliveryAttempt: attempt})
		d := dones(t, done)
		if attempt < 5 {
			if err == nil || len(d) != 0 {
				t.Fatalf("delivery %d: %v, done events %+v; want an error left to redelivery", attempt, err, d)
			}
			continue
		}
		if len(d) != 1 || d[0].Status != message.StatusFailed || !strings.Contains(d[0].Error, "gave up after 5 deliveries") ||
			!strings.Contains(d[0].Error, "Error 500") {
			t.Fatalf("delivery 5: %v, done events %+v; want the transfer failed with the compose's error", err, d)
		}
	}
	if left := s.staging(); len(left) != 0 {
		t.Errorf("staging left: %v", left)
	}
}
