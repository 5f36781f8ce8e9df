// Package benchrow defines the benchmark row the merger writes, one per
// transfer (the seeds' result record made durable), and the local sink
// that appends rows to an NDJSON file with the BigQuery table's schema, loadable as it is with
// bq load --source_format=NEWLINE_DELIMITED_JSON.
package benchrow

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"iter"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/osfile"
)

// Row is one transfer's benchmark record: a row of the BigQuery table
// transfers. Its fields, JSON names and desc tags are the single definition
// of that table's schema (see Schema and schema/transfers.json).
type Row struct {
	TransferID    string     `json:"transfer_id" desc:"Transfer id: derived from the idempotency key, or time-ordered and random"`
	Method        string     `json:"method" desc:"Method name of the request, compared across runs"`
	Tier          string     `json:"tier" desc:"Size tier of the seeds: small (< 50 MB), medium (< 600 MB) or large"`
	Source        string     `json:"source" desc:"Source paths, comma-separated"`
	Destination   string     `json:"destination" desc:"gs://bucket/prefix of the final objects"`
	Files         int        `json:"files" desc:"Files transferred"`
	SizeBytes     int64      `json:"size_bytes" desc:"Raw bytes of all files"`
	WireBytes     int64      `json:"wire_bytes" desc:"Compressed bytes stored in GCS"`
	Ratio         float64    `json:"ratio" desc:"size_bytes / wire_bytes"`
	Codec         string     `json:"codec" desc:"zstd, gzip or none"`
	Level         int        `json:"level" desc:"Compression level asked for; 0: zstd chose each chunk's level by what waited (levels)"`
	Levels        []LevelUse `json:"levels,omitempty" desc:"Levels the producer compressed at: per level, the chunks and raw bytes"`
	ChunkSize     int64      `json:"chunk_size" desc:"Requested chunk size in raw bytes"`
	Chunks        int        `json:"chunks" desc:"Chunks of all files"`
	Workers       int        `json:"workers" desc:"Distinct workers that uploaded chunks"`
	CompressMS    int64      `json:"compress_ms" desc:"Producer: read and compress, milliseconds"`
	UploadMS      int64      `json:"upload_ms" desc:"Workers: first upload start to last chunk stored, milliseconds"`
	ComposeMS     int64      `json:"compose_ms" desc:"Merger: compose trees, milliseconds"`
	VerifyMS      int64      `json:"verify_ms" desc:"Merger: final size and CRC32C checks, milliseconds"`
	TotalMS       int64      `json:"total_ms" desc:"Request start to done, milliseconds"`
	RawMBps       *float64   `json:"raw_mbps" desc:"size_bytes / total, MB/s (10^6 bytes); null unless status is ok"`
	WireMBps      *float64   `json:"wire_mbps" desc:"wire_bytes / upload stage, MB/s (10^6 bytes); null unless status is ok"`
	FilesSkipped  int        `json:"files_skipped" desc:"Files not sent: their final object was there already or unchanged, or the walk skipped them (links, FIFOs, sockets, devices, unreadable files)"`
	Status        string     `json:"status" desc:"ok, failed or cancelled"`
	Error         string     `json:"error,omitempty" desc:"Why the transfer failed"`
	StartedAt     time.Time  `json:"started_at" desc:"When the producer started the transfer"`
	FinishedAt    time.Time  `json:"finished_at" desc:"When the merger finished it"`
	FerryVersion  string     `json:"ferry_version" desc:"Version of the merger that wrote the row"`
	Labels        []Label    `json:"labels,omitempty" desc:"Free-form labels of the request"`
	TableBytes    int64      `json:"table_bytes,omitempty" desc:"Bytes of delimited text converted to Parquet (--convert parquet); their Parquet parts are counted in size_bytes and wire_bytes"`
	Rows          int64      `json:"rows,omitempty" desc:"Rows of those Parquet parts"`
	RowsRejected  int64      `json:"rows_rejected,omitempty" desc:"Records left out of those parts (--bad-rows), each named in a rejects.ndjson beside its file's parts"`
	BQTable       string     `json:"bq_table,omitempty" desc:"BigQuery table the Parquet parts were loaded into (--bq-table)"`
	BQJobID       string     `json:"bq_job_id,omitempty" desc:"Load job that loaded them (one per transfer)"`
	BQRows        int64      `json:"bq_rows,omitempty" desc:"Rows the load job loaded"`
	FilesAppended int        `json:"files_appended,omitempty" desc:"Files that grew, sent as their tail only and composed onto their objects (--skip-unchanged); counted in files and size_bytes whole"`
	BytesAppended int64      `json:"bytes_appended,omitempty" desc:"Raw bytes of those tails: what was read, compressed and uploaded of those files"`
	Pool          bool       `json:"pool,omitempty" desc:"The pool's agents (ferry agent) read, compressed and uploaded the files, each on its own host; workers counts those agents"`
	Agents        []Agent    `json:"agents,omitempty" desc:"Agents of the pool that sent the transfer's files: per agent, the raw bytes it read and sent"`
}

