package benchrow

import (
	"fmt"
	"io"
	"sort"
)

// FormatBytes prints a byte count in decimal (SI) units, kB = 10^3 and
// MB = 10^6 bytes: the units of MB/s, and the ones ferry prints everywhere
// (progress bar, stage tables, verify, report, producer status).
func FormatBytes(b float64) string {
	switch {
	case b <= 0:
		return "-"
	case b < 1e3:
		return fmt.Sprintf("%.0f B", b)
	case b < 1e6:
		return fmt.Sprintf("%.1f kB", b/1e3)
	case b < 1e9:
		return fmt.Sprintf("%.1f MB", b/1e6)
	case b < 1e12:
		return fmt.Sprintf("%.2f GB", b/1e9)
	}
	return fmt.Sprintf("%.2f TB", b/1e12)
}

// Count prints n and noun, plural unless n is 1: "1 object", "2 objects".
func Count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// FormatMS prints a duration in milliseconds as the seeds do.
func FormatMS(ms int64) string {
	switch {
	case ms < 1000:
		return fmt.Sprintf("%dms", ms)
	case ms < 60_000:
		return fmt.Sprintf("%.1fs", float64(ms)/1000)
	}
	return fmt.Sprintf("%.1fmin", float64(ms)/60_000)
}

func rate(bytes, ms int64) string {
	if ms <= 0 {
		return ""
	}
	return fmt.Sprintf("%.1f MB/s", MBps(bytes, ms))
}

// StageTable writes the seeds' pipeline summary for one row: time and
// throughput per stage, then sizes and ratio.
func StageTable(w io.Writer, r Row) {
	fmt.Fprintf(w, "  %-24s %10s %14s\n", "step", "time", "throughput")
	fmt.Fprintf(w, "  %-24s %10s %14s\n", fmt.Sprintf("compress (%s)", CodecText(r)), FormatMS(r.CompressMS), rate(r.SizeBytes, r.CompressMS))
	fmt.Fprintf(w, "  %-24s %10s %14s\n", fmt.Sprintf("upload (%s)", Count(r.Workers, "worker")), FormatMS(r.UploadMS), rate(r.WireBytes, r.UploadMS))
	fmt.Fprintf(w, "  %-24s %10s %14s\n", fmt.Sprintf("compose (%s)", Count(r.Chunks, "chunk")), FormatMS(r.ComposeMS), rate(r.WireBytes, r.ComposeMS))
	fmt.Fprintf(w, "  %-24s %10s %14s\n", "verify (crc32c)", FormatMS(r.VerifyMS), "")
	fmt.Fprintf(w, "  %-24s %10s %14s\n", "TOTAL", FormatMS(r.TotalMS), rate(r.SizeBytes, r.TotalMS))
	fmt.Fprintf(w, "  Original: %s  Wire: %s  Ratio: %.2fx  Files: %d  Status: %s\n",
		FormatBytes(float64(r.SizeBytes)), FormatBytes(float64(r.WireBytes)), r.Ratio, r.Files, r.Status)
	if r.Level == 0 && len(r.Levels) > 0 {
		fmt.Fprintf(w, "  Levels (chunks):")
		for _, u := range r.Levels {
			fmt.Fprintf(w, " %d: %d", u.Level, u.Chunks)
		}
		fmt.Fprintln(w)
	}
	if r.Error != "" {
		fmt.Fprintf(w, "  Error: %s\n", r.Error)
	}
}

// CodecText names a row's codec and level: "zstd 3" for a fixed level,
// "zstd 1-6" for the range an adaptive transfer used ("zstd adaptive"
// before it compressed anything), "none".
func CodecText(r Row) string {
	switch {
	case r.Codec == "none":
		return r.Codec
	case r.Level != 0:
		return fmt.Sprintf("%s %d", r.Codec, r.Level)
	case len(r.Levels) == 0:
		return r.Codec + " adaptive"
	case len(r.Levels) == 1:
		return fmt.Sprintf("%s %d", r.Codec, r.Levels[0].Level)
	}
	return fmt.Sprintf("%s %d-%d", r.Codec, r.Levels[0].Level, r.Levels[len(r.Levels)-1].Level)
}

// Summary is the spread of repeated measurements.
type Summary struct {
	N                int
	Min, Median, Max float64
}

// Summarize returns the spread of xs; the zero Summary for none. xs is not
// modified.
func Summarize(xs []float64) Summary {
	if len(xs) == 0 {
		return Summary{}
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	med := s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return Summary{N: n, Min: s[0], Median: med, Max: s[n-1]}
}
