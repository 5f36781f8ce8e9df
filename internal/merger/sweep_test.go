package merger

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/benchrow"
	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/teststack"
)

// at returns a clock that reads now moved by d.
func at(d time.Duration) func() time.Time { return func() time.Time { return time.Now().Add(d) } }

// Issue 8 §3: a transfer whose producer died — chunks uploaded, never
// sealed, and no event ever reached this merger (it restarted, say) — ends
// failed once its staging saw nothing new for FERRY_TRANSFER_TIMEOUT: done
// event, row with null throughput, staging removed.
func TestStalledTransferEndsFailedAfterTheTimeout(t *testing.T) {
	s := newStaged(t, "m-stalled", "none", 3, 1)
	s.upload(0, 0)
	s.upload(0, 1)
	done := &teststack.Recorder{}
	rows := rowsPath(t)
	newMerger := func(skew time.Duration) *Merger {
		return New(Options{Store: s.store, Done: done, Sink: sinkAt(t, rows), Version: "test",
			Buckets: config.Buckets{Allowed: []string{s.bucket}}, now: at(skew)})
	}
	// Within the timeout nothing happens.
	if err := newMerger(5 * time.Hour).Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := dones(t, done); len(d) != 0 || len(s.staging()) != 2 {
		t.Fatalf("swept a transfer inside its timeout: done %+v, staging %v", d, s.staging())
	}
	if err := newMerger(7 * time.Hour).Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	d := dones(t, done)
	if len(d) != 1 || d[0].TransferID != s.man.TransferID || d[0].Status != message.StatusFailed ||
		!strings.Contains(d[0].Error, "longer than FERRY_TRANSFER_TIMEOUT=6h0m0s") || !strings.Contains(d[0].Error, message.StagingPrefix(s.man.TransferID)) {
		t.Fatalf("done events %+v", d)
	}
	if left := s.staging(); len(left) != 0 {
		t.Fatalf("staging left: %v", left)
	}
	if _, err := s.store.Attrs(context.Background(), s.bucket, message.DoneMarker(s.man.TransferID)); err != nil {
		t.Fatalf("no done marker: %v", err)
	}
	r, _ := benchrow.ReadFile(rows)
	if len(r) != 1 || r[0].Status != "failed" || r[0].RawMBps != nil || r[0].WireMBps != nil {
		t.Fatalf("rows %+v, want one failed row with null throughput", r)
	}
	// The NDJSON says null, as BigQuery's NULLABLE column takes it.
	b, _ := os.ReadFile(rows)
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil || raw["raw_mbps"] != nil || !strings.Contains(string(b), `"raw_mbps":null`) {
		t.Fatalf("row JSON %s: %v", b, err)
	}
	// A second sweep finds nothing to end.
	if err := newMerger(8 * time.Hour).Sweep(context.Background()); err != nil || len(dones(t, done)) != 1 {
		t.Fatalf("second sweep: %v, %d done events", err, len(dones(t, done)))
	}
}

// A transfer of small files has nothing in staging until it is sealed:
// workers write each file to its final name. The merger's progress marker
// lets the sweep of a restarted merger still end it.
func TestStalledTransferOfSmallFilesEndsAfterARestart(t *testing.T) {
	s := newStaged(t, "m-stalled-small", "none", 1, 1, 1)
	done := &teststack.Recorder{}
	first := New(Options{Store: s.store, Done: done, Sink: sinkAt(t, rowsPath(t)), Version: "test"})
	if err := handle(t, first, s.event(message.EventChunk, s.upload(0, 0), s.upload(1, 0))); err != nil {
		t.Fatal(err)
	}
	if left := s.staging(); len(left) != 1 || left[0] != progressObject(s.man.TransferID) {
		t.Fatalf("staging %v, want the progress marker alone", left)
	}
	// The producer died; the merger restarted (a new one, empty cache).
	restarted := New(Options{Store: s.store, Done: done, Sink: sinkAt(t, rowsPath(t)), Version: "test",
		Buckets: config.Buckets{Allowed: []string{s.bucket}}, now: at(7 * time.Hour)})
	if err := restarted.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := dones(t, done); len(d) != 1 || d[0].Status != message.StatusFailed || !strings.Contains(d[0].Error, "FERRY_TRANSFER_TIMEOUT") {
		t.Fatalf("done events %+v", d)
	}
	if left := s.staging(); len(left) != 0 {
		t.Fatalf("staging left: %v", left)
	}
}

