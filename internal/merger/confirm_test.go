package merger

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
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

// forged is a chunk event with the manifest's size and CRC32C of file i,
// as anyone who can read .ferry/<id>/manifest.json can publish it.
func (s *staged) forged(i int) message.Event {
	f := s.man.Files[i]
	return s.event(message.EventChunk, message.EventPart{File: i, Object: f.Object, Generation: 1, Size: f.WireSize,
		CRC32C: f.WireCRC32, RawBytes: f.Size, Created: time.Now(), Attempt: 1})
}

// Issue 17 §1: a forged event for a one-chunk file whose object does not
// exist does not end the transfer ok; the real upload then does, and the
// done event carries the generation GCS reported, not the forger's.
func TestForgedEventForAMissingObjectDoesNotEndOK(t *testing.T) {
	s := newStaged(t, "m-forge-missing", "none", 1, 1)
	done := &teststack.Recorder{}
	m := New(Options{Store: s.store, Done: done, Sink: sinkAt(t, rowsPath(t)), Version: "test"})
	real := s.upload(1, 0)
	s.seal()
	for _, ev := range []message.Event{s.event(message.EventChunk, real), s.forged(0), s.event(message.EventSealed)} {
		if err := handle(t, m, ev); err != nil {
			t.Fatal(err)
		}
	}
	if d := dones(t, done); len(d) != 0 {
		t.Fatalf("done events %+v over an object that does not exist", d)
	}
	p := s.upload(0, 0)
	if err := handle(t, m, s.event(message.EventChunk, p)); err != nil {
		t.Fatal(err)
	}
	d := dones(t, done)
	if len(d) != 1 || d[0].Status != message.StatusOK || d[0].Files != 2 {
		t.Fatalf("done events %+v", d)
	}
	if got := d[0].Objects[0]; got.Generation != p.Generation || got.Generation == 1 {
		t.Errorf("done object %+v: generation %d, GCS has %d", got, got.Generation, p.Generation)
	}
}

// Issue 17 §1: an object under the final name that another transfer wrote,
// or an older version (--overwrite), never counts, even with a forged event
// that claims the manifest's size and CRC32C.
func TestForgedEventOverAnotherTransfersObjectDoesNotEndOK(t *testing.T) {
	for _, tc := range []struct {
		name  string
		bytes func(s *staged) []byte
	}{
		{"same bytes, other transfer", func(s *staged) []byte { return s.wire[0][0] }},
		{"older version", func(*staged) []byte { return []byte("the 59 bytes of an older version of this file") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStaged(t, "m-forge-other", "none", 1)
			s.man.Overwrite = true
			b := tc.bytes(s)
			if _, err := s.store.Upload(context.Background(), s.bucket, s.man.Files[0].Object, bytes.NewReader(b), gcs.UploadOptions{
				Size: int64(len(b)), CRC32C: crc32c.Checksum(b), Metadata: message.FinalMetadata("tid-other", int64(len(b)), 0, "none")}); err != nil {
				t.Fatal(err)
			}
			done := &teststack.Recorder{}
			m := New(Options{Store: s.store, Done: done, Sink: sinkAt(t, rowsPath(t)), Version: "test"})
			s.seal()
			for _, ev := range []message.Event{s.event(message.EventSealed), s.forged(0)} {
				if err := handle(t, m, ev); err != nil {
					t.Fatal(err)
				}
			}
			if d := dones(t, done); len(d) != 0 {
				t.Fatalf("done events %+v over an object of another transfer", d)
			}
		})
	}
}