// Agent is what one agent of the pool sent of a transfer.
type Agent struct {
	Agent string `json:"agent" desc:"Agent id (FERRY_AGENT_ID)"`
	Bytes int64  `json:"bytes" desc:"Raw bytes it read and sent"`
}

// LevelUse is what the producer compressed at one level.
type LevelUse struct {
	Level  int   `json:"level" desc:"Compression level"`
	Chunks int   `json:"chunks" desc:"Chunks compressed at it"`
	Bytes  int64 `json:"bytes" desc:"Raw bytes compressed at it"`
}

// Label is one free-form key/value label of a request.
type Label struct {
	Key   string `json:"key" desc:"Label key"`
	Value string `json:"value" desc:"Label value"`
}

// ChunkRow is one chunk's record: a row of the BigQuery table chunks, for
// finding stragglers and slow workers.
type ChunkRow struct {
	TransferID string    `json:"transfer_id" desc:"Transfer the chunk belongs to"`
	File       string    `json:"file" desc:"Relative path of the file"`
	Index      int       `json:"chunk" desc:"Chunk index within the file"`
	Bytes      int64     `json:"bytes" desc:"Raw bytes of the chunk"`
	WireBytes  int64     `json:"wire_bytes" desc:"Compressed bytes uploaded"`
	Worker     string    `json:"worker" desc:"Worker that uploaded it"`
	Attempts   int       `json:"attempts" desc:"Delivery attempt that uploaded it (1: first)"`
	UploadMS   int64     `json:"upload_ms" desc:"Upload start to object stored, milliseconds"`
	UploadedAt time.Time `json:"uploaded_at" desc:"When the chunk object was stored"`
}

// TierOf classifies a byte size to the nearest tier: "small" below 50 MB,
// "medium" below 600 MB and "large" from there on. A row's Tier is
// its SizeBytes' (datagen's tiers are sized to fall in their own).
func TierOf(size int64) string {
	switch {
	case size < 50_000_000:
		return "small"
	case size < 600_000_000:
		return "medium"
	default:
		return "large"
	}
}

// MBps is bytes per millisecond expressed in MB/s (10^6 bytes), as the seeds
// print them; 0 when ms is 0.
func MBps(bytes, ms int64) float64 {
	if ms <= 0 {
		return 0
	}
	return float64(bytes) / 1e6 / (float64(ms) / 1000)
}

// Float returns a pointer to v, for the nullable columns.
func Float(v float64) *float64 { return &v }

// File is a sink that appends rows to a local NDJSON file, and chunk rows to
// a second one beside it (ChunksPath). A transfer's rows are written once
// even when the merger retries, and even when two mergers on one machine
// (a rolling restart) share the file: each write holds an exclusive lock
// on the file and first reads the rows others appended since. It is safe
// for concurrent use.
type File struct {
	path string
	mu   sync.Mutex
	seen map[string]bool // transfer ids in the file up to off
	off  int64
}

