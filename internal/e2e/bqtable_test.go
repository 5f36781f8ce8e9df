package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/loader"
	"github.com/ferry-dev/ferry/internal/loader/bqtest"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/table/tabletest"
	"github.com/ferry-dev/ferry/internal/testutil"
)

// submitJSON runs producer submit --wait --json with args and returns the
// done event it printed and its exit status.
func submitJSON(t *testing.T, env []string, args ...string) (message.Done, int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binaries(t), "producer"), append([]string{"submit", "--wait", "--json"}, args...)...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := cmd.ProcessState.ExitCode()
	var done message.Done
	out := stdout.String()
	if i := strings.Index(out, "{"); i >= 0 {
		_ = json.Unmarshal([]byte(out[i:]), &done)
	}
	if err != nil && code == 0 {
		t.Fatalf("producer submit: %v", err)
	}
	return done, code, stderr.String()
}

// bqStack is a stack whose merger binary talks to the BigQuery REST
// double (project bq-e2e, datasets in location), which reads the sources
// of its loads from the stack's bucket; allow is the producer's
// FERRY_BQ_LOAD_DATASETS (bq-e2e.landing).
func bqStack(t *testing.T, location string) (*stack, *bqtest.Server, string) {
	s := newStack(t, stackOptions{noMerger: true})
	bq := bqtest.New("bq-e2e", func(ctx context.Context, uri string) ([]byte, error) {
		bucket, name, _ := strings.Cut(strings.TrimPrefix(uri, "gs://"), "/")
		return s.store.ReadAll(ctx, bucket, name)
	})
	bq.Location = location
	allow := "FERRY_BQ_LOAD_DATASETS=bq-e2e.landing"
	s.start("worker", "worker", s.env())
	s.start("merger", "merger", s.env(append(bqtest.Intercept(t, bq),
		"FERRY_BQ_DATASET=ferry_e2e", "FERRY_BQ_PROJECT=bq-e2e", "FERRY_BQ_LOCATION="+location, "FERRY_RESULTS_BUCKET="+s.bucket, allow)...))
	return s, bq, allow
}

// seedCSV writes a seed-like CSV of about size bytes into dir/name and
// returns its bytes.
func seedCSV(t *testing.T, dir, name string, size int64, seed int64) []byte {
	t.Helper()
	p := filepath.Join(dir, name)
	testutil.WriteCSV(t, p, size, seed)
	b, err := os.ReadFile(p)
	testutil.OK(t, err)
	return b
}

