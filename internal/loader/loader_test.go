package loader

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/api/option"

	"github.com/ferry-dev/ferry/internal/benchrow"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/loader/bqtest"
	"github.com/ferry-dev/ferry/internal/teststack"
)

func TestMain(m *testing.M) { os.Exit(teststack.MainWithGCS(m)) }

// newFakeBigQuery returns the BigQuery REST double (it records every
// request, so tests assert what the real client library sends) and a
// BigQuery client pointed at it.
func newFakeBigQuery(t *testing.T) (*bqtest.Server, *BigQuery) {
	f := bqtest.New("proj", nil)
	f.Location = "us-central1" // the terraform default: a regional dataset
	url := f.Start(t)
	bq, err := NewBigQuery(context.Background(), "proj", "ferry", f.Location, option.WithEndpoint(url+"/bigquery/v2/"),
		option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bq.Close() })
	return f, bq
}

var seq atomic.Int64

// unique names a fresh bucket: the fake server outlives one test (-count).
func unique(name string) string { return fmt.Sprintf("%s-%d", name, seq.Add(1)) }

func stage(t *testing.T, s *Staged, n int) []string {
	t.Helper()
	var tids []string
	for i := 0; i < n; i++ {
		tid := fmt.Sprintf("t%02d", i)
		tids = append(tids, tid)
		row := benchrow.Row{TransferID: tid, Method: "ferry", Status: "ok", StartedAt: time.Now(), FinishedAt: time.Now()}
		chunks := []benchrow.ChunkRow{{TransferID: tid, File: "f.csv", Index: 0, Bytes: 10}}
		if err := s.Write(context.Background(), row, slices.Values(chunks)); err != nil {
			t.Fatal(err)
		}
	}
	return tids
}

