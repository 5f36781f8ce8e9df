// Package iobuf copies between readers and writers with pooled buffers,
// and pools the large buffers of chunk messages (Get, Put).
// io.Copy allocates a fresh 32 KiB buffer for every copy from a file (an
// *os.File's WriteTo falls back to it), and the worker copies every spooled
// part twice (its CRC32C check and its upload): those buffers were most
// of what a worker allocated, and fed a collector that took a seventh of
// its CPU.
package iobuf

import (
	"bytes"
	"io"
	"math/bits"
	"strings"
	"sync"
)

// Size is the buffer each copy borrows.
const Size = 64 << 10

var pool = sync.Pool{New: func() any { b := make([]byte, Size); return &b }}

// Copy copies src to dst as io.Copy does, with a buffer from the pool. A
// source that writes itself without a buffer (bytes and strings readers)
// does so. Safe for concurrent use.
func Copy(dst io.Writer, src io.Reader) (int64, error) {
	switch src.(type) {
	case *bytes.Reader, *strings.Reader, *bytes.Buffer:
		return io.Copy(dst, src)
	}
	b := pool.Get().(*[]byte)
	defer pool.Put(b)
	// Hide WriteTo and ReadFrom, which would not use the buffer.
	return io.CopyBuffer(struct{ io.Writer }{dst}, struct{ io.Reader }{src}, *b)
}

// Large buffers (chunk messages) are pooled by size class: a class per
// eighth of each power of two from 1 MiB, so a buffer is at most an eighth
// larger than asked for. A fresh buffer of 8 MiB costs the kernel its
// pages, faulted in and zeroed, every time: for ferry cp's in-process
// messages that was half of all it spent on a stored 200 MB file.
const (
	largeMin     = 1 << 20
	largeMaxLog  = 30 // classes up to 1 GiB
	classesPerP2 = 8
)

var large [(largeMaxLog - 20 + 1) * classesPerP2]sync.Pool

// class is the size class of a buffer of n bytes and its capacity; -1
// below largeMin and above the last class.
func class(n int) (int, int) {
	if n < largeMin || n > 1<<largeMaxLog {
		return -1, 0
	}
	e := bits.Len(uint(n-1)) - 1 // 2^e < n <= 2^(e+1)
	step := 1 << e / classesPerP2
	sub := (n - 1<<e + step - 1) / step // 1 to classesPerP2
	return (e-20)*classesPerP2 + sub - 1, 1<<e + sub*step
}

// Get returns a buffer of length n: one Put back earlier when n is large,
// else a new one. Its bytes are not zeroed.
func Get(n int) []byte {
	c, size := class(n)
	if c < 0 {
		return make([]byte, n)
	}
	if b, ok := large[c].Get().(*[]byte); ok {
		return (*b)[:n]
	}
	return make([]byte, n, size)
}

// Put gives back a buffer that Get returned, once nothing reads or writes
// it any more; other buffers are left to the collector.
func Put(b []byte) {
	c, size := class(cap(b))
	if c < 0 || cap(b) != size {
		return
	}
	b = b[:0]
	large[c].Put(&b)
}