// ChunksPath is where File keeps the chunk rows of the transfers in path:
// ferry-results.ndjson → ferry-results.chunks.ndjson.
func ChunksPath(path string) string {
	if strings.HasSuffix(path, ".ndjson") {
		return strings.TrimSuffix(path, ".ndjson") + ".chunks.ndjson"
	}
	return path + ".chunks"
}

// OpenFile opens (or creates) the NDJSON file at path.
func OpenFile(path string) (*File, error) {
	f := &File{path: path, seen: map[string]bool{}}
	// Found now if it cannot be written (a missing directory), not
	// after a transfer has been sent whole.
	w, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("rows file: %w", err)
	}
	_ = w.Close()
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	if err := f.catchUp(fh); err != nil {
		return nil, err
	}
	return f, nil
}

// Write appends r and its chunk rows unless r's transfer is already there,
// and syncs. The chunk rows go first: the transfer row marks the pair
// written. They are encoded as they come: a transfer of a million chunks
// is never held as rows or as bytes.
func (f *File) Write(_ context.Context, r Row, chunks iter.Seq[ChunkRow]) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.seen[r.TransferID] {
		return nil
	}
	fh, err := os.OpenFile(f.path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("results file: %w", err)
	}
	defer fh.Close()
	if err := osfile.Lock(fh); err != nil {
		return fmt.Errorf("results file %s: lock: %w", f.path, err)
	}
	defer osfile.Unlock(fh) //nolint:errcheck // closing unlocks too
	if err := f.catchUp(fh); err != nil {
		return err
	}
	if f.seen[r.TransferID] {
		return nil // another merger wrote it
	}
	if err := appendLines(ChunksPath(f.path), chunks); err != nil {
		return err
	}
	b, err := NDJSON([]Row{r})
	if err != nil {
		return err
	}
	if _, err := fh.Write(b); err != nil {
		return fmt.Errorf("results file %s: %w", f.path, err)
	}
	if err := fh.Sync(); err != nil {
		return fmt.Errorf("results file %s: %w", f.path, err)
	}
	f.off += int64(len(b))
	f.seen[r.TransferID] = true
	return nil
}

// catchUp reads the whole lines after f.off and remembers their transfers.
func (f *File) catchUp(fh *os.File) error {
	if _, err := fh.Seek(f.off, io.SeekStart); err != nil {
		return fmt.Errorf("results file %s: %w", f.path, err)
	}
	rd := bufio.NewReaderSize(fh, 64<<10)
	for n := 1; ; n++ {
		line, err := rd.ReadBytes('\n')
		if err == io.EOF {
			return nil // a line without its newline is not finished
		}
		if err != nil {
			return fmt.Errorf("results file %s: %w", f.path, err)
		}
		f.off += int64(len(line))
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var r struct {
			TransferID string `json:"transfer_id"`
		}
		if err := json.Unmarshal(line, &r); err != nil {
			return fmt.Errorf("%s: line %d after offset %d: %w", f.path, n, f.off-int64(len(line)), err)
		}
		f.seen[r.TransferID] = true
	}
}

// NDJSON encodes rows one JSON object per line.
func NDJSON[T any](rows []T) ([]byte, error) {
	var b []byte
	for _, r := range rows {
		line, err := json.Marshal(r)
		if err != nil {
			return nil, err
		}
		b = append(append(b, line...), '\n')
	}
	return b, nil
}

func appendLines[T any](path string, rows iter.Seq[T]) error {
	if rows == nil {
		return nil
	}
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("results file: %w", err)
	}
	bw := bufio.NewWriterSize(fh, 64<<10)
	if _, err := encodeLines(bw, rows); err != nil {
		fh.Close()
		return fmt.Errorf("results file %s: %w", path, err)
	}
	if err := bw.Flush(); err != nil {
		fh.Close()
		return fmt.Errorf("results file %s: %w", path, err)
	}
	if err := fh.Sync(); err != nil {
		fh.Close()
		return fmt.Errorf("results file %s: %w", path, err)
	}
	if err := fh.Close(); err != nil {
		return fmt.Errorf("results file %s: %w", path, err)
	}
	return nil
}

