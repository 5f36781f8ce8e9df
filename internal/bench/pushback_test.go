package bench

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/gcs"
)

// Workload 10 reads what each process waited out from the summary line its
// Store logs on Close, and its goal holds ferry-4w at 150 writes/s to 1.3x
// the ideal with fewer 429s than writes let through.
func TestPushbackRowsAndGoal(t *testing.T) {
	dir := t.TempDir()
	prefix := filepath.Join(dir, "pushback-files-100-limit-150-ferry-4w-1")
	write := func(name, body string) {
		if err := os.WriteFile(prefix+"-"+name+".log", []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("worker-1", `{"level":"WARN","msg":"GCS asks for fewer writes"}`+"\n"+
		`{"level":"WARN","msg":"`+gcs.PushbackSummary+`","bucket":"b","pushbacks":7,"cuts":3,"settled_writes_per_s":"40.5"}`+"\n")
	write("producer", "not json\n")
	write("merger", `{"severity":"WARNING","message":"`+gcs.PushbackSummary+`","bucket":"b","pushbacks":2,"cuts":1,"settled_writes_per_s":"9.5"}`+"\n")
	got := readPushbacks(prefix)
	if len(got) != 2 || got[0] != (ProcPushback{"merger", 2, 9.5}) || got[1] != (ProcPushback{"worker-1", 7, 40.5}) {
		t.Fatalf("readPushbacks = %+v", got)
	}

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
