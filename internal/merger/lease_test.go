package merger

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/teststack"
)

// A merger renews the lease of every transfer it holds, once a
// message.LeaseRenewEvery, from its first event to its end, so that its
// lease holds others off after the producer has gone; the transfer's end
// removes the lease, and nothing renews it back.
func TestTheMergerRenewsTheLeaseOfATransferItHolds(t *testing.T) {
	s := newStaged(t, "m-renew", "zstd", 2, 1)
	ctx := context.Background()
	lease := message.LeaseObject(s.man.TransferID)
	l := message.Lease{V: message.Version, TransferID: s.man.TransferID, Destination: "gs://m-renew/x", Scope: "x", Renews: true}
	if _, err := s.store.PutSmall(ctx, s.bucket, lease, message.Encode(l), true, "application/json"); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	later := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	done := &teststack.Recorder{}
	m := New(Options{Store: s.store, Done: done, Sink: sinkAt(t, rowsPath(t)), now: clock})
	if err := handle(t, m, s.event(message.EventChunk, s.upload(0, 0))); err != nil {
		t.Fatal(err)
	}
	renewed := func() string {
		a, err := s.store.Attrs(ctx, s.bucket, lease)
		if err != nil {
			t.Fatal(err)
		}
		return a.Metadata[message.MetaRenewed]
	}
	m.recheck(ctx)
	first := renewed()
	if first == "" {
		t.Fatalf("lease not renewed on the first look at a transfer in progress")
	}
	later(message.LeaseRenewEvery / 2)
	m.recheck(ctx)
	if got := renewed(); got != first {
		t.Errorf("lease renewed again after %v: %s, then %s", message.LeaseRenewEvery/2, first, got)
	}
	later(message.LeaseRenewEvery)
	m.recheck(ctx)
	if got := renewed(); got == first {
		t.Errorf("lease not renewed after %v", message.LeaseRenewEvery*3/2)
	}
	s.seal()
	evs := []message.Event{s.event(message.EventSealed)}
	for i, f := range s.man.Files {
		for j := range f.Chunks {
			if i > 0 || j > 0 {
				evs = append(evs, s.event(message.EventChunk, s.upload(i, j)))
			}
		}
	}
	for _, ev := range evs {
		if err := handle(t, m, ev); err != nil {
			t.Fatal(err)
		}
	}
	if d := dones(t, done); len(d) != 1 || d[0].Status != message.StatusOK {
		t.Fatalf("done events %+v, want one ok", d)
	}
	later(2 * message.LeaseRenewEvery)
	m.recheck(ctx)
	if _, err := s.store.Attrs(ctx, s.bucket, lease); !errors.Is(err, gcs.ErrNotFound) {
		t.Errorf("the lease of an ended transfer: %v, want gone", err)
	}
}