func staged(t *testing.T, store *gcs.Store, bucket, table string) []string {
	t.Helper()
	var names []string
	if err := store.List(context.Background(), bucket, stagedPrefix(table), func(a gcs.Attrs) error {
		names = append(names, a.Name)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return names
}

func TestLoadSendsWhatBigQueryNeeds(t *testing.T) {
	bucket := unique("l-requests")
	store := teststack.Bucket(t, bucket)
	fake, bq := newFakeBigQuery(t)
	s := NewStaged(store, bucket)
	stage(t, s, 3)
	l := New(Options{Store: store, Warehouse: bq, Bucket: bucket, Batch: 10, MaxAge: time.Hour})

	// Three rows, a batch of ten, an hour to wait: nothing is due yet.
	if n, err := l.Once(context.Background()); err != nil || n != 0 {
		t.Fatalf("Once = %d, %v; want nothing loaded before the batch is due", n, err)
	}
	l.o.Now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	if n, err := l.Once(context.Background()); err != nil || n != 6 {
		t.Fatalf("Once = %d, %v; want 3 chunk and 3 transfer objects loaded", n, err)
	}
	loads := fake.Loads()
	if len(loads) != 2 {
		t.Fatalf("%d load jobs, want 2 (chunks, then transfers)", len(loads))
	}
	for i, table := range []string{ChunksTable, TransfersTable} {
		job := loads[i]
		cfg := job["configuration"].(map[string]any)["load"].(map[string]any)
		id := job["jobReference"].(map[string]any)["jobId"].(string)
		if !strings.HasPrefix(id, "ferry_"+table+"_") || !strings.HasSuffix(id, "_1") {
			t.Errorf("job id %s, want ferry_%s_<hash>_1", id, table)
		}
		if cfg["sourceFormat"] != "NEWLINE_DELIMITED_JSON" || cfg["writeDisposition"] != "WRITE_APPEND" || cfg["createDisposition"] != "CREATE_IF_NEEDED" {
			t.Errorf("load config %v", cfg)
		}
		if opts, _ := cfg["schemaUpdateOptions"].([]any); len(opts) != 1 || opts[0] != "ALLOW_FIELD_ADDITION" {
			t.Errorf("schemaUpdateOptions %v: want ALLOW_FIELD_ADDITION, so a table of an earlier ferry gains new columns", cfg["schemaUpdateOptions"])
		}
		dest := cfg["destinationTable"].(map[string]any)
		if dest["projectId"] != "proj" || dest["datasetId"] != "ferry" || dest["tableId"] != table {
			t.Errorf("destination %v", dest)
		}
		uris := cfg["sourceUris"].([]any)
		if len(uris) != 3 || uris[0] != "gs://"+bucket+"/.ferry/results/"+table+"/t00.ndjson" {
			t.Errorf("source URIs %v", uris)
		}
		want := benchrow.TransfersSchema()
		if table == ChunksTable {
			want = benchrow.ChunksSchema()
		}
		fields := cfg["schema"].(map[string]any)["fields"].([]any)
		if len(fields) != len(want) {
			t.Fatalf("%s schema has %d fields, want %d", table, len(fields), len(want))
		}
		for j, f := range fields {
			fm := f.(map[string]any)
			if fm["name"] != want[j].Name || fm["type"] != want[j].Type {
				t.Errorf("%s field %d = %v %v, want %s %s", table, j, fm["name"], fm["type"], want[j].Name, want[j].Type)
			}
		}
	}
	if left := staged(t, store, bucket, TransfersTable); len(left) != 0 {
		t.Fatalf("loaded objects left staged: %v", left)
	}
	// A merger retrying after the load must not stage the row again.
	stage(t, s, 1)
	if left := staged(t, store, bucket, TransfersTable); len(left) != 0 {
		t.Fatalf("a loaded transfer was staged again: %v", left)
	}
}

func TestFailedLoadIsRetriedUnderANewJobID(t *testing.T) {
	bucket := unique("l-fail")
	store := teststack.Bucket(t, bucket)
	fake, bq := newFakeBigQuery(t)
	stage(t, NewStaged(store, bucket), 2)
	l := New(Options{Store: store, Warehouse: bq, Bucket: bucket, Batch: 2})
	fake.FailLoads(1)
	if _, err := l.Once(context.Background()); err == nil || !strings.Contains(err.Error(), "injected load failure") {
		t.Fatalf("Once = %v, want the load failure", err)
	}
	if left := staged(t, store, bucket, ChunksTable); len(left) != 2 {
		t.Fatalf("after a failed load %d objects are staged, want both kept", len(left))
	}
	if _, err := l.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, j := range fake.Loads() {
		ids = append(ids, j["jobReference"].(map[string]any)["jobId"].(string))
	}
	if len(ids) != 3 || !strings.HasSuffix(ids[0], "_1") || !strings.HasSuffix(ids[1], "_2") || ids[1][:len(ids[1])-2] != ids[0][:len(ids[0])-2] {
		t.Fatalf("job ids %v: want the failed chunks load retried as _2, then the transfers load", ids)
	}
}

// deleteFails makes cleanup fail once, as a loader crashing right after a
// successful load would.
type deleteFails struct {
	*gcs.Store
	once sync.Once
}

func (d *deleteFails) Delete(ctx context.Context, bucket, name string) error {
	var fail bool
	d.once.Do(func() { fail = true })
	if fail {
		return errors.New("injected: crashed before cleaning up")
	}
	return d.Store.Delete(ctx, bucket, name)
}

func TestRetryAfterALoadDoesNotLoadTwice(t *testing.T) {
	bucket := unique("l-dedup")
	store := teststack.Bucket(t, bucket)
	fake, bq := newFakeBigQuery(t)
	stage(t, NewStaged(store, bucket), 2)
	l := New(Options{Store: &deleteFails{Store: store}, Warehouse: bq, Bucket: bucket, Batch: 2})
	if _, err := l.Once(context.Background()); err == nil {
		t.Fatal("want the injected cleanup failure")
	}
	if n := len(fake.Loads()); n != 1 {
		t.Fatalf("%d loads before the retry, want 1", n)
	}
	// A fresh loader finds the job done and only cleans up.
	l2 := New(Options{Store: store, Warehouse: bq, Bucket: bucket, Batch: 2})
	if _, err := l2.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	loads := fake.Loads()
	if len(loads) != 2 {
		t.Fatalf("%d load jobs, want 2: chunks once (not again after the crash), transfers once", len(loads))
	}
	if left := staged(t, store, bucket, ChunksTable); len(left) != 0 {
		t.Fatalf("objects still staged: %v", left)
	}
}

func TestOutageLosesNoRow(t *testing.T) {
	bucket := unique("l-outage")
	store := teststack.Bucket(t, bucket)
	fake, bq := newFakeBigQuery(t)
	stage(t, NewStaged(store, bucket), 1)
	l := New(Options{Store: store, Warehouse: bq, Bucket: bucket, Batch: 1})
	fake.Down(1000) // every request fails until the outage ends
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	_, err := l.Once(ctx)
	cancel()
	if err == nil {
		t.Fatal("Once succeeded during an outage")
	}
	if left := staged(t, store, bucket, TransfersTable); len(left) != 1 {
		t.Fatalf("the staged row is gone after an outage: %v", left)
	}
	fake.Down(0)
	if n, err := l.Once(context.Background()); err != nil || n != 2 {
		t.Fatalf("after the outage: %d, %v", n, err)
	}
	if len(fake.Loads()) != 2 {
		t.Fatalf("%d loads, want 2", len(fake.Loads()))
	}
}
