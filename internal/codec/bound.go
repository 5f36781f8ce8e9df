package codec

// FrameSize is the raw size of one compressed frame. The producer compresses
// a chunk as one or more independent frames of this size, on a pool of one
// encoder per core, so all cores keep working even when a file's last chunk
// is the only one left. Concatenated frames are still one valid stream. A
// frame starts with no history, so the larger the frame, the less of it is
// compressed without a full 2 MiB window behind it: on a tar of Go's source
// tree 8 MiB frames compress to 1.4 % less than the stock zstd -3 where
// 4 MiB frames were 2.0 % short, at the same speed; a larger window would
// close more of the gap but ask decoders (restore's) for more memory.
const FrameSize = 8 << 20

// Bound is the most bytes Encode can produce from n raw bytes in one frame,
// incompressible data included. The producer sizes chunks with it so that a
// compressed chunk always fits a Pub/Sub message; TestBoundHoldsForRandomBytes
// checks it against random bytes.
func (c Codec) Bound(n int64) int64 {
	switch c {
	case Zstd:
		// ZSTD_COMPRESSBOUND from zstd.h: a raw block costs 3 bytes per
		// 128 KiB, far below n/256; the term for small inputs covers the
		// frame header (at most 18 bytes) and the 4-byte checksum the Go
		// encoder writes. 32 bytes more in case its framing differs.
		const kib128 = 128 << 10
		b := n + n>>8
		if n < kib128 {
			b += (kib128 - n) >> 11
		}
		return b + 32
	case Gzip:
		// zlib's deflateBound for stored blocks (5 bytes of header per at
		// most 65535 bytes: n>>12 + n>>14 is more), plus the gzip header
		// and trailer (18 bytes) and the final empty block.
		return n + n>>12 + n>>14 + n>>25 + 13 + 18 + 32
	}
	return n
}
