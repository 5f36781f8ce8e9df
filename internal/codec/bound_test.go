package codec

import (
	"math/rand/v2"
	"testing"
)

// TestBoundHoldsForRandomBytes: incompressible input never encodes to more
// than Bound, at the sizes the producer uses (tiny bundle parts up to whole
// frames), for every codec at its default and its fastest and slowest levels.
func TestBoundHoldsForRandomBytes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	sizes := []int{0, 1, 100, 4095, 65535, 65536, 128<<10 - 1, 128 << 10, 128<<10 + 1, 1 << 20, FrameSize - 1, FrameSize}
	for _, c := range []Codec{Zstd, Gzip, None} {
		levels := []int{c.DefaultLevel()}
		switch c {
		case Zstd:
			levels = append(levels, 1, 19)
		case Gzip:
			levels = append(levels, 1, 9)
		}
		for _, level := range levels {
			enc, err := NewEncoder(c, level)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range sizes {
				src := make([]byte, n)
				for i := range src {
					src[i] = byte(rng.Uint32())
				}
				out, err := enc.Encode(nil, src)
				if err != nil {
					t.Fatal(err)
				}
				if got, bound := int64(len(out)), c.Bound(int64(n)); got > bound {
					t.Errorf("%s level %d: %d random bytes encode to %d, above Bound %d", c, level, n, got, bound)
				} else if n == FrameSize {
					t.Logf("%s level %d: %d random bytes encode to %d (Bound %d, +%d)", c, level, n, got, bound, got-int64(n))
				}
			}
		}
	}
}