// Issue 16 §1: a done event does not grow with the transfer. The worst case
// (every inline name as long as GCS allows and full of characters JSON
// escapes, the longest error) stays under message.MaxDoneBytes.
func TestDoneBound(t *testing.T) {
	long := "gs://" + strings.Repeat("b", 222) + "/" + strings.Repeat("\u2028<", 1024/4)
	d := message.Done{V: message.Version, TransferID: strings.Repeat("t", 64), Status: message.StatusFailed,
		Error: message.Truncate(strings.Repeat("\x01", 10<<20), message.MaxErrorBytes), Destination: long,
		Listing: long, Files: 1 << 30, Bytes: 1 << 62, WireBytes: 1 << 62, FilesSkipped: 1 << 30}
	for range message.MaxDoneInline {
		d.Objects = append(d.Objects, message.DoneObject{Name: long, Size: 1 << 62, CRC32C: 1<<32 - 1, Generation: 1 << 62, RawSize: 1 << 62, RawCRC32C: 1<<32 - 1})
		d.Skipped = append(d.Skipped, long)
	}
	for range message.MaxAgents {
		d.Agents = append(d.Agents, message.AgentBytes{Agent: strings.Repeat("a", 63), Bytes: 1 << 62})
	}
	n := len(message.Encode(d))
	if n > message.MaxDoneBytes {
		t.Fatalf("worst-case done event is %d bytes, over MaxDoneBytes=%d", n, message.MaxDoneBytes)
	}
	t.Logf("worst-case done event: %d bytes (bound %d)", n, message.MaxDoneBytes)
}

// Issue 16 §1: a transfer of 200,000 files ends with a done event under its
// bound that counts them all, and a listing object that names every one.
// The store is memStore: fake-gcs-server's memory backend scans its bucket
// on every write, which makes 200,000 objects quadratic.
func TestTwoHundredThousandFilesEndWithABoundedDoneEvent(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	const n = 200_000
	st := newMemStore()
	man := message.Manifest{V: message.Version, TransferID: "tid-200k", Sealed: true, Bucket: "bkt", Prefix: "tree", Method: "test",
		Codec: "none", ChunkSize: 1 << 20, StartedAt: time.Now().UTC()}
	for i := range n {
		body := []byte(strings.Repeat("x", i%17))
		obj := "tree/" + strings.Repeat("d/", i%5) + time.Duration(i).String() + ".txt"
		f := message.File{Path: obj, Object: obj, Size: int64(len(body)), RawCRC32C: crc32c.Checksum(body),
			WireSize: int64(len(body)), WireCRC32: crc32c.Checksum(body)}
		f.Chunks = []message.ChunkInfo{{Object: obj, RawSize: f.Size, RawCRC32C: f.RawCRC32C, WireSize: f.WireSize, WireCRC32C: f.WireCRC32}}
		man.Files = append(man.Files, f)
		st.put(obj, body, message.FinalMetadata(man.TransferID, f.Size, f.RawCRC32C, "none"))
	}
	putManifest(t, &man, st.memPut)
	done := &teststack.Recorder{}
	m := New(Options{Store: st, Done: done, Sink: sinkAt(t, rowsPath(t)), Version: "test"})
	ev := message.Event{V: message.Version, Type: message.EventSealed, TransferID: man.TransferID, Bucket: "bkt", At: time.Now()}
	if err := handle(t, m, ev); err != nil {
		t.Fatal(err)
	}
	msgs := done.Messages()
	if len(msgs) != 1 || len(msgs[0].Data) > message.MaxDoneBytes {
		t.Fatalf("%d done events; the first is %d bytes", len(msgs), len(msgs[0].Data))
	}
	d := dones(t, done)[0]
	if d.Status != message.StatusOK || d.Files != n || len(d.Objects) != message.MaxDoneInline || d.Listing != "gs://bkt/"+message.ListingObject(man.TransferID) {
		t.Fatalf("done event: status %s, %d files, %d inline, listing %q", d.Status, d.Files, len(d.Objects), d.Listing)
	}
	body, err := st.ReadAll(context.Background(), "bkt", message.ListingObject(man.TransferID))
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		var e message.ListingEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		named[e.Name] = e.Generation != 0
	}
	for _, f := range man.Files {
		if !named["gs://bkt/"+f.Object] {
			t.Fatalf("listing does not name %s with a generation (%d entries)", f.Object, len(named))
		}
	}
	t.Logf("done event %d bytes, listing %d bytes for %d files", len(msgs[0].Data), len(body), n)
}

