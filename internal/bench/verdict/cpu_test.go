package verdict

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Issue 31 §2: the CPU table gives, per method and process, CPU-seconds
// per GB of source and per 1,000 files (workers summed, the servers
// apart), and names what the wall time waited on.
func TestCPUTable(t *testing.T) {
	ferry := func(wall, prod, w1, w2, merger, server float64) Run {
		return Run{Workload: LargeFile, Tier: "medium", Method: "ferry-2w", Role: Ferry, Files: 2000, Bytes: 2e9, Wire: 7e8,
			Wall: time.Duration(wall * float64(time.Second)), ServerCPU: time.Duration(server * float64(time.Second)),
			Procs: []Proc{{Name: "producer", CPU: time.Duration(prod * float64(time.Second))}, {Name: "worker-1", CPU: time.Duration(w1 * float64(time.Second))},
				{Name: "worker-2", CPU: time.Duration(w2 * float64(time.Second))}, {Name: "merger", CPU: time.Duration(merger * float64(time.Second))}}}
	}
	peer := Run{Workload: LargeFile, Tier: "medium", Method: "gcloud", Role: Peer, Files: 2000, Bytes: 2e9, Wall: 40 * time.Second,
		Procs: []Proc{{Name: "gcloud", CPU: 4 * time.Second}}, ServerCPU: 30 * time.Second}
	rs := Group([]Run{ferry(10, 8, 2, 2, 1, 4), ferry(12, 10, 2, 2, 1, 5), ferry(11, 9, 2, 2, 1, 4.5), peer})
	var b bytes.Buffer
	CPUTable(rs, LargeFile, "medium").Write(&b)
	out := b.String()
	for _, want := range []string{
		`ferry-2w\s+producer\s+9\.00\s+4\.50\s+4\.500\s+0\.82`, // median 9 s over 2 GB and 2,000 files, 11 s of wall
		`ferry-2w\s+workers\s+4\.00\s+2\.00\s+2\.000`,          // the two workers summed
		`ferry-2w\s+server\s+4\.50\s+2\.25`,
		`ferry-2w\s+all but the server\s+14\.00\s+7\.00\s+7\.000`,
		`ferry-2w: the wall time \(11\.0 s\) waited on producer \(0\.82 cores\)`,
		`gcloud: the wall time \(40\.0 s\) waited on server \(0\.75 cores\)`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("CPU table lacks %s:\n%s", want, out)
		}
	}
	var idle bytes.Buffer
	IdleTable([]IdleCPU{{Name: "worker", CPU: 300 * time.Millisecond, Window: 30 * time.Second}}).Write(&idle)
	if !strings.Contains(idle.String(), "0.600") {
		t.Errorf("idle table:\n%s\nwant 0.600 CPU s per minute", idle.String())
	}
}