// Issue 29 §2, as deployed: producer submit --convert parquet --bq-table
// has the merger binary run one load job over exactly the transfer's
// Parquet parts, with the id the transfer decides, in the dataset's
// location; the double reads the parts with parquet-go and the table holds
// the CSV's records. The done event says the table, job and rows. A second
// transfer into the same table with the default --bq-write empty fails with
// BigQuery's own error and leaves its parts in place; a dataset outside
// FERRY_BQ_LOAD_DATASETS is refused before anything is sent.
func TestBQTableLoadsExactlyTheTransfersParts(t *testing.T) {
	s, bq, allow := bqStack(t, "us-central1")
	const bqProject = "bq-e2e"

	dir := filepath.Join(t.TempDir(), "day1")
	data := seedCSV(t, dir, "prices.csv", 3<<20, 31)
	done, code, stderr := submitJSON(t, s.env(allow), "--convert", "parquet", "--bq-table", "bq-e2e.landing.prices", "--chunk-size", "1MiB",
		dir, "gs://"+s.bucket+"/land")
	recs := tabletest.Records(t, data, ',')
	header, recs := recs[0], recs[1:]
	if code != 0 || done.Status != message.StatusOK || done.Load == nil || done.Load.Rows != int64(len(recs)) ||
		done.Load.JobID != message.LoadJobID(done.TransferID) || done.Load.Table != "bq-e2e.landing.prices" || done.Load.Location != bq.Location {
		t.Fatalf("submit: exit %d, done %+v (load %+v); want ok with %d rows loaded\n%s", code, done, done.Load, len(recs), tail(stderr, 3000))
	}
	var parts []string
	for n := range s.objects("land/day1/prices.csv/") {
		parts = append(parts, "gs://"+s.bucket+"/"+n)
	}
	sort.Strings(parts)
	var job map[string]any
	for _, j := range bq.Loads() {
		if bqtest.JobID(j) == done.Load.JobID {
			if job != nil {
				t.Fatalf("job %s inserted twice", done.Load.JobID)
			}
			job = j
		}
	}
	ld := bqtest.LoadConfig(job)
	dest, _ := ld["destinationTable"].(map[string]any)
	var uris []string
	for _, u := range ld["sourceUris"].([]any) {
		uris = append(uris, u.(string))
	}
	ref, _ := job["jobReference"].(map[string]any)
	if ld["sourceFormat"] != "PARQUET" || ld["writeDisposition"] != "WRITE_EMPTY" || ld["createDisposition"] != "CREATE_IF_NEEDED" ||
		dest["projectId"] != bqProject || dest["datasetId"] != "landing" || dest["tableId"] != "prices" || ref["location"] != bq.Location ||
		strings.Join(uris, " ") != strings.Join(parts, " ") || len(parts) != 3 {
		t.Fatalf("load job %v\nwant a PARQUET load, WRITE_EMPTY, into bq-e2e.landing.prices in %s, of exactly the parts %v", job, bq.Location, parts)
	}
	rows := bq.Rows("prices")
	if len(rows) != len(recs) {
		t.Fatalf("the table holds %d rows, the CSV %d records", len(rows), len(recs))
	}
	for i, r := range []int{0, len(recs) / 2, len(recs) - 1} {
		for c, name := range header {
			typ := map[int]string{0: "DATE", 10: "INT64"}[c]
			if c >= 5 && c <= 9 {
				typ = "DECIMAL(18,6)"
			}
			if got, want := rows[r][name], tabletest.Expect(t, typ, recs[r][c]); got != want {
				t.Fatalf("row %d (%d), column %s: the table has %v, the CSV %q", r, i, name, got, recs[r][c])
			}
		}
	}

	// Again into the same table, not empty now: BigQuery refuses, the
	// transfer fails with its words, and the parts it wrote stay.
	dir2 := filepath.Join(t.TempDir(), "day2")
	seedCSV(t, dir2, "prices.csv", 1<<20, 32)
	done2, code, stderr := submitJSON(t, s.env(allow), "--convert", "parquet", "--bq-table", "bq-e2e.landing.prices", dir2, "gs://"+s.bucket+"/land")
	if code != 1 || done2.Status != message.StatusFailed || !strings.Contains(done2.Error, "is not empty") || done2.Load == nil || done2.Files != 1 {
		t.Fatalf("second load: exit %d, done %+v; want failed with BigQuery's error and its one part listed\n%s", code, done2, tail(stderr, 2000))
	}
	if left := s.objects("land/day2/"); len(left) != 1 {
		t.Fatalf("a failed load left %d objects of its transfer, want its 1 part: %v", len(left), left)
	}
	if n := len(bq.Rows("prices")); n != len(recs) {
		t.Fatalf("the refused load changed the table: %d rows", n)
	}

	// A dataset configuration does not allow: refused, nothing sent.
	_, code, stderr = submitJSON(t, s.env(allow), "--convert", "parquet", "--bq-table", "bq-e2e.other.prices", dir2, "gs://"+s.bucket+"/other")
	if code == 0 || !strings.Contains(stderr, "dataset bq-e2e.other is not in FERRY_BQ_LOAD_DATASETS") {
		t.Fatalf("a dataset not allowed: exit %d, stderr %s", code, stderr)
	}
	if left := s.objects("other/"); len(left) != 0 {
		t.Fatalf("a refused request wrote %v", left)
	}
}

