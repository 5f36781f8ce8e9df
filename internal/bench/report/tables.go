package report

import (
	"fmt"
	"io"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/ferry-dev/ferry/internal/benchrow"
)

// Table titles, shared by the text tables and the HTML page.
const (
	titleMethods = "Summary of transfer methods by tier"
	titleStages  = "Where the time goes"
	titleCodecs  = "Summary of compression methods"
	titleFailed  = "Failed rows by method"
)

func fmtRatio(r float64) string {
	if r <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", r)
}

func fmtMBps(v float64) string {
	if v <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f MB/s", v)
}

func fmtMS(ms float64) string {
	return benchrow.FormatMS(int64(math.Round(ms)))
}

// fmtStage prints a stage's median time, "-" when the stage took none.
func fmtStage(ms float64) string {
	if ms <= 0 {
		return "-"
	}
	return fmtMS(ms)
}

func width(min int, ss ...string) int {
	w := min
	for _, s := range ss {
		w = max(w, utf8.RuneCountInString(s))
	}
	return w
}

func pad(s string, w int) string {
	return s + strings.Repeat(" ", max(0, w-utf8.RuneCountInString(s)))
}

// cell is one group's row of the method table; "-" where there is no ok run.
func (g methodTier) cells() (size, wire, ratio, total, mbps string) {
	if g.Runs == 0 {
		return "-", "-", "-", "-", "-"
	}
	return benchrow.FormatBytes(g.Size), benchrow.FormatBytes(g.Wire), fmtRatio(g.Ratio), fmtMS(g.TotalMS), fmtMBps(g.MBps)
}

// Tables writes the seed-style text tables of rows: per method and tier
// (runs, median size, wire size, ratio, total time and MB/s, fastest first),
// where the time goes per stage, per codec and level (ratio and compress
// MB/s), and the failed rows per method. Only rows with status "ok" count in
// the medians.
func Tables(w io.Writer, rows []benchrow.Row) {
	s := summarize(rows)
	if s.Rows == 0 {
		fmt.Fprintln(w, "No benchmark rows.")
		return
	}
	fmt.Fprintf(w, "%d rows: %d ok, %d failed\n", s.Rows, s.OK, s.Failed)
	writeMethods(w, s)
	writeStages(w, s)
	writeCodecs(w, s)
	writeFailures(w, s)
}

func writeMethods(w io.Writer, s summary) {
	fmt.Fprintf(w, "\n%s (medians of ok runs, fastest first)\n", titleMethods)
	names := []string{"method"}
	for _, g := range s.Groups {
		names = append(names, g.Method)
	}
	mw := width(6, names...)
	for _, tier := range s.Tiers {
		fmt.Fprintf(w, "\n  ── %s ──\n", tier)
		head := fmt.Sprintf("  %s %5s %10s %10s %7s %10s %14s", pad("method", mw), "runs", "size", "wire", "ratio", "time", "MB/s")
		if s.Failed > 0 {
			head += fmt.Sprintf(" %7s", "failed")
		}
		fmt.Fprintln(w, head)
		for _, g := range s.groupsOfTier(tier) {
			size, wire, ratio, total, mbps := g.cells()
			line := fmt.Sprintf("  %s %5d %10s %10s %7s %10s %14s", pad(g.Method, mw), g.Runs, size, wire, ratio, total, mbps)
			if g.Failed > 0 {
				line += fmt.Sprintf(" %7d", g.Failed)
			}
			fmt.Fprintln(w, line)
		}
	}
}

func writeStages(w io.Writer, s summary) {
	fmt.Fprintf(w, "\n%s (median time per stage of ok runs; pipelined stages overlap)\n\n", titleStages)
	methods, tiers := []string{"method"}, []string{"tier"}
	for _, g := range s.Groups {
		methods = append(methods, g.Method)
		tiers = append(tiers, g.Tier)
	}
	mw, tw := width(6, methods...), width(4, tiers...)
	fmt.Fprintf(w, "  %s %s %10s %10s %10s %10s %10s\n", pad("method", mw), pad("tier", tw), "compress", "upload", "compose", "verify", "total")
	for _, g := range s.Groups {
		if g.Runs == 0 {
			continue
		}
		fmt.Fprintf(w, "  %s %s %10s %10s %10s %10s %10s\n", pad(g.Method, mw), pad(g.Tier, tw),
			fmtStage(g.CompressMS), fmtStage(g.UploadMS), fmtStage(g.ComposeMS), fmtStage(g.VerifyMS), fmtMS(g.TotalMS))
	}
}

func writeCodecs(w io.Writer, s summary) {
	fmt.Fprintf(w, "\n%s (medians of ok runs, fastest first)\n\n", titleCodecs)
	names := []string{"codec"}
	for _, c := range s.Codecs {
		names = append(names, c.Codec)
	}
	cw := width(5, names...)
	fmt.Fprintf(w, "  %s %5s %5s %7s %14s\n", pad("codec", cw), "level", "runs", "ratio", "c_tp")
	for _, c := range s.Codecs {
		fmt.Fprintf(w, "  %s %5d %5d %7s %14s\n", pad(c.Codec, cw), c.Level, c.Runs, fmtRatio(c.Ratio), fmtMBps(c.CompressMBps))
	}
}

func writeFailures(w io.Writer, s summary) {
	if len(s.Failures) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%s\n\n", titleFailed)
	names := []string{"method"}
	for _, f := range s.Failures {
		names = append(names, f.Method)
	}
	mw := width(6, names...)
	fmt.Fprintf(w, "  %s %6s  %s\n", pad("method", mw), "failed", "last error")
	for _, f := range s.Failures {
		fmt.Fprintf(w, "  %s %6d  %s\n", pad(f.Method, mw), f.Count, oneLine(f.LastError, 100))
	}
}

// oneLine flattens s to one line of at most n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if s == "" {
		return "-"
	}
	if utf8.RuneCountInString(s) > n {
		r := []rune(s)
		s = string(r[:n-1]) + "…"
	}
	return s
}
