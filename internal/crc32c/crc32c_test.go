package crc32c

import (
	"bytes"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestCombineMatchesHashCRC32OnRandomSplits(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(rng.IntN(256))
	}
	want := crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli))
	for trial := 0; trial < 200; trial++ {
		// Cut data at random points, including empty pieces and the ends.
		n := 1 + rng.IntN(40)
		cuts := []int{0}
		for i := 0; i < n; i++ {
			cuts = append(cuts, rng.IntN(len(data)+1))
		}
		cuts = append(cuts, len(data))
		slices.Sort(cuts)
		var parts []Part
		for i := 1; i < len(cuts); i++ {
			piece := data[cuts[i-1]:cuts[i]]
			parts = append(parts, Part{CRC32C: Checksum(piece), Size: int64(len(piece))})
		}
		if got := CombineAll(parts); got != want {
			t.Fatalf("trial %d: CombineAll over %d parts = %08x, hash/crc32 says %08x", trial, len(parts), got, want)
		}
	}
}

func TestCombineTwo(t *testing.T) {
	tests := []struct{ a, b string }{
		{"", ""},
		{"a", ""},
		{"", "b"},
		{"hello, ", "world"},
		{"123456789", "123456789"},
	}
	for _, tc := range tests {
		t.Run(tc.a+"|"+tc.b, func(t *testing.T) {
			want := Checksum([]byte(tc.a + tc.b))
			got := Combine(Checksum([]byte(tc.a)), Checksum([]byte(tc.b)), int64(len(tc.b)))
			if got != want {
				t.Fatalf("Combine(%q, %q) = %08x, want %08x", tc.a, tc.b, got, want)
			}
		})
	}
}

func TestKnownVector(t *testing.T) {
	// The CRC32C check value from the Castagnoli paper / RFC 3720.
	if got := Checksum([]byte("123456789")); got != 0xe3069283 {
		t.Fatalf("Checksum(123456789) = %08x, want e3069283", got)
	}
}

// TestBase64IsWhatGCSShows: GCS's documented crc32c of "hello world" is
// yZRlqg==, and an empty object's AAAAAA==.
func TestBase64IsWhatGCSShows(t *testing.T) {
	if got := Base64(Checksum([]byte("hello world"))); got != "yZRlqg==" {
		t.Errorf("Base64(crc32c(hello world)) = %s, want yZRlqg==", got)
	}
	if got := Base64(Checksum(nil)); got != "AAAAAA==" {
		t.Errorf("Base64(crc32c of nothing) = %s, want AAAAAA==", got)
	}
}

// OfRange gives the CRC32C of the bytes, however the range is split
// between its readers, and fails when the reader has fewer bytes.
func TestOfRangeIsTheChecksumOfTheRange(t *testing.T) {
	data := make([]byte, 1<<20+13)
	for i := range data {
		data[i] = byte(i*7 + i>>9)
	}
	r := bytes.NewReader(data)
	for _, c := range []struct{ off, n, segment int64 }{
		{0, int64(len(data)), rangeSegment}, {0, int64(len(data)), 1000}, {17, 300_001, 4096}, {5, 0, 1}, {int64(len(data)) - 3, 3, 1},
	} {
		got, err := ofRange(r, c.off, c.n, c.segment)
		if want := Checksum(data[c.off : c.off+c.n]); err != nil || got != want {
			t.Errorf("%d bytes from %d in segments of %d: %08x, %v; want %08x", c.n, c.off, c.segment, got, err, want)
		}
	}
	if _, err := ofRange(r, 10, int64(len(data)), 4096); err == nil {
		t.Errorf("a range past the end: no error")
	}
}

// BenchmarkOfRange reads the CRC32C of a 256 MiB file in the page cache
// with io.Copy (one reader, 32 KiB reads) and with OfRange.
func BenchmarkOfRange(b *testing.B) {
	p := filepath.Join(b.TempDir(), "f")
	data := bytes.Repeat([]byte("2026-12-04,XYZ,US0000000000,NYSE,USD,1.0,1.0,1.0,1.0,1.0,100\n"), 256<<20/63)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		b.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	n := int64(len(data))
	b.Run("io.Copy", func(b *testing.B) {
		b.SetBytes(n)
		for range b.N {
			h := New()
			if _, err := io.Copy(h, io.NewSectionReader(f, 0, n)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("OfRange", func(b *testing.B) {
		b.SetBytes(n)
		for range b.N {
			if _, err := OfRange(f, 0, n); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// Combining in two steps equals combining once over the two lengths
// together, for lengths past 512 MiB (2^32 bits) too, where the CRC-32
// shortcut of wrapping the table of powers gives wrong values for
// Castagnoli's polynomial: the appends of files of gigabytes rely on it.
func TestCombineOverLargeLengths(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, l := range []int64{1 << 28, 1<<29 - 1, 1 << 29, 600_000_041, 1<<31 + 7, 1 << 40, 1<<62 + 3} {
		for range 4 {
			a, b, c := rng.Uint32(), rng.Uint32(), rng.Uint32()
			l1 := l/2 + rng.Int64N(l/4+1)
			l2 := l - l1
			twoSteps := Combine(Combine(a, b, l1), c, l2)
			once := Combine(a, Combine(b, c, l2), l1+l2)
			if twoSteps != once {
				t.Fatalf("lengths %d + %d: %08x in two steps, %08x at once", l1, l2, twoSteps, once)
			}
		}
	}
}
