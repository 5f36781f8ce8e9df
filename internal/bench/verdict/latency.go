package verdict

import (
	"fmt"
	"strings"
	"time"
)

// Latency is workload 11: the many-files tree and one file through a relay
// that delays every byte (package latency) at each of LatencyRTTs, with
// ferry cp and ferry restore at their defaults beside the ideal client at
// IdealParallel and IdealFar requests in flight, a plain upload request
// and gcloud storage cp: what a user far from GCS gets.
const Latency = "latency"

// LatencyRTTs are workload 11's round trips: loopback, a VM in another
// region, a laptop, another continent.
var LatencyRTTs = []time.Duration{0, 10 * time.Millisecond, 40 * time.Millisecond, 80 * time.Millisecond}

// IdealFar is the ideal client's requests in flight on a far link; the
// ideal client at it is IdealClientFar.
const (
	IdealFar       = 128
	IdealClientFar = "ideal_client_128"
	GoSimple       = "go_simple"
)

// LatencyTier names a workload 11 tier: the data's tier and the round trip.
func LatencyTier(data string, rtt time.Duration) string {
	return fmt.Sprintf("%s-rtt-%dms", data, rtt.Milliseconds())
}

// LatencyRTT is the round trip of a workload 11 tier, and its data's tier.
func LatencyRTT(tier string) (string, time.Duration) {
	data, ms, _ := strings.Cut(tier, "-rtt-")
	d, _ := time.ParseDuration(ms)
	return data, d
}

// LatencyTable is workload 11 at one tier.
func LatencyTable(rs []Result, tier string) Table {
	_, rtt := LatencyRTT(tier)
	rs = Select(rs, Latency, tier)
	t := Table{
		Title:  fmt.Sprintf("Workload 11: %s at %d ms round trip (a relay delays every byte; a new connection pays one round trip more)", sizeOf(rs), rtt.Milliseconds()),
		Header: []string{"method", "runs", "wall s", "files/s", "MB/s", "connections", "requests in flight (ferry cp)"},
	}
	for _, g := range rs {
		if len(g.OK) == 0 {
			t.Rows = append(t.Rows, []string{g.Method, runsCell(g), "-", "-", "-", "-", "-"})
			continue
		}
		last := g.OK[len(g.OK)-1]
		wall := g.Wall.Median
		inFlight := "-"
		if last.InFlight > 0 {
			inFlight = itoa(last.InFlight)
		}
		t.Rows = append(t.Rows, []string{g.Method, runsCell(g), Secs(wall), ftoa(float64(last.Files)/wall, 0),
			ftoa(float64(last.Bytes)/1e6/wall, 1), itoa(int(last.Connections)), inFlight})
	}
	t.Notes = append(t.Notes, "ferry_restore restores what ferry cp stored (stored untimed, without the delay); the others upload")
	return t
}

// latencyGoals are issue 53's: at 40 ms ferry cp at least 0.8 of the ideal
// client with IdealFar in flight, and restore within 1.5 times its own
// time at 0 ms; at 0 ms ferry cp at least 0.8 of the ideal client with
// IdealParallel; one file on the free link no slower than one plain
// upload request.
func latencyGoals(rs []Result) []Goal {
	var out []Goal
	var far, near, file, restoreFar, restoreNear string
	for _, tier := range Tiers(rs, Latency) {
		data, rtt := LatencyRTT(tier)
		switch {
		case strings.HasPrefix(data, "files-") && rtt == 40*time.Millisecond:
			far = tier
		case strings.HasPrefix(data, "files-") && rtt == 0:
			near = tier
		case rtt == 0:
			file = tier
		}
	}
	restoreFar, restoreNear = far, near
	ratio := func(name, target string, tier, num, den string, inverse bool, bound float64) {
		sel := Select(rs, Latency, tier)
		a, okA := Find(sel, num)
		b, okB := Find(sel, den)
		if !okA || !okB || len(a.OK) == 0 || len(b.OK) == 0 {
			out = append(out, goal(name, target, "-", false, false))
			return
		}
		q := a.Wall.Median / b.Wall.Median
		if inverse {
			q = 1 / q
		}
		met := q <= bound
		if inverse {
			met = q >= bound
		}
		out = append(out, goal(name, target, fmt.Sprintf("%.2f (%s %s s, %s %s s)", q, num, Secs(a.Wall.Median), den, Secs(b.Wall.Median)), met, true))
	}
	ratio("at 40 ms: ferry cp's rate / the ideal client's with 128 in flight", ">= 0.80", far, FerryCp, IdealClientFar, true, 0.8)
	ratio("at 0 ms: ferry cp's rate / the ideal client's with 16 in flight", ">= 0.80", near, FerryCp, IdealClient, true, 0.8)
	ratio("one file on a free link: ferry cp's wall time / one plain upload request's", "<= 1.00", file, FerryCp, GoSimple, false, 1.0)
	// Restore at 40 ms beside itself at 0 ms: two tiers.
	a, okA := Find(Select(rs, Latency, restoreFar), FerryRestore)
	b, okB := Find(Select(rs, Latency, restoreNear), FerryRestore)
	const name, target = "at 40 ms: ferry restore's wall time / its own at 0 ms", "<= 1.50"
	if okA && okB && len(a.OK) > 0 && len(b.OK) > 0 {
		q := a.Wall.Median / b.Wall.Median
		out = append(out, goal(name, target, fmt.Sprintf("%.2f (%s s vs %s s)", q, Secs(a.Wall.Median), Secs(b.Wall.Median)), q <= 1.5, true))
	} else {
		out = append(out, goal(name, target, "-", false, false))
	}
	return out
}
