package codec

import (
	"bytes"
	"io"
	"math/rand/v2"
	"os/exec"
	"strings"
	"testing"
)

func sample(n int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 7))
	var b bytes.Buffer
	for b.Len() < n {
		b.WriteString("2024-01-02,IDX")
		b.WriteByte(byte('A' + rng.IntN(26)))
		b.WriteString(",")
		b.WriteString(strings.Repeat("1", rng.IntN(5)))
		b.WriteString("\n")
	}
	return b.Bytes()[:n]
}

// TestConcatenatedFramesFormOneStream is the property the merger relies on:
// frames compressed independently and concatenated decompress to the
// concatenation of their inputs.
func TestConcatenatedFramesFormOneStream(t *testing.T) {
	for _, c := range []Codec{Zstd, Gzip, None} {
		t.Run(string(c), func(t *testing.T) {
			enc, err := NewEncoder(c, c.DefaultLevel())
			if err != nil {
				t.Fatal(err)
			}
			var raw, wire []byte
			for i, n := range []int{0, 1000, 0, 70000, 5} {
				chunk := sample(n, uint64(i))
				raw = append(raw, chunk...)
				wire, err = enc.Encode(wire, chunk)
				if err != nil {
					t.Fatal(err)
				}
			}
			r, err := NewReader(c, bytes.NewReader(wire))
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(r)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if !bytes.Equal(got, raw) {
				t.Fatalf("decoded %d bytes, want %d equal to the input", len(got), len(raw))
			}
		})
	}
}

// TestStockCLIReadsConcatenatedFrames checks the same with the stock zstd and
// gzip tools, which is what a reader without ferry has.
func TestStockCLIReadsConcatenatedFrames(t *testing.T) {
	for _, tc := range []struct {
		c    Codec
		tool string
	}{{Zstd, "zstd"}, {Gzip, "gzip"}} {
		t.Run(tc.tool, func(t *testing.T) {
			if _, err := exec.LookPath(tc.tool); err != nil {
				t.Skipf("%s not on PATH", tc.tool)
			}
			enc, err := NewEncoder(tc.c, tc.c.DefaultLevel())
			if err != nil {
				t.Fatal(err)
			}
			var raw, wire []byte
			for i := 0; i < 3; i++ {
				chunk := sample(50000, uint64(i))
				raw = append(raw, chunk...)
				wire, _ = enc.Encode(wire, chunk)
			}
			cmd := exec.Command(tc.tool, "-d", "-c")
			cmd.Stdin = bytes.NewReader(wire)
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("%s -d: %v", tc.tool, err)
			}
			if !bytes.Equal(out, raw) {
				t.Fatalf("%s -d gave %d bytes, want the %d input bytes", tc.tool, len(out), len(raw))
			}
		})
	}
}

func TestEmptyInputIsAValidZstdFile(t *testing.T) {
	enc, _ := NewEncoder(Zstd, 3)
	wire, _ := enc.Encode(nil, nil)
	if len(wire) == 0 {
		t.Fatal("empty input produced no frame; a 0-byte file would not be a valid .zst")
	}
	if _, err := exec.LookPath("zstd"); err == nil {
		cmd := exec.Command("zstd", "-d", "-c")
		cmd.Stdin = bytes.NewReader(wire)
		out, err := cmd.Output()
		if err != nil || len(out) != 0 {
			t.Fatalf("zstd -d of the empty frame: %v, %d bytes", err, len(out))
		}
	}
}

func TestParseAndLevels(t *testing.T) {
	if _, err := Parse("lz4"); err == nil || !strings.Contains(err.Error(), `"lz4"`) {
		t.Fatalf("Parse(lz4) error = %v, want one naming lz4", err)
	}
	if err := Zstd.CheckLevel(0); err == nil {
		t.Fatal("zstd level 0 accepted")
	}
	if err := Gzip.CheckLevel(10); err == nil || !strings.Contains(err.Error(), "10") {
		t.Fatalf("gzip level 10: %v", err)
	}
	if err := None.CheckLevel(0); err != nil {
		t.Fatal(err)
	}
}

