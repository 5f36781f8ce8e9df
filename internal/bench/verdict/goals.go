package verdict

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// Method names shared by the workloads, the goals and docs/performance.md.
const (
	ZstdCLI       = "zstd_cli_T2"         // zstd -3 -T2, the compression ceiling
	GcloudRecurse = "gcloud_storage_cp_r" // gcloud storage cp -r
	// IdealClient is the many-files workload's ceiling: PutTree with
	// IdealParallel requests in flight.
	IdealClient    = "ideal_client"
	IdealParallel  = 16
	FerryRestore   = "ferry_restore"
	GcloudDownZstd = "gcloud_cp_zstd_d"
	FerryZstd3     = "ferry-zstd3"
	FerryAdapt     = "ferry-zstd-adapt" // zstd, its level adapting (the default)
	FerryNone      = "ferry-none"
	// FerryParquet converts the CSV to Parquet (zstd columns);
	// FerryParquetSnappy with snappy columns.
	FerryParquet       = "ferry-parquet"
	FerryParquetSnappy = "ferry-parquet-snappy"
	// RandomTier is workload 4's tier of random bytes.
	RandomTier   = "random"
	CodecZstdCLI = "zstd_cli_3_T2"
)

// Goal is one of ferry's performance goals beside what the run measured. Goals are
// printed, never asserted.
type Goal struct {
	Name     string
	Target   string
	Measured string
	// State is "met", "not met" or "not measured".
	State string
}

func goal(name, target string, measured string, met, known bool) Goal {
	g := Goal{Name: name, Target: target, Measured: measured, State: "not measured"}
	if known {
		g.State = "not met"
		if met {
			g.State = "met"
		}
	}
	return g
}

// bestFerry is ferry's fastest method among rs.
func bestFerry(rs []Result) (Result, bool) { return Best(rs, Ferry) }

