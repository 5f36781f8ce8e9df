package merger

import (
	"bytes"
	"context"
	"sync"
	"testing"

	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/result"
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
	r, err := result.ReadFile(rows)
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
