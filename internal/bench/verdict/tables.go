package verdict

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ferry-dev/ferry/internal/benchrow"
)

// Workload names, as they appear in rows (label "workload") and tables.
const (
	LargeFile  = "large-file"
	SmallFiles = "small-files"
	Shaped     = "shaped-link"
	Codecs     = "codecs"
	Restore    = "restore"
	KernelLink = "kernel-link"
	BigTree    = "big-tree"
	Parquet    = "parquet"
)

// Result is one method's repeats on one workload and tier.
type Result struct {
	Workload, Tier, Method string
	Role                   Role
	Setting                string
	Runs                   []Run // every repeat, in order
	OK                     []Run // the repeats that succeeded
	Wall                   Summary
	LastErr                error
}

// Group gathers runs by workload, tier and method, in the order each was
// first seen.
func Group(runs []Run) []Result {
	var out []Result
	index := map[string]int{}
	for _, r := range runs {
		k := r.Workload + "\x00" + r.Tier + "\x00" + r.Method
		i, ok := index[k]
		if !ok {
			i = len(out)
			index[k] = i
			out = append(out, Result{Workload: r.Workload, Tier: r.Tier, Method: r.Method, Role: r.Role, Setting: r.Setting})
		}
		g := &out[i]
		g.Runs = append(g.Runs, r)
		if r.OK() {
			g.OK = append(g.OK, r)
		} else {
			g.LastErr = r.Err
		}
	}
	for i := range out {
		out[i].Wall = Summarize(out[i].each(func(r Run) float64 { return r.Wall.Seconds() }))
	}
	return out
}

func (g Result) each(f func(Run) float64) []float64 {
	xs := make([]float64, 0, len(g.OK))
	for _, r := range g.OK {
		xs = append(xs, f(r))
	}
	return xs
}

// Median is the median of f over the successful repeats.
func (g Result) Median(f func(Run) float64) float64 { return Summarize(g.each(f)).Median }

// MaxOf is the largest f over the successful repeats.
func (g Result) MaxOf(f func(Run) float64) float64 { return Summarize(g.each(f)).Max }

// MBps is the median raw throughput.
func (g Result) MBps() float64 {
	return g.Median(func(r Run) float64 { return MBps(r.Bytes, r.Wall.Seconds()) })
}

// FilesPerSec is the median of files per second.
func (g Result) FilesPerSec() float64 {
	return g.Median(func(r Run) float64 {
		if r.Wall <= 0 {
			return 0
		}
		return float64(r.Files) / r.Wall.Seconds()
	})
}

// Select returns the results of one workload and tier ("" matches any).
func Select(rs []Result, workload, tier string) []Result {
	var out []Result
	for _, r := range rs {
		if r.Workload == workload && (tier == "" || r.Tier == tier) {
			out = append(out, r)
		}
	}
	return out
}

// Tiers lists the tiers of a workload's results, in order of appearance.
func Tiers(rs []Result, workload string) []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range rs {
		if r.Workload == workload && !seen[r.Tier] {
			seen[r.Tier] = true
			out = append(out, r.Tier)
		}
	}
	return out
}

// Best returns the result of role with the lowest median wall time among
// those with a successful repeat.
func Best(rs []Result, role Role) (Result, bool) {
	var best Result
	found := false
	for _, r := range rs {
		if r.Role != role || len(r.OK) == 0 {
			continue
		}
		if !found || r.Wall.Median < best.Wall.Median {
			best, found = r, true
		}
	}
	return best, found
}

// Find returns the result of method.
func Find(rs []Result, method string) (Result, bool) {
	for _, r := range rs {
		if r.Method == method {
			return r, true
		}
	}
	return Result{}, false
}

func runsCell(g Result) string {
	if f := len(g.Runs) - len(g.OK); f > 0 {
		return fmt.Sprintf("%d (%d failed)", len(g.Runs), f)
	}
	return itoa(len(g.Runs))
}

