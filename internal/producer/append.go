package producer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/plan"
	"github.com/ferry-dev/ferry/internal/seektable"
)

// Appends. A file longer than the final object ferry wrote for
// it is sent as its tail only when the object is proven to hold the file's
// first bytes unchanged: the object's ferry-raw-size and ferry-raw-crc32c
// against the CRC32C of that many of the file's bytes, read here (size
// and mtime never decide). The object then stands as the file's first
// chunk (message.ChunkInfo.Generation), and the merger composes it and the
// tail's chunks into the same name, only while it is that generation. A
// zstd object's seek table stays inside the new object as a skippable
// frame, listed as a frame of no raw bytes, so the new table covers the
// whole file. Anything else — another codec, no or foreign metadata, a
// file that shrank or whose prefix differs, a zstd object without ferry's
// table — sends the file whole, as before.

// MaxComponents is the most components ferry lets an appended object
// reach: GCS has documented 1,024 as a composite's bound. An append that
// would pass it sends the file whole instead, and says so in the log.
const MaxComponents = 1024

// maxTailRead bounds the read of an object's last bytes for its seek
// table: a table of seektable.MaxFrames frames fits.
const maxTailRead = 4 << 20

// appendable reports whether f can be sent as an append to its final
// object a (of the destination bucket), and the chunk that then stands for
// the object.
func (p *Producer) appendable(ctx context.Context, bucket string, f *plan.File, a gcs.Attrs, c codec.Codec) (message.ChunkInfo, bool, error) {
	m := a.Metadata
	if f.Part != nil || f.Stream != nil || m[message.MetaCodec] != string(c) || m[message.MetaRawCRC32C] == "" {
		return message.ChunkInfo{}, false, nil
	}
	raw, err := strconv.ParseInt(m[message.MetaRawSize], 10, 64)
	if err != nil || raw <= 0 || raw >= f.Size {
		return message.ChunkInfo{}, false, nil
	}
	tail := f.Size - raw
	adds := (tail+f.ChunkSize-1)/f.ChunkSize + 1 // the tail's chunks, and a seek table
	if max(a.ComponentCount, 1)+adds > MaxComponents {
		p.o.Log.Info("a file that grew goes whole: an append would pass the components a composite may have",
			"object", "gs://"+bucket+"/"+a.Name, "components", a.ComponentCount, "most", MaxComponents)
		return message.ChunkInfo{}, false, nil
	}
	crc, err := sourceCRC32C(f, 0, raw, f.Size)
	if err != nil || fmt.Sprintf("%08x", crc) != m[message.MetaRawCRC32C] {
		return message.ChunkInfo{}, false, err
	}
	first := message.ChunkInfo{Object: f.Object, RawSize: raw, RawCRC32C: crc, WireSize: a.Size, WireCRC32C: a.CRC32C, Generation: a.Generation}
	if c == codec.Zstd {
		frames, err := p.objectFrames(ctx, bucket, a, raw)
		if err != nil {
			return message.ChunkInfo{}, false, err
		}
		if frames == nil {
			return message.ChunkInfo{}, false, nil
		}
		first.Frames = frames
	}
	return first, true, nil
}

// objectFrames reads the seek table at the end of zstd object a, which
// must decompress to raw bytes, and returns its frames and then the
// table's own skippable frame, of no raw bytes; nil when a does not end
// with a table of ferry's that adds up.
func (p *Producer) objectFrames(ctx context.Context, bucket string, a gcs.Attrs, raw int64) ([]message.Frame, error) {
	n := min(a.Size, maxTailRead)
	rc, err := p.o.Store.NewRangeReader(ctx, bucket, a.Name, a.Size-n, n)
	if err != nil {
		return nil, fmt.Errorf("object gs://%s/%s: its seek table: %w", bucket, a.Name, err)
	}
	tail, err := io.ReadAll(rc)
	_ = rc.Close()
	if err != nil {
		return nil, fmt.Errorf("object gs://%s/%s: its seek table: %w", bucket, a.Name, err)
	}
	size, err := seektable.TableSize(tail)
	if errors.Is(err, seektable.ErrNoTable) || err == nil && size > int64(len(tail)) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	frames, err := seektable.Parse(tail[int64(len(tail))-size:])
	if err != nil {
		return nil, nil
	}
	var w, r int64
	for _, f := range frames {
		w += int64(f.Wire)
		r += int64(f.Raw)
	}
	if w+size != a.Size || r != raw || len(frames)+1 > seektable.MaxFrames/2 {
		return nil, nil
	}
	return append(frames, message.Frame{Wire: uint32(size)}), nil
}
