package verdict

import (
	"fmt"
	"strconv"
	"strings"
)

// Pushback is workload 10: the small-file tree through a proxy
// that answers GCS's own 429 to writes (every request but a read) beyond a
// bucket's limit, with every process of ferry behind it, at each of
// PushbackLimits: how close to the limit a fleet that paces itself gets,
// how many writes it had refused, and the rate each process settled at.
const Pushback = "pushback"

// PushbackLimits are workload 10's write limits (writes a second): one at
// which a fleet that did not pace itself failed, and a new bucket's.
var PushbackLimits = []float64{150, 1000}

// PushbackLimit is the write limit of a workload 10 tier.
func PushbackLimit(tier string) float64 {
	_, v, _ := strings.Cut(tier, "-limit-")
	f, _ := strconv.ParseFloat(v, 64)
	return f
}

// ProcPushback is what GCS's push-back did to one process of a run, from
// the summary line its Store logs on Close (gcs.PushbackSummary).
type ProcPushback struct {
	Name string
	// PushBacks is the 429s and 503s it waited out; Settled the writes a
	// second it paced itself at when it ended.
	PushBacks int64
	Settled   float64
}

// PushbackTable is workload 10 at one limit.
func PushbackTable(rs []Result, tier string) Table {
	limit := PushbackLimit(tier)
	rs = Select(rs, Pushback, tier)
	t := Table{
		Title: fmt.Sprintf("Workload 10: %s behind a write limit of %.0f writes/s (429 beyond it), every process behind it", sizeOf(rs), limit),
		Header: []string{"method", "runs", "wall s", "ideal s", "wall / ideal", "writes let through", "429s", "429s / let through",
			"429s waited out, by process", "settled writes/s, all processes"},
	}
	for _, g := range rs {
		if len(g.OK) == 0 {
			t.Rows = append(t.Rows, []string{g.Method, runsCell(g), "-", "-", "-", "-", "-", "-", "-", "-"})
			continue
		}
		ideal := float64(g.OK[0].Files) / limit
		wall := g.Wall.Median
		passed := g.Median(func(r Run) float64 { return float64(r.WritesPassed) })
		refused := g.Median(func(r Run) float64 { return float64(r.Refused) })
		ratio := "-"
		if passed > 0 {
			ratio = ftoa(refused/passed, 2)
		}
		// The per-process columns are the last repeat's.
		last := g.OK[len(g.OK)-1]
		var by []string
		var settled float64
		for _, p := range last.Pushbacks {
			by = append(by, fmt.Sprintf("%s %d", p.Name, p.PushBacks))
			settled += p.Settled
		}
		bys := strings.Join(by, ", ")
		if bys == "" {
			bys = "none"
		}
		t.Rows = append(t.Rows, []string{g.Method, runsCell(g), Secs(wall), Secs(ideal), fmtX(wall / ideal),
			ftoa(passed, 0), ftoa(refused, 0), ratio, bys, ftoa(settled, 0)})
	}
	t.Notes = append(t.Notes,
		"ideal: the files at the limit, one write each (files / limit); the transfer's own writes (manifest pages, markers, listing) come on top",
		"429s: what the proxy refused; by process: what each process's Store says it waited out when it closed (gcs.PushbackSummary), last repeat",
		"settled: the sum of the rates the processes paced themselves at when they ended (last repeat)",
		"goal: ferry-4w at 150 writes/s within 1.3x of the ideal, with fewer writes refused than let through")
	return t
}

// pushbackGoals are workload 10's goals.
func pushbackGoals(rs []Result) []Goal {
	var out []Goal
	for _, tier := range Tiers(rs, Pushback) {
		if PushbackLimit(tier) != 150 {
			continue
		}
		f, ok := Find(Select(rs, Pushback, tier), "ferry-4w")
		name := "429 at 150 writes/s: ferry-4w wall / ideal, 429s < writes let through"
		if !ok || len(f.OK) == 0 {
			out = append(out, goal(name, "<= 1.30", "-", false, false))
			continue
		}
		q := f.Wall.Median / (float64(f.OK[0].Files) / 150)
		passed := f.Median(func(r Run) float64 { return float64(r.WritesPassed) })
		refused := f.Median(func(r Run) float64 { return float64(r.Refused) })
		out = append(out, goal(name, "<= 1.30", fmt.Sprintf("%.2f (%s s; %.0f refused, %.0f let through)", q, Secs(f.Wall.Median), refused, passed),
			q <= 1.3 && refused < passed && len(f.OK) == len(f.Runs), true))
	}
	return out
}

// Append is workload 9: the seed-like CSV sent, grown by 1 %,
// and sent again, by ferry (--skip-unchanged: the tail only, composed onto
// the object) and by the peers' rsync, which send a grown file again
// whole.
const Append = "append"

// AppendTable is workload 9: the second sync of a file grown by 1 %.
func AppendTable(rs []Result, tier string) Table {
	rs = Select(rs, Append, tier)
	t := Table{
		Title:  fmt.Sprintf("Workload 9: a file grown by 1 %%, sent again, tier %s (%s)", tier, sizeOf(rs)),
		Header: []string{"method", "runs", "grown MB", "whole s", "again s", "again / whole", "MB read+compressed", "MB to the server", "vs best peer"},
	}
	again := func(g Result) float64 { return g.Median(func(r Run) float64 { return r.Wall.Seconds() }) }
	best := 0.0
	for _, g := range rs {
		if g.Role == Peer && len(g.OK) > 0 && (best == 0 || again(g) < best) {
			best = again(g)
		}
	}
	for _, g := range rs {
		if len(g.OK) == 0 {
			t.Rows = append(t.Rows, []string{g.Method, runsCell(g), "-", "-", "-", "-", "-", "-", "-"})
			continue
		}
		whole := g.Median(func(r Run) float64 { return r.FullWall.Seconds() })
		read := "-"
		if g.Role == Ferry {
			read = ftoa(g.Median(func(r Run) float64 {
				var n int64
				for _, l := range r.Levels {
					n += l.Bytes
				}
				return float64(n) / 1e6
			}), 1)
		}
		vs := "-"
		if best > 0 && g.Role == Ferry {
			vs = fmtX(best / again(g))
		}
		t.Rows = append(t.Rows, []string{g.Method, runsCell(g), ftoa(g.Median(func(r Run) float64 { return float64(r.Grown) / 1e6 }), 1),
			ftoa(whole, 2), ftoa(again(g), 2), fmtX(again(g) / whole), read,
			ftoa(g.Median(func(r Run) float64 { return float64(r.Uploaded) / 1e6 }), 1), vs})
	}
	t.Notes = append(t.Notes,
		"whole: the first sync of the file; again: the second, after it grew by 1 % (timed, and counted, alone); ferry's merger and workers run already (a fleet serving hourly growth), its producer inside the clock",
		"MB to the server: the request bodies the storage stand-in read during the second sync",
		"targets: ferry's second sync at most 5 % of its whole one, and at least 10x faster than the best peer's")
	return t
}

// DuckDBParquet is DuckDB's own CSV-to-Parquet writer (COPY … TO …
// (FORMAT parquet, COMPRESSION zstd)) on the same CSV: the size ferry's
// parts are measured against.
const DuckDBParquet = "duckdb-parquet-zstd"

// FerryCp is ferry cp: the whole engine in one process, no Pub/Sub.
const FerryCp = "ferry-cp"