// Goals evaluates the goals on the results of one bench run. linkMBps is
// the shaped link's limit; smallTier the tier of the many-small-files set;
// l each process's memory limit.
func Goals(rs []Result, linkMBps float64, smallTier string, l Limits) []Goal {
	var out []Goal
	for _, tier := range Tiers(rs, LargeFile) {
		sel := Select(rs, LargeFile, tier)
		f, okF := bestFerry(sel)
		p, okP := Best(sel, Peer)
		z, okZ := Find(sel, ZstdCLI)
		okZ = okZ && len(z.OK) > 0
		if okF && okP {
			q := f.Wall.Median / p.Wall.Median
			out = append(out, goal("large file "+tier+": ferry wall time / best peer's", "<= 0.50",
				fmt.Sprintf("%.2f (%s %s s, %s %s s)", q, f.Method, Secs(f.Wall.Median), p.Method, Secs(p.Wall.Median)), q <= 0.5, true))
		} else {
			out = append(out, goal("large file "+tier+": ferry wall time / best peer's", "<= 0.50", "-", false, false))
		}
		if okF && okZ {
			q := f.Wall.Median / z.Wall.Median
			out = append(out, goal("large file "+tier+": ferry wall time / zstd -3 -T2 alone", "<= 2.0",
				fmt.Sprintf("%.2f (%s s vs %s s)", q, Secs(f.Wall.Median), Secs(z.Wall.Median)), q <= 2, true))
		}
	}

	if sel := Select(rs, Shaped, ""); len(sel) > 0 {
		if f, ok := Find(sel, "ferry-2w"); ok && len(f.OK) > 0 {
			out = append(out, idealGoal(fmt.Sprintf("shaped link %.1f MB/s: ferry raw MB/s / ideal", linkMBps), f, linkMBps))
		}
		if m, ok := Find(sel, "ferry-1w-max-rate"); ok && len(m.OK) > 0 {
			got := m.Median(func(r Run) float64 { return r.LinkMBps })
			out = append(out, goal(fmt.Sprintf("--max-rate %.0fMB: MB/s sent over an unshaped link", linkMBps), fmt.Sprintf("<= %.1f", linkMBps*1.05),
				fmt.Sprintf("%.2f", got), got <= linkMBps*1.05, got > 0))
		}
	}

	for _, tier := range Tiers(rs, KernelLink) {
		sel, rate := Select(rs, KernelLink, tier), KernelRate(tier)
		for _, name := range []string{"ferry-2w", "ferry-2w-pubsub"} {
			if f, ok := Find(sel, name); ok && len(f.OK) > 0 {
				out = append(out, idealGoal(fmt.Sprintf("kernel-shaped %.0f MB/s: %s raw MB/s / ideal", rate, name), f, rate))
			}
		}
	}

	if sel := Select(rs, SmallFiles, smallTier); len(sel) > 0 {
		f, okF := bestFerry(sel)
		g, okG := Find(sel, GcloudRecurse)
		okG = okG && len(g.OK) > 0
		if okF {
			fps := f.FilesPerSec()
			out = append(out, goal("small files: ferry files/s", ">= 1000", fmt.Sprintf("%.0f (%s)", fps, f.Method), fps >= 1000, true))
			if id, ok := Find(sel, IdealClient); ok && len(id.OK) > 0 {
				q := Speedup(id.Wall.Median, f.Wall.Median)
				out = append(out, goal("small files: ferry / the ideal client", ">= 0.5",
					fmt.Sprintf("%.2f (%.0f vs %.0f files/s)", q, fps, id.FilesPerSec()), q >= 0.5, true))
			}
			if okG {
				// As the table's column: median wall times, same files.
				q := Speedup(g.Wall.Median, f.Wall.Median)
				out = append(out, goal("small files: ferry files/s / gcloud storage cp -r", ">= 5.0",
					fmt.Sprintf("%.2f (%.0f vs %.0f files/s)", q, fps, g.FilesPerSec()), q >= 5, true))
			}
		}
	}

	for _, tier := range Tiers(rs, Codecs) {
		sel := Select(rs, Codecs, tier)
		f, okF := Find(sel, FerryZstd3)
		z, okZ := Find(sel, CodecZstdCLI)
		if okF && okZ && len(f.OK) > 0 && len(z.OK) > 0 {
			comp := func(r Run) float64 { return MBps(r.Bytes, float64(r.CompressMS)/1000) }
			ratio := func(r Run) float64 {
				if r.Wire <= 0 {
					return 0
				}
				return float64(r.Bytes) / float64(r.Wire)
			}
			q := f.Median(comp) / z.Median(comp)
			out = append(out, goal("codecs "+tier+": producer compress MB/s / zstd -3 -T2", ">= 0.95",
				fmt.Sprintf("%.2f (%.0f vs %.0f MB/s)", q, f.Median(comp), z.Median(comp)), q >= 0.95, true))
			rq := f.Median(ratio) / z.Median(ratio)
			out = append(out, goal("codecs "+tier+": producer ratio / CLI's", ">= 0.98",
				fmt.Sprintf("%.3f (%.2f vs %.2f)", rq, f.Median(ratio), z.Median(ratio)), rq >= 0.98, true))
		}
	}

	out = append(out, freeLinkGoals(rs)...)
	out = append(out, cpGoals(rs, linkMBps, smallTier)...)
	out = append(out, pushbackGoals(rs)...)
	if len(Tiers(rs, Latency)) > 0 {
		out = append(out, latencyGoals(rs)...)
	}
	out = append(out, poolGoals(rs, l)...)

	for _, tier := range Tiers(rs, Restore) {
		sel := Select(rs, Restore, tier)
		f, okF := Find(sel, FerryRestore)
		if !okF || len(f.OK) == 0 {
			out = append(out, goal("restore "+tier, "a restore of the tier", "-", false, false))
			continue
		}
		ref, want, name := GcloudDownZstd, 1.5, "ferry restore speed / gcloud storage cp + zstd -d"
		if _, ok := Find(sel, GcloudDownZstd); !ok {
			ref, want, name = GcloudRecurse, 2.0, "ferry restore speed / gcloud storage cp -r"
		}
		if g, ok := Find(sel, ref); ok && len(g.OK) > 0 {
			q := Speedup(g.Wall.Median, f.Wall.Median)
			out = append(out, goal("restore "+tier+": "+name, fmt.Sprintf(">= %.1f", want),
				fmt.Sprintf("%.2f (%s s vs %s s)", q, Secs(f.Wall.Median), Secs(g.Wall.Median)), q >= want, true))
		}
	}

	out = append(out, treeGoals(rs, l)...)
	if peaks := ProcessPeaks(rs); len(peaks) > 0 {
		out = append(out, Goal{Name: "memory: peak RSS per ferry process, every run (budgets at their defaults)",
			Target: fmt.Sprintf("within budget + %d MiB: producer <= %d, worker <= %d, merger <= %d MiB",
				l.Overhead>>20, l.Producer>>20, l.Worker>>20, l.Merger>>20),
			Measured: strings.Join(peaks, ", "), State: memoryState(rs, l)})
	}
	return out
}