// Issue 17 §3: a failed transfer leaves none of the final objects it wrote
// (sealed or not, and one a worker uploaded after the failure), and none of
// another transfer's; a re-run then meets no object of the failed attempt.
func TestFailedTransferRemovesItsFinalObjects(t *testing.T) {
	for _, sealed := range []bool{true, false} {
		t.Run(fmt.Sprintf("sealed=%v", sealed), func(t *testing.T) {
			s := newStaged(t, "m-fail-clean", "none", 1, 1, 1, 1)
			done := &teststack.Recorder{}
			m := New(Options{Store: s.store, Done: done, Sink: sinkAt(t, rowsPath(t)), Version: "test"})
			var parts []message.EventPart
			for i := range 2 {
				parts = append(parts, s.upload(i, 0))
			}
			other := []byte("another transfer's object under the same prefix")
			if _, err := s.store.Upload(context.Background(), s.bucket, "out/dir/other.csv", bytes.NewReader(other), gcs.UploadOptions{
				Size: int64(len(other)), CRC32C: crc32c.Checksum(other), Metadata: message.FinalMetadata("tid-other", 1, 0, "none")}); err != nil {
				t.Fatal(err)
			}
			if sealed {
				s.seal()
			}
			failed := s.event(message.EventFailed)
			failed.Error = "source dir/f03.csv: file grew while it was read"
			if !sealed {
				failed.Prefix = s.man.Prefix
			}
			for _, ev := range []message.Event{s.event(message.EventChunk, parts...), failed} {
				if err := handle(t, m, ev); err != nil && !errors.Is(err, queue.ErrPermanent) {
					t.Fatal(err)
				}
			}
			late := s.upload(2, 0) // a worker that had not heard yet
			if err := handle(t, m, s.event(message.EventChunk, late)); err != nil {
				t.Fatal(err)
			}
			if d := dones(t, done); len(d) != 1 || d[0].Status != message.StatusFailed || d[0].Files != 0 {
				t.Fatalf("done events %+v", d)
			}
			var left []string
			_ = s.store.List(context.Background(), s.bucket, "out/", func(a gcs.Attrs) error { left = append(left, a.Name); return nil })
			if len(left) != 1 || left[0] != "out/dir/other.csv" {
				t.Fatalf("left under the prefix: %v, want only the other transfer's object", left)
			}
		})
	}
}

// Issue 17 §2: authority comes from topics. A chunk report on the control
// topic (which submitters may publish to) is refused, as is a sealed or
// cancel event on the workers' events topic; neither touches the transfer.
func TestEachTopicCarriesOnlyItsPublishersEvents(t *testing.T) {
	s := newStaged(t, "m-topics", "none", 1)
	done := &teststack.Recorder{}
	m := New(Options{Store: s.store, Done: done, Sink: sinkAt(t, rowsPath(t)), Version: "test"})
	p := s.upload(0, 0)
	s.seal()
	for _, tc := range []struct {
		h  func(context.Context, queue.Message) error
		ev message.Event
	}{
		{m.HandleControl, s.event(message.EventChunk, p)},
		{m.HandleEvents, s.event(message.EventSealed)},
		{m.HandleEvents, s.event(message.EventCancel)},
	} {
		err := tc.h(context.Background(), queue.Message{ID: "x", Data: message.Encode(tc.ev)})
		if !errors.Is(err, queue.ErrPermanent) || !strings.Contains(err.Error(), "does not carry it") {
			t.Fatalf("%s event on the wrong topic: %v, want a permanent refusal", tc.ev.Type, err)
		}
	}
	if d := dones(t, done); len(d) != 0 {
		t.Fatalf("done events %+v from events on the wrong topics", d)
	}
	sealed := s.event(message.EventSealed)
	sealed.Key = s.endKey()
	for _, step := range []struct {
		h  func(context.Context, queue.Message) error
		ev message.Event
	}{{m.HandleEvents, s.event(message.EventChunk, p)}, {m.HandleControl, sealed}} {
		if err := step.h(context.Background(), queue.Message{ID: "y", Data: message.Encode(step.ev)}); err != nil {
			t.Fatal(err)
		}
	}
	if d := dones(t, done); len(d) != 1 || d[0].Status != message.StatusOK {
		t.Fatalf("done events %+v, want the transfer ok from the right topics", d)
	}
}

