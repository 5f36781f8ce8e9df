package verdict

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// Workload 10's goal holds ferry-4w at 150 writes/s to 1.3x the ideal with
// fewer 429s than writes let through, and its table shows what each
// process waited out.
func TestPushbackGoal(t *testing.T) {
	got := []ProcPushback{{"merger", 2, 9.5}, {"worker-1", 7, 40.5}}

	tier := "files-100-limit-150"
	run := func(wall time.Duration, passed, refused int, err error) Run {
		return Run{Workload: Pushback, Tier: tier, Method: "ferry-4w", Role: Ferry, Files: 150, Wall: wall,
			WritesPassed: passed, Refused: refused, Pushbacks: got, Err: err}
	}
	for _, c := range []struct {
		runs []Run
		met  bool
	}{
		{[]Run{run(1200*time.Millisecond, 160, 30, nil)}, true},
		{[]Run{run(1400*time.Millisecond, 160, 30, nil)}, false},                           // 1.4x the ideal of 1 s
		{[]Run{run(1100*time.Millisecond, 160, 200, nil)}, false},                          // refused more than it wrote
		{[]Run{run(time.Second, 160, 30, nil), run(0, 0, 0, errors.New("failed"))}, false}, // a failed repeat
	} {
		g := pushbackGoals(Group(c.runs))
		if len(g) != 1 || (g[0].State == "met") != c.met {
			t.Errorf("runs %+v: goals %+v, want met=%v", c.runs, g, c.met)
		}
	}
	var b strings.Builder
	PushbackTable(Group([]Run{run(1200*time.Millisecond, 160, 30, nil)}), tier).Write(&b)
	for _, want := range []string{"limit of 150 writes/s", "1.20x", "merger 2, worker-1 7", "50"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table:\n%s\nwant %q", b.String(), want)
		}
	}
}
