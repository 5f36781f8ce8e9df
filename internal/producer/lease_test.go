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

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/plan"
	"github.com/ferry-dev/ferry/internal/teststack"
)

// Two transfers to one destination started at the same moment, many
// times over: each writes its lease and lists the others, and however
// their steps interleave, exactly one goes on and the other is refused
// naming it (no merger runs here, so no lease is freed in between).
func TestOfTwoTransfersStartedAtOnceExactlyOneGoesOn(t *testing.T) {
	const bucket = "p-lease"
	gs := teststack.Bucket(t, bucket)
	dir := filepath.Join(t.TempDir(), "tree")
	must(t, os.MkdirAll(dir, 0o755))
	genFile(t, filepath.Join(dir, "a.csv"), 5_000)
	genFile(t, filepath.Join(dir, "b.csv"), 6_000)
	for round := range 20 {
		var wg sync.WaitGroup
		errs := make([]error, 2)
		ids := make([]string, 2)
		for i := range 2 {
			p := New(Options{Store: gs, Chunks: &teststack.Recorder{}, Events: &teststack.Recorder{}, SpoolDir: t.TempDir(), Concurrency: 1})
			ids[i] = NewTransferID("")
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
		must(t, gs.List(context.Background(), bucket, message.LeaseRoot, func(a gcs.Attrs) error {
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
		must(t, gs.Delete(context.Background(), bucket, leases[0]))
	}
}

// A key's id under a secret is the same for the same secret and key, is
// another for another secret, and is never the id anyone computes from
// the key alone.
func TestAKeyedTransferIDNeedsTheSecret(t *testing.T) {
	a, b := strings.Repeat("a", 32), strings.Repeat("b", 32)
	id := KeyedTransferID(a, "nightly")
	switch {
	case id != KeyedTransferID(a, "nightly"):
		t.Errorf("the same secret and key gave %s and %s", id, KeyedTransferID(a, "nightly"))
	case id == KeyedTransferID(b, "nightly"), id == NewTransferID("nightly"), id == KeyedTransferID(a, "nightly2"):
		t.Errorf("%s is also another secret's, key's or the unkeyed id", id)
	case !message.ValidTransferID(id) || !strings.HasPrefix(id, "h") || !strings.HasPrefix(NewTransferID("nightly"), "k"):
		t.Errorf("ids %s and %s", id, NewTransferID("nightly"))
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
	must(t, os.WriteFile(src, []byte("id,price\n1,2.50\n2,3.75\n"), 0o644))
	p := New(Options{Store: gs, Chunks: &teststack.Recorder{}, Events: &teststack.Recorder{}, SpoolDir: t.TempDir(), Concurrency: 1})
	m, err := p.Submit(context.Background(), Request{Sources: []string{src}, Destination: "gs://" + bucket + "/t/", Codec: codec.Zstd,
		ChunkSize: 64 << 10, Convert: &plan.Convert{BadRows: 3}})
	must(t, err)
	b, err := gs.ReadAll(context.Background(), bucket, message.LeaseObject(m.TransferID))
	must(t, err)
	var l message.Lease
	must(t, message.Decode(b, &l))
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
	must(t, os.MkdirAll(dir, 0o755))
	genFile(t, filepath.Join(dir, "a.csv"), 5_000)
	gone := exec.Command("true")
	must(t, gone.Run())
	host, _ := os.Hostname()
	for _, tc := range []struct {
		holder  string
		refused bool
	}{{fmt.Sprintf("%s %d", host, gone.Process.Pid), false}, {LeaseHolder(), true}, {"another-host 1", true}} {
		dead := NewTransferID("")
		l := message.Lease{V: message.Version, TransferID: dead, Destination: "gs://" + bucket + "/h", Scope: "h/", Holder: tc.holder}
		_, err := gs.PutSmall(context.Background(), bucket, message.LeaseObject(dead), message.Encode(l), true, "application/json")
		must(t, err)
		p := New(Options{Store: gs, Chunks: &teststack.Recorder{}, Events: &teststack.Recorder{}, SpoolDir: t.TempDir(), Concurrency: 1})
		req := Request{TransferID: NewTransferID(""), Sources: []string{dir}, Destination: "gs://" + bucket + "/h", Codec: codec.Zstd, ChunkSize: 64 << 10}
		_, err = p.Submit(context.Background(), req)
		if refused := err != nil && strings.Contains(err.Error(), "transfer "+dead+" is writing there"); refused != tc.refused {
			t.Errorf("a lease held by %q: Submit = %v, want refused %v", tc.holder, err, tc.refused)
		}
		must(t, gs.Delete(context.Background(), bucket, message.LeaseObject(dead)))
		must(t, gs.Delete(context.Background(), bucket, message.LeaseObject(req.TransferID)))
	}
}