// Limits are each process's memory limit in bytes: its budget plus
// Overhead (setup.MemoryOverhead), what the runtime is told and
// docs/capacity.md states.
type Limits struct{ Producer, Worker, Merger, Agent, Overhead int64 }

// memoryState checks the largest peaks against l.
func memoryState(rs []Result, l Limits) string {
	var prod, work, merge int64
	for _, g := range rs {
		if g.Role != Ferry {
			continue
		}
		for _, r := range g.OK {
			for _, p := range r.Procs {
				switch {
				case p.Name == "producer":
					prod = max(prod, p.MaxRSSKB)
				case strings.HasPrefix(p.Name, "worker"):
					work = max(work, p.MaxRSSKB)
				case p.Name == "merger":
					merge = max(merge, p.MaxRSSKB)
				}
			}
		}
	}
	if prod == 0 && work == 0 && merge == 0 {
		return "not measured"
	}
	if prod<<10 <= l.Producer && work<<10 <= l.Worker && merge<<10 <= l.Merger {
		return "met"
	}
	return "not met"
}

// WriteGoals prints the goals as a table.
func WriteGoals(w io.Writer, gs []Goal) {
	t := Table{Title: "Goals (printed, never asserted)", Header: []string{"goal", "target", "measured", "state"}, Left: true}
	for _, g := range gs {
		t.Rows = append(t.Rows, []string{g.Name, g.Target, g.Measured, g.State})
	}
	t.Write(w)
}

// freeLinkGoals are the compression goals: on loopback, where
// bandwidth is free, ferry (its level adapting) is never slower than a
// plain single-stream upload (go_simple, workload 1's 200 MB tier) nor
// than ferry with no codec (workload 4); and on random bytes zstd costs
// at most 1.3x the CPU and 1.1x the wall time of no codec.
func freeLinkGoals(rs []Result) []Goal {
	var out []Goal
	wall := func(g Result) string { return Secs(g.Wall.Median) }
	if sel := Select(rs, LargeFile, "medium"); len(sel) > 0 {
		f, okF := Find(sel, "ferry-2w")
		g, okG := Find(sel, "go_simple")
		if okF && okG && len(f.OK) > 0 && len(g.OK) > 0 {
			q := f.Wall.Median / g.Wall.Median
			out = append(out, goal("free link 200 MB: ferry-2w wall time / go_simple's", "<= 1.00",
				fmt.Sprintf("%.2f (%s s vs %s s)", q, wall(f), wall(g)), q <= 1, true))
		}
	}
	for _, tier := range Tiers(rs, Codecs) {
		sel := Select(rs, Codecs, tier)
		a, okA := Find(sel, FerryAdapt)
		n, okN := Find(sel, FerryNone)
		if !okA || !okN || len(a.OK) == 0 || len(n.OK) == 0 {
			continue
		}
		q := a.Wall.Median / n.Wall.Median
		if tier != RandomTier {
			out = append(out, goal("codecs "+tier+" (free link): ferry zstd adaptive wall time / --codec none", "<= 1.00",
				fmt.Sprintf("%.2f (%s s vs %s s)", q, wall(a), wall(n)), q <= 1, true))
			continue
		}
		cpu := func(r Run) float64 { return r.CPU().Seconds() }
		c := a.Median(cpu) / n.Median(cpu)
		out = append(out, goal("incompressible "+sizeOf([]Result{a})+": zstd CPU / --codec none", "<= 1.30",
			fmt.Sprintf("%.2f (%.1f vs %.1f s)", c, a.Median(cpu), n.Median(cpu)), c <= 1.3, true))
		out = append(out, goal("incompressible "+sizeOf([]Result{a})+": zstd wall time / --codec none", "<= 1.10",
			fmt.Sprintf("%.2f (%s s vs %s s)", q, wall(a), wall(n)), q <= 1.1, true))
	}
	return out
}