func cpuCell(g Result) string {
	if len(g.OK) == 0 {
		return "-"
	}
	return ftoa(g.Median(func(r Run) float64 { return r.CPU().Seconds() }), 1)
}

func rssCell(g Result) string {
	v := g.MaxOf(func(r Run) float64 { return float64(r.PeakRSSKB()) })
	if v <= 0 {
		return "-"
	}
	return ftoa(v/1024, 0)
}

func speedupCell(ref Result, hasRef bool, g Result) string {
	if !hasRef || len(g.OK) == 0 || g.Role == Ceiling {
		return "-"
	}
	return fmtX(Speedup(ref.Wall.Median, g.Wall.Median))
}

// composeCell is ferry's compose stage beside the server's own compose
// time, medians in seconds: "1.2 / 0.8".
func composeCell(g Result) string {
	if g.Role != Ferry || len(g.OK) == 0 {
		return "-"
	}
	stage := g.Median(func(r Run) float64 { return float64(r.ComposeMS) / 1000 })
	server := g.Median(func(r Run) float64 { return float64(r.ServerComposeMS) / 1000 })
	return Secs(stage) + " / " + Secs(server)
}

func failureNotes(rs []Result) []string {
	var notes []string
	for _, g := range rs {
		if g.LastErr != nil {
			notes = append(notes, fmt.Sprintf("%s failed %d of %d: %s", g.Method, len(g.Runs)-len(g.OK), len(g.Runs), OneLine(g.LastErr.Error(), 160)))
		}
	}
	return notes
}

func settingNotes(rs []Result) []string {
	var notes []string
	for _, g := range rs {
		if g.Setting != "" {
			notes = append(notes, fmt.Sprintf("%-20s %s", g.Method, g.Setting))
		}
	}
	return append(notes, levelNotes(rs)...)
}

// levelNotes say, for each ferry method whose level adapted, how many
// chunks its repeats compressed at each level.
func levelNotes(rs []Result) []string {
	var notes []string
	for _, g := range rs {
		used := map[int]int{}
		for _, r := range g.OK {
			if g.Role != Ferry || r.Level != 0 || r.Codec != "zstd" {
				continue
			}
			for _, u := range r.Levels {
				used[u.Level] += u.Chunks
			}
		}
		if len(used) == 0 {
			continue
		}
		var b strings.Builder
		for _, l := range slices.Sorted(maps.Keys(used)) {
			fmt.Fprintf(&b, " %d: %d", l, used[l])
		}
		notes = append(notes, fmt.Sprintf("%-20s adaptive zstd, chunks at each level over %d runs:%s", g.Method, len(g.OK), b.String()))
	}
	return notes
}

// OneLine is s on one line, cut to n bytes with an ellipsis.
func OneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n-1] + "…"
	}
	return s
}

// LargeFileTable is workload 1 for one tier: wall time, throughput, bytes
// stored, the speedup over the best peer (above 1: faster), CPU, peak RSS
// and, for ferry, its compose stage beside the server's compose time.
func LargeFileTable(rs []Result, tier string) Table {
	rs = Select(rs, LargeFile, tier)
	best, ok := Best(rs, Peer)
	t := Table{
		Title:  fmt.Sprintf("Workload 1: one large file, tier %s (%s)", tier, sizeOf(rs)),
		Header: []string{"method", "runs", "wall s min / med / max", "raw MB/s", "stored MB", "vs best peer", "CPU s", "peak RSS MiB", "compose s ferry / server"},
	}
	for _, g := range rs {
		t.Rows = append(t.Rows, []string{g.Method, runsCell(g), spread(g.Wall), fmtRate(g.MBps()),
			fmtMB(g.Median(func(r Run) float64 { return float64(r.Wire) })), speedupCell(best, ok, g), cpuCell(g), rssCell(g), composeCell(g)})
	}
	if ok {
		t.Notes = append(t.Notes, fmt.Sprintf("best peer: %s, median %s s; \"vs best peer\" is its median wall time over the method's (above 1x: faster)", best.Method, Secs(best.Wall.Median)))
	}
	t.Notes = append(t.Notes, settingNotes(rs)...)
	t.Notes = append(t.Notes, failureNotes(rs)...)
	return t
}

