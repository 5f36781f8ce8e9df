package merger

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/ferry-dev/ferry/internal/benchrow"
	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/loader"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/teststack"
	"github.com/ferry-dev/ferry/internal/testutil"
)

// fakeTables records the load jobs it is given and answers with rows, or
// err.
type fakeTables struct {
	mu   sync.Mutex
	jobs []loader.TableJob
	rows int64
	err  error
	// failBatches fails shared jobs; rowsOf, when set, answers each job
	// with the rows its request says.
	failBatches bool
	rowsOf      bool
}

func (f *fakeTables) Load(_ context.Context, job loader.TableJob) (int64, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.jobs = append(f.jobs, job)
	if f.failBatches && strings.HasPrefix(job.ID, "ferry_load_batch_") {
		return 0, "", &loader.JobError{JobID: job.ID, Err: errors.New("Provided Schema does not match Table")}
	}
	if f.rowsOf {
		return job.Rows, "us-central1", f.err
	}
	return f.rows, "us-central1", f.err
}

// tableTransfer stages a transfer of three Parquet parts of one source
// (10, 20 and 30 rows) and a plain file, asking for a table load.
func tableTransfer(t *testing.T, name string) *staged {
	s := newStaged(t, name, "none", 1, 1, 1, 1)
	for i := range 3 {
		s.man.Files[i].Table = &message.TablePart{Source: "dir/prices.csv", Part: i, Parts: 3, Rows: int64(10 * (i + 1))}
		s.man.Totals.Rows += int64(10 * (i + 1))
	}
	s.man.Load = &message.Load{Table: "proj-1.landing.prices", Write: message.LoadEmpty}
	return s
}

// Issue 29 §2: an ok transfer that names a table runs one load job over
// exactly its Parquet parts, with the transfer's job id; the done event
// and the row say the table, job and rows.
func TestOKTransferLoadsItsPartsIntoTheTable(t *testing.T) {
	s := tableTransfer(t, "m-load")
	tables := &fakeTables{rows: 60}
	done := &teststack.Recorder{}
	rows := rowsPath(t)
	m := New(Options{Store: s.store, Done: done, Sink: sinkAt(t, rows), Version: "test", Tables: tables,
		Loads: config.Loads{Datasets: []string{"proj-1.landing"}}})
	for _, ev := range s.uploadAll() {
		testutil.OK(t, handle(t, m, ev))
	}
	s.seal()
	testutil.OK(t, handle(t, m, s.event(message.EventSealed)))
	testutil.OK(t, handle(t, m, s.event(message.EventSealed))) // an end handled again loads nothing more
	d := dones(t, done)
	if len(d) != 1 || d[0].Status != message.StatusOK || d[0].Load == nil || d[0].Load.Rows != 60 || d[0].Load.JobID != message.LoadJobID(s.man.TransferID) {
		t.Fatalf("done events %+v", d)
	}
	if len(tables.jobs) != 1 {
		t.Fatalf("%d load jobs, want 1", len(tables.jobs))
	}
	j := tables.jobs[0]
	want := "gs://" + s.bucket + "/out/dir/f00.csv gs://" + s.bucket + "/out/dir/f01.csv gs://" + s.bucket + "/out/dir/f02.csv"
	if strings.Join(j.URIs, " ") != want || j.Rows != 60 || j.Table != "proj-1.landing.prices" || j.Write != message.LoadEmpty {
		t.Fatalf("load job %+v, want the three parts (%s)", j, want)
	}
	r, _ := benchrow.ReadFile(rows)
	if len(r) != 1 || r[0].Rows != 60 || r[0].BQRows != 60 || r[0].BQJobID != j.ID || r[0].BQTable != j.Table {
		t.Fatalf("rows %+v", r)
	}
}

// A load that fails, is refused by the merger's own configuration, or
// loads other than the parts' rows ends the transfer failed with the
// cause, and leaves the parts: even a chunk event that arrives after the
// end does not take one away.
func TestFailedLoadEndsFailedAndKeepsTheParts(t *testing.T) {
	for _, tc := range []struct {
		name    string
		tables  *fakeTables
		allowed []string
		want    string
	}{
		{"job failed", &fakeTables{err: &loader.JobError{JobID: "j", Err: errors.New("Provided Schema does not match Table")}}, []string{"proj-1.landing"}, "Provided Schema does not match Table"},
		{"not allowed here", &fakeTables{rows: 60}, []string{"proj-1.other"}, "dataset proj-1.landing is not in FERRY_BQ_LOAD_DATASETS"},
		{"rows differ", &fakeTables{rows: 59}, []string{"proj-1.landing"}, "loaded 59 rows into proj-1.landing.prices; the transfer's parts hold 60"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tableTransfer(t, "m-loadfail")
			done := &teststack.Recorder{}
			m := New(Options{Store: s.store, Done: done, Sink: sinkAt(t, rowsPath(t)), Version: "test", Tables: tc.tables,
				Loads: config.Loads{Datasets: tc.allowed}})
			evs := s.uploadAll()
			for _, ev := range evs[:3] {
				testutil.OK(t, handle(t, m, ev))
			}
			s.seal()
			testutil.OK(t, handle(t, m, s.event(message.EventSealed))) // the listing confirms the fourth
			d := dones(t, done)
			if len(d) != 1 || d[0].Status != message.StatusFailed || !strings.Contains(d[0].Error, tc.want) || d[0].Files != 4 {
				t.Fatalf("done events %+v, want failed saying %q over 4 files", d, tc.want)
			}
			_ = handle(t, m, evs[3]) // late
			for _, f := range s.man.Files {
				if _, err := s.store.Attrs(context.Background(), s.bucket, f.Object); errors.Is(err, gcs.ErrNotFound) {
					t.Fatalf("%s was removed after a failed load", f.Object)
				}
			}
		})
	}
}

// A paged manifest whose header claims other rows than its pages hold is
// refused before anything is composed or loaded.
func TestManifestWhoseRowsDoNotAddUpIsRefused(t *testing.T) {
	chunks := make([]int, message.PageFiles+1) // paged
	for i := range chunks {
		chunks[i] = 1
	}
	s := newStaged(t, "m-rows", "none", chunks...)
	s.man.Files[0].Table = &message.TablePart{Source: "dir/f.csv", Parts: 1, Rows: 10}
	tables := &fakeTables{rows: 11}
	done := &teststack.Recorder{}
	m := New(Options{Store: s.store, Done: done, Sink: sinkAt(t, rowsPath(t)), Version: "test", Tables: tables,
		Loads: config.Loads{Datasets: []string{"proj-1.landing"}}})
	s.man.Load = &message.Load{Table: "proj-1.landing.prices", Write: message.LoadEmpty}
	putManifest(t, &s.man, func(name string, body []byte) error {
		if name == message.ManifestObject(s.man.TransferID) {
			var h message.Manifest
			testutil.OK(t, message.Decode(body, &h))
			h.Totals.Rows = 11 // the pages hold 10
			body = message.Encode(h)
		}
		_, err := s.store.PutSmall(context.Background(), s.bucket, name, body, false, "")
		return err
	})
	_ = handle(t, m, s.event(message.EventSealed))
	d := dones(t, done)
	if len(d) != 1 || d[0].Status != message.StatusFailed || !strings.Contains(d[0].Error, "10 rows), the totals say") {
		t.Fatalf("done events %+v, want the manifest refused for its rows", d)
	}
	if len(tables.jobs) != 0 {
		t.Fatalf("a refused manifest was loaded: %+v", tables.jobs)
	}
}
