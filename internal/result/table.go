package result

import (
	"fmt"
	"io"
)

// FormatBytes prints a byte count as the seeds do (1000-based MB is what
// they label MB/s; sizes use the seeds' 1024-based units).
func FormatBytes(b float64) string {
	switch {
	case b <= 0:
		return "-"
	case b < 1024:
		return fmt.Sprintf("%.0f B", b)
	case b < 1<<20:
		return fmt.Sprintf("%.1f KB", b/1024)
	case b < 1<<30:
		return fmt.Sprintf("%.1f MB", b/(1<<20))
	}
	return fmt.Sprintf("%.2f GB", b/(1<<30))
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
	fmt.Fprintf(w, "  %-24s %10s %14s\n", fmt.Sprintf("compress (%s %d)", r.Codec, r.Level), FormatMS(r.CompressMS), rate(r.SizeBytes, r.CompressMS))
	fmt.Fprintf(w, "  %-24s %10s %14s\n", fmt.Sprintf("upload (%d workers)", r.Workers), FormatMS(r.UploadMS), rate(r.WireBytes, r.UploadMS))
	fmt.Fprintf(w, "  %-24s %10s %14s\n", fmt.Sprintf("compose (%d chunks)", r.Chunks), FormatMS(r.ComposeMS), rate(r.WireBytes, r.ComposeMS))
	fmt.Fprintf(w, "  %-24s %10s %14s\n", "verify (crc32c)", FormatMS(r.VerifyMS), "")
	fmt.Fprintf(w, "  %-24s %10s %14s\n", "TOTAL", FormatMS(r.TotalMS), rate(r.SizeBytes, r.TotalMS))
	fmt.Fprintf(w, "  Original: %s  Wire: %s  Ratio: %.2fx  Files: %d  Status: %s\n",
		FormatBytes(float64(r.SizeBytes)), FormatBytes(float64(r.WireBytes)), r.Ratio, r.Files, r.Status)
	if r.Error != "" {
		fmt.Fprintf(w, "  Error: %s\n", r.Error)
	}
}