// encodeLines writes rows to w, one JSON object a line, and counts them.
func encodeLines[T any](w io.Writer, rows iter.Seq[T]) (int, error) {
	enc := json.NewEncoder(w)
	n := 0
	for r := range rows {
		if err := enc.Encode(r); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// Spooled is NDJSON written to a temporary file, ready to upload: its size
// and CRC32C are known, and it is read from the start.
type Spooled struct {
	*os.File
	Lines  int
	Size   int64
	CRC32C uint32
}

// Close closes and removes the file.
func (s *Spooled) Close() error {
	err := s.File.Close()
	_ = os.Remove(s.Name())
	return err
}

// Spool writes rows as NDJSON to a temporary file, never holding them, and
// returns it positioned at its start.
func Spool[T any](rows iter.Seq[T]) (*Spooled, error) {
	w, err := NewSpoolWriter[T]()
	if err != nil {
		return nil, err
	}
	for r := range rows {
		if err := w.Add(r); err != nil {
			return nil, err
		}
	}
	return w.Finish()
}

// SpoolWriter is Spool for values that come one at a time from a loop
// that fills more than one spool. Not safe for concurrent use.
type SpoolWriter[T any] struct {
	s   *Spooled
	h   hash.Hash32
	bw  *bufio.Writer
	enc *json.Encoder
}

// NewSpoolWriter creates the temporary file.
func NewSpoolWriter[T any]() (*SpoolWriter[T], error) {
	f, err := os.CreateTemp("", "ferry-rows-*.ndjson")
	if err != nil {
		return nil, fmt.Errorf("spooling rows: %w", err)
	}
	w := &SpoolWriter[T]{s: &Spooled{File: f}, h: crc32c.New()}
	w.bw = bufio.NewWriterSize(io.MultiWriter(f, w.h), 64<<10)
	w.enc = json.NewEncoder(w.bw)
	return w, nil
}

// Add writes v as one line.
func (w *SpoolWriter[T]) Add(v T) error {
	if err := w.enc.Encode(v); err != nil {
		_ = w.Close()
		return fmt.Errorf("spooling rows: %w", err)
	}
	w.s.Lines++
	return nil
}

// Lines counts what was added.
func (w *SpoolWriter[T]) Lines() int { return w.s.Lines }

// Finish returns what was written, positioned at its start; the writer is
// then done with.
func (w *SpoolWriter[T]) Finish() (*Spooled, error) {
	s := w.s
	err := w.bw.Flush()
	if err == nil {
		s.Size, err = s.Seek(0, io.SeekCurrent)
	}
	if err == nil {
		_, err = s.Seek(0, io.SeekStart)
	}
	if err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("spooling rows: %w", err)
	}
	s.CRC32C = w.h.Sum32()
	return s, nil
}

// Close removes the file of a writer that will not be finished.
func (w *SpoolWriter[T]) Close() error { return w.s.Close() }

// Lines yields the values of a spooled file of T from its start; err says
// why it stopped early, if it did.
func Lines[T any](s *Spooled) (rows iter.Seq[T], err func() error) {
	var failed error
	rows = func(yield func(T) bool) {
		if _, failed = s.Seek(0, io.SeekStart); failed != nil {
			return
		}
		dec := json.NewDecoder(bufio.NewReaderSize(s, 64<<10))
		for n := 1; n <= s.Lines; n++ {
			var v T
			if failed = dec.Decode(&v); failed != nil {
				failed = fmt.Errorf("spooled rows, line %d: %w", n, failed)
				return
			}
			if !yield(v) {
				return
			}
		}
	}
	return rows, func() error { return failed }
}

// ReadFile reads every row of an NDJSON results file; errors name the line.
func ReadFile(path string) ([]Row, error) { return readNDJSON[Row](path) }

// ReadChunkFile reads every chunk row of an NDJSON file.
func ReadChunkFile(path string) ([]ChunkRow, error) { return readNDJSON[ChunkRow](path) }

func readNDJSON[T any](path string) ([]T, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	var rows []T
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for n := 1; sc.Scan(); n++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var r T
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		rows = append(rows, r)
	}
	return rows, sc.Err()
}
