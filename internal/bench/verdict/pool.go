package verdict

import (
	"fmt"
	"strconv"
	"strings"
)

// Pool is workload 12: one pooled transfer (producer submit --pool) of
// the many-files tree and one of the largest file, sent by each of
// PoolAgents agents, each capped at PoolLink bytes a second as a host's
// link caps it: how close the pool comes to agents × link.
const Pool = "pool"

// PoolAgents are the pool sizes workload 12 runs; PoolLink is each
// agent's FERRY_MAX_RATE, in bytes a second: small enough that the two
// cores are not the bound (--codec none).
var PoolAgents = []int{1, 2, 3, 4}

const PoolLink = 2 << 20

// PoolFilesLink is each agent's link for a tree of many small files: at
// PoolLink four agents made the stand-in server the bound on 2 cores
// (0.75 of agents × link, the cores all busy), not their links.
const PoolFilesLink = 1 << 20

// PoolLinkOf is each agent's link for a transfer of files files.
func PoolLinkOf(files int) int {
	if files > 1 {
		return PoolFilesLink
	}
	return PoolLink
}

// The kill variant: PoolKillAgents agents, the first killed with SIGKILL
// mid-transfer; the time it loses is its wall time less that of as many
// agents not killed.
const (
	PoolKillAgents = 3
	PoolKillMethod = "ferry-pool-3a-kill1"
)

// PoolMethod names the pool of n agents in rows.
func PoolMethod(n int) string { return "ferry-pool-" + strconv.Itoa(n) + "a" }

// poolIdeal is the rate of n agents each at its link, bytes a second.
func poolIdeal(n, files int) float64 { return float64(n) * float64(PoolLinkOf(files)) }

// PoolTable is workload 12 at one tier.
func PoolTable(rs []Result, tier string) Table {
	rs = Select(rs, Pool, tier)
	files := 0
	for _, g := range rs {
		for _, r := range g.OK {
			files = r.Files
		}
	}
	t := Table{
		Title:  fmt.Sprintf("Workload 12: %s, one pooled transfer, each agent at %.1f MB/s (FERRY_MAX_RATE), --codec none", sizeOf(rs), float64(PoolLinkOf(files))/1e6),
		Header: []string{"method", "runs", "wall s", "MB/s", "rate / (agents × link)", "MB sent by each agent", "chunk bytes via Pub/Sub", "$/TiB (GCS ops)", "lost to the kill s"},
	}
	for _, g := range rs {
		if len(g.OK) == 0 {
			t.Rows = append(t.Rows, []string{g.Method, runsCell(g), "-", "-", "-", "-", "-", "-", "-"})
			continue
		}
		last := g.OK[len(g.OK)-1]
		wall := g.Wall.Median
		rate := float64(last.Bytes) / wall
		n := max(1, last.Workers)
		lost := "-"
		if g.Method == PoolKillMethod {
			lost = poolLost(rs, g)
		}
		t.Rows = append(t.Rows, []string{g.Method, runsCell(g), Secs(wall), ftoa(rate/1e6, 1), ftoa(rate/poolIdeal(n, last.Files), 2),
			agentMB(last.AgentBytes), strconv.FormatInt(last.PubSubBytes, 10), poolCost(last), lost})
	}
	t.Notes = append(t.Notes, "MB sent by each agent: the row's agents, of the last run; $/TiB estimates GCS class A operations only (a write per 32 MiB chunk, two per file), at $0.005 per 1,000: compute and egress left out",
		fmt.Sprintf("%s: %d agents, agent-1 killed with SIGKILL a third of the way through (its shard comes back when its lease lapses); lost to the kill is its median wall time less that of %s", PoolKillMethod, PoolKillAgents, PoolMethod(PoolKillAgents)))
	return t
}

// agentMB lists what each agent sent, in MB.
func agentMB(bytes []int64) string {
	if len(bytes) == 0 {
		return "-"
	}
	cells := make([]string, len(bytes))
	for i, b := range bytes {
		cells[i] = ftoa(float64(b)/1e6, 1)
	}
	return strings.Join(cells, " / ")
}

// poolLost is the kill variant's median wall time less that of as many
// agents none of which was killed, with when the kill came.
func poolLost(rs []Result, kill Result) string {
	base, ok := Find(rs, PoolMethod(PoolKillAgents))
	if !ok || len(base.OK) == 0 {
		return "-"
	}
	at := kill.OK[len(kill.OK)-1].KilledAt
	return fmt.Sprintf("%s (killed at %s s)", Secs(kill.Wall.Median-base.Wall.Median), Secs(at.Seconds()))
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
func poolGoals(rs []Result, l Limits) []Goal {
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
			last := g.OK[len(g.OK)-1]
			q := float64(last.Bytes) / g.Wall.Median / poolIdeal(n, last.Files)
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
		// Memory per agent stays within its budget whatever the transfer.
		var peak int64
		for _, g := range sel {
			for _, r := range g.OK {
				for _, p := range r.Procs {
					if strings.HasPrefix(p.Name, "agent") {
						peak = max(peak, p.MaxRSSKB)
					}
				}
			}
		}
		target := fmt.Sprintf("<= FERRY_AGENT_MEMORY + overhead (%d MiB)", l.Agent>>20)
		out = append(out, goal("pool "+tier+": peak RSS of an agent", target, fmt.Sprintf("%d MiB", peak>>10), peak<<10 <= l.Agent, peak > 0 && l.Agent > 0))
		// The kill variant's run is ok only when its transfer ended ok, the
		// merger confirmed every object and staging emptied out.
		name := fmt.Sprintf("pool %s, %d agents, one killed: ok, identical, nothing staged", tier, PoolKillAgents)
		if g, ok := Find(sel, PoolKillMethod); ok && len(g.Runs) > 0 {
			value := fmt.Sprintf("%d of %d runs ok", len(g.OK), len(g.Runs))
			if len(g.OK) > 0 {
				value += ", " + poolLost(sel, g) + " lost"
			}
			out = append(out, goal(name, "every run", value, len(g.OK) == len(g.Runs), true))
		} else {
			out = append(out, goal(name, "every run", "-", false, false))
		}
	}
	return out
}
