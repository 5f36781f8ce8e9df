package merger

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/benchrow"
	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/teststack"
)

// Issue 9 §2: two mergers at once, as during a rolling update, each with its
// own cache and its own sink on the same rows file (two processes on one
// host). The events of each transfer are split between them, and the last
// one is delivered to both at the same moment, so both try to finish it.
// Still: one final object per file with the right bytes, one row per
// transfer; the done event may come twice (batch systems deduplicate by
// transfer_id), always ok.
func TestTwoMergersEndEachTransferOnce(t *testing.T) {
	rows := rowsPath(t)
	done := &teststack.Recorder{}
	var all []*staged
	for i := 0; i < 3; i++ {
		all = append(all, newStaged(t, "m-two", "zstd", 40, 1, 1, 1, 1))
	}
	mergers := []*Merger{
		New(Options{Store: all[0].store, Done: done, Sink: sinkAt(t, rows), Version: "a"}),
		New(Options{Store: all[0].store, Done: done, Sink: sinkAt(t, rows), Version: "b"}),
	}
	// deliver hands ev to m as Pub/Sub would: again after an error.
	deliver := func(m *Merger, ev message.Event) {
		for attempt := 1; ; attempt++ {
			err := handle(t, m, ev)
			if err == nil {
				return
			}
			if attempt == 5 {
				t.Errorf("event %s of %s: %v after 5 deliveries", ev.Type, ev.TransferID, err)
				return
			}
		}
	}
	var wg sync.WaitGroup
	for _, s := range all {
		for i, ev := range s.uploadAll() {
			wg.Add(1)
			go func() { defer wg.Done(); deliver(mergers[i%2], ev) }()
		}
	}
	wg.Wait()
	for _, s := range all {
		s.seal()
		for _, m := range mergers {
			wg.Add(1)
			go func() { defer wg.Done(); deliver(m, s.event(message.EventSealed)) }()
		}
	}
	wg.Wait()

	per := map[string]int{}
	for _, d := range dones(t, done) {
		if d.Status != message.StatusOK {
			t.Fatalf("done %+v", d)
		}
		per[d.TransferID]++
	}
	r, err := benchrow.ReadFile(rows)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]int{}
	for _, x := range r {
		byID[x.TransferID]++
	}
	for _, s := range all {
		id := s.man.TransferID
		if per[id] < 1 || per[id] > 2 || byID[id] != 1 {
			t.Errorf("transfer %s: %d done events (want 1 or 2), %d rows (want 1)", id, per[id], byID[id])
		}
		for i, f := range s.man.Files {
			got, err := s.store.ReadAll(context.Background(), s.bucket, f.Object)
			// The chunks in order, then (zstd, several chunks) the table.
			if err != nil || int64(len(got)) != f.WireSize || crc32c.Checksum(got) != f.WireCRC32 || !bytes.HasPrefix(got, bytes.Join(s.wire[i], nil)) {
				t.Errorf("%s: %d bytes, %v; want %d with crc32c %08x", f.Object, len(got), err, f.WireSize, f.WireCRC32)
			}
		}
		if left := s.staging(); len(left) != 0 {
			t.Errorf("transfer %s left staging: %v", id, left)
		}
	}
	t.Logf("done events per transfer: %v", per)
}

// Issue 9 §2: when the events of a sealed transfer are split between two
// mergers after each first looked at GCS, neither sees it complete from its
// own events. A quiet, incomplete transfer is looked at again: the first
// merger to do so finishes it, the other finds the done marker.
func TestTwoMergersWithSplitEventsFinishOnARecheck(t *testing.T) {
	s := newStaged(t, "m-split", "zstd", 6, 1, 1, 1)
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	done := &teststack.Recorder{}
	rows := rowsPath(t)
	a := New(Options{Store: s.store, Done: done, Sink: sinkAt(t, rows), Version: "a", now: clock})
	b := New(Options{Store: s.store, Done: done, Sink: sinkAt(t, rows), Version: "b", now: clock})
	s.seal()
	if err := handle(t, a, s.event(message.EventSealed)); err != nil { // a looks: nothing stored yet
		t.Fatal(err)
	}
	if err := handle(t, b, s.event(message.EventChunk, s.upload(0, 0))); err != nil { // b looks: one chunk
		t.Fatal(err)
	}
	n := 0
	for i, f := range s.man.Files {
		for j := range f.Chunks {
			if i == 0 && j == 0 {
				continue
			}
			m := []*Merger{a, b}[n%2]
			n++
			if err := handle(t, m, s.event(message.EventChunk, s.upload(i, j))); err != nil {
				t.Fatal(err)
			}
		}
	}
	if d := dones(t, done); len(d) != 0 {
		t.Fatalf("done events %+v: a merger saw the whole transfer from its own events, the test proves nothing", d)
	}
	// Quiet for RecheckEvery: both look again.
	mu.Lock()
	now = now.Add(6 * time.Second)
	mu.Unlock()
	a.recheck(context.Background())
	b.recheck(context.Background())
	d := dones(t, done)
	if len(d) != 1 || d[0].Status != message.StatusOK {
		t.Fatalf("done events %+v, want one ok", d)
	}
	if r, _ := benchrow.ReadFile(rows); len(r) != 1 {
		t.Fatalf("%d rows, want 1", len(r))
	}
	for _, f := range s.man.Files {
		got, err := s.store.ReadAll(context.Background(), s.bucket, f.Object)
		if err != nil || int64(len(got)) != f.WireSize || crc32c.Checksum(got) != f.WireCRC32 {
			t.Fatalf("%s: %d bytes, %v; want %d with crc32c %08x", f.Object, len(got), err, f.WireSize, f.WireCRC32)
		}
	}
	if left := s.staging(); len(left) != 0 {
		t.Fatalf("staging left: %v", left)
	}
}

// A merger that looked a transfer up before another merger ended it must not
// leave its progress marker behind when a late event of a one-chunk file
// reaches it afterwards (seen once in e2e as a stray .ferry/<id>/progress).
func TestLateEventAtTheOtherMergerLeavesNoProgressMarker(t *testing.T) {
	rows := rowsPath(t)
	done := &teststack.Recorder{}
	s := newStaged(t, "m-late", "zstd", 2, 1)
	a := New(Options{Store: s.store, Done: done, Sink: sinkAt(t, rows), Version: "a"})
	b := New(Options{Store: s.store, Done: done, Sink: sinkAt(t, rows), Version: "b"})
	evs := s.uploadAll() // one event per file: a two-chunk file, then a one-chunk file
	// b learns of the transfer from a staging chunk: it finds no done
	// marker, and writes no progress marker (nothing final yet).
	if err := handle(t, b, evs[0]); err != nil {
		t.Fatal(err)
	}
	// a gets everything and ends the transfer.
	for _, ev := range evs {
		if err := handle(t, a, ev); err != nil {
			t.Fatal(err)
		}
	}
	s.seal()
	if err := handle(t, a, s.event(message.EventSealed)); err != nil {
		t.Fatal(err)
	}
	if d := dones(t, done); len(d) != 1 || d[0].Status != message.StatusOK {
		t.Fatalf("done events %+v", d)
	}
	// A redelivery of the one-chunk file's event reaches b.
	if err := handle(t, b, evs[1]); err != nil {
		t.Fatal(err)
	}
	if left := s.staging(); len(left) != 0 {
		t.Fatalf("left behind after the transfer ended: %v", left)
	}
}
