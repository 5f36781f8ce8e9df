// Package result defines the benchmark row — the seeds' result record made
// durable, one per transfer — and the local sink that appends rows to an
// NDJSON file with the BigQuery table's schema, loadable as it is with
// bq load --source_format=NEWLINE_DELIMITED_JSON.
package result

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"
)

// Row is one transfer's benchmark record.
type Row struct {
	TransferID   string    `json:"transfer_id"`
	Method       string    `json:"method"`
	Tier         string    `json:"tier"`
	Source       string    `json:"source"`
	Destination  string    `json:"destination"`
	Files        int       `json:"files"`
	SizeBytes    int64     `json:"size_bytes"`
	WireBytes    int64     `json:"wire_bytes"`
	Ratio        float64   `json:"ratio"`
	Codec        string    `json:"codec"`
	Level        int       `json:"level"`
	ChunkSize    int64     `json:"chunk_size"`
	Chunks       int       `json:"chunks"`
	Workers      int       `json:"workers"`
	CompressMS   int64     `json:"compress_ms"`
	UploadMS     int64     `json:"upload_ms"`
	ComposeMS    int64     `json:"compose_ms"`
	VerifyMS     int64     `json:"verify_ms"`
	TotalMS      int64     `json:"total_ms"`
	RawMBps      float64   `json:"raw_mbps"`
	WireMBps     float64   `json:"wire_mbps"`
	Status       string    `json:"status"`
	Error        string    `json:"error,omitempty"`
	StartedAt    time.Time `json:"started_at"`
	FinishedAt   time.Time `json:"finished_at"`
	FerryVersion string    `json:"ferry_version"`
	Labels       []Label   `json:"labels,omitempty"`
}

// Label is one free-form key/value label of a request.
type Label struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// MBps is bytes per millisecond expressed in MB/s (10^6 bytes), as the seeds
// print them; 0 when ms is 0.
func MBps(bytes, ms int64) float64 {
	if ms <= 0 {
		return 0
	}
	return float64(bytes) / 1e6 / (float64(ms) / 1000)
}

// File is a sink that appends rows to a local NDJSON file. A transfer's row
// is written once even when the merger retries: rows already in the file are
// remembered by transfer id. It is safe for concurrent use.
type File struct {
	path string
	mu   sync.Mutex
	seen map[string]bool
}

// OpenFile opens (or creates) the NDJSON file at path.
func OpenFile(path string) (*File, error) {
	f := &File{path: path, seen: map[string]bool{}}
	rows, err := ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	for _, r := range rows {
		f.seen[r.TransferID] = true
	}
	return f, nil
}

// Write appends r unless a row of its transfer is already there, and syncs.
func (f *File) Write(_ context.Context, r Row) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.seen[r.TransferID] {
		return nil
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	fh, err := os.OpenFile(f.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("results file: %w", err)
	}
	if _, err := fh.Write(append(b, '\n')); err != nil {
		fh.Close()
		return fmt.Errorf("results file %s: %w", f.path, err)
	}
	if err := fh.Sync(); err != nil {
		fh.Close()
		return fmt.Errorf("results file %s: %w", f.path, err)
	}
	if err := fh.Close(); err != nil {
		return fmt.Errorf("results file %s: %w", f.path, err)
	}
	f.seen[r.TransferID] = true
	return nil
}

// ReadFile reads every row of an NDJSON results file; errors name the line.
func ReadFile(path string) ([]Row, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	var rows []Row
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for n := 1; sc.Scan(); n++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var r Row
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		rows = append(rows, r)
	}
	return rows, sc.Err()
}
