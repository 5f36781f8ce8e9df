// Package codec compresses chunks as independent frames and reads the streams
// they form. Concatenated zstd frames are a valid zstd stream and concatenated
// gzip members a valid gzip file, so a composed object decompresses with the
// stock zstd -d or gzip -d, with no ferry needed to read it.
package codec

import (
	"bytes"
	"fmt"
	"io"

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

// Encoder compresses one chunk into one independent frame. An Encoder is not
// safe for concurrent use; keep one per goroutine.
type Encoder interface {
	// Encode appends the frame for src to dst and returns the result.
	Encode(dst, src []byte) ([]byte, error)
}

// NewEncoder returns an encoder for c at level.
func NewEncoder(c Codec, level int) (Encoder, error) {
	if err := c.CheckLevel(level); err != nil {
		return nil, err
	}
	switch c {
	case Zstd:
		// One goroutine per encoder: ferry parallelises across chunks, and
		// zero frames keeps a 0-byte file a valid zstd file.
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

func (z zstdEncoder) Encode(dst, src []byte) ([]byte, error) { return z.enc.EncodeAll(src, dst), nil }

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