// SmallFilesTable is workload 2 for one data set: files/s, MB/s and the
// speedup in files/s over gcloud storage cp -r.
func SmallFilesTable(rs []Result, tier, gcloudMethod string) Table {
	rs = Select(rs, SmallFiles, tier)
	ref, ok := Find(rs, gcloudMethod)
	ok = ok && len(ref.OK) > 0
	t := Table{
		Title:  fmt.Sprintf("Workload 2: many files, %s (%s)", tier, sizeOf(rs)),
		Header: []string{"method", "runs", "wall s min / med / max", "files/s", "MB/s", "vs " + gcloudMethod, "of " + IdealClient, "CPU s", "peak RSS MiB"},
	}
	ideal, okIdeal := Find(rs, IdealClient)
	okIdeal = okIdeal && len(ideal.OK) > 0
	for _, g := range rs {
		vs, of := "-", "-"
		if ok && len(g.OK) > 0 {
			vs = fmtX(Speedup(ref.Wall.Median, g.Wall.Median))
		}
		if okIdeal && len(g.OK) > 0 {
			of = fmtX(Speedup(ideal.Wall.Median, g.Wall.Median))
		}
		t.Rows = append(t.Rows, []string{g.Method, runsCell(g), spread(g.Wall), fmtRate(g.FilesPerSec()), fmtRate(g.MBps()), vs, of, cpuCell(g), rssCell(g)})
	}
	t.Notes = append(t.Notes, settingNotes(rs)...)
	t.Notes = append(t.Notes, failureNotes(rs)...)
	return t
}

// linkRatio is the median of raw bytes per byte sent over the link: what
// compression bought on it.
func linkRatio(g Result) float64 {
	return g.Median(func(r Run) float64 {
		if r.LinkBytes <= 0 {
			return 0
		}
		return float64(r.Bytes) / float64(r.LinkBytes)
	})
}

// Ideal is the best raw throughput a compressing method can have on a link:
// its compression ratio times the link rate.
func Ideal(ratio, linkMBps float64) float64 { return ratio * linkMBps }

// ShapedTable is workload 3: raw throughput through a link of linkMBps,
// the rate the proxy measured, and each method's share of its ideal.
func ShapedTable(rs []Result, linkMBps float64) Table {
	rs = Select(rs, Shaped, "")
	return linkTable(rs, linkMBps, fmt.Sprintf("Workload 3: a shaped link of %.1f MB/s (%s)", linkMBps, sizeOf(rs)),
		"link MB/s is what the proxy measured from first to last byte up")
}

// KernelTable is workload 6 at one rate: the same columns through a link
// the kernel shapes (tbf), Pub/Sub's bytes included.
func KernelTable(rs []Result, tier string, linkMBps float64) Table {
	rs = Select(rs, KernelLink, tier)
	return linkTable(rs, linkMBps, fmt.Sprintf("Workload 6: a link of %.1f MB/s shaped by the kernel (tbf; %s)", linkMBps, sizeOf(rs)),
		"the submitting side (producer; with the spool, its workers too; the peers) runs in a network namespace whose veth sends through tbf; link MB/s is what the veth sent over the wall time")
}

// KernelRate is the link rate of a workload 6 tier ("kernel-7MBps").
func KernelRate(tier string) float64 {
	v, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimPrefix(tier, "kernel-"), "MBps"), 64)
	return v
}