// Issue 29 §2 on the local stack: a merger without BigQuery writes the load
// job it would run to FERRY_LOADS_FILE, once, with the parts and their rows.
// Two appends into one table that end together share that job
// (FERRY_BQ_TABLE_BATCH=2: the batch is full at the second, whatever the
// window), and each done event names it with the transfer's own rows.
func TestBQTableWithoutBigQueryWritesTheLoadsFile(t *testing.T) {
	s := newStack(t, stackOptions{noMerger: true})
	allow := "FERRY_BQ_LOAD_DATASETS=local-project.landing"
	loads := filepath.Join(t.TempDir(), "loads.ndjson")
	s.start("worker", "worker", s.env())
	s.start("merger", "merger", s.env(allow, "FERRY_LOADS_FILE="+loads, "FERRY_BQ_TABLE_BATCH_WINDOW=10m", "FERRY_BQ_TABLE_BATCH=2"))
	var dones [2]message.Done
	var codes [2]int
	var stderrs [2]string
	recs := map[string]int{}
	var wg sync.WaitGroup
	for i, day := range []string{"day1", "day2"} {
		dir := filepath.Join(t.TempDir(), day)
		data := seedCSV(t, dir, "prices.csv", 2<<20, int64(33+i))
		recs[day] = len(tabletest.Records(t, data, ',')) - 1
		wg.Go(func() {
			dones[i], codes[i], stderrs[i] = submitJSON(t, s.env(allow), "--convert", "parquet", "--bq-table", "local-project.landing.prices", "--bq-write", "append",
				"--chunk-size", "1MiB", dir, "gs://"+s.bucket+"/land/"+day)
		})
	}
	wg.Wait()
	for i := range dones {
		if codes[i] != 0 || dones[i].Status != message.StatusOK || dones[i].Load == nil {
			t.Fatalf("submit %d: exit %d, done %+v\n%s", i, codes[i], dones[i], tail(stderrs[i], 3000))
		}
	}
	fh, err := os.Open(loads)
	testutil.OK(t, err)
	defer fh.Close()
	var lines []loader.LocalLoad
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		var l loader.LocalLoad
		testutil.OK(t, json.Unmarshal(sc.Bytes(), &l))
		lines = append(lines, l)
	}
	all := recs["day1"] + recs["day2"]
	if len(lines) != 1 || !strings.HasPrefix(lines[0].JobID, "ferry_load_batch_") || lines[0].Rows != int64(all) || lines[0].Write != "append" ||
		lines[0].Table != "local-project.landing.prices" || len(lines[0].URIs) != 4 {
		t.Fatalf("loads file %+v; want one shared append job of 4 parts and %d rows", lines, all)
	}
	for i, day := range []string{"day1", "day2"} {
		if l := dones[i].Load; l.JobID != lines[0].JobID || l.Rows != int64(recs[day]) {
			t.Fatalf("%s: load %+v, want job %s with its %d rows", day, l, lines[0].JobID, recs[day])
		}
	}
	code, out, _ := runBinary(t, s.env(allow), "producer", "status", "--bucket", "gs://"+s.bucket, dones[0].TransferID)
	if want := fmt.Sprintf("local-project.landing.prices: %d rows loaded by job %s (local)", recs["day1"], lines[0].JobID); code != 0 || !strings.Contains(out, want) {
		t.Fatalf("producer status: exit %d, %s\nwant a line saying %q", code, out, want)
	}
}

