package producer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/plan"
	"github.com/ferry-dev/ferry/internal/teststack"
	"github.com/ferry-dev/ferry/internal/testutil"
)

// Two transfers to one destination started at the same moment, many
// times over: each writes its lease and lists the others, and however
// their steps interleave, exactly one goes on and the other is refused
// naming it (no merger runs here, so no lease is freed in between).
func TestOfTwoTransfersStartedAtOnceExactlyOneGoesOn(t *testing.T) {
	const bucket = "p-lease"
	gs := teststack.Bucket(t, bucket)
	dir := filepath.Join(t.TempDir(), "tree")
	testutil.OK(t, os.MkdirAll(dir, 0o755))
	testutil.WriteCSV(t, filepath.Join(dir, "a.csv"), 5_000, 1)
	testutil.WriteCSV(t, filepath.Join(dir, "b.csv"), 6_000, 1)
	for round := range 20 {
		var wg sync.WaitGroup
		errs := make([]error, 2)
		ids := make([]string, 2)
		for i := range 2 {
			p := New(Options{Store: gs, Chunks: &teststack.Recorder{}, Events: &teststack.Recorder{}, SpoolDir: t.TempDir(), Concurrency: 1})
			ids[i] = message.NewTransferID("")
			req := Request{TransferID: ids[i], Sources: []string{dir}, Destination: "gs://" + bucket + "/r", Codec: codec.Zstd, ChunkSize: 64 << 10}
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = p.Submit(context.Background(), req)
			}()
		}
		wg.Wait()
		var input *InputError
		switch {
		case errs[0] == nil && errors.As(errs[1], &input) && strings.Contains(errs[1].Error(), "transfer "+ids[0]+" is writing there"):
		case errs[1] == nil && errors.As(errs[0], &input) && strings.Contains(errs[0].Error(), "transfer "+ids[1]+" is writing there"):
		default:
			t.Fatalf("round %d: %s: %v; %s: %v; want one ok and the other refused naming it", round, ids[0], errs[0], ids[1], errs[1])
		}
		var leases []string
		testutil.OK(t, gs.List(context.Background(), bucket, message.LeaseRoot, func(a gcs.Attrs) error {
			leases = append(leases, a.Name)
			return nil
		}))
		winner := ids[0]
		if errs[0] != nil {
			winner = ids[1]
		}
		if len(leases) != 1 || leases[0] != message.LeaseObject(winner) {
			t.Fatalf("round %d: leases %v, want only %s's: the refused transfer leaves none", round, leases, winner)
		}
		testutil.OK(t, gs.Delete(context.Background(), bucket, leases[0]))
	}
}

// A key's id under a secret is the same for the same secret and key, is
// another for another secret, and is never the id anyone computes from
// the key alone.
func TestAKeyedTransferIDNeedsTheSecret(t *testing.T) {
	a, b := strings.Repeat("a", 32), strings.Repeat("b", 32)
	id := message.KeyedTransferID(a, "nightly")
	switch {
	case id != message.KeyedTransferID(a, "nightly"):
		t.Errorf("the same secret and key gave %s and %s", id, message.KeyedTransferID(a, "nightly"))
	case id == message.KeyedTransferID(b, "nightly"), id == message.NewTransferID("nightly"), id == message.KeyedTransferID(a, "nightly2"):
		t.Errorf("%s is also another secret's, key's or the unkeyed id", id)
	case !message.ValidTransferID(id) || !strings.HasPrefix(id, "h") || !strings.HasPrefix(message.NewTransferID("nightly"), "k"):
		t.Errorf("ids %s and %s", id, message.NewTransferID("nightly"))
	}
}

// A converted file's lease covers the directory of its parts, where
// --bad-rows may also write rejects.ndjson: a transfer that writes only
// that object's neighbours is held off too.
func TestAConvertedFilesLeaseCoversItsRejects(t *testing.T) {
	const bucket = "p-lease-convert"
	gs := teststack.Bucket(t, bucket)
	dir := t.TempDir()
	src := filepath.Join(dir, "prices.csv")
	testutil.OK(t, os.WriteFile(src, []byte("id,price\n1,2.50\n2,3.75\n"), 0o644))
	p := New(Options{Store: gs, Chunks: &teststack.Recorder{}, Events: &teststack.Recorder{}, SpoolDir: t.TempDir(), Concurrency: 1})
	m, err := p.Submit(context.Background(), Request{Sources: []string{src}, Destination: "gs://" + bucket + "/t/", Codec: codec.Zstd,
		ChunkSize: 64 << 10, Convert: &plan.Convert{BadRows: 3}})
	testutil.OK(t, err)
	b, err := gs.ReadAll(context.Background(), bucket, message.LeaseObject(m.TransferID))
	testutil.OK(t, err)
	var l message.Lease
	testutil.OK(t, message.Decode(b, &l))
	if l.Scope != "t/prices.csv/" {
		t.Fatalf("lease scope %q, want t/prices.csv/: its parts and its rejects object", l.Scope)
	}
}