func linkTable(rs []Result, linkMBps float64, title, linkNote string) Table {
	t := Table{
		Title:  title,
		Header: []string{"method", "runs", "wall s min / med / max", "raw MB/s", "sent MB", "link MB/s", "ideal MB/s", "of ideal"},
	}
	for _, g := range rs {
		raw := g.MBps()
		ideal := Ideal(linkRatio(g), linkMBps)
		of := "-"
		if ideal > 0 && raw > 0 {
			of = ftoa(100*raw/ideal, 0) + "%"
		}
		t.Rows = append(t.Rows, []string{g.Method, runsCell(g), spread(g.Wall), fmtRate(raw),
			fmtMB(g.Median(func(r Run) float64 { return float64(r.LinkBytes) })),
			fmtRate(g.Median(func(r Run) float64 { return r.LinkMBps })), fmtRate(ideal), of})
	}
	t.Notes = append(t.Notes, "ideal = (raw bytes / bytes sent over the link) x link rate; "+linkNote)
	t.Notes = append(t.Notes, levelNotes(rs)...)
	t.Notes = append(t.Notes, failureNotes(rs)...)
	return t
}

// CodecTable is workload 4: the seeds' compression table.
func CodecTable(rs []Result, tier string) Table {
	rs = Select(rs, Codecs, tier)
	t := Table{
		Title:  fmt.Sprintf("Workload 4: codecs, tier %s (%s)", tier, sizeOf(rs)),
		Header: []string{"method", "codec", "runs", "ratio", "compress MB/s", "decompress MB/s", "transfer s med"},
	}
	for _, g := range rs {
		if len(g.Runs) == 0 {
			continue
		}
		r0 := g.Runs[0]
		codec := r0.Codec
		if codec != "none" && codec != "" {
			codec = benchrow.CodecText(benchrow.Row{Codec: r0.Codec, Level: r0.Level, Levels: r0.Levels})
		}
		ratio := g.Median(func(r Run) float64 {
			if r.Wire <= 0 {
				return 0
			}
			return float64(r.Bytes) / float64(r.Wire)
		})
		comp := g.Median(func(r Run) float64 { return MBps(r.Bytes, float64(r.CompressMS)/1000) })
		dec := g.Median(func(r Run) float64 { return MBps(r.Bytes, float64(r.DecompressMS)/1000) })
		transfer := "-"
		if g.Role == Ferry && len(g.OK) > 0 {
			transfer = Secs(g.Wall.Median)
		}
		t.Rows = append(t.Rows, []string{g.Method, codec, runsCell(g), fmtX(ratio), fmtRate(comp), fmtRate(dec), transfer})
	}
	t.Notes = append(t.Notes,
		"ferry rows: compress is the producer's compress stage inside a whole transfer (2 workers uploading beside it);",
		"decompress is the stock CLI (zstd -d / gzip -d) on the object ferry stored, downloaded first, output discarded")
	t.Notes = append(t.Notes, settingNotes(rs)...)
	t.Notes = append(t.Notes, failureNotes(rs)...)
	return t
}

// RestoreTable is workload 5 for one data set.
func RestoreTable(rs []Result, tier string) Table {
	rs = Select(rs, Restore, tier)
	best, ok := Best(rs, Peer)
	t := Table{
		Title:  fmt.Sprintf("Workload 5: restore, %s (%s)", tier, sizeOf(rs)),
		Header: []string{"method", "runs", "wall s min / med / max", "raw MB/s", "files/s", "vs best peer", "CPU s", "peak RSS MiB"},
	}
	for _, g := range rs {
		t.Rows = append(t.Rows, []string{g.Method, runsCell(g), spread(g.Wall), fmtRate(g.MBps()), fmtRate(g.FilesPerSec()), speedupCell(best, ok, g), cpuCell(g), rssCell(g)})
	}
	t.Notes = append(t.Notes, settingNotes(rs)...)
	t.Notes = append(t.Notes, failureNotes(rs)...)
	return t
}

// sizeOf describes the data of a group of results: "1 file, 200.0 MB".
func sizeOf(rs []Result) string {
	for _, g := range rs {
		for _, r := range g.Runs {
			if r.Bytes > 0 {
				f := "files"
				if r.Files == 1 {
					f = "file"
				}
				return fmt.Sprintf("%d %s, %.1f MB", r.Files, f, float64(r.Bytes)/1e6)
			}
		}
	}
	return "no data"
}

