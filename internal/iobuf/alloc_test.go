package iobuf

import "runtime"

// runtimeBytes is the process's total bytes allocated so far.
type runtimeBytes uint64

func (b *runtimeBytes) read() {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	*b = runtimeBytes(m.TotalAlloc)
}