// Issue 29 §2 without conversion: --bq-table with --codec gzip loads the
// CSV objects as sent, a tree of key=value directories hive-partitioned:
// the merger binary's job reads CSV with the header skipped and the
// columns detected, over exactly the .csv.gz objects (not the text file
// beside them), with the source URI prefix just above the keys; the double
// gunzips every member, so the table holds every record with its dt
// column. Converted, the same tree's Parquet parts carry dt as a column
// and restore --to csv gives the files back. The default codec (zstd) is
// refused before anything is sent, as is a transfer of CSV and NDJSON
// together at its end (one job, one format).
func TestBQTableLoadsTheObjectsAsSentHivePartitioned(t *testing.T) {
	s, bq, allow := bqStack(t, "US")

	dir := filepath.Join(t.TempDir(), "export")
	var records int
	for i, day := range []string{"2026-12-01", "2026-12-02"} {
		data := seedCSV(t, filepath.Join(dir, "dt="+day), "prices.csv", 1536<<10, int64(40+i)) // two chunks: a composed gzip of two members
		records += len(tabletest.Records(t, data, ',')) - 1
	}
	testutil.OK(t, os.WriteFile(filepath.Join(dir, "dt=2026-12-01", "README.txt"), []byte("not a table\n"), 0o644))

	_, code, stderr := submitJSON(t, s.env(allow), "--bq-table", "bq-e2e.landing.prices", dir, "gs://"+s.bucket+"/zstd")
	if code == 0 || !strings.Contains(stderr, "which BigQuery reads gzip'd or uncompressed, not zstd: add --codec gzip") || len(s.objects("zstd/")) != 0 {
		t.Fatalf("zstd objects for a load: exit %d, %s", code, tail(stderr, 2000))
	}

	done, code, stderr := submitJSON(t, s.env(allow), "--codec", "gzip", "--chunk-size", "1MiB", "--bq-table", "bq-e2e.landing.prices", dir, "gs://"+s.bucket+"/land")
	if code != 0 || done.Status != message.StatusOK || done.Load == nil || done.Load.Rows != int64(records) {
		t.Fatalf("submit: exit %d, done %+v (load %+v); want ok with %d rows loaded\n%s", code, done, done.Load, records, tail(stderr, 3000))
	}
	var job map[string]any
	for _, j := range bq.Loads() {
		if bqtest.JobID(j) == done.Load.JobID {
			job = j
		}
	}
	ld := bqtest.LoadConfig(job)
	var uris []string
	for _, u := range ld["sourceUris"].([]any) {
		uris = append(uris, u.(string))
	}
	sort.Strings(uris)
	want := "gs://" + s.bucket + "/land/export/dt=2026-12-01/prices.csv.gz gs://" + s.bucket + "/land/export/dt=2026-12-02/prices.csv.gz"
	hp, _ := ld["hivePartitioningOptions"].(map[string]any)
	if ld["sourceFormat"] != "CSV" || ld["autodetect"] != true || fmt.Sprint(ld["skipLeadingRows"]) != "1" || strings.Join(uris, " ") != want ||
		hp["mode"] != "AUTO" || hp["sourceUriPrefix"] != "gs://"+s.bucket+"/land/export/" {
		t.Fatalf("load job %v\nwant CSV, autodetect, skipLeadingRows 1, hive AUTO under land/export/, of %s", ld, want)
	}
	rows := bq.Rows("prices")
	days := map[any]int{}
	for _, r := range rows {
		days[r["dt"]]++
	}
	if len(rows) != records || len(days) != 2 || days["2026-12-01"] == 0 || rows[0]["symbol"] == nil {
		t.Fatalf("the table holds %d rows (days %v, first %v), the CSVs %d records", len(rows), days, rows[0], records)
	}

	// Converted, the same tree's parts carry the keys as columns (a
	// part's directory is its file's name, which hive detection does not
	// take): the table gets dt all the same, and restore --to csv gives the
	// files back as they were.
	done, code, stderr = submitJSON(t, s.env(allow), "--convert", "parquet", "--chunk-size", "1MiB", "--bq-table", "bq-e2e.landing.prices_pq", dir, "gs://"+s.bucket+"/pq")
	if code != 0 || done.Status != message.StatusOK || done.Load == nil || done.Load.Rows != int64(records) {
		t.Fatalf("converted: exit %d, done %+v (load %+v)\n%s", code, done, done.Load, tail(stderr, 3000))
	}
	pqRows := bq.Rows("prices_pq")
	days = map[any]int{}
	for _, r := range pqRows {
		days[r["dt"]]++
	}
	if len(pqRows) != records || days["2026-12-01"]+days["2026-12-02"] != records || days["2026-12-01"] == 0 {
		t.Fatalf("converted: the table holds %d rows by day %v, the CSVs %d records", len(pqRows), days, records)
	}
	for _, j := range bq.Loads() {
		if bqtest.JobID(j) == done.Load.JobID && bqtest.LoadConfig(j)["hivePartitioningOptions"] != nil {
			t.Fatalf("a load of parts asks for hive partitioning: %v", bqtest.LoadConfig(j))
		}
	}
	out := filepath.Join(t.TempDir(), "out")
	if code, _, stderr := runBinary(t, s.env(allow), "restore", "--to", "csv", "gs://"+s.bucket+"/pq/", out); code != 0 {
		t.Fatalf("restore --to csv: exit %d, %s", code, stderr)
	}
	for _, day := range []string{"2026-12-01", "2026-12-02"} {
		want, err := os.ReadFile(filepath.Join(dir, "dt="+day, "prices.csv"))
		testutil.OK(t, err)
		got, err := os.ReadFile(filepath.Join(out, "export", "dt="+day, "prices.csv"))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("dt=%s/prices.csv came back as %d bytes (%v), sent %d", day, len(got), err, len(want))
		}
	}

	// CSV and NDJSON in one transfer: one job cannot read both.
	testutil.OK(t, os.WriteFile(filepath.Join(dir, "dt=2026-12-02", "events.ndjson"), []byte(`{"a":1}`+"\n"), 0o644))
	done, code, _ = submitJSON(t, s.env(allow), "--codec", "gzip", "--bq-table", "bq-e2e.landing.mixed", dir, "gs://"+s.bucket+"/mixed")
	if code == 0 || done.Status != message.StatusFailed || !strings.Contains(done.Error, "one load job reads one format") ||
		!strings.Contains(done.Error, "events.ndjson is NEWLINE_DELIMITED_JSON") || done.Files != 4 {
		t.Fatalf("mixed: exit %d, done %+v", code, done)
	}
}

