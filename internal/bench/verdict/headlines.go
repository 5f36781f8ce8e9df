package verdict

import (
	"fmt"
	"io"
	"strings"
)

// Headlines are the few figures a user chooses a tool by, for the README:
// each workload's methods side by side, with the spread over the run's
// repeats (median, and min–max). The goals, all of them, stay in the
// bench's printout and docs/performance.md.
type headline struct {
	workload, tier, what string
	methods              []string
	// value is what a row shows of one repeat; unit names it.
	value func(Run) float64
	unit  string
}

var headlines = []headline{
	{SmallFiles, "small", "small files", []string{FerryCp, "ferry-2w", IdealClient, GcloudRecurse, "gsutil_m_cp_r"},
		func(r Run) float64 { return float64(r.Files) / r.Wall.Seconds() }, "files/s"},
	{LargeFile, "medium", "one 200 MB CSV, free link", []string{FerryCp, "ferry-2w", "go_simple", "go_resumable", "gcloud_storage"},
		func(r Run) float64 { return r.Wall.Seconds() }, "s"},
	{Shaped, "", "one CSV through a 7 MB/s link", []string{FerryCp, "ferry-2w", "go_simple", "gcloud_storage"},
		func(r Run) float64 { return MBps(r.Bytes, r.Wall.Seconds()) }, "MB/s of the file"},
}

// WriteHeadlines writes the headline table of rs as Markdown, after
// header: one row a workload, one column a method.
func WriteHeadlines(w io.Writer, header string, rs []Result, smallTier string) {
	fmt.Fprintf(w, "%s\n\n", header)
	fmt.Fprintln(w, "| workload | ferry cp | fleet (2 workers) | peers |")
	fmt.Fprintln(w, "| --- | --- | --- | --- |")
	for _, h := range headlines {
		var sel []Result
		if h.tier == "small" {
			h.tier = smallTier
			h.what = fmt.Sprintf("%s (%s)", h.what, smallTier)
		}
		if h.tier == "" {
			for _, r := range rs {
				if r.Workload == h.workload {
					sel = append(sel, r)
				}
			}
		} else {
			sel = Select(rs, h.workload, h.tier)
		}
		if len(sel) == 0 {
			continue
		}
		cell := func(name string) string {
			g, ok := Find(sel, name)
			if !ok || len(g.OK) == 0 {
				return "–"
			}
			s := Summarize(g.each(h.value))
			if s.N == 1 {
				return fmt.Sprintf("%s %s", num(s.Median), h.unit)
			}
			return fmt.Sprintf("%s %s (%s–%s)", num(s.Median), h.unit, num(s.Min), num(s.Max))
		}
		var peers []string
		for _, m := range h.methods[2:] {
			if c := cell(m); c != "–" {
				peers = append(peers, m+" "+c)
			}
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", h.what, cell(h.methods[0]), cell(h.methods[1]), strings.Join(peers, "; "))
	}
}

// num prints a figure with the digits that mean something.
func num(x float64) string {
	switch {
	case x >= 100:
		return fmt.Sprintf("%.0f", x)
	case x >= 10:
		return fmt.Sprintf("%.1f", x)
	}
	return fmt.Sprintf("%.2f", x)
}
