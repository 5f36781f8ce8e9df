package e2e

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/ferry-dev/ferry/internal/bench/datagen"
	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/producer"
	"github.com/ferry-dev/ferry/internal/testutil"
)

// TestTwoMergersOnOneSubscription (issue 9 §2): two mergers receive from
// one events subscription, as during a rolling update, each with its own
// cache and its own sink on the same results file. Three transfers at once,
// each a file of several chunks beside small files: every file arrives
// intact under its final name, each transfer has one row, and its done
// events (possibly two: batch systems deduplicate by transfer_id) say ok.
func TestTwoMergersOnOneSubscription(t *testing.T) {
	s := newStack(t, stackOptions{workers: 2, inlineMax: 4 << 10, mergers: 2})
	feed := s.doneFeed()
	var reqs []producer.Request
	var waits []func() (message.Done, error)
	for i := 0; i < 3; i++ {
		dir := filepath.Join(t.TempDir(), fmt.Sprintf("set%d", i))
		testutil.WriteCSV(t, filepath.Join(dir, "big.csv"), 400_000, int64(80+i))
		if err := datagen.WriteManySmall(filepath.Join(dir, "small"), 5, 5_000, int64(90+i)); err != nil {
			t.Fatal(err)
		}
		req := producer.Request{Sources: []string{dir}, Destination: fmt.Sprintf("gs://%s/two/%d", s.bucket, i),
			Codec: codec.Zstd, ChunkSize: 64 << 10, Method: "e2e-two-mergers"}
		reqs = append(reqs, req)
		waits = append(waits, s.transferAsync(req))
	}
	ids := map[string]bool{}
	for i, wait := range waits {
		done, err := wait()
		if err != nil || done.Status != message.StatusOK || len(done.Objects) != 6 {
			t.Fatalf("transfer %d: %v, done %+v", i, err, done)
		}
		ids[done.TransferID] = true
		s.verifyAll(reqs[i])
	}
	s.assertClean()
	for id := range ids {
		if row := s.row(id); row.Status != "ok" || row.Files != 6 {
			t.Errorf("row %+v", row)
		}
	}
	a, b := s.handled[0].Load(), s.handled[1].Load()
	if a == 0 || b == 0 {
		t.Fatalf("events handled: %d and %d; both mergers must have taken part", a, b)
	}
	// The done events seen so far (more may still come): all ok.
	per := map[string]int{}
	for more := true; more; {
		select {
		case d := <-feed:
			if d.Status != message.StatusOK {
				t.Errorf("done %+v", d)
			}
			per[d.TransferID]++
		default:
			more = false
		}
	}
	t.Logf("events handled by the two mergers: %d and %d; done events per transfer so far: %v", a, b, per)
}
