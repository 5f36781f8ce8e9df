package verdict

import (
	"fmt"
	"strconv"
)

// Pool is workload 12: one pooled transfer (producer submit --pool) of
// the many-files tree and one of the largest file, sent by each of
// PoolAgents agents, each capped at PoolLink bytes a second as a host's
// link caps it: how close the pool comes to agents × link.
const Pool = "pool"

// PoolAgents are the pool sizes workload 12 runs; PoolLink is each
// agent's FERRY_MAX_RATE, in bytes a second: small enough that the two
// cores are not the bound (--codec none).
var PoolAgents = []int{1, 2, 4}

const PoolLink = 2 << 20

// PoolMethod names the pool of n agents in rows.
func PoolMethod(n int) string { return "ferry-pool-" + strconv.Itoa(n) + "a" }

// poolIdeal is the rate of n agents each at its link, bytes a second.
func poolIdeal(n int) float64 { return float64(n) * PoolLink }

// PoolTable is workload 12 at one tier.
func PoolTable(rs []Result, tier string) Table {
	rs = Select(rs, Pool, tier)
	t := Table{
		Title:  fmt.Sprintf("Workload 12: %s, one pooled transfer, each agent at %.1f MB/s (FERRY_MAX_RATE), --codec none", sizeOf(rs), PoolLink/1e6),
		Header: []string{"method", "runs", "wall s", "MB/s", "rate / (agents × link)", "MB / agents", "chunk bytes via Pub/Sub", "$/TiB (GCS ops)"},
	}
	for _, g := range rs {
		if len(g.OK) == 0 {
			t.Rows = append(t.Rows, []string{g.Method, runsCell(g), "-", "-", "-", "-", "-", "-"})
			continue
		}
		last := g.OK[len(g.OK)-1]
		wall := g.Wall.Median
		rate := float64(last.Bytes) / wall
		n := max(1, last.Workers)
		t.Rows = append(t.Rows, []string{g.Method, runsCell(g), Secs(wall), ftoa(rate/1e6, 1), ftoa(rate/poolIdeal(n), 2),
			ftoa(float64(last.Bytes)/1e6/float64(n), 1), strconv.FormatInt(last.PubSubBytes, 10), poolCost(last)})
	}
	t.Notes = append(t.Notes, "MB / agents is the transfer's bytes over its agents, not each agent's own (the manifest has those; the row does not yet); $/TiB estimates GCS class A operations only (a write per 32 MiB chunk, two per file), at $0.005 per 1,000: compute and egress left out")
	return t
}

// poolCost estimates the GCS operations' price per TiB of a run: a write
// per 32 MiB chunk (FERRY_CHUNK_SIZE's default) and two more per file (its
// one-chunk upload or its compose, and its share of pages, shard plans
// and listings), at class A's $0.005 per 1,000, over its bytes.
func poolCost(r Run) string {
	if r.Bytes == 0 {
		return "-"
	}
	ops := float64(r.Bytes)/(32<<20) + 2*float64(r.Files)
	perTiB := ops * 0.005 / 1000 * (1 << 40) / float64(r.Bytes)
	return fmt.Sprintf("%.2f", perTiB)
}

// poolGoals are issue 50's: at 2 and 4 agents a rate of at least 0.85 of
// agents × link, on every tier, and no chunk byte through Pub/Sub.
func poolGoals(rs []Result) []Goal {
	var out []Goal
	for _, tier := range Tiers(rs, Pool) {
		sel := Select(rs, Pool, tier)
		for _, n := range []int{2, 4} {
			name := fmt.Sprintf("pool %s, %d agents: rate / (agents × link)", tier, n)
			g, ok := Find(sel, PoolMethod(n))
			if !ok || len(g.OK) == 0 {
				out = append(out, goal(name, ">= 0.85", "-", false, false))
				continue
			}
			q := float64(g.OK[len(g.OK)-1].Bytes) / g.Wall.Median / poolIdeal(n)
			out = append(out, goal(name, ">= 0.85", fmt.Sprintf("%.2f (%s s)", q, Secs(g.Wall.Median)), q >= 0.85, true))
		}
		var most int64
		known := false
		for _, g := range sel {
			for _, r := range g.OK {
				known = true
				most = max(most, r.PubSubBytes)
			}
		}
		out = append(out, goal("pool "+tier+": chunk bytes through Pub/Sub", "0", strconv.FormatInt(most, 10), most == 0, known))
	}
	return out
}
