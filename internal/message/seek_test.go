package message

import (
	"bytes"
	"testing"

	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/seektable"
)

// TestSealWireCountsTheSeekTable: a multi-chunk file's wire size and CRC32C
// are those of its chunks' bytes followed by the seek table SeekTable
// returns, which lists every chunk's frames in order; one-chunk files and
// files without frames have no table.
func TestSealWireCountsTheSeekTable(t *testing.T) {
	a, b := []byte("chunk-a-bytes"), []byte("chunk-b")
	f := File{Chunks: []ChunkInfo{
		{WireSize: int64(len(a)), WireCRC32C: crc32c.Checksum(a), Frames: []Frame{{Wire: 6, Raw: 100}, {Wire: 7, Raw: 50}}},
		{WireSize: int64(len(b)), WireCRC32C: crc32c.Checksum(b), Frames: []Frame{{Wire: 7, Raw: 20}}},
	}}
	table := f.SealWire()
	frames, err := seektable.Parse(table)
	if err != nil || len(frames) != 3 || frames[2] != (Frame{Wire: 7, Raw: 20}) {
		t.Fatalf("table frames %v, %v", frames, err)
	}
	whole := append(append(append([]byte(nil), a...), b...), table...)
	if f.WireSize != int64(len(whole)) || f.WireCRC32 != crc32c.Checksum(whole) {
		t.Fatalf("sealed %d bytes crc %08x, want %d bytes crc %08x", f.WireSize, f.WireCRC32, len(whole), crc32c.Checksum(whole))
	}
	if !bytes.Equal(f.SeekTable(), table) {
		t.Fatal("SeekTable differs from what SealWire counted")
	}
	for name, g := range map[string]File{
		"one chunk": {Chunks: []ChunkInfo{{WireSize: 7, Frames: []Frame{{Wire: 7, Raw: 9}}}}},
		"gzip":      {Chunks: []ChunkInfo{{WireSize: 3}, {WireSize: 4}}},
	} {
		if g.SealWire() != nil || g.SeekTable() != nil || g.WireSize != 7 {
			t.Errorf("%s: got a table or wire size %d", name, g.WireSize)
		}
	}
}