// --skip-unchanged with --convert parquet and a --bq-table append: a CSV
// whose parts came from the same bytes converted the same way is skipped,
// all its parts together, so its rows are not appended twice (the end runs
// no job and says so); a CSV that changed (its mtime, then with --checksum
// its bytes) is converted and loaded again; truncate is refused, as it
// would leave the table with the changed files' rows only.
func TestSkipUnchangedDoesNotReloadConvertedFiles(t *testing.T) {
	s := newStack(t, stackOptions{noMerger: true})
	allow := "FERRY_BQ_LOAD_DATASETS=local-project.landing"
	loads := filepath.Join(t.TempDir(), "loads.ndjson")
	s.start("worker", "worker", s.env())
	s.start("merger", "merger", s.env(allow, "FERRY_LOADS_FILE="+loads, "FERRY_BQ_TABLE_BATCH_WINDOW=0s"))
	dir := filepath.Join(t.TempDir(), "day")
	seedCSV(t, dir, "a.csv", 2<<20, 51)
	seedCSV(t, dir, "b.csv", 300<<10, 52)
	args := []string{"--convert", "parquet", "--bq-table", "local-project.landing.prices", "--bq-write", "append", "--chunk-size", "1MiB", "--skip-unchanged"}
	submit := func(extra ...string) message.Done {
		t.Helper()
		done, code, stderr := submitJSON(t, s.env(allow), append(append(append([]string{}, args...), extra...), dir, "gs://"+s.bucket+"/land")...)
		if code != 0 || done.Status != message.StatusOK || done.Load == nil {
			t.Fatalf("submit %v: exit %d, done %+v\n%s", extra, code, done, tail(stderr, 3000))
		}
		return done
	}
	jobs := func() int {
		b, err := os.ReadFile(loads)
		testutil.OK(t, err)
		return strings.Count(string(b), "\n")
	}
	first := submit()
	if first.Files != 3 || jobs() != 1 {
		t.Fatalf("first: %d objects, %d load jobs; want a.csv's 2 parts and b.csv's 1 in one job", first.Files, jobs())
	}
	again := submit()
	if again.Files != 0 || again.FilesSkipped != 3 || again.Load.JobID != "" || jobs() != 1 {
		t.Fatalf("unchanged: done %+v (load %+v), %d load jobs; want every part skipped and no job", again, again.Load, jobs())
	}
	code, out, _ := runBinary(t, s.env(allow), "producer", "status", "--bucket", "gs://"+s.bucket, again.TransferID)
	if code != 0 || !strings.Contains(out, "nothing loaded: every file to load was unchanged") {
		t.Fatalf("producer status: exit %d\n%s", code, out)
	}
	later := time.Now().Add(time.Hour)
	testutil.OK(t, os.Chtimes(filepath.Join(dir, "a.csv"), later, later))
	touched := submit()
	if touched.Files != 2 || touched.FilesSkipped != 1 || touched.Load.JobID == "" || jobs() != 2 {
		t.Fatalf("a.csv touched: done %+v (load %+v), %d load jobs; want its 2 parts sent and loaded, b.csv skipped", touched, touched.Load, jobs())
	}
	if sum := submit("--checksum"); sum.Files != 0 || sum.FilesSkipped != 3 {
		t.Fatalf("--checksum over the same bytes: done %+v", sum)
	}
	// The same bytes converted otherwise are other parts: sent again.
	if snappy := submit("--parquet-compression", "snappy"); snappy.Files != 3 || snappy.FilesSkipped != 0 {
		t.Fatalf("the same files, snappy columns: done %+v; want every part converted again", snappy)
	}
	_, code, stderr := submitJSON(t, s.env(allow), "--convert", "parquet", "--bq-table", "local-project.landing.prices", "--bq-write", "truncate",
		"--skip-unchanged", dir, "gs://"+s.bucket+"/land")
	if code == 0 || !strings.Contains(stderr, "--skip-unchanged with --bq-write truncate") {
		t.Fatalf("truncate with --skip-unchanged: exit %d, %s", code, tail(stderr, 2000))
	}
}

