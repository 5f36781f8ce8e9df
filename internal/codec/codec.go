// Package codec compresses chunks as independent frames and reads the streams
// they form. Concatenated zstd frames are a valid zstd stream and concatenated
// gzip members a valid gzip file, so a composed object decompresses with the
// stock zstd -d or gzip -d, with no ferry needed to read it.
package codec

import (
	"bytes"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// Codec names a compression format.
type Codec string

// The codecs ferry writes.
const (
	Zstd Codec = "zstd"
	Gzip Codec = "gzip"
	None Codec = "none"
)

// Parse returns the codec named s; the error names s and the valid names.
func Parse(s string) (Codec, error) {
	switch c := Codec(s); c {
	case Zstd, Gzip, None:
		return c, nil
	}
	return "", fmt.Errorf("unknown codec %q (want zstd, gzip or none)", s)
}

// DefaultLevel is the level used when a request gives none: zstd 3 is the
// seeds' production sweet spot, gzip 6 is gzip's own default.
func (c Codec) DefaultLevel() int {
	switch c {
	case Zstd:
		return 3
	case Gzip:
		return 6
	}
	return 0
}

// CheckLevel reports whether level is valid for c; the error names the level.
func (c Codec) CheckLevel(level int) error {
	lo, hi := 0, 0
	switch c {
	case Zstd:
		lo, hi = 1, 22
	case Gzip:
		lo, hi = 1, 9
	}
	if level < lo || level > hi {
		return fmt.Errorf("level %d is out of range for %s (%d to %d)", level, c, lo, hi)
	}
	return nil
}

// Ext is the suffix appended to object names of this codec.
func (c Codec) Ext() string {
	switch c {
	case Zstd:
		return ".zst"
	case Gzip:
		return ".gz"
	}
	return ""
}

// ContentType is the Content-Type set on final objects. No Content-Encoding is
// set: readers get the compressed bytes they can verify against the CRC32C.
func (c Codec) ContentType() string {
	switch c {
	case Zstd:
		return "application/zstd"
	case Gzip:
		return "application/gzip"
	}
	return "application/octet-stream"
}

// ContentTypeOf is the Content-Type of the final object name stored with
// c: the codec's, or, for a plain copy (None), the type its extension
// names, as gcloud storage cp sets it. The table is ferry's own, not the
// host's MIME database, so that every producer and merger of a fleet
// gives an object the same type.
func ContentTypeOf(c Codec, name string) string {
	if c != None {
		return c.ContentType()
	}
	if t, ok := byExtension[strings.ToLower(path.Ext(name))]; ok {
		return t
	}
	return None.ContentType()
}

// byExtension is the Content-Type of a plain copy by its extension.
var byExtension = map[string]string{
	".avro": "application/avro", ".bz2": "application/x-bzip2", ".css": "text/css", ".csv": "text/csv",
	".gif": "image/gif", ".gz": "application/gzip", ".htm": "text/html", ".html": "text/html",
	".jpeg": "image/jpeg", ".jpg": "image/jpeg", ".js": "text/javascript", ".json": "application/json",
	".jsonl": "application/x-ndjson", ".log": "text/plain", ".md": "text/markdown", ".ndjson": "application/x-ndjson",
	".parquet": "application/vnd.apache.parquet", ".pdf": "application/pdf", ".png": "image/png",
	".sql": "application/sql", ".svg": "image/svg+xml", ".tar": "application/x-tar", ".tsv": "text/tab-separated-values",
	".txt": "text/plain", ".xml": "application/xml", ".yaml": "application/yaml", ".yml": "application/yaml",
	".zip": "application/zip", ".zst": "application/zstd",
}

// Encoder compresses one chunk into one independent frame. An Encoder is not
// safe for concurrent use; keep one per goroutine.
type Encoder interface {
	// Encode appends the frame for src to dst and returns the result.
	Encode(dst, src []byte) ([]byte, error)
}

// Stored is the zstd level below 1 that only adaptation chooses (package
// level), for a link that waits on the compressor: frames of raw blocks
// (RawZstdFrame), at the cost of a copy, still one valid .zst object that
// zstd -d, the seek table and restore read as any other.
const Stored = 0

// NewEncoder returns an encoder for c at level (zstd: 1 to 22, or Stored).
func NewEncoder(c Codec, level int) (Encoder, error) {
	if c == Zstd && level == Stored {
		return storedEncoder{}, nil
	}
	if err := c.CheckLevel(level); err != nil {
		return nil, err
	}
	switch c {
	case Zstd:
		// One goroutine per encoder: ferry parallelises across chunks, and
		// zero frames keeps a 0-byte file a valid zstd file. Each frame
		// keeps zstd's xxhash64 (3 % of the producer's CPU): the object's
		// CRC32C says that it is corrupt, the frame's checksum says where,
		// so restore names the byte range at fault.
		enc, err := zstd.NewWriter(nil,
			zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(level)),
			zstd.WithEncoderConcurrency(1),
			zstd.WithWindowSize(2<<20), // what zstd -3 uses on large inputs; faster than 8 MiB
			zstd.WithZeroFrames(true))
		if err != nil {
			return nil, err
		}
		return zstdEncoder{enc}, nil
	case Gzip:
		w, err := gzip.NewWriterLevel(io.Discard, level)
		if err != nil {
			return nil, err
		}
		return &gzipEncoder{w: w}, nil
	case None:
		return noneEncoder{}, nil
	}
	return nil, fmt.Errorf("unknown codec %q", c)
}

