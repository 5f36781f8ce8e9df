// Package message defines what ferry's services say to each other: the chunk
// messages workers receive, the events the merger acts on, the manifest the
// producer seals in GCS and the done event batch systems wait for. All are
// versioned JSON; decoders reject what they do not understand, so a bad
// message fails clearly instead of half-working.
package message

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ferry-dev/ferry/internal/seektable"
)

// Version is the schema version ferry writes and reads.
const Version = 1

// Event types on the events topic.
const (
	EventChunk  = "chunk"  // a worker stored and verified the parts of one chunk message
	EventSealed = "sealed" // the producer wrote the sealed manifest
	EventFailed = "failed" // a producer or worker hit a permanent error
	EventCancel = "cancel" // a user asked to cancel the transfer
)

// Event tells the merger that something about a transfer changed.
type Event struct {
	V          int    `json:"v"`
	Type       string `json:"type"`
	TransferID string `json:"transfer_id"`
	Bucket     string `json:"bucket"`
	// Parts are what a chunk event's worker stored: one per part of the
	// chunk message, so one event per message, also for a bundle.
	Parts  []EventPart `json:"parts,omitempty"`
	Error  string      `json:"error,omitempty"`
	Worker string      `json:"worker,omitempty"`
	// Prefix is the destination prefix of a transfer that failed before
	// its manifest was sealed (the producer's failed event), so that the
	// merger can remove the final objects it wrote.
	Prefix string `json:"prefix,omitempty"`
	// Run is the producer's run the event is about: a chunk event copies
	// its chunk message's, a producer's failed event names its own. The
	// merger ignores what a run other than the sealed manifest's says.
	Run string `json:"run,omitempty"`
	// Key proves an end event on the control topic (sealed, failed,
	// cancel): a transfer's end key, whose SHA-256 its key object lists
	// (see Keys). Without it the merger does not act on such an event.
	Key string    `json:"key,omitempty"`
	At  time.Time `json:"at"`
}

// EventPart is one object a worker stored and verified: what GCS reported
// after the upload committed.
type EventPart struct {
	File       int    `json:"file"`
	Index      int    `json:"index"`
	Object     string `json:"object"`
	Generation int64  `json:"generation"`
	Size       int64  `json:"size"`
	CRC32C     uint32 `json:"crc32c"`
	// RawBytes is how many source bytes the part holds, for progress
	// reports.
	RawBytes int64 `json:"raw_bytes"`
	// Started is when the upload began, Created when GCS created the
	// object, Attempt the delivery attempt that wrote it: the chunk rows.
	Started time.Time `json:"started"`
	Created time.Time `json:"created"`
	Attempt int       `json:"attempt"`
	// Paced counts the 429s (GCS: slow down) the upload waited out.
	Paced int `json:"paced,omitempty"`
}

// AgentBytes is what one agent of a pool sent of a transfer.
type AgentBytes struct {
	Agent string `json:"agent"`
	Bytes int64  `json:"bytes"`
}

