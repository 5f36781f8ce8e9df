// Package bqtest is a BigQuery REST double for tests: it answers the calls a
// load makes (jobs.insert, jobs.get), keeps the jobs it was given, and, when
// it can read the source objects, appends their NDJSON rows to in-memory
// tables, so a test asserts rows, not only requests. Intercept puts it in
// front of a child process that talks to the real endpoints, so a ferry
// binary can be tested unchanged.
package bqtest

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/ferry-dev/ferry/internal/table/tabletest"
)

// Reader returns the bytes of a gs://BUCKET/OBJECT URI.
type Reader func(ctx context.Context, uri string) ([]byte, error)

// Server is the double. It is safe for concurrent use.
type Server struct {
	// Location, when set, is the dataset's single region: as in
	// BigQuery, jobs.get finds a job only when asked with that location,
	// and answers 404 without it. Set it before Start.
	Location string

	project string
	read    Reader

	mu       sync.Mutex
	jobs     map[string]map[string]any // job id → job resource
	inserts  []map[string]any
	rows     map[string][]map[string]any // table id → rows loaded
	failLoad int                         // the next failLoad loads end DONE with an errorResult
	down     int                         // the next down requests answer 503
	paths    []string
}

// New returns a double for project. With read set, a load job reads its
// source URIs and appends their rows to the destination table; a URI it
// cannot read fails the job, as in BigQuery.
func New(project string, read Reader) *Server {
	return &Server{project: project, read: read, jobs: map[string]map[string]any{}, rows: map[string][]map[string]any{}}
}

// Start serves s on loopback until the test ends and returns its URL.
func (s *Server) Start(t testing.TB) string {
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv.URL
}

// FailLoads makes the next n load jobs end DONE with an error.
func (s *Server) FailLoads(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failLoad = n
}

// Down makes the next n requests answer 503 (0 ends an outage).
func (s *Server) Down(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = n
}

// Loads returns the load jobs inserted, in order.
func (s *Server) Loads() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string]any(nil), s.inserts...)
}

// Rows returns the rows loaded into table.
func (s *Server) Rows(table string) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string]any(nil), s.rows[table]...)
}

// Paths returns "METHOD PATH" of every request.
func (s *Server) Paths() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.paths...)
}

// LoadConfig returns a load job's configuration.load.
func LoadConfig(job map[string]any) map[string]any {
	cfg, _ := job["configuration"].(map[string]any)
	ld, _ := cfg["load"].(map[string]any)
	return ld
}

// JobID returns a job's id.
func JobID(job map[string]any) string {
	ref, _ := job["jobReference"].(map[string]any)
	id, _ := ref["jobId"].(string)
	return id
}

// ServeHTTP answers jobs.insert, jobs.get and OAuth token requests.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.paths = append(s.paths, r.Method+" "+r.URL.Path)
	down := s.down > 0
	if down {
		s.down--
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Path == "/token" { // OAuth, for a child process using Application Default Credentials
		_, _ = io.WriteString(w, `{"access_token":"bqtest-token","token_type":"Bearer","expires_in":3600}`)
		return
	}
	if down {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"error":{"code":503,"message":"backend unavailable (injected)"}}`)
		return
	}
	prefix := "/bigquery/v2/projects/" + s.project + "/jobs"
	switch {
	case r.Method == http.MethodPost && r.URL.Path == prefix:
		var job map[string]any
		if err := json.NewDecoder(r.Body).Decode(&job); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		id := JobID(job)
		s.mu.Lock()
		_, dup := s.jobs[id]
		s.mu.Unlock()
		if dup {
			w.WriteHeader(http.StatusConflict)
			_, _ = io.WriteString(w, `{"error":{"code":409,"message":"Already Exists: Job `+s.project+`:`+id+`"}}`)
			return
		}
		status, loaded := s.run(r.Context(), job)
		s.mu.Lock()
		job["status"] = status
		job["statistics"] = map[string]any{"load": map[string]any{"outputRows": fmt.Sprint(loaded)}}
		s.inserts = append(s.inserts, job)
		s.jobs[id] = job
		s.mu.Unlock()
		_ = json.NewEncoder(w).Encode(job)
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, prefix+"/"):
		s.mu.Lock()
		job, ok := s.jobs[strings.TrimPrefix(r.URL.Path, prefix+"/")]
		s.mu.Unlock()
		if s.Location != "" && !strings.EqualFold(r.URL.Query().Get("location"), s.Location) {
			ok = false // a job of a regional dataset is not found without its location
		}
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"error":{"code":404,"message":"Not found: Job"}}`)
			return
		}
		_ = json.NewEncoder(w).Encode(job)
	default:
		http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusNotImplemented)
	}
}

// run carries out a load job and returns its final status and the rows it
// loaded.
func (s *Server) run(ctx context.Context, job map[string]any) (map[string]any, int) {
	status, n := s.load(ctx, job)
	if status["errorResult"] != nil {
		n = 0
	}
	return status, n
}

