package verdict

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestPoolKillGoalStatesTheTimeLost: the kill variant's goal is met only
// when every run of it ended ok, and says how long the kill cost against
// as many agents not killed; the table names each agent's bytes.
func TestPoolKillGoalStatesTheTimeLost(t *testing.T) {
	base := Run{Workload: Pool, Tier: "medium", Method: PoolMethod(PoolKillAgents), Role: Ferry, Workers: 3, Files: 1, Bytes: 60 << 20,
		Wall: 10 * time.Second, AgentBytes: []int64{20e6, 20e6, 22.9e6}}
	kill := Run{Workload: Pool, Tier: "medium", Method: PoolKillMethod, Role: Ferry, Workers: 3, Files: 1, Bytes: 60 << 20,
		Wall: 31500 * time.Millisecond, KilledAt: 3300 * time.Millisecond, AgentBytes: []int64{30e6, 32.9e6}}
	find := func(gs []Goal) Goal {
		for _, g := range gs {
			if strings.Contains(g.Name, "one killed") {
				return g
			}
		}
		t.Fatalf("no kill goal in %+v", gs)
		return Goal{}
	}
	g := find(poolGoals(Group([]Run{base, kill}), Limits{}))
	if g.State != "met" || g.Measured != "1 of 1 runs ok, 21.5 (killed at 3.30 s) lost" {
		t.Errorf("kill goal %+v, want met, 21.5 s lost", g)
	}
	failed := kill
	failed.Err = errors.New("staging left after the kill: [.ferry/x/c/0/0]")
	if g := find(poolGoals(Group([]Run{base, kill, failed}), Limits{})); g.State != "not met" {
		t.Errorf("kill goal %+v with a failed run, want not met", g)
	}
	tab := PoolTable(Group([]Run{base, kill}), "medium")
	if got := tab.Rows[0][5]; got != "20.0 / 20.0 / 22.9" {
		t.Errorf("bytes per agent %q", got)
	}
	if got := tab.Rows[1][8]; got != "21.5 (killed at 3.30 s)" {
		t.Errorf("lost to the kill %q", got)
	}
}
