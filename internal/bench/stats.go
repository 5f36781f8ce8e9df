// Package bench is make bench: it runs ferry and its peers (gcloud, gsutil,
// single-stream Go uploads, the zstd CLI) on the same data against the same
// fake-gcs-server build, each method in a fresh server process and each
// repeat in an empty bucket of its own, with every process started inside
// its method's clock. It prints one table per workload with min, median and
// max wall time and the ratio to the best peer, prints the goals of issues
// 10–12 beside what was measured (never asserting them), and appends one
// benchrow.Row per run to an NDJSON file, so make report shows ferry beside
// its peers.
//
// Ferry is driven only through its binaries (localstack, producer, worker,
// merger, restore) and their documented flags and variables, so the bench
// keeps working while ferry's internals change.
package bench

import (
	"math"

	"github.com/ferry-dev/ferry/internal/benchrow"
)

// Summary is the spread of repeated measurements (result.Summary, which
// make report's medians use too).
type Summary = benchrow.Summary

// Summarize is result.Summarize.
func Summarize(xs []float64) Summary { return benchrow.Summarize(xs) }

// Speedup is how many times faster a method is than a reference, from their
// median wall times: ref / t. 0 when either is unknown.
func Speedup(ref, t float64) float64 {
	if ref <= 0 || t <= 0 || math.IsNaN(ref) || math.IsNaN(t) {
		return 0
	}
	return ref / t
}

// MBps is bytes per second in MB/s (10^6 bytes); 0 for no time.
func MBps(bytes int64, seconds float64) float64 {
	if seconds <= 0 {
		return 0
	}
	return float64(bytes) / 1e6 / seconds
}
