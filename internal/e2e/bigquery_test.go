package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/loader/bqtest"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/teststack"
	"github.com/ferry-dev/ferry/internal/testutil"
)

// The merger's BigQuery mode as deployed: the merger binary, configured only
// by FERRY_BQ_* variables, reaches "BigQuery" over HTTPS with Application
// Default Credentials. Behind a loopback proxy the BigQuery double answers,
// reading the staged NDJSON from fake-gcs-server as a load job would. A real
// transfer by real processes (producer submit, worker, merger) must land its
// row through a load job, exactly once, and leave nothing staged.
func TestMergerLoadsRowsIntoBigQuery(t *testing.T) {
	s := newStack(t, stackOptions{noMerger: true})
	const bqProject, dataset = "bq-e2e", "ferry_e2e"
	bq := bqtest.New(bqProject, func(ctx context.Context, uri string) ([]byte, error) {
		bucket, name, _ := strings.Cut(strings.TrimPrefix(uri, "gs://"), "/")
		return s.store.ReadAll(ctx, bucket, name)
	})
	bq.Location = "us-central1"
	intercept := bqtest.Intercept(t, bq)
	s.start("worker", "worker", s.env())
	s.start("merger", "merger", s.env(append(intercept,
		"FERRY_BQ_DATASET="+dataset, "FERRY_BQ_PROJECT="+bqProject, "FERRY_BQ_LOCATION="+bq.Location, "FERRY_RESULTS_BUCKET="+s.bucket,
		"FERRY_LOAD_BATCH=1", "FERRY_LOAD_MAX_AGE=1s")...))

	src := filepath.Join(t.TempDir(), "bq.csv")
	testutil.WriteCSV(t, src, 3_000_000, 21)
	key := "bq-e2e-" + s.bucket
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	submit := exec.CommandContext(ctx, filepath.Join(binaries(t), "producer"), "submit", "--wait", "--json",
		"--method", "bq-e2e", "--chunk-size", "1MiB", "--idempotency-key", key, src, "gs://"+s.bucket+"/bq")
	submit.Env = s.env()
	var stdout, stderr bytes.Buffer
	submit.Stdout, submit.Stderr = &stdout, &stderr
	if err := submit.Run(); err != nil {
		t.Fatalf("producer submit: %v\n%s", err, tail(stderr.String(), 4000))
	}
	tid := message.NewTransferID(key)
	var done map[string]any
	out := stdout.String()
	if json.Unmarshal([]byte(out), &done) != nil || done["transfer_id"] != tid || done["status"] != "ok" {
		t.Fatalf("submit printed %q, want the ok done event of %s", out, tid)
	}

	rowsOf := func(table string) []map[string]any {
		var out []map[string]any
		for _, r := range bq.Rows(table) {
			if r["transfer_id"] == tid {
				out = append(out, r)
			}
		}
		return out
	}
	staged := func() []string {
		var left []string
		_ = s.store.List(context.Background(), s.bucket, message.StagingRoot+"results/", func(a gcs.Attrs) error {
			if strings.HasSuffix(a.Name, ".ndjson") { // rows waiting for a load (the rest are the loader's tombstones)
				left = append(left, a.Name)
			}
			return nil
		})
		return left
	}
	// The loader deletes a staged row after its load; until then it may
	// still be loading.
	teststack.Until(t, 60*time.Second, "the transfer's rows in BigQuery and nothing left staged", func() bool {
		return len(rowsOf("transfers")) > 0 && len(rowsOf("chunks")) > 0 && len(staged()) == 0
	})

	rows := rowsOf("transfers")
	if len(rows) != 1 {
		t.Fatalf("%d rows for %s in transfers, want exactly 1: %v", len(rows), tid, rows)
	}
	st, _ := os.Stat(src)
	row := rows[0]
	if row["status"] != "ok" || row["method"] != "bq-e2e" || row["size_bytes"] != float64(st.Size()) {
		t.Fatalf("row %v: want status ok, method bq-e2e, size_bytes %d", row, st.Size())
	}
	if n := len(rowsOf("chunks")); float64(n) != row["chunks"] {
		t.Fatalf("%d chunk rows, the transfer row says %v chunks", n, row["chunks"])
	}
	loads := map[string]int{}
	for _, job := range bq.Loads() {
		ld := bqtest.LoadConfig(job)
		dest, _ := ld["destinationTable"].(map[string]any)
		if dest["projectId"] != bqProject || dest["datasetId"] != dataset || ld["writeDisposition"] != "WRITE_APPEND" {
			t.Errorf("load job %s into %v (%v), want %s.%s, appending", bqtest.JobID(job), dest, ld["writeDisposition"], bqProject, dataset)
		}
		if errs, _ := job["status"].(map[string]any)["errorResult"]; errs != nil {
			t.Errorf("load job %s failed: %v", bqtest.JobID(job), errs)
		}
		uris, _ := ld["sourceUris"].([]any)
		for _, u := range uris {
			if strings.HasSuffix(u.(string), "/"+tid+".ndjson") {
				loads[dest["tableId"].(string)]++
			}
		}
	}
	if loads["transfers"] != 1 || loads["chunks"] != 1 {
		t.Fatalf("the transfer's rows were loaded %v times per table, want once each", loads)
	}
	if _, err := os.Stat(s.results); !os.IsNotExist(err) {
		t.Errorf("with FERRY_BQ_DATASET the merger also wrote %s (%v)", s.results, err)
	}
}
