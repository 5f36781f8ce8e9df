// Package iobuf copies between readers and writers with pooled buffers.
// io.Copy allocates a fresh 32 KiB buffer for every copy from a file (an
// *os.File's WriteTo falls back to it), and the worker copies every spooled
// part twice (its CRC32C check and its upload): those buffers were most
// of what a worker allocated, and fed a collector that took a seventh of
// its CPU.
package iobuf

import (
	"bytes"
	"io"
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