// cpGoals are the goals for ferry cp, the engine in one process:
// small files at 0.8x the ideal client and 10x gcloud storage cp -r, with
// at most 1.2x its CPU per file; 200 MB on a free link within go_simple's
// wall time; the shaped link at 0.9x the ideal and 2.5x go_simple.
func cpGoals(rs []Result, linkMBps float64, smallTier string) []Goal {
	var out []Goal
	okRuns := func(sel []Result, name string) (Result, bool) {
		r, ok := Find(sel, name)
		return r, ok && len(r.OK) > 0
	}
	if sel := Select(rs, SmallFiles, smallTier); len(sel) > 0 {
		c, okC := okRuns(sel, FerryCp)
		if id, ok := okRuns(sel, IdealClient); ok && okC {
			q := Speedup(id.Wall.Median, c.Wall.Median)
			out = append(out, goal("small files: ferry cp / the ideal client", ">= 0.8",
				fmt.Sprintf("%.2f (%.0f vs %.0f files/s)", q, c.FilesPerSec(), id.FilesPerSec()), q >= 0.8, true))
			perFile := func(g Result) float64 {
				return g.Median(func(r Run) float64 { return r.CPU().Seconds() }) * 1000 / float64(g.OK[0].Files)
			}
			if id.OK[0].Files > 0 && c.OK[0].Files > 0 {
				q := perFile(c) / perFile(id)
				out = append(out, goal("small files: ferry cp CPU per file / the ideal client's", "<= 1.20",
					fmt.Sprintf("%.2f (%.2f vs %.2f ms)", q, perFile(c), perFile(id)), q <= 1.2, true))
			}
		}
		if g, ok := okRuns(sel, GcloudRecurse); ok && okC {
			q := Speedup(g.Wall.Median, c.Wall.Median)
			out = append(out, goal("small files: ferry cp files/s / gcloud storage cp -r", ">= 10",
				fmt.Sprintf("%.2f (%.0f vs %.0f files/s)", q, c.FilesPerSec(), g.FilesPerSec()), q >= 10, true))
		}
	}
	if sel := Select(rs, LargeFile, "medium"); len(sel) > 0 {
		c, okC := okRuns(sel, FerryCp)
		if g, ok := okRuns(sel, "go_simple"); ok && okC {
			q := c.Wall.Median / g.Wall.Median
			out = append(out, goal("free link 200 MB: ferry cp wall time / go_simple's", "<= 1.00",
				fmt.Sprintf("%.2f (%s s vs %s s)", q, Secs(c.Wall.Median), Secs(g.Wall.Median)), q <= 1, true))
		}
	}
	if sel := Select(rs, Shaped, ""); len(sel) > 0 {
		if c, ok := okRuns(sel, FerryCp); ok {
			out = append(out, idealGoal(fmt.Sprintf("shaped link %.1f MB/s: ferry cp raw MB/s / ideal", linkMBps), c, linkMBps))
			if g, ok := okRuns(sel, "go_simple"); ok {
				q := Speedup(g.Wall.Median, c.Wall.Median)
				out = append(out, goal(fmt.Sprintf("shaped link %.1f MB/s: ferry cp / go_simple", linkMBps), ">= 2.5",
					fmt.Sprintf("%.2f (%s s vs %s s)", q, Secs(c.Wall.Median), Secs(g.Wall.Median)), q >= 2.5, true))
			}
		}
	}
	return out
}

