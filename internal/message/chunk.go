package message

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ferry-dev/ferry/internal/iobuf"
)

// Chunk asks a worker to store the parts of one chunk message. A message
// holds one part (a chunk of a large file) or many (a bundle of small files,
// each its own final object); the payload is the parts' wire bytes,
// concatenated in order.
//
// On the wire a chunk message is binary, so that compressed bytes are not
// inflated by base64 on their way through Pub/Sub:
//
//	"FRYC" | header length (4 bytes, big endian) | header (JSON) | payload
//
// The payload follows the header, or, when Spool is set, it is the content of
// that file in the worker's own spool directory.
type Chunk struct {
	V          int    `json:"v"`
	TransferID string `json:"transfer_id"`
	Bucket     string `json:"bucket"`
	Codec      string `json:"codec"`
	Overwrite  bool   `json:"overwrite,omitempty"`
	// Run names the producer's run of the transfer this chunk belongs to
	// (RunObject): a resubmission of the same transfer is a new run, and
	// a worker drops the chunks of a run that is no longer the
	// transfer's. Empty in messages of producers before runs existed.
	Run string `json:"run,omitempty"`
	// Spool is the name of the file holding the payload, relative to the
	// worker's spool directory: one path element, never a path.
	Spool string `json:"spool,omitempty"`
	// Key is the run's chunk key (Keys.Chunks): the proof that the
	// transfer's producer sent this message. A secret: never logged.
	Key   string `json:"key,omitempty"`
	Parts []Part `json:"parts"`
}

// Part is one object a chunk message asks for.
type Part struct {
	// Object is where the worker writes: the staging object of a chunk, or
	// the final object itself when Final is set (a file of one chunk).
	Object string `json:"object"`
	Final  bool   `json:"final,omitempty"`
	// File is the file's index in the manifest, Path its relative path,
	// Index the chunk's index in the file, Chunks the file's chunk count.
	File       int    `json:"file"`
	Path       string `json:"path"`
	Index      int    `json:"index"`
	Chunks     int    `json:"chunks"`
	RawOffset  int64  `json:"raw_offset"`
	RawSize    int64  `json:"raw_size"`
	RawCRC32C  uint32 `json:"raw_crc32c"`
	WireSize   int64  `json:"wire_size"`
	WireCRC32C uint32 `json:"wire_crc32c"`
	// ContentType and Metadata are set on the object when Final is set,
	// or when the file has one chunk and is staged (Manifest.Staged): the
	// merger's compose onto the final name keeps them.
	ContentType string            `json:"content_type,omitempty"`
	Metadata    map[string]string `json:"metadata,omitempty"`
}

// Limits a chunk message must respect; anything beyond them is malformed.
const (
	// MaxParts is the most parts one message may carry.
	MaxParts = 1000
	// MaxHeader is the largest header, in bytes.
	MaxHeader = 1 << 20
	// MaxPartWire is the largest part: a chunk is at most 1 GiB raw, and
	// compression may grow incompressible data a little.
	MaxPartWire = 1<<30 + 1<<24
)

var chunkMagic = []byte("FRYC")

// HeaderOverhead is the envelope's size beyond the JSON header and payload.
const HeaderOverhead = 8

// EncodeChunk returns the wire form of c followed by payload (nil when the
// payload is in the spool).
func EncodeChunk(c Chunk, payload [][]byte) []byte {
	h := Encode(c)
	n := HeaderOverhead + len(h)
	for _, p := range payload {
		n += len(p)
	}
	// From the pool of large buffers: the in-process transport gives it
	// back once the message is acked (queue.MemoryOptions.Release).
	out := iobuf.Get(n)[:0]
	out = append(out, chunkMagic...)
	out = binary.BigEndian.AppendUint32(out, uint32(len(h)))
	out = append(out, h...)
	for _, p := range payload {
		out = append(out, p...)
	}
	return out
}

// DecodeChunk parses a chunk message strictly: the envelope, the header (no
// unknown fields, the right version) and everything the header claims — ids
// and names that cannot leave their place, sizes that add up to the payload.
// Errors wrap ErrMalformed. The payload aliases data.
func DecodeChunk(data []byte) (Chunk, []byte, error) {
	var c Chunk
	if len(data) < HeaderOverhead || !bytes.Equal(data[:4], chunkMagic) {
		return c, nil, fmt.Errorf("%w: not a chunk message (no FRYC envelope)", ErrMalformed)
	}
	hl := binary.BigEndian.Uint32(data[4:8])
	if hl > MaxHeader || int64(hl) > int64(len(data)-HeaderOverhead) {
		return c, nil, fmt.Errorf("%w: header of %d bytes in a message of %d", ErrMalformed, hl, len(data))
	}
	header, payload := data[HeaderOverhead:HeaderOverhead+int(hl)], data[HeaderOverhead+int(hl):]
	if err := Decode(header, &c); err != nil {
		return Chunk{}, nil, err
	}
	if err := c.check(int64(len(payload))); err != nil {
		return Chunk{}, nil, fmt.Errorf("%w: chunk of transfer %.64q: %v", ErrMalformed, c.TransferID, err)
	}
	return c, payload, nil
}

