package message

import (
	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/seektable"
)

// SeekTable returns the seek table that ends f's composed final object: the
// frames of every chunk, in order, in zstd's seekable format. The merger
// writes it to SeekTableObject and composes it as the last component; the
// producer counts it in f.WireSize and f.WireCRC32, so both sides derive it
// from the manifest and cannot disagree.
//
// It is nil when f's chunks list no frames: gzip and none files, and files of
// one chunk, whose payload already ends with their own table.
func (f *File) SeekTable() []byte {
	n := 0
	for _, c := range f.Chunks {
		n += len(c.Frames)
	}
	if n == 0 || len(f.Chunks) < 2 {
		return nil
	}
	frames := make([]seektable.Frame, 0, n)
	for _, c := range f.Chunks {
		frames = append(frames, c.Frames...)
	}
	return seektable.Append(make([]byte, 0, seektable.Size(n)), frames)
}

// SealWire sets f.WireSize and f.WireCRC32 to those of the final object:
// the chunks' wire bytes in order, then the seek table, if any. It returns
// the table.
func (f *File) SealWire() []byte {
	parts := make([]crc32c.Part, 0, len(f.Chunks)+1)
	f.WireSize = 0
	for _, c := range f.Chunks {
		parts = append(parts, crc32c.Part{CRC32C: c.WireCRC32C, Size: c.WireSize})
		f.WireSize += c.WireSize
	}
	table := f.SeekTable()
	if table != nil {
		parts = append(parts, crc32c.Part{CRC32C: crc32c.Checksum(table), Size: int64(len(table))})
		f.WireSize += int64(len(table))
	}
	f.WireCRC32 = crc32c.CombineAll(parts)
	return table
}