// Manifest is what the producer read, written once it has read everything.
type Manifest struct {
	// EndKey is the producer's end key (see Keys): in its memory only,
	// never written.
	EndKey string `json:"-"`
	// ChunkKey is the run's chunk key (Keys.Chunks), which its chunk
	// messages carry: in the producer's memory only.
	ChunkKey   string            `json:"-"`
	V          int               `json:"v"`
	TransferID string            `json:"transfer_id"`
	Sealed     bool              `json:"sealed"`
	Bucket     string            `json:"bucket"`
	Prefix     string            `json:"prefix"`
	Sources    []string          `json:"sources"`
	Method     string            `json:"method"`
	Labels     map[string]string `json:"labels,omitempty"`
	Codec      string            `json:"codec"`
	// Level is the transfer's fixed level, or 0 when zstd's adapted per
	// chunk (package level); Levels are the levels its chunks used.
	Level     int        `json:"level"`
	Levels    []LevelUse `json:"levels,omitempty"`
	ChunkSize int64      `json:"chunk_size"`
	Overwrite bool       `json:"overwrite,omitempty"`
	// Staged says the overwrite replaces nothing until the end: every
	// file's bytes, one-chunk files too, are staged, and the merger
	// composes each onto its final name only once all are stored, and
	// only while that name is still at File.Replaces, the generation the
	// producer's listing found. A failed or cancelled transfer leaves
	// what it found as it found it, and an older transfer never replaces
	// a newer one's object (see File.Staged).
	Staged      bool      `json:"staged,omitempty"`
	Files       []File    `json:"files"`
	StartedAt   time.Time `json:"started_at"`
	SealedAt    time.Time `json:"sealed_at"`
	CompressMS  int64     `json:"compress_ms"`
	ProducerID  string    `json:"producer,omitempty"`
	FerryVer    string    `json:"ferry_version,omitempty"`
	ContentType string    `json:"content_type"`
	// Skipped are the files the producer did not send: their final object
	// was there already (-n/--no-clobber) or unchanged (--skip-unchanged),
	// or the walk skipped them (a link, a FIFO, a socket, a device, an
	// unreadable file: plan.Skip reasons).
	Skipped []Skipped `json:"skipped,omitempty"`
	// Symlinks is what the walk did with links: files, follow or ignore.
	Symlinks string `json:"symlinks,omitempty"`
	// Run is the producer's run that sealed this manifest (RunObject).
	Run string `json:"run,omitempty"`
	// Pages, when set, say where the files are: each page an object of
	// its own (ManifestPage), and SkippedPages pages of skipped files
	// (SkippedPage); Files and Skipped are then empty. Totals sum them.
	// See pages.go.
	Pages        []Page `json:"pages,omitempty"`
	SkippedPages int    `json:"skipped_pages,omitempty"`
	Totals       Totals `json:"totals"`
	// Load, when set, is the BigQuery table the merger loads the
	// transfer's Parquet parts into once it ends ok.
	Load *Load `json:"load,omitempty"`
	// Pool is set when the pool's agents sent the files (Request.Pool),
	// and Agents are those agents with the source bytes each sent.
	Pool   bool         `json:"pool,omitempty"`
	Agents []AgentBytes `json:"agents,omitempty"`

	inline bool // set by Unpaged
}

// LevelUse is how many chunks, of how many raw bytes, the producer
// compressed at one level. A manifest holds at most one per level the
// codec has (zstd's 22), so it does not grow with the transfer.
type LevelUse struct {
	Level  int   `json:"level"`
	Chunks int   `json:"chunks"`
	Bytes  int64 `json:"bytes"`
}

// Skipped is a source file the producer skipped, and why.
type Skipped struct {
	Path   string `json:"path"`
	Object string `json:"object"`
	Reason string `json:"reason"`
}

// File is one source file of a transfer.
type File struct {
	Path      string      `json:"path"`
	Object    string      `json:"object"`
	Size      int64       `json:"size"`
	RawCRC32C uint32      `json:"raw_crc32c"`
	WireSize  int64       `json:"wire_size"`
	WireCRC32 uint32      `json:"wire_crc32c"`
	Chunks    []ChunkInfo `json:"chunks"`
	// Mtime is the source's modification time (UTC), for the final
	// object's MetaMtime.
	Mtime time.Time `json:"mtime,omitzero"`
	// Posix is the source's permission bits, owner and group, for the
	// final object's metadata as gcloud storage cp --preserve-posix
	// writes it (see PosixMetadata); nil for standard input.
	Posix *Posix `json:"posix,omitempty"`
	// Table is set when the file is a Parquet part of a source converted
	// from delimited text.
	Table *TablePart `json:"table,omitempty"`
	// Replaces, in a staged overwrite (Manifest.Staged), is the
	// generation of the final object the producer's listing found, 0
	// for none: the merger replaces that generation or, for 0, writes
	// only where nothing is.
	Replaces int64 `json:"replaces,omitempty"`
}