// Issue 8 §3: done markers outlive staging, but not FERRY_DONE_RETENTION;
// objects of other tools under .ferry/ (the loader's rows) are not taken
// for transfers.
func TestSweepRemovesDoneMarkersPastTheirRetention(t *testing.T) {
	f := newFixture(t, "m-retention", 2)
	f.upload(0)
	f.upload(1)
	f.seal()
	if err := f.event(message.EventSealed, 0, f.m); err != nil {
		t.Fatal(err)
	}
	marker := message.DoneMarker(f.man.TransferID)
	loaderRow := message.StagingRoot + "results/transfers/" + f.man.TransferID + ".ndjson"
	if _, err := f.store.PutSmall(context.Background(), f.bucket, loaderRow, []byte("{}\n"), false, ""); err != nil {
		t.Fatal(err)
	}
	sweep := func(skew time.Duration) {
		t.Helper()
		m := New(Options{Store: f.store, Done: f.done, Sink: sinkAt(t, f.rows), Version: "test",
			Buckets: config.Buckets{Allowed: []string{f.bucket}}, now: at(skew)})
		if err := m.Sweep(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	sweep(719 * time.Hour)
	if _, err := f.store.Attrs(context.Background(), f.bucket, marker); err != nil {
		t.Fatalf("done marker removed inside its retention: %v", err)
	}
	sweep(721 * time.Hour)
	if _, err := f.store.Attrs(context.Background(), f.bucket, marker); !errors.Is(err, gcs.ErrNotFound) {
		t.Fatalf("done marker kept past FERRY_DONE_RETENTION: %v", err)
	}
	if _, err := f.store.Attrs(context.Background(), f.bucket, loaderRow); err != nil {
		t.Fatalf("the loader's staged row was taken for a transfer: %v", err)
	}
	if d := f.dones(); len(d) != 1 {
		t.Fatalf("%d done events, want the transfer's one", len(d))
	}
}

// Issue 8 §3: the cache is bounded; an evicted transfer is rebuilt from GCS
// and still finishes.
func TestCacheIsBoundedAndRebuiltFromGCS(t *testing.T) {
	done := &teststack.Recorder{}
	var all []*staged
	for i := 0; i < 5; i++ {
		all = append(all, newStaged(t, "m-cache", "none", 3, 1))
	}
	m := New(Options{Store: all[0].store, Done: done, Sink: sinkAt(t, rowsPath(t)), Version: "test", CacheTransfers: 2})
	for _, s := range all {
		for _, ev := range s.uploadAll() {
			if err := handle(t, m, ev); err != nil {
				t.Fatal(err)
			}
		}
		if n := m.cache.len(); n > 2 {
			t.Fatalf("cache holds %d transfers, bound 2", n)
		}
	}
	for _, s := range all {
		s.seal()
		if err := handle(t, m, s.event(message.EventSealed)); err != nil {
			t.Fatal(err)
		}
	}
	d := dones(t, done)
	if len(d) != len(all) {
		t.Fatalf("%d done events, want %d", len(d), len(all))
	}
	for _, x := range d {
		if x.Status != message.StatusOK {
			t.Fatalf("done %+v", x)
		}
	}
	if n := m.cache.len(); n > 2 {
		t.Fatalf("cache holds %d transfers, bound 2", n)
	}
}
