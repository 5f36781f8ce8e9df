// Package seektable writes and reads the frame index ferry appends to every
// zstd object it stores: a seek table in zstd's seekable format, held in a
// skippable frame that the stock `zstd -d` (and every other zstd decoder)
// passes over. With it, a reader finds each independent frame's compressed
// and decompressed offsets from the object's last bytes, and can download
// and decompress the frames in parallel.
//
// Layout (all integers little endian):
//
//	skippable frame header: magic 0x184D2A5E, content size (4 bytes)
//	one entry per frame:    compressed size (4), decompressed size (4)[, checksum (4)]
//	footer:                 frame count (4), descriptor (1), magic 0x8F92EAB1
//
// ferry writes no per-frame checksums (it checks CRC32C instead); Parse
// accepts tables with them.
package seektable

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Frame is one independent compressed frame: its compressed (wire) and
// decompressed (raw) sizes.
type Frame struct {
	Wire uint32 `json:"w"`
	Raw  uint32 `json:"r"`
}

const (
	skippableMagic = 0x184D2A5E
	seekableMagic  = 0x8F92EAB1
	headerSize     = 8
	// FooterSize is the size of the table's footer, the last bytes of an
	// object that has a table.
	FooterSize = 9
	entrySize  = 8
	checksumF  = 0x80
	// MaxFrames bounds the frames one table may list (the format allows
	// 2^27); more is taken as a corrupt table.
	MaxFrames = 1 << 24
)

// ErrNoTable: the bytes do not end with a seek table.
var ErrNoTable = errors.New("no seek table")

// Size is the size of the table of n frames, as Append writes it.
func Size(n int) int { return headerSize + n*entrySize + FooterSize }

// Append appends the table of frames to dst.
func Append(dst []byte, frames []Frame) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, skippableMagic)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(frames)*entrySize+FooterSize))
	for _, f := range frames {
		dst = binary.LittleEndian.AppendUint32(dst, f.Wire)
		dst = binary.LittleEndian.AppendUint32(dst, f.Raw)
	}
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(frames)))
	dst = append(dst, 0)
	return binary.LittleEndian.AppendUint32(dst, seekableMagic)
}

// TableSize reads the footer at the end of tail (at least FooterSize bytes:
// the end of an object) and returns the size of the whole table, so a reader
// knows how many of the object's last bytes to fetch. It returns ErrNoTable
// when tail does not end with a footer.
func TableSize(tail []byte) (int64, error) {
	if len(tail) < FooterSize {
		return 0, fmt.Errorf("%w: %d bytes are too few for a footer", ErrNoTable, len(tail))
	}
	f := tail[len(tail)-FooterSize:]
	if binary.LittleEndian.Uint32(f[5:]) != seekableMagic {
		return 0, ErrNoTable
	}
	n := int64(binary.LittleEndian.Uint32(f[:4]))
	desc := f[4]
	if desc&0x7c != 0 {
		return 0, fmt.Errorf("%w: reserved bits set in descriptor %#x", ErrNoTable, desc)
	}
	if n > MaxFrames {
		return 0, fmt.Errorf("%w: %d frames", ErrNoTable, n)
	}
	es := int64(entrySize)
	if desc&checksumF != 0 {
		es += 4
	}
	return headerSize + n*es + FooterSize, nil
}

// Parse reads a whole table (the last TableSize bytes of an object).
func Parse(table []byte) ([]Frame, error) {
	size, err := TableSize(table)
	if err != nil {
		return nil, err
	}
	if int64(len(table)) != size {
		return nil, fmt.Errorf("%w: table of %d bytes, the footer says %d", ErrNoTable, len(table), size)
	}
	if binary.LittleEndian.Uint32(table[:4]) != skippableMagic {
		return nil, fmt.Errorf("%w: no skippable frame before the footer", ErrNoTable)
	}
	if got := int64(binary.LittleEndian.Uint32(table[4:8])); got != size-headerSize {
		return nil, fmt.Errorf("%w: skippable frame of %d bytes, want %d", ErrNoTable, got, size-headerSize)
	}
	n := int(binary.LittleEndian.Uint32(table[len(table)-FooterSize:]))
	es := entrySize
	if table[len(table)-5]&checksumF != 0 {
		es += 4
	}
	frames := make([]Frame, n)
	for i := range frames {
		e := table[headerSize+i*es:]
		frames[i] = Frame{Wire: binary.LittleEndian.Uint32(e), Raw: binary.LittleEndian.Uint32(e[4:])}
	}
	return frames, nil
}