// TablePart is one Parquet part of a source converted from delimited text
// (producer submit --convert parquet): which bytes of the source it holds,
// from which line, and how many rows.
type TablePart struct {
	Source string `json:"source"` // the source's relative path
	Part   int    `json:"part"`
	Parts  int    `json:"parts"`
	Offset int64  `json:"offset"`
	Size   int64  `json:"size"`
	Line   int64  `json:"line"`
	Rows   int64  `json:"rows"`
	// Schema is the parts' schema in BigQuery's JSON format, on part 0.
	Schema json.RawMessage `json:"schema,omitempty"`
	// Rejects are the records of the part's bytes left out of it
	// (--bad-rows), in the order of the file; the merger writes a
	// source's into RejectsObject beside its parts.
	Rejects []Reject `json:"rejects,omitempty"`
}

// Reject is a record of a converted source left out of its Parquet part
// (--bad-rows): where it is, why, and its text (at most 1 KiB of it;
// Truncated says there was more). One line of a rejects object.
type Reject struct {
	Source    string `json:"source"`
	Line      int64  `json:"line"`
	Column    int    `json:"column,omitempty"` // 1-based; 0: the record as a whole
	Name      string `json:"name,omitempty"`
	Error     string `json:"error"`
	Record    string `json:"record"`
	Truncated bool   `json:"truncated,omitempty"`
}

// MaxBadRows bounds --bad-rows: a transfer's rejects are listed in its
// manifest and written by the merger, so they stay small whatever the
// files hold.
const MaxBadRows = 10_000

// RejectsName is the name of a source's rejects object in the directory
// of its Parquet parts: ferry's own, as the parts are, so no source file
// can have its name.
const RejectsName = "rejects.ndjson"

// PartName is the name of Parquet part index of a converted source, in
// the directory of the source's name.
func PartName(index int) string { return fmt.Sprintf("part-%05d.parquet", index) }

// PartIndex is the index of the Parquet part named name, ok false for any
// other name.
func PartIndex(name string) (int, bool) {
	digits, ok := strings.CutPrefix(name, "part-")
	if !ok {
		return 0, false
	}
	if digits, ok = strings.CutSuffix(digits, ".parquet"); !ok || len(digits) < 5 {
		return 0, false
	}
	i, err := strconv.Atoi(digits)
	if err != nil || i < 0 || PartName(i) != name {
		return 0, false
	}
	return i, true
}

// RejectsObject is the rejects object beside the Parquet part named part.
func RejectsObject(part string) string {
	if i := strings.LastIndexByte(part, '/'); i >= 0 {
		return part[:i+1] + RejectsName
	}
	return RejectsName
}

// Posix is a file's permission bits (mode & 0777, as gcloud keeps them),
// owner and group.
type Posix struct {
	Mode uint32 `json:"mode"`
	UID  uint32 `json:"uid"`
	GID  uint32 `json:"gid"`
}

// ChunkInfo is one chunk of a file as the producer wrote it.
type ChunkInfo struct {
	Object     string `json:"object"`
	RawSize    int64  `json:"raw_size"`
	RawCRC32C  uint32 `json:"raw_crc32c"`
	WireSize   int64  `json:"wire_size"`
	WireCRC32C uint32 `json:"wire_crc32c"`
	// Frames are the chunk's compressed frames (zstd), in order: the
	// merger builds the final object's seek table from them.
	Frames []Frame `json:"frames,omitempty"`
	// Generation is set on the first chunk of an append (a source that
	// grew): the chunk is the file's final object as it is, at this
	// generation, which the new object begins with; only the tail's
	// chunks travel. The merger composes onto it only while it is still
	// that generation.
	Generation int64 `json:"generation,omitempty"`
}

// Staged reports whether f's bytes are composed onto its final object by
// the merger: a file of several chunks, or of one chunk staged because the
// transfer overwrites (Manifest.Staged). A file of one chunk that is not
// staged is written to its final name by its worker.
func (f *File) Staged() bool {
	return len(f.Chunks) > 1 || len(f.Chunks) == 1 && f.Chunks[0].Object != f.Object
}