// Issue 43 §3, done when: a nightly batch of a directory with a good
// export, a header-only file (a quiet day) and a 0-byte file ends ok. The
// header-only file lands as one Parquet part of no rows with its columns;
// the 0-byte file is skipped, counted and named; the load job loads the
// good file's parts, and the table holds its records.
func TestANightlyBatchWithAnEmptyDayEndsOKAndLoads(t *testing.T) {
	s, bq, allow := bqStack(t, "us-central1")
	dir := filepath.Join(t.TempDir(), "night")
	data := seedCSV(t, dir, "a-busy-day.csv", 1<<20, 7)
	recs := tabletest.Records(t, data, ',')
	header, recs := recs[0], recs[1:]
	testutil.OK(t, os.WriteFile(filepath.Join(dir, "b-quiet-day.csv"), []byte(strings.Join(header, ",")+"\n"), 0o644))
	testutil.OK(t, os.WriteFile(filepath.Join(dir, "c-no-export.csv"), nil, 0o644))
	done, code, stderr := submitJSON(t, s.env(allow), "--convert", "parquet", "--bq-table", "bq-e2e.landing.nightly", dir, "gs://"+s.bucket+"/land")
	if code != 0 || done.Status != message.StatusOK || done.Load == nil || done.Load.Rows != int64(len(recs)) || done.FilesSkipped != 1 || done.FilesConverted != 2 {
		t.Fatalf("submit: exit %d, done %+v (load %+v); want ok, %d rows loaded, 2 files converted, the empty one skipped\n%s",
			code, done, done.Load, len(recs), tail(stderr, 3000))
	}
	quiet := s.objects("land/night/b-quiet-day.csv/")
	if len(quiet) != 1 {
		t.Fatalf("the quiet day's parts: %v; want one", quiet)
	}
	for name := range quiet {
		b, err := s.store.ReadAll(context.Background(), s.bucket, name)
		testutil.OK(t, err)
		cols, _, rows := tabletest.ReadBack(t, b)
		if len(rows) != 0 || strings.Join(cols, ",") != strings.Join(header, ",") {
			t.Fatalf("the quiet day's part has columns %v and %d rows; want the header's columns and no rows", cols, len(rows))
		}
	}
	if got := len(bq.Rows("nightly")); got != len(recs) {
		t.Fatalf("the table holds %d rows, the busy day %d records", got, len(recs))
	}
}
