package setup

import (
	"os"
	"runtime/debug"
)

// MemoryOverhead is what a process holds beside the work its budget
// bounds: the runtime and its clients (Pub/Sub, GCS), the compressors'
// tables (about 19 MiB a core for zstd's three adaptive levels), the
// manifest page in flight, and the executable's resident pages
// (binaryPages). docs/capacity.md states it with the budgets.
const MemoryOverhead = 96 << 20

// binaryPages is the part of MemoryOverhead the runtime does not count:
// the executable's own pages once resident (file-backed; the producer,
// with the Parquet writer in it, is a 95 MiB binary and had 48 MiB of it
// resident at its peak on a tree of 51,136 files, 2026-12-04).
const binaryPages = 40 << 20

// MemoryLimit tells the Go runtime the process's limit: budget (what the
// configuration bounds, FERRY_PRODUCER_MEMORY times the requests at once)
// plus MemoryOverhead less the executable's resident pages (binaryPages),
// which count in the process's RSS but not in the runtime's memory, so
// that the collector runs before the heap doubles past it instead of at
// GOGC's 100 % headroom (where a 256 MiB budget peaked at more than
// twice that).
// GOMEMLIMIT, when set, wins. It returns the limit in force.
func MemoryLimit(budget int64) int64 {
	if _, set := os.LookupEnv("GOMEMLIMIT"); set || budget <= 0 {
		return debug.SetMemoryLimit(-1)
	}
	debug.SetMemoryLimit(budget + MemoryOverhead - binaryPages)
	return budget + MemoryOverhead - binaryPages
}