// AppendsTo is the generation of the existing final object f is an append
// to (its first chunk), 0 when f is sent whole.
func (f *File) AppendsTo() int64 {
	if len(f.Chunks) > 1 && f.Chunks[0].Generation != 0 && f.Chunks[0].Object == f.Object {
		return f.Chunks[0].Generation
	}
	return 0
}

// Frame is one independent compressed frame: its compressed (wire) and
// decompressed (raw) sizes.
type Frame = seektable.Frame

// Status values of a finished transfer.
const (
	StatusOK        = "ok"
	StatusFailed    = "failed"
	StatusCancelled = "cancelled"
)

// Done is the one message a transfer ends with, on the done topic. Its size
// does not grow with the transfer (MaxDoneBytes): it carries counts, at most
// MaxDoneInline objects and skipped names, and where the full listing is.
type Done struct {
	V           int    `json:"v"`
	TransferID  string `json:"transfer_id"`
	Status      string `json:"status"`
	Error       string `json:"error,omitempty"`
	Destination string `json:"destination"`
	// Files, Bytes and WireBytes count the final objects GCS confirmed:
	// the raw bytes they decompress to and the bytes stored. A transfer
	// that did not end ok counts none.
	Files     int   `json:"files"`
	Bytes     int64 `json:"bytes"`
	WireBytes int64 `json:"wire_bytes"`
	// Kept counts the objects a transfer that did not end ok leaves: each
	// replaced an object or grew one by an append, so its clean-up may
	// not delete it (message.KeptOnFailure). Objects and the listing name
	// them.
	Kept int `json:"objects_kept,omitempty"`
	// RowError says why the transfer's benchmark row could not be
	// written: a row is a record of the transfer, so the transfer ends
	// (ok, if it did) without it.
	RowError string `json:"row_error,omitempty"`
	// Objects are the first MaxDoneInline final objects (in manifest
	// order); Listing, when set, is gs://BUCKET/OBJECT of the NDJSON
	// object that names every one of them and every skipped file (one
	// ListingEntry a line). It is kept as long as the done marker.
	Objects    []DoneObject  `json:"objects,omitempty"`
	Listing    string        `json:"listing,omitempty"`
	StartedAt  time.Time     `json:"started_at"`
	FinishedAt time.Time     `json:"finished_at"`
	Timings    StageTimingMS `json:"timings_ms"`

	// FilesSkipped counts the files the producer did not send (see
	// Skipped reasons); Skipped names the first MaxDoneInline of their
	// final objects (gs://bucket/object).
	FilesSkipped int      `json:"files_skipped,omitempty"`
	Skipped      []string `json:"skipped,omitempty"`
	// Load is what the load into a BigQuery table did, when the transfer
	// asked for one (Manifest.Load) and ended ok, or failed in the load.
	Load *Loaded `json:"load,omitempty"`
	// Rejected are the records of converted sources left out of their
	// parts (--bad-rows); Objects and the listing name each source's
	// rejects object.
	Rejected int64 `json:"rejected_rows,omitempty"`
	// Appended are the files that grew and were sent as their tail only,
	// composed onto their objects, and AppendedBytes those tails' raw
	// bytes; the listing says each one's.
	Appended      int   `json:"files_appended,omitempty"`
	AppendedBytes int64 `json:"bytes_appended,omitempty"`
	// What moved, beside what is stored (Files, Bytes, WireBytes count
	// whole objects, an appended one too): BytesRead are the source
	// bytes read and sent (a file sent whole: all of it; an appended
	// file: its tail; a converted source: the text its parts hold),
	// BytesSent the bytes uploaded for them, FilesWhole the files sent
	// whole, and FilesConverted the sources converted to Parquet parts
	// (each part an object). Skipped files were only compared.
	BytesRead      int64 `json:"bytes_read"`
	BytesSent      int64 `json:"bytes_sent"`
	FilesWhole     int   `json:"files_whole"`
	FilesConverted int   `json:"files_converted,omitempty"`
	// Agents are the pool's agents that sent a pooled transfer's files,
	// with the raw bytes each sent (Manifest.Agents).
	Agents []AgentBytes `json:"agents,omitempty"`
}

