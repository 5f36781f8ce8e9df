// Package crc32c computes CRC32C (Castagnoli) checksums, the ones GCS stores for
// every object, and combines them: given crc(A) and crc(B) it derives crc(A‖B)
// without reading a byte, so the merger can predict the checksum of a composed
// object from its chunks' checksums.
package crc32c

import (
	"hash"
	"hash/crc32"
)

// Table is the Castagnoli table GCS uses.
var Table = crc32.MakeTable(crc32.Castagnoli)

// poly is the Castagnoli polynomial, bit-reversed, as hash/crc32 uses it.
const poly = 0x82f63b78

// Checksum returns the CRC32C of b.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, Table) }

// New returns a running CRC32C hash.
func New() hash.Hash32 { return crc32.New(Table) }

// Update adds b to a running checksum.
func Update(crc uint32, b []byte) uint32 { return crc32.Update(crc, Table, b) }

// x2n[k] holds x^(2^k) modulo the polynomial, so x^n can be built by
// multiplying the entries of n's set bits. zlib keeps 32 entries and wraps
// k around them, which assumes x^(2^32) = x modulo its polynomial;
// Castagnoli's does not give that, so every power a length of up to
// 2^63 bytes (2^66 bits) needs has its own entry. With 32, a length of
// 512 MiB or more combined wrongly.
var x2n [67]uint32

func init() {
	p := uint32(1) << 30 // x^1
	x2n[0] = p
	for k := 1; k < len(x2n); k++ {
		p = multModP(p, p)
		x2n[k] = p
	}
}

// multModP multiplies a and b modulo the polynomial, in the reflected bit order
// CRC registers use. It is zlib's multmodp.
func multModP(a, b uint32) uint32 {
	m := uint32(1) << 31
	var p uint32
	for {
		if a&m != 0 {
			p ^= b
			if a&(m-1) == 0 {
				break
			}
		}
		m >>= 1
		if b&1 != 0 {
			b = b>>1 ^ poly
		} else {
			b >>= 1
		}
	}
	return p
}

// x2nModP returns x^(n·2^k) modulo the polynomial.
func x2nModP(n uint64, k uint) uint32 {
	p := uint32(1) << 31 // x^0
	for n != 0 {
		if n&1 != 0 {
			p = multModP(x2n[k], p)
		}
		n >>= 1
		k++
	}
	return p
}

// Combine returns the CRC32C of A‖B given crcA = CRC32C(A), crcB = CRC32C(B)
// and lenB = len(B). It runs in O(log lenB) time.
func Combine(crcA, crcB uint32, lenB int64) uint32 {
	if lenB <= 0 {
		return crcA
	}
	return multModP(x2nModP(uint64(lenB), 3), crcA) ^ crcB
}

// Part is one piece of a larger byte sequence: its CRC32C and its length.
type Part struct {
	CRC32C uint32
	Size   int64
}

// CombineAll returns the CRC32C of the concatenation of parts, in order.
func CombineAll(parts []Part) uint32 {
	var crc uint32
	for _, p := range parts {
		crc = Combine(crc, p.CRC32C, p.Size)
	}
	return crc
}