// ProcessPeaks lists the largest peak RSS of each ferry process name over
// every successful ferry run, largest first: "producer 212 MiB".
func ProcessPeaks(rs []Result) []string {
	peak := map[string]int64{}
	for _, g := range rs {
		if g.Role != Ferry {
			continue
		}
		for _, r := range g.OK {
			for _, p := range r.Procs {
				name := p.Name
				if strings.HasPrefix(name, "worker-") {
					name = "worker"
				}
				peak[name] = max(peak[name], p.MaxRSSKB)
			}
		}
	}
	names := make([]string, 0, len(peak))
	for n := range peak {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return peak[names[i]] > peak[names[j]] })
	out := make([]string, 0, len(names))
	for _, n := range names {
		out = append(out, fmt.Sprintf("%s %.0f MiB", n, float64(peak[n])/1024))
	}
	return out
}

// BigTreeTable is workload 7: a tree of many small files at each size run
// (100,000; 1,000,000 with BENCH_FULL), with the peak RSS of each of
// ferry's processes, so that memory that grows with the file count shows.
func BigTreeTable(rs []Result, tiers []string) Table {
	t := Table{
		Title: "Workload 7: a tree of many small files (memory independent of the file count)",
		Header: []string{"tree", "method", "runs", "wall s min / med / max", "files/s", "vs " + GcloudRecurse,
			"producer MiB", "merger MiB", "worker MiB", "merger CPU s / 1,000 files"},
	}
	for _, tier := range tiers {
		sel := Select(rs, BigTree, tier)
		ref, ok := Find(sel, GcloudRecurse)
		ok = ok && len(ref.OK) > 0
		for _, g := range sel {
			vs := "-"
			if ok && len(g.OK) > 0 {
				vs = fmtX(Speedup(ref.Wall.Median, g.Wall.Median))
			}
			row := []string{tier, g.Method, runsCell(g), spread(g.Wall), fmtRate(g.FilesPerSec()), vs}
			if g.Role == Ferry {
				row = append(row, procRSS(g, "producer"), procRSS(g, "merger"), procRSS(g, "worker"), mergerCPU(g))
			} else {
				row = append(row, "-", "-", rssCell(g), "-")
			}
			t.Rows = append(t.Rows, row)
		}
		t.Notes = append(t.Notes, failureNotes(sel)...)
	}
	t.Notes = append(t.Notes, "RSS is each process's peak (wait4), MiB; worker: the larger of the workers'.")
	return t
}

// procRSS is the largest peak RSS, over g's runs, of its processes whose
// name starts with name.
func procRSS(g Result, name string) string {
	v := peakKB(g, name)
	if v <= 0 {
		return "-"
	}
	return ftoa(v/1024, 0)
}

// peakKB is the largest peak RSS in KiB, over g's runs, of its processes
// whose name starts with name.
func peakKB(g Result, name string) float64 {
	return g.MaxOf(func(r Run) float64 {
		var m int64
		for _, p := range r.Procs {
			if strings.HasPrefix(p.Name, name) {
				m = max(m, p.MaxRSSKB)
			}
		}
		return float64(m)
	})
}

// mergerCPU is the merger's median CPU seconds per 1,000 files.
func mergerCPU(g Result) string {
	if len(g.OK) == 0 {
		return "-"
	}
	return ftoa(g.Median(func(r Run) float64 {
		for _, p := range r.Procs {
			if p.Name == "merger" && r.Files > 0 {
				return p.CPU.Seconds() / float64(r.Files) * 1000
			}
		}
		return 0
	}), 3)
}

