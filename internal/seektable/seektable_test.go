package seektable

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os/exec"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// frames compresses data as independent frames of size raw each and returns
// the stream and its table.
func frames(t *testing.T, data []byte, raw int) ([]byte, []Frame) {
	t.Helper()
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithZeroFrames(true))
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	var fs []Frame
	for off := 0; off == 0 || off < len(data); off += raw {
		piece := data[off:min(off+raw, len(data))]
		n := len(out)
		out = enc.EncodeAll(piece, out)
		fs = append(fs, Frame{Wire: uint32(len(out) - n), Raw: uint32(len(piece))})
	}
	return out, fs
}

func sample(n int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, n)
	for i := range b {
		b[i] = "abcdefgh,\n0123"[r.IntN(14)]
	}
	return b
}

func TestRoundTripFindsEveryFrame(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int
	}{{"empty", 0}, {"one frame", 1000}, {"many frames", 300_000}} {
		t.Run(tc.name, func(t *testing.T) {
			data := sample(tc.size)
			stream, fs := frames(t, data, 64<<10)
			obj := Append(append([]byte(nil), stream...), fs)
			if len(obj)-len(stream) != Size(len(fs)) {
				t.Fatalf("table is %d bytes, Size says %d", len(obj)-len(stream), Size(len(fs)))
			}
			size, err := TableSize(obj[len(obj)-FooterSize:])
			if err != nil || size != int64(Size(len(fs))) {
				t.Fatalf("TableSize = %d, %v; want %d", size, err, Size(len(fs)))
			}
			got, err := Parse(obj[int64(len(obj))-size:])
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(fs) {
				t.Fatalf("%d frames, want %d", len(got), len(fs))
			}
			// Each frame, decoded on its own at its offsets, gives the
			// raw bytes at its raw offset.
			dec, _ := zstd.NewReader(nil)
			var woff, roff int
			for i, f := range got {
				if f != fs[i] {
					t.Fatalf("frame %d = %+v, want %+v", i, f, fs[i])
				}
				raw, err := dec.DecodeAll(obj[woff:woff+int(f.Wire)], nil)
				if err != nil {
					t.Fatalf("frame %d: %v", i, err)
				}
				if !bytes.Equal(raw, data[roff:roff+int(f.Raw)]) {
					t.Fatalf("frame %d decodes to other bytes", i)
				}
				woff += int(f.Wire)
				roff += int(f.Raw)
			}
			if roff != len(data) {
				t.Fatalf("frames cover %d raw bytes, want %d", roff, len(data))
			}
		})
	}
}

// The table must be invisible to decoders: the Go decoder and the stock
// zstd CLI both read the object as the original bytes.
func TestDecodersSkipTheTable(t *testing.T) {
	data := sample(200_000)
	stream, fs := frames(t, data, 50_000)
	obj := Append(stream, fs)
	dec, _ := zstd.NewReader(nil)
	got, err := dec.DecodeAll(obj, nil)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Go decoder: %d bytes, %v; want the original %d bytes", len(got), err, len(data))
	}
	if _, err := exec.LookPath("zstd"); err != nil {
		t.Skip("zstd CLI not installed (make deps installs it)")
	}
	cmd := exec.Command("zstd", "-d", "-c")
	cmd.Stdin = bytes.NewReader(obj)
	out, err := cmd.Output()
	if err != nil || !bytes.Equal(out, data) {
		t.Fatalf("zstd -d: %d bytes, %v; want the original %d bytes", len(out), err, len(data))
	}
}

func TestChecksummedTablesParse(t *testing.T) {
	// A table written by another tool with per-frame checksums: entries of
	// 12 bytes and the checksum flag in the descriptor.
	tbl := []byte{0x5e, 0x2a, 0x4d, 0x18, 12*2 + 9, 0, 0, 0}
	for _, e := range [][3]uint32{{10, 20, 0xdead}, {30, 40, 0xbeef}} {
		for _, v := range e {
			tbl = append(tbl, byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
		}
	}
	tbl = append(tbl, 2, 0, 0, 0, 0x80, 0xb1, 0xea, 0x92, 0x8f)
	got, err := Parse(tbl)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != (Frame{10, 20}) || got[1] != (Frame{30, 40}) {
		t.Fatalf("frames %+v", got)
	}
}

func TestNotATable(t *testing.T) {
	stream, fs := frames(t, sample(1000), 4096)
	good := Append(nil, fs)
	for name, tail := range map[string][]byte{
		"plain zstd":      stream,
		"too short":       {1, 2, 3},
		"reserved bits":   append(append([]byte(nil), good[:len(good)-5]...), 0x04, 0xb1, 0xea, 0x92, 0x8f),
		"truncated table": good[3:],
	} {
		t.Run(name, func(t *testing.T) {
			size, err := TableSize(tail)
			if err == nil {
				_, err = Parse(tail)
				if err == nil {
					t.Fatalf("TableSize = %d and Parse accepted it", size)
				}
			}
			if !errors.Is(err, ErrNoTable) {
				t.Fatalf("error %v, want ErrNoTable", err)
			}
		})
	}
}