// Bounds of a done event, whatever the transfer's size.
const (
	// MaxDoneInline is how many objects and skipped names a done event
	// lists itself; the listing object has the rest.
	MaxDoneInline = 100
	// MaxErrorBytes bounds the error text of a done event, a failed
	// event and a row.
	MaxErrorBytes = 4 << 10
	// MaxDoneBytes bounds an encoded done event: MaxDoneInline objects and
	// skipped names of the longest names GCS allows, escaped, the error
	// and the rest (TestDoneBound builds the worst case).
	MaxDoneBytes = 1 << 20
	// MaxAgents is how many agents a manifest and a done event name, each
	// with its bytes; those beyond are summed as OtherAgents.
	MaxAgents = 100
)

// OtherAgents stands for the agents beyond MaxAgents.
const OtherAgents = "(other agents)"

// DoneObject is one final object of a transfer, as GCS confirmed it.
type DoneObject struct {
	Name       string `json:"name"`
	Size       int64  `json:"size"`
	CRC32C     uint32 `json:"crc32c"`
	Generation int64  `json:"generation,omitempty"`
	RawSize    int64  `json:"raw_size"`
	RawCRC32C  uint32 `json:"raw_crc32c"`
}

// ListingEntry is one line of a done event's listing: a final object GCS
// confirmed, or (Skipped set) a source file that was not sent and why.
type ListingEntry struct {
	DoneObject
	// Path is the source file relative to its source, for skipped files.
	Path    string `json:"path,omitempty"`
	Skipped string `json:"skipped,omitempty"`
	// Appended is, for a file that grew and was sent as its tail only,
	// the tail's raw bytes.
	Appended int64 `json:"appended,omitempty"`
}

// Truncate shortens s to at most n bytes, on a rune boundary, marking
// the cut: errors echo input, and what is echoed must stay small.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "… (truncated)"
	cut := max(n-len(mark), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// StageTimingMS are the per-stage milliseconds of the seeds' stage table.
type StageTimingMS struct {
	Compress int64 `json:"compress"`
	Upload   int64 `json:"upload"`
	Compose  int64 `json:"compose"`
	Verify   int64 `json:"verify"`
	Total    int64 `json:"total"`
}

// ErrMalformed marks a message that can never be understood.
var ErrMalformed = errors.New("malformed message")

// Encode marshals v as JSON.
func Encode(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("message: encode %T: %v", v, err)) // only plain structs are encoded
	}
	return b
}

// Decode unmarshals data into v strictly: unknown fields, trailing data and a
// wrong version are errors that wrap ErrMalformed.
func Decode(data []byte, v interface{ version() int }) error {
	return DecodeFrom(bytes.NewReader(data), v)
}

// DecodeFrom is Decode reading r: a large message (a manifest) is read
// into the decoder's buffer only, not into a copy of its own first.
// A failure to read r is returned as it is, not as ErrMalformed: the
// message may be fine.
func DecodeFrom(r io.Reader, v interface{ version() int }) error {
	er := &errReader{r: r}
	dec := json.NewDecoder(er)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if er.err != nil {
			return er.err
		}
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: trailing data after the JSON object", ErrMalformed)
	}
	if got := v.version(); got != Version {
		return fmt.Errorf("%w: version %d, want %d", ErrMalformed, got, Version)
	}
	return nil
}

func (c *Chunk) version() int    { return c.V }
func (e *Event) version() int    { return e.V }
func (m *Manifest) version() int { return m.V }
func (d *Done) version() int     { return d.V }

// errReader remembers a read error other than the end of the input.
type errReader struct {
	r   io.Reader
	err error
}

func (e *errReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF {
		e.err = err
	}
	return n, err
}
