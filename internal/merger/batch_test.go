package merger

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/loader"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/teststack"
	"github.com/ferry-dev/ferry/internal/testutil"
)

// appendTransfers stages n transfers of three Parquet parts (60 rows)
// each, appending to one table, their chunks all reported and manifests
// sealed; the end of each is its sealed event.
func appendTransfers(t *testing.T, m func(*staged) *Merger, n int) ([]*staged, *Merger) {
	var ss []*staged
	for range n {
		s := tableTransfer(t, "m-batch")
		s.man.Load.Write = message.LoadAppend
		ss = append(ss, s)
	}
	mg := m(ss[0])
	for _, s := range ss {
		for _, ev := range s.uploadAll() {
			testutil.OK(t, handle(t, mg, ev))
		}
		s.seal()
	}
	return ss, mg
}

// endAll handles the sealed event of every transfer at once, as a merger's
// concurrent handlers do.
func endAll(t *testing.T, m *Merger, ss []*staged) {
	var wg sync.WaitGroup
	errs := make([]error, len(ss))
	for i, s := range ss {
		wg.Go(func() { errs[i] = handle(t, m, s.event(message.EventSealed)) })
	}
	wg.Wait()
	testutil.OK(t, errors.Join(errs...))
}

// Issue 29 §2: appends into one table that end together share one load
// job (BigQuery runs 1,500 a table a day): its id derives from the
// transfers, it loads all their parts, and each done event names it with
// the transfer's own rows. A full batch loads at once, whatever the
// window; the claims go with the staging.
func TestAppendsIntoOneTableShareALoadJob(t *testing.T) {
	tables := &fakeTables{rowsOf: true}
	done := &teststack.Recorder{}
	ss, m := appendTransfers(t, func(s *staged) *Merger {
		return New(Options{Store: s.store, Done: done, Sink: sinkAt(t, rowsPath(t)), Version: "test", Tables: tables,
			Loads: config.Loads{Datasets: []string{"proj-1.landing"}}, TableBatchWindow: time.Hour, TableBatchMax: 3})
	}, 3)
	endAll(t, m, ss)
	if len(tables.jobs) != 1 {
		t.Fatalf("%d load jobs, want 1 shared: %+v", len(tables.jobs), tables.jobs)
	}
	j := tables.jobs[0]
	var tids []string
	for _, s := range ss {
		tids = append(tids, s.man.TransferID)
	}
	if j.ID != loader.BatchJobID(tids) || len(j.URIs) != 9 || j.Rows != 180 || j.Write != message.LoadAppend {
		t.Fatalf("shared job %+v, want %s over 9 parts and 180 rows", j, loader.BatchJobID(tids))
	}
	d := dones(t, done)
	sort.Slice(d, func(a, b int) bool { return d[a].TransferID < d[b].TransferID })
	if len(d) != 3 {
		t.Fatalf("%d done events", len(d))
	}
	for _, e := range d {
		if e.Status != message.StatusOK || e.Load == nil || e.Load.JobID != j.ID || e.Load.Rows != 60 {
			t.Fatalf("done %+v (load %+v), want ok with 60 rows by %s", e, e.Load, j.ID)
		}
	}
	for _, s := range ss {
		if _, err := s.store.Attrs(context.Background(), s.bucket, message.LoadClaimObject(s.man.TransferID)); !errors.Is(err, gcs.ErrNotFound) {
			t.Fatalf("claim of %s left behind: %v", s.man.TransferID, err)
		}
	}
}

