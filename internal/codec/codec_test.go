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