type zstdEncoder struct{ enc *zstd.Encoder }

// Encode compresses src as one frame, unless samples of it show it does not
// compress (already-compressed files, random bytes): then it is stored as a
// frame of raw blocks, which costs a copy instead of a compression, and
// which zstd -d, the seek table and restore read as any other frame.
func (z zstdEncoder) Encode(dst, src []byte) ([]byte, error) {
	if z.incompressible(src) {
		return RawZstdFrame(dst, src), nil
	}
	return z.enc.EncodeAll(src, dst), nil
}

// Sampling for incompressible data: three probes spread over the frame
// must all shrink by less than 3 % for the frame to be stored raw. They
// cost 3 × 8 KiB of compression per frame (0.3 % of an 8 MiB frame); a frame
// below sampleMin is compressed as it is.
const (
	probeSize   = 8 << 10
	sampleMin   = 64 << 10
	probeShrink = 0.97
)

func (z zstdEncoder) incompressible(src []byte) bool {
	if len(src) < sampleMin {
		return false
	}
	var buf [probeSize + 64]byte
	for _, at := range []int{len(src) / 6, len(src) / 2, len(src) * 5 / 6} {
		at = min(at, len(src)-probeSize)
		out := z.enc.EncodeAll(src[at:at+probeSize], buf[:0])
		if float64(len(out)) < probeShrink*probeSize {
			return false
		}
	}
	return true
}

// RawZstdFrame appends src to dst as one zstd frame of raw blocks: the
// magic number, a frame header with the content size and a 128 KiB window
// (raw blocks refer to no history, so any decoder's window suffices), no
// checksum (GCS's CRC32C covers the bytes), and blocks of at most 128 KiB.
func RawZstdFrame(dst, src []byte) []byte {
	const blockMax = 128 << 10
	dst = append(dst, 0x28, 0xB5, 0x2F, 0xFD) // magic, little-endian
	// Frame_Header_Descriptor: Frame_Content_Size_Flag 3 (8 bytes), no
	// single segment, no checksum, no dictionary.
	dst = append(dst, 0xC0)
	// Window_Descriptor: exponent 7, mantissa 0: 2^(10+7) = 128 KiB.
	dst = append(dst, 7<<3)
	n := uint64(len(src))
	for i := range 8 {
		dst = append(dst, byte(n>>(8*i)))
	}
	if len(src) == 0 {
		return append(dst, 1, 0, 0) // one empty last raw block
	}
	for off := 0; off < len(src); off += blockMax {
		end := min(off+blockMax, len(src))
		h := uint32(end-off)<<3 | 0<<1 // Block_Size, Block_Type raw
		if end == len(src) {
			h |= 1 // Last_Block
		}
		dst = append(dst, byte(h), byte(h>>8), byte(h>>16))
		dst = append(dst, src[off:end]...)
	}
	return dst
}

// storedEncoder writes every frame of raw blocks.
type storedEncoder struct{}

func (storedEncoder) Encode(dst, src []byte) ([]byte, error) { return RawZstdFrame(dst, src), nil }

type gzipEncoder struct {
	w   *gzip.Writer
	buf bytes.Buffer
}

func (g *gzipEncoder) Encode(dst, src []byte) ([]byte, error) {
	g.buf.Reset()
	g.w.Reset(&g.buf)
	if _, err := g.w.Write(src); err != nil {
		return dst, err
	}
	if err := g.w.Close(); err != nil {
		return dst, err
	}
	return append(dst, g.buf.Bytes()...), nil
}

type noneEncoder struct{}

func (noneEncoder) Encode(dst, src []byte) ([]byte, error) { return append(dst, src...), nil }

// NewReader returns a reader of the decompressed stream r, which may hold
// many concatenated frames.
func NewReader(c Codec, r io.Reader) (io.ReadCloser, error) {
	switch c {
	case Zstd:
		d, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, err
		}
		return d.IOReadCloser(), nil
	case Gzip:
		g, err := gzip.NewReader(r)
		if err != nil {
			return nil, err
		}
		g.Multistream(true)
		return g, nil
	case None:
		return io.NopCloser(r), nil
	}
	return nil, fmt.Errorf("unknown codec %q", c)
}
