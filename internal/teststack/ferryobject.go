package teststack

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/seektable"
)

// FerryOptions say how FerryObject stores a file.
type FerryOptions struct {
	Codec     codec.Codec // default zstd
	ChunkSize int         // raw bytes per chunk object; default 1 MiB
	FrameSize int         // raw bytes per frame; default 256 KiB
	// NoTable leaves out the seek table, as ferry wrote zstd objects
	// before brief decision 4.
	NoTable bool
	// Metadata is added to ferry's final metadata.
	Metadata map[string]string
}

// FerryObject stores raw under name as ferry stores a file: compressed as
// independent frames of FrameSize raw bytes, ChunkSize raw bytes to a chunk
// object, the chunks composed in a tree of at most 32 sources per compose
// with the seek table (zstd) as the last component, and ferry's final
// metadata on the result. A file of one chunk is uploaded whole, its
// payload ending with the table. Staging objects are removed.
func FerryObject(t *testing.T, s *gcs.Store, bucket, name string, raw []byte, o FerryOptions) gcs.Attrs {
	t.Helper()
	ctx := context.Background()
	if o.Codec == "" {
		o.Codec = codec.Zstd
	}
	if o.ChunkSize == 0 {
		o.ChunkSize = 1 << 20
	}
	if o.FrameSize == 0 {
		o.FrameSize = 256 << 10
	}
	enc, err := codec.NewEncoder(o.Codec, o.Codec.DefaultLevel())
	if err != nil {
		t.Fatal(err)
	}
	var chunks [][]byte
	var frames []seektable.Frame
	for off := 0; off < len(raw) || off == 0; off += o.ChunkSize {
		chunk := raw[off:min(off+o.ChunkSize, len(raw))]
		var wire []byte
		for f := 0; f < len(chunk) || f == 0; f += o.FrameSize {
			piece := chunk[f:min(f+o.FrameSize, len(chunk))]
			n := len(wire)
			if wire, err = enc.Encode(wire, piece); err != nil {
				t.Fatal(err)
			}
			frames = append(frames, seektable.Frame{Wire: uint32(len(wire) - n), Raw: uint32(len(piece))})
		}
		chunks = append(chunks, wire)
	}
	var table []byte
	if o.Codec == codec.Zstd && !o.NoTable {
		table = seektable.Append(nil, frames)
	}
	meta := message.FinalMetadata("test", int64(len(raw)), crc32c.Checksum(raw), string(o.Codec))
	for k, v := range o.Metadata {
		meta[k] = v
	}
	if len(chunks) == 1 {
		data := append(chunks[0], table...)
		a, err := s.Upload(ctx, bucket, name, bytes.NewReader(data), gcs.UploadOptions{
			Size: int64(len(data)), CRC32C: crc32c.Checksum(data), ContentType: o.Codec.ContentType(), Metadata: meta})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}

	sum := sha256.Sum256([]byte(name))
	staging := message.StagingPrefix("test-"+hex.EncodeToString(sum[:6])) + "c/"
	var srcs, staged []string
	put := func(n string, data []byte) {
		if _, err := s.PutSmall(ctx, bucket, n, data, false, ""); err != nil {
			t.Fatal(err)
		}
		srcs = append(srcs, n)
		staged = append(staged, n)
	}
	for i, c := range chunks {
		put(fmt.Sprintf("%s%05d", staging, i), c)
	}
	if table != nil {
		put(staging+"table", table)
	}
	for level := 0; len(srcs) > 32; level++ {
		var next []string
		for lo := 0; lo < len(srcs); lo += 32 {
			n := fmt.Sprintf("%si%d-%05d", staging, level, lo/32)
			if _, err := s.Compose(ctx, bucket, n, srcs[lo:min(lo+32, len(srcs))], gcs.ComposeOptions{}); err != nil {
				t.Fatal(err)
			}
			next = append(next, n)
			staged = append(staged, n)
		}
		srcs = next
	}
	a, err := s.Compose(ctx, bucket, name, srcs, gcs.ComposeOptions{ContentType: o.Codec.ContentType(), Metadata: meta})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range staged {
		if err := s.Delete(ctx, bucket, n); err != nil {
			t.Fatal(err)
		}
	}
	return a
}