// idealGoal is f's raw throughput as a share of the ideal on a link of
// linkMBps: the link rate times f's own ratio of raw bytes to bytes sent.
func idealGoal(name string, f Result, linkMBps float64) Goal {
	raw := f.MBps()
	ideal := Ideal(linkRatio(f), linkMBps)
	q := 0.0
	if ideal > 0 {
		q = raw / ideal
	}
	return goal(name, ">= 0.90", fmt.Sprintf("%.2f (%.1f of %.1f MB/s)", q, raw, ideal), q >= 0.9, ideal > 0)
}

// treeGoals are the memory goals on workload 7: at its largest tree,
// producer and merger within 256 MiB and workers within 128 MiB, and no
// process's peak more than 10 % above its peak at the smallest tree.
func treeGoals(rs []Result, l Limits) []Goal {
	var tiers []string
	var out []Goal
	for _, tier := range Tiers(rs, BigTree) {
		if strings.HasPrefix(tier, "files-") {
			tiers = append(tiers, tier)
		} else {
			out = append(out, realTreeGoal(Select(rs, BigTree, tier), tier, l))
		}
	}
	peak := func(tier, name string) (float64, bool) {
		f, ok := Find(Select(rs, BigTree, tier), "ferry-2w")
		if !ok || len(f.OK) == 0 {
			return 0, false
		}
		return peakKB(f, name) / 1024, true
	}
	if len(tiers) == 0 {
		return out
	}
	// Tiers are named files-N: the smallest and largest tree by N.
	slices.SortFunc(tiers, func(a, b string) int { return cmp.Compare(treeFiles(a), treeFiles(b)) })
	small, big := tiers[0], tiers[len(tiers)-1]
	p, okP := peak(big, "producer")
	m, okM := peak(big, "merger")
	w, okW := peak(big, "worker")
	out = append(out, goal("tree "+big+": peak RSS producer / merger / worker", "<= 256 / 256 / 128 MiB",
		fmt.Sprintf("%.0f / %.0f / %.0f MiB", p, m, w), p <= 256 && m <= 256 && w <= 128, okP && okM && okW))
	if small == big {
		return out
	}
	var worst float64
	var who string
	known := true
	for _, name := range []string{"producer", "merger", "worker"} {
		a, okA := peak(small, name)
		b, okB := peak(big, name)
		if !okA || !okB || a <= 0 {
			known = false
			continue
		}
		if g := b/a - 1; g > worst || who == "" {
			worst, who = g, name
		}
	}
	return append(out, goal("tree: growth of a process's peak RSS, "+small+" to "+big, "<= 10 %",
		fmt.Sprintf("%+.0f %% (%s)", 100*worst, who), worst <= 0.10, known))
}

// treeFiles is the file count a workload 7 tier names ("files-100000").
// realTreeGoal is the real source tree's row: every process inside its
// default limit on files of every size, with the speed beside gcloud's.
func realTreeGoal(sel []Result, tier string, l Limits) Goal {
	name := "real tree " + tier + ": peak RSS producer / merger / worker"
	target := fmt.Sprintf("<= %d / %d / %d MiB", l.Producer>>20, l.Merger>>20, l.Worker>>20)
	f, ok := Find(sel, "ferry-2w")
	if !ok || len(f.OK) == 0 {
		return goal(name, target, "-", false, false)
	}
	peak := func(name string) int64 { return int64(peakKB(f, name)) << 10 }
	p, m, w := peak("producer"), peak("merger"), peak("worker")
	measured := fmt.Sprintf("%d / %d / %d MiB at %s files/s", p>>20, m>>20, w>>20, fmtRate(f.FilesPerSec()))
	if g, ok := Find(sel, GcloudRecurse); ok && len(g.OK) > 0 {
		measured += fmt.Sprintf(" (%s the speed of gcloud storage cp -r)", fmtX(Speedup(g.Wall.Median, f.Wall.Median)))
	}
	return goal(name, target, measured, p <= l.Producer && m <= l.Merger && w <= l.Worker, true)
}

func treeFiles(tier string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(tier, "files-"))
	return n
}