// Issue 17 §4: what an earlier run of a transfer says is history. Before
// the seal (the RunObject names the current run) and after it (the
// manifest does), a worker's failure in the earlier run and its report of
// other bytes neither fail nor delay the current run, which ends ok.
func TestEventsOfAnEarlierRunAreIgnored(t *testing.T) {
	const runA, runB = "aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb"
	s := newStaged(t, "m-runs", "none", 1, 1)
	s.man.Run = runB
	if _, err := s.store.PutSmall(context.Background(), s.bucket, message.RunObject(s.man.TransferID), []byte(runB), false, ""); err != nil {
		t.Fatal(err)
	}
	done := &teststack.Recorder{}
	m := New(Options{Store: s.store, Done: done, Sink: sinkAt(t, rowsPath(t)), Version: "test"})
	old := func(typ string, parts ...message.EventPart) message.Event {
		ev := s.event(typ, parts...)
		ev.Run = runA
		if typ == message.EventFailed {
			ev.Error = "file dir/f00.csv: destination already exists"
		}
		return ev
	}
	stale := message.EventPart{File: 0, Index: 0, Object: s.man.Files[0].Object, Generation: 7, Size: 3, CRC32C: 1}
	if err := handle(t, m, old(message.EventFailed)); err != nil {
		t.Fatal(err)
	}
	if err := handle(t, m, old(message.EventChunk, stale)); err != nil {
		t.Fatal(err)
	}
	evs := s.uploadAll()
	s.seal()
	for _, ev := range append(evs, s.event(message.EventSealed)) {
		ev.Run = runB
		if err := handle(t, m, ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := handle(t, m, old(message.EventFailed)); err != nil {
		t.Fatal(err)
	}
	d := dones(t, done)
	if len(d) != 1 || d[0].Status != message.StatusOK || d[0].Files != 2 {
		t.Fatalf("done events %+v, want one ok with 2 files", d)
	}
}

// Issue 32 §4: a one-chunk file whose object was right when its event came
// and was then replaced, before the transfer ended, by bytes of the same
// size that claim this transfer, does not end ok: the end's listing
// compares each final object's CRC32C with the manifest's, not only its
// size and metadata.
func TestAnObjectReplacedAfterItsEventDoesNotEndOK(t *testing.T) {
	s := newStaged(t, "m-replaced", "none", 1, 1)
	done := &teststack.Recorder{}
	m := New(Options{Store: s.store, Done: done, Sink: sinkAt(t, rowsPath(t)), Version: "test"})
	for _, ev := range s.uploadAll() {
		if err := handle(t, m, ev); err != nil {
			t.Fatal(err)
		}
	}
	f := s.man.Files[0]
	b := bytes.Clone(s.wire[0][0])
	b[len(b)/2] ^= 0x01
	if _, err := s.store.Upload(context.Background(), s.bucket, f.Object, bytes.NewReader(b), gcs.UploadOptions{
		Size: int64(len(b)), CRC32C: crc32c.Checksum(b), Metadata: message.FinalMetadata(s.man.TransferID, f.Size, f.RawCRC32C, "none")}); err != nil {
		t.Fatal(err)
	}
	s.seal()
	if err := handle(t, m, s.event(message.EventSealed)); err != nil {
		t.Fatal(err)
	}
	for _, d := range dones(t, done) {
		if d.Status == message.StatusOK {
			t.Fatalf("done event %+v over %s, whose %d bytes have crc32c %08x where the manifest says %08x",
				d, f.Object, len(b), crc32c.Checksum(b), f.WireCRC32)
		}
	}
}

// Issue 32 §1: Pub/Sub does not say who published an end event on the
// control topic, so the merger acts on one only when it carries an end key
// the transfer's key object lists. Forgeries (no key, a wrong key, the key
// of another transfer, an end key of a transfer without a key object) are
// each refused, logged and dead-lettered, and change nothing; the
// submitter's key, and an operator's added to the key object, still end it.
func TestForgedEndEventsChangeNothing(t *testing.T) {
	s := newStaged(t, "m-forged-end", "none", 1, 1)
	other := newStaged(t, "m-forged-other", "none", 1)
	done := &teststack.Recorder{}
	logs := &bytes.Buffer{}
	m := New(Options{Store: s.store, Done: done, Sink: sinkAt(t, rowsPath(t)), Version: "test", Log: slog.New(slog.NewJSONHandler(logs, nil))})
	key, otherKey := s.endKey(), other.endKey()
	// The first file is uploaded, the second not: nothing may end it yet.
	p := s.upload(0, 0)
	if err := handle(t, m, s.event(message.EventChunk, p)); err != nil {
		t.Fatal(err)
	}
	forge := func(typ, key string) message.Event {
		ev := s.event(typ)
		ev.Key, ev.Error = key, "forged: the end of someone else's transfer"
		if typ == message.EventFailed {
			ev.Prefix = s.man.Prefix // would delete its final objects
		}
		return ev
	}
	for _, typ := range []string{message.EventFailed, message.EventCancel, message.EventSealed} {
		for name, k := range map[string]string{"no key": "", "a wrong key": message.NewEndKey(), "another transfer's key": otherKey,
			"not hex": strings.Repeat("Z", 64)} {
			err := m.HandleControl(context.Background(), queue.Message{ID: "f", Data: message.Encode(forge(typ, k))})
			if !errors.Is(err, queue.ErrPermanent) || !errors.Is(err, errUnproven) {
				t.Errorf("%s event with %s: %v, want a permanent refusal as unproven", typ, name, err)
			}
		}
	}
	if d := dones(t, done); len(d) != 0 {
		t.Fatalf("done events %+v after forged end events", d)
	}
	if _, err := s.store.Attrs(context.Background(), s.bucket, s.man.Files[0].Object); err != nil {
		t.Fatalf("the final object of the first file after forged end events: %v", err)
	}
	if !strings.Contains(logs.String(), `"msg":"end event not proven; dropped, nothing changed"`) ||
		!strings.Contains(logs.String(), `"claimed_error":"forged: the end of someone else's transfer"`) {
		t.Errorf("the merger's log does not say what the forgeries claimed:\n%s", logs.String())
	}
	// A transfer without a key object (a producer without end keys, or
	// its key object never written) is ended by no control event.
	nokey := newStaged(t, "m-forged-nokey", "none", 1)
	ev := nokey.event(message.EventCancel)
	ev.Key = key
	if err := m.HandleControl(context.Background(), queue.Message{ID: "n", Data: message.Encode(ev)}); !errors.Is(err, errUnproven) ||
		!strings.Contains(err.Error(), "has no key object") {
		t.Errorf("cancel of a transfer without a key object: %v, want unproven, naming the missing key object", err)
	}

	// The submitter's own cancel ends it.
	ev = s.event(message.EventCancel)
	ev.Key = key
	if err := m.HandleControl(context.Background(), queue.Message{ID: "c", Data: message.Encode(ev)}); err != nil {
		t.Fatal(err)
	}
	if d := dones(t, done); len(d) != 1 || d[0].Status != message.StatusCancelled {
		t.Fatalf("done events %+v, want the transfer cancelled by its submitter's key", d)
	}
}

// Issue 42 §3: a forged failed event without a key, naming a bucket
// FERRY_BUCKETS does not allow, was refused before its key was checked,
// and refusing published a failed done event (and a row) for the named
// transfer, whose submit --wait then failed. On the control topic such an
// event is unproven: dropped, nothing published. (A worker's event naming
// such a bucket still ends its transfer failed: the workers topic is
// theirs alone.)
func TestAnUnprovenEventForABucketNotAllowedRefusesNothing(t *testing.T) {
	s := newStaged(t, "m-forged-bucket", "none", 1)
	done := &teststack.Recorder{}
	rows := rowsPath(t)
	m := New(Options{Store: s.store, Done: done, Sink: sinkAt(t, rows), Version: "test", Buckets: config.Buckets{Allowed: []string{"ferry-only"}}})
	for _, typ := range []string{message.EventFailed, message.EventCancel, message.EventSealed} {
		ev := s.event(typ)
		ev.Error = "forged"
		err := m.HandleControl(context.Background(), queue.Message{ID: "f", Data: message.Encode(ev)})
		if !errors.Is(err, queue.ErrPermanent) || !errors.Is(err, errUnproven) || !errors.Is(err, config.ErrBucketNotAllowed) {
			t.Errorf("%s event for a bucket not allowed: %v, want it dropped as unproven", typ, err)
		}
	}
	if d := dones(t, done); len(d) != 0 {
		t.Fatalf("done events %+v published for a forged event", d)
	}
	if r, _ := benchrow.ReadFile(rows); len(r) != 0 {
		t.Fatalf("rows %+v written for a forged event", r)
	}
}

// Issue 42 §3: a message's error text is bounded in the logs as in the
// row. A proven failed event whose error is 5 MB ends its transfer with
// the text cut to message.MaxErrorBytes, and no log line carries more.
func TestAFailedEventsErrorIsBoundedInTheLogs(t *testing.T) {
	s := newStaged(t, "m-long-error", "none", 1)
	done := &teststack.Recorder{}
	logs := &bytes.Buffer{}
	m := New(Options{Store: s.store, Done: done, Sink: sinkAt(t, rowsPath(t)), Version: "test", Log: slog.New(slog.NewJSONHandler(logs, nil))})
	ev := s.event(message.EventFailed)
	ev.Key, ev.Error = s.endKey(), "read f0: "+strings.Repeat("x", 5<<20)
	if err := m.HandleControl(context.Background(), queue.Message{ID: "f", Data: message.Encode(ev)}); err != nil {
		t.Fatal(err)
	}
	d := dones(t, done)
	if len(d) != 1 || d[0].Status != message.StatusFailed || !strings.HasPrefix(d[0].Error, "read f0: xxx") || len(d[0].Error) > message.MaxErrorBytes {
		t.Fatalf("done events %d, first status %q with %d bytes of error", len(d), d[0].Status, len(d[0].Error))
	}
	for i, line := range strings.Split(logs.String(), "\n") {
		if len(line) > 2*message.MaxErrorBytes {
			t.Errorf("log line %d is %d bytes: %.200s…", i, len(line), line)
		}
	}
}

// Issue 42 §1: a failed transfer's clean-up removes the final objects it
// wrote, but keeps one its staged overwrite composed over an object it
// found (ferry-replaced): what that replaced is gone, so removing it would
// leave nothing.
func TestAFailedOverwriteKeepsWhatReplacedAnObject(t *testing.T) {
	s := newStaged(t, "m-kept", "none", 1, 1)
	ctx := context.Background()
	put := func(name string, md map[string]string) {
		b := []byte("the bytes of " + name)
		if _, err := s.store.Upload(ctx, s.bucket, name, bytes.NewReader(b), gcs.UploadOptions{Size: int64(len(b)), CRC32C: crc32c.Checksum(b), Metadata: md}); err != nil {
			t.Fatal(err)
		}
	}
	tid := s.man.TransferID
	put("out/dir/f00.csv", map[string]string{message.MetaTransfer: tid, message.MetaReplaced: "1700000000000001"})
	put("out/dir/f01.csv", map[string]string{message.MetaTransfer: tid})
	done := &teststack.Recorder{}
	m := New(Options{Store: s.store, Done: done, Sink: sinkAt(t, rowsPath(t)), Version: "test"})
	ev := s.event(message.EventFailed)
	ev.Key, ev.Error, ev.Prefix = s.endKey(), "read f01: input/output error", s.man.Prefix
	if err := m.HandleControl(ctx, queue.Message{ID: "f", Data: message.Encode(ev)}); err != nil {
		t.Fatal(err)
	}
	if d := dones(t, done); len(d) != 1 || d[0].Status != message.StatusFailed {
		t.Fatalf("done events %+v", d)
	}
	if _, err := s.store.Attrs(ctx, s.bucket, "out/dir/f00.csv"); err != nil {
		t.Errorf("the object that replaced one the overwrite found was removed: %v", err)
	}
	if _, err := s.store.Attrs(ctx, s.bucket, "out/dir/f01.csv"); !errors.Is(err, gcs.ErrNotFound) {
		t.Errorf("the failed transfer's new object stays: %v", err)
	}
}