// Issue 19 §3: incompressible data is stored as a frame of raw blocks, which
// the Go decoder and the stock zstd CLI read back byte-identical, mixed with
// compressed frames; compressible data is still compressed.
func TestIncompressibleFramesAreStoredRaw(t *testing.T) {
	enc, err := NewEncoder(Zstd, 3)
	if err != nil {
		t.Fatal(err)
	}
	random := make([]byte, 1<<20+12345)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	text := sample(1<<20, 3)
	var wire, raw []byte
	var sizes []int
	for _, src := range [][]byte{random, text, random[:70000], {}, random[:100]} {
		n := len(wire)
		if wire, err = enc.Encode(wire, src); err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(wire)-n)
		raw = append(raw, src...)
	}
	if want := len(random) + 14 + 3*((len(random)+128<<10-1)/(128<<10)); sizes[0] != want {
		t.Errorf("random MiB took %d bytes, want %d (raw blocks)", sizes[0], want)
	}
	if sizes[1] > len(text)/2 {
		t.Errorf("text took %d bytes of %d: compressible data must still compress", sizes[1], len(text))
	}
	if int64(sizes[0]) > Zstd.Bound(int64(len(random))) {
		t.Errorf("raw frame of %d bytes is over Bound %d", sizes[0], Zstd.Bound(int64(len(random))))
	}
	r, err := NewReader(Zstd, bytes.NewReader(wire))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	if err != nil || !bytes.Equal(got, raw) {
		t.Fatalf("Go decoder: %d bytes, %v; want %d identical", len(got), err, len(raw))
	}
	stockZstdReads(t, wire, raw)
}

// BenchmarkEncodeIncompressible is what a frame of random bytes costs: about
// a copy, as for codec none.
func BenchmarkEncodeIncompressible(b *testing.B) {
	random := make([]byte, FrameSize)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	for _, c := range []Codec{Zstd, None} {
		b.Run(string(c), func(b *testing.B) {
			enc, _ := NewEncoder(c, c.DefaultLevel())
			dst := make([]byte, 0, Zstd.Bound(FrameSize))
			b.SetBytes(int64(len(random)))
			for b.Loop() {
				dst, _ = enc.Encode(dst[:0], random)
			}
		})
	}
}

// A plain copy gets the type its extension names, as gcloud storage cp
// sets it; a compressed one its codec's, whatever the name.
func TestContentTypeOf(t *testing.T) {
	for _, c := range []struct {
		codec Codec
		name  string
		want  string
	}{
		{None, "exports/prices.csv", "text/csv"},
		{None, "logs/app.LOG", "text/plain"},
		{None, "a/b.ndjson", "application/x-ndjson"},
		{None, "noext", "application/octet-stream"},
		{None, "x.unknownext", "application/octet-stream"},
		{Zstd, "prices.csv.zst", "application/zstd"},
		{Gzip, "prices.csv.gz", "application/gzip"},
	} {
		if got := ContentTypeOf(c.codec, c.name); got != c.want {
			t.Errorf("ContentTypeOf(%s, %q) = %q, want %q", c.codec, c.name, got, c.want)
		}
	}
}

// Stored, the level below 1, writes compressible bytes as frames of raw
// blocks, at a copy's cost, and the stock tool reads them back.
func TestStoredFramesAreRawBlocksThatZstdReads(t *testing.T) {
	enc, err := NewEncoder(Zstd, Stored)
	if err != nil {
		t.Fatal(err)
	}
	text := sample(1<<20+777, 3)
	var wire []byte
	for _, src := range [][]byte{text, {}, text[:100]} {
		if wire, err = enc.Encode(wire, src); err != nil {
			t.Fatal(err)
		}
	}
	raw := append(append([]byte(nil), text...), text[:100]...)
	blocks := (len(text)+128<<10-1)/(128<<10) + 1 + 1
	if want := len(raw) + 3*14 + 3*blocks; len(wire) != want {
		t.Errorf("stored frames of %d bytes took %d, want %d (headers and raw blocks only)", len(raw), len(wire), want)
	}
	stockZstdReads(t, wire, raw)
}

// stockZstdReads checks that zstd -d turns wire into raw (skipped where the
// CLI is not installed).
func stockZstdReads(t *testing.T, wire, raw []byte) {
	t.Helper()
	if _, err := exec.LookPath("zstd"); err != nil {
		t.Skip("no zstd CLI")
	}
	cmd := exec.Command("zstd", "-dc")
	cmd.Stdin = bytes.NewReader(wire)
	out, err := cmd.Output()
	if err != nil || !bytes.Equal(out, raw) {
		t.Fatalf("zstd -d: %d bytes, %v; want %d identical", len(out), err, len(raw))
	}
}
