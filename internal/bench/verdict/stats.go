// Package verdict is what make bench concludes from its runs, and runs no
// process: the runs and their rows (Run), the results grouped by method
// (Result), the tables, the goals with their thresholds, the headlines and
// the summary spliced into docs/performance.md. Its table tests hold each
// goal at its threshold; the driver (package bench) only measures.
package verdict

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