var (
	transferIDRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$`)
	bucketRE     = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$`)
	spoolNameRE  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,254}$`)
	runRE        = regexp.MustCompile(`^[0-9a-f]{16}$`)
)

// ValidRun reports whether run is a run id ferry could have made (NewRun).
func ValidRun(run string) bool { return runRE.MatchString(run) }

// ValidTransferID reports whether id is a transfer id ferry could have made.
func ValidTransferID(id string) bool { return transferIDRE.MatchString(id) }

// ValidBucket reports whether name is a bucket name GCS could accept.
func ValidBucket(name string) bool { return bucketRE.MatchString(name) }

// ValidSpoolName reports whether name can name a spool file: one path
// element of letters, digits, '_', '-' and '.', not starting with '.', with
// no "..".
func ValidSpoolName(name string) bool {
	return spoolNameRE.MatchString(name) && !strings.Contains(name, "..")
}

func (c *Chunk) check(payload int64) error {
	if !ValidTransferID(c.TransferID) {
		return fmt.Errorf("transfer id %.64q is not one ferry makes", c.TransferID)
	}
	if c.Run != "" && !ValidRun(c.Run) {
		return fmt.Errorf("run %.64q is not one ferry makes", c.Run)
	}
	if !bucketRE.MatchString(c.Bucket) {
		return fmt.Errorf("bucket %.64q is not a bucket name", c.Bucket)
	}
	switch c.Codec {
	case "zstd", "gzip", "none":
	default:
		return fmt.Errorf("codec %.32q: want zstd, gzip or none", c.Codec)
	}
	if c.Key != "" && !ValidKeyHex(c.Key) {
		return fmt.Errorf("key is not 64 lowercase hex digits")
	}
	if c.Spool != "" && (!ValidSpoolName(c.Spool) || !strings.HasPrefix(c.Spool, c.TransferID+"-")) {
		return fmt.Errorf("spool %.64q is not a spool file name of this transfer (one path element, no \"..\")", c.Spool)
	}
	if len(c.Parts) == 0 || len(c.Parts) > MaxParts {
		return fmt.Errorf("%d parts, want 1 to %d", len(c.Parts), MaxParts)
	}
	var wire int64
	for i := range c.Parts {
		p := &c.Parts[i]
		if err := p.check(c.TransferID); err != nil {
			return fmt.Errorf("part %d: %v", i, err)
		}
		wire += p.WireSize
	}
	switch {
	case c.Spool == "" && wire != payload:
		return fmt.Errorf("parts hold %d wire bytes, the payload %d", wire, payload)
	case c.Spool != "" && payload != 0:
		return fmt.Errorf("payload of %d bytes beside spool file %s", payload, c.Spool)
	}
	return nil
}

func (p *Part) check(tid string) error {
	switch {
	case p.File < 0 || p.Chunks < 1 || p.Index < 0 || p.Index >= p.Chunks:
		return fmt.Errorf("file %d chunk %d of %d is out of range", p.File, p.Index, p.Chunks)
	case p.RawOffset < 0 || p.RawSize < 0 || p.WireSize < 0 || p.WireSize > MaxPartWire:
		return fmt.Errorf("sizes out of range (raw offset %d, raw %d, wire %d)", p.RawOffset, p.RawSize, p.WireSize)
	case p.Final && p.Chunks != 1:
		return fmt.Errorf("final object of a file of %d chunks", p.Chunks)
	}
	if err := CheckObjectName(p.Object); err != nil {
		return err
	}
	if p.Final {
		if root := ReservedRoot(p.Object); root != "" {
			return fmt.Errorf("final object %.64q is under ferry's own prefix %s", p.Object, root)
		}
		return nil
	}
	if want := ChunkObject(tid, p.File, p.Index); p.Object != want {
		return fmt.Errorf("staging object %.64q, want %s", p.Object, want)
	}
	if p.Chunks > 1 && (len(p.Metadata) > 0 || p.ContentType != "") {
		// A staged file of one chunk carries its final object's
		// metadata, which the merger's compose keeps; a chunk of
		// several has none.
		return fmt.Errorf("metadata on staging object %s", p.Object)
	}
	return nil
}

// CheckObjectName rejects what GCS rejects or readers trip over: an empty
// name, invalid UTF-8, control characters, names over 1024 bytes, and "." or
// ".." as a whole name.
func CheckObjectName(name string) error {
	switch {
	case name == "" || name == "." || name == "..":
		return fmt.Errorf("object name %q is not allowed", name)
	case !utf8.ValidString(name):
		return fmt.Errorf("object name %.64q is not valid UTF-8", name)
	case len(name) > 1024:
		return fmt.Errorf("object name %.60q… is %d bytes; GCS allows 1024", name, len(name))
	}
	for _, r := range name {
		if unicode.IsControl(r) {
			return fmt.Errorf("object name %.64q contains control character %U", name, r)
		}
	}
	return nil
}

// Offsets returns where each part's bytes start in the payload, and the
// payload's size.
func (c *Chunk) Offsets() ([]int64, int64) {
	offs := make([]int64, len(c.Parts))
	var n int64
	for i, p := range c.Parts {
		offs[i] = n
		n += p.WireSize
	}
	return offs, n
}
