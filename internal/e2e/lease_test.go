package e2e

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/producer"
)

// Issue 42 §2: the same command twice at once. Before leases, each run won
// some of the objects and both failed on the other's; now the first goes
// on and ends ok, the second is refused naming it and sends nothing.
func TestTheSameCommandTwiceAtOnceEndsOneOKAndRefusesTheOther(t *testing.T) {
	s := newStack(t, stackOptions{workers: 2, inlineMax: 4 << 10})
	dir := filepath.Join(t.TempDir(), "export")
	req := producer.Request{Sources: overwriteTree(t, dir, 9, 7), Destination: "gs://" + s.bucket + "/daily", Codec: codec.Zstd, ChunkSize: 64 << 10}

	// T1 holds before its first chunk: it has its lease, nothing else
	// of it is in flight.
	open, waiting := make(chan struct{}), make(chan struct{})
	var once sync.Once
	g := &hook{publisher: s.q.Publisher(s.ps.ChunksTopic), before: func([]byte) error {
		once.Do(func() { close(waiting); <-open })
		return nil
	}}
	p1 := producer.New(producer.Options{Store: s.store, Chunks: g, Events: s.q.Publisher(s.ps.ControlTopic), SpoolDir: s.spool, InlineMax: 4 << 10, Concurrency: 1})
	wait1 := s.transferWith(p1, req)
	<-waiting
	t1 := s.leaseHolder()

	second := func(r producer.Request, what string) {
		t.Helper()
		r.TransferID = message.NewTransferID("")
		_, err := s.prod.Submit(context.Background(), r)
		var input *producer.InputError
		if !errors.As(err, &input) || !strings.Contains(err.Error(), "transfer "+t1+" is writing there") || !strings.Contains(err.Error(), "refused before it sent anything") {
			t.Fatalf("%s while T1 (%s) runs: %v, want it refused naming T1", what, t1, err)
		}
		for _, n := range s.staging() {
			if strings.Contains(n, r.TransferID) {
				t.Errorf("%s was refused, yet left %s", what, n)
			}
		}
		if n := len(s.objects(message.KeyObject(r.TransferID))); n != 0 {
			t.Errorf("%s was refused, yet wrote its key object", what)
		}
	}
	second(req, "the same command")
	sub := req // one file of T1's tree, on its own: an object T1 writes too
	sub.Sources = []string{filepath.Join(dir, "f03.csv")}
	sub.Destination = "gs://" + s.bucket + "/daily/export/"
	second(sub, "one of its files")

	// Another prefix, and a name T1's objects never start with, go on
	// beside it.
	other := req
	other.Destination = "gs://" + s.bucket + "/elsewhere"
	if d, err := s.transfer(other); err != nil || d.Status != message.StatusOK {
		t.Fatalf("a transfer to another prefix while T1 runs: %v %+v", err, d)
	}
	beside := sub
	beside.Destination = "gs://" + s.bucket + "/daily-notes/"
	if d, err := s.transfer(beside); err != nil || d.Status != message.StatusOK {
		t.Fatalf("a transfer to daily-notes/ while T1 writes daily/: %v %+v", err, d)
	}

	close(open)
	d1, err := wait1()
	if err != nil || d1.Status != message.StatusOK || d1.Files != 10 {
		t.Fatalf("T1: %v %+v", err, d1)
	}
	s.verifyAll(req)
	s.assertClean() // the leases too: they live under the staging root
	// Once T1 has ended, the same command runs (and, as before, finds
	// T1's objects there: -n skips them).
	again := req
	again.NoClobber = true
	if d, err := s.transfer(again); err != nil || d.Status != message.StatusOK || d.FilesSkipped != 10 {
		t.Fatalf("the same command once T1 ended: %v %+v", err, d)
	}
}

// A lease whose transfer ended (its done marker written) or that nothing
// has touched for FERRY_TRANSFER_TIMEOUT (a killed ferry cp's) holds no
// one off; a live one written first does, whatever its id.
func TestALeaseOfATransferThatEndedOrStalledHoldsNothingUp(t *testing.T) {
	s := newStack(t, stackOptions{workers: 1, inlineMax: 4 << 10})
	dir := filepath.Join(t.TempDir(), "export")
	req := producer.Request{Sources: overwriteTree(t, dir, 2, 3), Destination: "gs://" + s.bucket + "/d", Codec: codec.Zstd, ChunkSize: 64 << 10}
	ctx := context.Background()
	plant := func(tid string) {
		t.Helper()
		l := message.Lease{V: message.Version, TransferID: tid, Destination: "gs://" + s.bucket + "/d", Scope: "d/"}
		if _, err := s.store.PutSmall(ctx, s.bucket, message.LeaseObject(tid), message.Encode(l), false, "application/json"); err != nil {
			t.Fatal(err)
		}
	}

	plant("ended1")
	if _, err := s.store.PutSmall(ctx, s.bucket, message.DoneMarker("ended1"), []byte(`{}`), false, "application/json"); err != nil {
		t.Fatal(err)
	}
	plant("killed1")
	stale := producer.New(producer.Options{Store: s.store, Chunks: s.q.Publisher(s.ps.ChunksTopic), Events: s.q.Publisher(s.ps.ControlTopic),
		SpoolDir: s.spool, InlineMax: 4 << 10, TransferTimeout: time.Nanosecond})
	if d, err := s.transferWith(stale, req)(); err != nil || d.Status != message.StatusOK {
		t.Fatalf("beside an ended transfer's lease and a stale one: %v %+v", err, d)
	}

	// The same stale lease, judged with the default timeout (6h): it is
	// live, and it came first.
	again := req
	again.Overwrite, again.TransferID = true, message.NewTransferID("")
	_, err := s.prod.Submit(ctx, again)
	if err == nil || !strings.Contains(err.Error(), "transfer killed1 is writing there") {
		t.Fatalf("beside a live lease written first: %v, want it refused naming killed1", err)
	}
}

// leaseHolder is the one transfer that holds a lease in the bucket.
func (s *stack) leaseHolder() string {
	s.t.Helper()
	leases := s.objects(message.LeaseRoot)
	if len(leases) != 1 {
		s.t.Fatalf("%d leases, want 1: %v", len(leases), leases)
	}
	for name := range leases {
		return strings.TrimPrefix(name, message.LeaseRoot)
	}
	return ""
}
