package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/ferry-dev/ferry/internal/gcs"
)

// Pushback is workload 10: the small-file tree through a proxy
// that answers GCS's own 429 to writes (every request but a read) beyond a
// bucket's limit, with every process of ferry behind it, at each of
// pushbackLimits: how close to the limit a fleet that paces itself gets,
// how many writes it had refused, and the rate each process settled at.
const Pushback = "pushback"

// pushbackLimits are workload 10's write limits (writes a second): the
// limit the issue measured a fleet failing at, and a new bucket's.
var pushbackLimits = []float64{150, 1000}

func (b *Bench) pushback(ctx context.Context) error {
	t := b.data.Small
	dir := t.Dir
	src := func() []string { return []string{dir} }
	for _, limit := range pushbackLimits {
		ms := []method{b.ferryMethod("ferry-4w", 4, "zstd", 0, src), b.cpMethod(src)}
		if err := b.runPlan(ctx, plan{workload: Pushback, tier: fmt.Sprintf("%s-limit-%.0f", t.Name, limit), methods: ms,
			verify: verifyUpload(t.Files, t.Bytes, nil, "peer/"), writeLimit: limit}); err != nil {
			return err
		}
	}
	return nil
}

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

// readPushbacks reads the push-back summaries from the logs of a repeat
// (prefix + "-NAME.log", JSON lines), one per process that met any.
func readPushbacks(prefix string) []ProcPushback {
	files, _ := filepath.Glob(prefix + "-*.log")
	var out []ProcPushback
	for _, path := range files {
		name := strings.TrimSuffix(strings.TrimPrefix(path, prefix+"-"), ".log")
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		p := ProcPushback{Name: name}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var l struct {
				Msg       string `json:"msg"`
				Message   string `json:"message"` // FERRY_LOG_FORMAT=json: Cloud Logging's names
				PushBacks int64  `json:"pushbacks"`
				Settled   string `json:"settled_writes_per_s"`
			}
			if json.Unmarshal(sc.Bytes(), &l) != nil || (l.Msg != gcs.PushbackSummary && l.Message != gcs.PushbackSummary) {
				continue
			}
			s, _ := strconv.ParseFloat(l.Settled, 64)
			p.PushBacks += l.PushBacks
			p.Settled += s
		}
		_ = f.Close()
		if p.PushBacks > 0 {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
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
		t.Rows = append(t.Rows, []string{g.Method, runsCell(g), secs(wall), secs(ideal), fmtX(wall / ideal),
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
		out = append(out, goal(name, "<= 1.30", fmt.Sprintf("%.2f (%s s; %.0f refused, %.0f let through)", q, secs(f.Wall.Median), refused, passed),
			q <= 1.3 && refused < passed && len(f.OK) == len(f.Runs), true))
	}
	return out
}