// ParquetTable is workload 8: the seed-like CSV sent as ferry's zstd object
// and converted to Parquet, side by side, with zstd -3 and DuckDB's own
// Parquet writer on the same file (their CPU is all their process's).
func ParquetTable(rs []Result, tier string) Table {
	rs = Select(rs, Parquet, tier)
	t := Table{
		Title: fmt.Sprintf("Workload 8: CSV to Parquet, tier %s (%s)", tier, sizeOf(rs)),
		Header: []string{"method", "runs", "stored MB", "CSV / stored", "vs zstd object", "producer CPU s", "MB/s per core",
			"transfer s med", "rows", "load request"},
	}
	stored := func(g Result) float64 { return g.Median(func(r Run) float64 { return float64(r.Wire) }) }
	cpu := func(r Run) time.Duration {
		if c := producerCPU(r); c > 0 {
			return c
		}
		var c time.Duration
		for _, p := range r.Procs {
			c += p.CPU
		}
		return c
	}
	perCore := func(g Result) float64 {
		return g.Median(func(r Run) float64 { return MBps(r.Bytes, cpu(r).Seconds()) })
	}
	var zstdStored, zstdRate, duckStored float64
	for _, g := range rs {
		switch {
		case len(g.OK) == 0:
		case g.Method == FerryAdapt:
			zstdStored, zstdRate = stored(g), perCore(g)
		case g.Method == DuckDBParquet:
			duckStored = stored(g)
		}
	}
	for _, g := range rs {
		if len(g.OK) == 0 {
			t.Rows = append(t.Rows, []string{g.Method, runsCell(g), "-", "-", "-", "-", "-", "-", "-", "-"})
			continue
		}
		vs, rows, load := "-", "-", "-"
		if zstdStored > 0 {
			vs = fmtX(stored(g) / zstdStored)
		}
		if n := g.Median(func(r Run) float64 { return float64(r.Rows) }); n > 0 {
			rows = ftoa(n, 0)
		}
		if n := g.Median(func(r Run) float64 { return float64(r.LoadBytes) }); n > 0 {
			load = ftoa(n, 0) + " B"
		}
		ratio := g.Median(func(r Run) float64 { return float64(r.Bytes) / float64(max(r.Wire, 1)) })
		t.Rows = append(t.Rows, []string{g.Method, runsCell(g), fmtMB(stored(g)), fmtX(ratio), vs,
			ftoa(g.Median(func(r Run) float64 { return cpu(r).Seconds() }), 2), fmtRate(perCore(g)),
			Secs(g.Wall.Median), rows, load})
	}
	for _, g := range rs {
		if g.Method != FerryParquet || len(g.OK) == 0 || zstdStored <= 0 {
			continue
		}
		size, speed := stored(g)/zstdStored, perCore(g)/zstdRate
		t.Notes = append(t.Notes,
			fmt.Sprintf("target: the Parquet parts no larger than ferry's zstd object of the CSV: %s, %s", fmtX(size), metText(size <= 1)),
			fmt.Sprintf("target: conversion at least half the zstd path's speed per core: %s of it, %s", fmtX(speed), metText(speed >= 0.5)))
		if duckStored > 0 {
			vs := stored(g) / duckStored
			t.Notes = append(t.Notes, fmt.Sprintf("target: the Parquet parts no larger than DuckDB's own Parquet (zstd) of the CSV: %s, %s", fmtX(vs), metText(vs <= 1)))
		}
	}
	t.Notes = append(t.Notes,
		"MB/s per core: the CSV's MB over the producer's CPU seconds (read, convert or compress, publish), or a local tool's;",
		"load request: the load job the merger would run (FERRY_LOADS_FILE's line: the parts' URIs); BigQuery runs it for free")
	t.Notes = append(t.Notes, settingNotes(rs)...)
	t.Notes = append(t.Notes, failureNotes(rs)...)
	return t
}

func metText(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

// producerCPU is the CPU the run's producer used.
func producerCPU(r Run) time.Duration {
	for _, p := range r.Procs {
		if p.Name == "producer" {
			return p.CPU
		}
	}
	return 0
}