// load carries out a load job.
func (s *Server) load(ctx context.Context, job map[string]any) (status map[string]any, loaded int) {
	failed := func(msg string) map[string]any {
		return map[string]any{"state": "DONE", "errorResult": map[string]any{"reason": "invalid", "message": msg}}
	}
	s.mu.Lock()
	inject := s.failLoad > 0
	if inject {
		s.failLoad--
	}
	s.mu.Unlock()
	if inject {
		return failed("injected load failure"), 0
	}
	ld := LoadConfig(job)
	if ld == nil || s.read == nil {
		return map[string]any{"state": "DONE"}, 0
	}
	dest, _ := ld["destinationTable"].(map[string]any)
	table, _ := dest["tableId"].(string)
	uris, _ := ld["sourceUris"].([]any)
	format, _ := ld["sourceFormat"].(string)
	var rows []map[string]any
	for _, u := range uris {
		uri, _ := u.(string)
		b, err := s.read(ctx, uri)
		if err != nil {
			return failed(fmt.Sprintf("Not found: URI %s: %v", uri, err)), 0
		}
		if len(b) > 1 && b[0] == 0x1f && b[1] == 0x8b { // gzip'd, as BigQuery reads it: every member
			zr, err := gzip.NewReader(bytes.NewReader(b))
			if err == nil {
				b, err = io.ReadAll(zr)
			}
			if err != nil {
				return failed(fmt.Sprintf("Error while reading data from %s: gzip: %v", uri, err)), 0
			}
		}
		var got []map[string]any
		switch format {
		case "PARQUET":
			got, err = parquetRows(b)
		case "CSV":
			got, err = csvRows(b, ld)
		default:
			got, err = ndjsonRows(b)
		}
		if err != nil {
			return failed(fmt.Sprintf("Error while reading data from %s: %v", uri, err)), 0
		}
		if err := hiveColumns(got, uri, ld); err != nil {
			return failed(err.Error()), 0
		}
		rows = append(rows, got...)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch ld["writeDisposition"] {
	case "WRITE_EMPTY":
		if len(s.rows[table]) > 0 {
			return failed(fmt.Sprintf("Already Exists: Table %s.%s is not empty (writeDisposition WRITE_EMPTY)", dest["datasetId"], table)), 0
		}
	case "WRITE_TRUNCATE":
		s.rows[table] = nil
	}
	s.rows[table] = append(s.rows[table], rows...) // a job's rows land together or not at all
	return map[string]any{"state": "DONE"}, len(rows)
}

// csvRows reads CSV as a load with autodetect and skipLeadingRows 1 does:
// the first record names the columns, each cell is text.
func csvRows(b []byte, ld map[string]any) ([]map[string]any, error) {
	if ld["autodetect"] != true || fmt.Sprint(ld["skipLeadingRows"]) != "1" {
		return nil, fmt.Errorf("bqtest reads CSV with autodetect and skipLeadingRows 1 only, not %v", ld)
	}
	r := csv.NewReader(bytes.NewReader(b))
	if d, _ := ld["fieldDelimiter"].(string); d != "" {
		r.Comma = []rune(d)[0]
	}
	recs, err := r.ReadAll()
	if err != nil || len(recs) == 0 {
		return nil, fmt.Errorf("CSV: %v (%d records)", err, len(recs))
	}
	rows := make([]map[string]any, len(recs)-1)
	for i, rec := range recs[1:] {
		rows[i] = map[string]any{}
		for j, name := range recs[0] {
			rows[i][name] = rec[j]
		}
	}
	return rows, nil
}

// hiveColumns adds the key=value directories of uri below the load's
// hive partitioning prefix to each row, as a hive-partitioned load does;
// a uri outside the prefix, or a directory that is no key=value, is
// BigQuery's error.
func hiveColumns(rows []map[string]any, uri string, ld map[string]any) error {
	hp, _ := ld["hivePartitioningOptions"].(map[string]any)
	if hp == nil {
		return nil
	}
	prefix, _ := hp["sourceUriPrefix"].(string)
	if hp["mode"] != "AUTO" || !strings.HasPrefix(uri, prefix) || !strings.HasSuffix(prefix, "/") {
		return fmt.Errorf("invalid hive partitioning options %v for %s", hp, uri)
	}
	dirs := strings.Split(strings.TrimPrefix(uri, prefix), "/")
	for _, d := range dirs[:len(dirs)-1] {
		k, v, ok := strings.Cut(d, "=")
		if !ok {
			return fmt.Errorf("failed to infer hive partitioning: %s is not key=value in %s", d, uri)
		}
		for _, r := range rows {
			r[k] = v
		}
	}
	return nil
}

// ndjsonRows reads NEWLINE_DELIMITED_JSON.
func ndjsonRows(b []byte) ([]map[string]any, error) {
	var rows []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var row map[string]any
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			return nil, err
		}
		rows = append(rows, row)
	}
	return rows, sc.Err()
}

// parquetRows reads a Parquet file with parquet-go (tabletest): each cell
// as text, "" for NULL.
func parquetRows(b []byte) ([]map[string]any, error) {
	names, _, cells, err := tabletest.Read(b)
	if err != nil {
		return nil, err
	}
	rows := make([]map[string]any, len(cells))
	for i, c := range cells {
		rows[i] = map[string]any{}
		for j, n := range names {
			rows[i][n] = c[j]
		}
	}
	return rows, nil
}