// A dead ferry cp's lease holds nobody off: a lease whose holder is a
// process of this host that no longer runs is ignored, however recent;
// the same lease held by a running process refuses the transfer.
func TestALeaseOfAProcessThatIsGoneHoldsNothingOff(t *testing.T) {
	const bucket = "p-lease-holder"
	gs := teststack.Bucket(t, bucket)
	dir := filepath.Join(t.TempDir(), "tree")
	testutil.OK(t, os.MkdirAll(dir, 0o755))
	testutil.WriteCSV(t, filepath.Join(dir, "a.csv"), 5_000, 1)
	gone := exec.Command("true")
	testutil.OK(t, gone.Run())
	host, _ := os.Hostname()
	for _, tc := range []struct {
		holder  string
		refused bool
	}{{fmt.Sprintf("%s %d", host, gone.Process.Pid), false}, {LeaseHolder(), true}, {"another-host 1", true}} {
		dead := message.NewTransferID("")
		l := message.Lease{V: message.Version, TransferID: dead, Destination: "gs://" + bucket + "/h", Scope: "h/", Holder: tc.holder}
		_, err := gs.PutSmall(context.Background(), bucket, message.LeaseObject(dead), message.Encode(l), true, "application/json")
		testutil.OK(t, err)
		p := New(Options{Store: gs, Chunks: &teststack.Recorder{}, Events: &teststack.Recorder{}, SpoolDir: t.TempDir(), Concurrency: 1})
		req := Request{TransferID: message.NewTransferID(""), Sources: []string{dir}, Destination: "gs://" + bucket + "/h", Codec: codec.Zstd, ChunkSize: 64 << 10}
		_, err = p.Submit(context.Background(), req)
		if refused := err != nil && strings.Contains(err.Error(), "transfer "+dead+" is writing there"); refused != tc.refused {
			t.Errorf("a lease held by %q: Submit = %v, want refused %v", tc.holder, err, tc.refused)
		}
		testutil.OK(t, gs.Delete(context.Background(), bucket, message.LeaseObject(dead)))
		testutil.OK(t, gs.Delete(context.Background(), bucket, message.LeaseObject(req.TransferID)))
	}
}

// A lease ferry renews holds others off while it is renewed, and nobody
// once five renewals are missed (its producer and mergers gone), however
// short of the transfer timeout; a lease of an earlier version, which
// nobody renews, holds them off until the transfer timeout as before.
func TestALeaseNobodyRenewsHoldsNothingOffOnceStale(t *testing.T) {
	const bucket = "p-lease-stale"
	gs := teststack.Bucket(t, bucket)
	dir := filepath.Join(t.TempDir(), "tree")
	testutil.OK(t, os.MkdirAll(dir, 0o755))
	testutil.WriteCSV(t, filepath.Join(dir, "a.csv"), 5_000, 1)
	for _, tc := range []struct {
		renews  bool
		later   time.Duration
		refused bool
	}{{true, 0, true}, {true, message.LeaseStaleAfter - time.Minute, true}, {true, message.LeaseStaleAfter + time.Minute, false},
		{false, message.LeaseStaleAfter + time.Minute, true}} {
		dead := message.NewTransferID("")
		l := message.Lease{V: message.Version, TransferID: dead, Destination: "gs://" + bucket + "/h", Scope: "h/", Holder: "another-host 1", Renews: tc.renews}
		_, err := gs.PutSmall(context.Background(), bucket, message.LeaseObject(dead), message.Encode(l), true, "application/json")
		testutil.OK(t, err)
		now := time.Now().Add(tc.later)
		p := New(Options{Store: gs, Chunks: &teststack.Recorder{}, Events: &teststack.Recorder{}, SpoolDir: t.TempDir(), Concurrency: 1,
			Now: func() time.Time { return now }})
		req := Request{TransferID: message.NewTransferID(""), Sources: []string{dir}, Destination: "gs://" + bucket + "/h", Codec: codec.Zstd, ChunkSize: 64 << 10}
		_, err = p.Submit(context.Background(), req)
		if refused := err != nil && strings.Contains(err.Error(), "transfer "+dead+" is writing there"); refused != tc.refused {
			t.Errorf("a lease (renews %v) %v later: Submit = %v, want refused %v", tc.renews, tc.later, err, tc.refused)
		}
		testutil.OK(t, gs.Delete(context.Background(), bucket, message.LeaseObject(dead)))
		_ = gs.Delete(context.Background(), bucket, message.LeaseObject(req.TransferID))
	}
}

// touchStore tells of every renewal.
type touchStore struct {
	*gcs.Store
	touched chan string
}

func (s touchStore) Touch(ctx context.Context, bucket, name, key, value string) error {
	err := s.Store.Touch(ctx, bucket, name, key, value)
	if err == nil {
		s.touched <- name + " " + key
	}
	return err
}

// The producer renews its transfer's lease while it runs: the lease's renewal time moves, and its place among the leases
// (its Created time) stays.
func TestTheProducerRenewsItsLeaseWhileItRuns(t *testing.T) {
	const bucket = "p-lease-renew"
	gs := teststack.Bucket(t, bucket)
	tid := message.NewTransferID("")
	l := message.Lease{V: message.Version, TransferID: tid, Destination: "gs://" + bucket + "/r", Scope: "r/", Renews: true}
	first, err := gs.PutSmall(context.Background(), bucket, message.LeaseObject(tid), message.Encode(l), true, "application/json")
	testutil.OK(t, err)
	ts := touchStore{Store: gs, touched: make(chan string, 16)}
	p := New(Options{Store: ts, Chunks: &teststack.Recorder{}, Events: &teststack.Recorder{}, SpoolDir: t.TempDir()})
	stop := p.renewLease(context.Background(), bucket, tid, time.Millisecond)
	for range 2 {
		if got, want := <-ts.touched, message.LeaseObject(tid)+" "+message.MetaRenewed; got != want {
			t.Fatalf("touched %q, want %q", got, want)
		}
	}
	stop()
	a, err := gs.Attrs(context.Background(), bucket, message.LeaseObject(tid))
	testutil.OK(t, err)
	if a.Metadata[message.MetaRenewed] == "" || !a.Created.Equal(first.Created) || a.Updated.Before(first.Updated) {
		t.Errorf("renewed lease: metadata %v, created %v (was %v), updated %v (was %v)", a.Metadata, a.Created, first.Created, a.Updated, first.Updated)
	}
}