// A shared job that fails gives way to one job per transfer, so one
// transfer's bad parts fail only itself.
func TestAFailedSharedJobFallsBackToOneJobPerTransfer(t *testing.T) {
	tables := &fakeTables{rowsOf: true, failBatches: true}
	done := &teststack.Recorder{}
	ss, m := appendTransfers(t, func(s *staged) *Merger {
		return New(Options{Store: s.store, Done: done, Sink: sinkAt(t, rowsPath(t)), Version: "test", Tables: tables,
			Loads: config.Loads{Datasets: []string{"proj-1.landing"}}, TableBatchWindow: time.Hour, TableBatchMax: 2})
	}, 2)
	endAll(t, m, ss)
	var own []string
	for _, j := range tables.jobs[1:] {
		own = append(own, j.ID)
	}
	sort.Strings(own)
	want := []string{message.LoadJobID(ss[0].man.TransferID), message.LoadJobID(ss[1].man.TransferID)}
	sort.Strings(want)
	if len(tables.jobs) != 3 || !strings.HasPrefix(tables.jobs[0].ID, "ferry_load_batch_") || strings.Join(own, " ") != strings.Join(want, " ") {
		t.Fatalf("jobs %+v, want the shared one, then each transfer's own", tables.jobs)
	}
	for _, e := range dones(t, done) {
		if e.Status != message.StatusOK || e.Load.Rows != 60 || e.Load.JobID != message.LoadJobID(e.TransferID) {
			t.Fatalf("done %+v (load %+v)", e, e.Load)
		}
	}
}

// A merger that ends a transfer again after its batch was claimed by every
// member runs that very job (BigQuery finds it: nothing loads twice) at
// once, without waiting for a window; a claim a member lacks names a job
// that never ran, and is dropped for a new batch.
func TestAClaimedBatchRunsAgainAsClaimed(t *testing.T) {
	tables := &fakeTables{rowsOf: true}
	done := &teststack.Recorder{}
	ss, m := appendTransfers(t, func(s *staged) *Merger {
		return New(Options{Store: s.store, Done: done, Sink: sinkAt(t, rowsPath(t)), Version: "test", Tables: tables,
			Loads: config.Loads{Datasets: []string{"proj-1.landing"}}, TableBatchWindow: time.Hour, TableBatchMax: 1})
	}, 3)
	claim := func(job string, members ...*staged) []byte {
		c := loader.Claim{Job: loader.TableJob{ID: job, Table: "proj-1.landing.prices", Write: message.LoadAppend}, Members: map[string]loader.ClaimMember{}}
		for _, s := range members {
			c.Members[s.man.TransferID] = loader.ClaimMember{Bucket: s.bucket, Rows: 60}
			c.Job.Rows += 60
		}
		b, _ := json.Marshal(c)
		return b
	}
	// ss[0] and ss[1] were claimed by a crashed merger; ss[2] claimed,
	// but with a member that never got its claim (nor ended).
	whole := claim("ferry_load_batch_crashed", ss[0], ss[1])
	put := func(s *staged, b []byte) {
		_, err := s.store.Upload(context.Background(), s.bucket, message.LoadClaimObject(s.man.TransferID), bytes.NewReader(b), gcs.UploadOptions{Size: int64(len(b)), CRC32C: crc32c.Checksum(b)})
		testutil.OK(t, err)
	}
	put(ss[0], whole)
	put(ss[1], whole)
	ghost := &staged{bucket: ss[2].bucket, man: message.Manifest{TransferID: "tid-never-claimed"}}
	put(ss[2], claim("ferry_load_batch_void", ss[2], ghost))
	for _, s := range ss {
		testutil.OK(t, handle(t, m, s.event(message.EventSealed)))
	}
	var ids []string
	for _, j := range tables.jobs {
		ids = append(ids, j.ID)
	}
	if want := "ferry_load_batch_crashed ferry_load_batch_crashed " + loader.BatchJobID([]string{ss[2].man.TransferID}); strings.Join(ids, " ") != want {
		t.Fatalf("jobs %v, want %s", ids, want)
	}
	for _, e := range dones(t, done) {
		if e.Status != message.StatusOK || e.Load.Rows != 60 {
			t.Fatalf("done %+v (load %+v)", e, e.Load)
		}
	}
}
