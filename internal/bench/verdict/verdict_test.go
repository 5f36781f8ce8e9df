package verdict

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/benchrow"
)

// limits are the memory limits the goals are judged at here: the
// configuration's defaults when these tests were written
// (bench.DefaultLimits).
var limits = Limits{Producer: 352 << 20, Worker: 168 << 20, Merger: 224 << 20, Overhead: 96 << 20}

func TestSpeedupAndRates(t *testing.T) {
	if got := Speedup(6, 3); got != 2 {
		t.Errorf("Speedup(6, 3) = %v, want 2", got)
	}
	if got := Speedup(0, 3); got != 0 {
		t.Errorf("Speedup(0, 3) = %v, want 0 (unknown)", got)
	}
	if got := MBps(200_000_000, 4); got != 50 {
		t.Errorf("MBps = %v, want 50", got)
	}
	if got := Ideal(2.87, 7); got < 20.08 || got > 20.1 {
		t.Errorf("Ideal(2.87, 7) = %v, want 20.09", got)
	}
}

func run(method string, role Role, wall float64, opts ...func(*Run)) Run {
	r := Run{Workload: LargeFile, Tier: "medium", Method: method, Role: role, Wall: time.Duration(wall * float64(time.Second)),
		Files: 1, Bytes: 200_000_000, Wire: 200_000_000}
	for _, o := range opts {
		o(&r)
	}
	return r
}

func TestGroupAndBest(t *testing.T) {
	runs := []Run{
		run("ferry-2w", Ferry, 4), run("gcloud", Peer, 10), run("ferry-2w", Ferry, 6),
		run("gcloud", Peer, 8), run("gsutil", Peer, 30), run("gcloud", Peer, 12),
		run("ferry-2w", Ferry, 5), run("zstd", Ceiling, 1),
		run("broken", Peer, 1, func(r *Run) { r.Err = errors.New("exit status 1: no such bucket") }),
	}
	rs := Group(runs)
	if len(rs) != 5 || rs[0].Method != "ferry-2w" || rs[1].Method != "gcloud" {
		t.Fatalf("groups %v", rs)
	}
	if rs[0].Wall != (Summary{N: 3, Min: 4, Median: 5, Max: 6}) {
		t.Errorf("ferry-2w wall %+v, want 4/5/6", rs[0].Wall)
	}
	best, ok := Best(rs, Peer)
	if !ok || best.Method != "gcloud" {
		t.Errorf("best peer %q, want gcloud (the failed method has the lowest time but no success)", best.Method)
	}
	tab := LargeFileTable(rs, "medium")
	var b bytes.Buffer
	tab.Write(&b)
	out := b.String()
	for _, want := range []string{"ferry-2w", "4.00 / 5.00 / 6.00", "2.00x", "best peer: gcloud", "broken failed 1 of 1: exit status 1: no such bucket", "1 (1 failed)"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	// The ceiling is not compared with the peers.
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "zstd ") && strings.Contains(line, "x ") {
			t.Errorf("ceiling row has a ratio to the best peer: %q", line)
		}
	}
}

func TestGoals(t *testing.T) {
	runs := []Run{
		run("ferry-2w", Ferry, 4, func(r *Run) {
			r.Procs = []Proc{{Name: "producer", MaxRSSKB: 300 << 10}, {Name: "worker-1", MaxRSSKB: 200 << 10}}
		}),
		run("gcloud", Peer, 10),
		run(ZstdCLI, Ceiling, 1),
		{Workload: SmallFiles, Tier: "files-5000", Method: "ferry-2w", Role: Ferry, Wall: 5 * time.Second, Files: 5000},
		{Workload: SmallFiles, Tier: "files-5000", Method: GcloudRecurse, Role: Peer, Wall: 50 * time.Second, Files: 5000},
		{Workload: Shaped, Tier: "shaped", Method: "ferry-2w", Role: Ferry, Wall: 10 * time.Second, Bytes: 200_000_000, LinkBytes: 70_000_000},
		// Faster, but its own cap let through 8 MB/s: not the shaped goal's row, and over its own.
		{Workload: Shaped, Tier: "shaped", Method: "ferry-1w-max-rate", Role: Ferry, Wall: 5 * time.Second, Bytes: 200_000_000, LinkBytes: 40_000_000, LinkMBps: 8},
	}
	gs := Goals(Group(runs), 7, "files-5000", limits)
	want := map[string]string{
		"large file medium: ferry wall time / best peer's":                          "met",     // 0.40
		"large file medium: ferry wall time / zstd -3 -T2 alone":                    "not met", // 4.0
		"small files: ferry files/s":                                                "met",     // 1000
		"small files: ferry files/s / gcloud storage cp -r":                         "met",     // 10x
		"shaped link 7.0 MB/s: ferry raw MB/s / ideal":                              "met",     // 20 of 20
		"memory: peak RSS per ferry process, every run (budgets at their defaults)": "not met", // worker 200 MiB
		"--max-rate 7MB: MB/s sent over an unshaped link":                           "not met", // 8 MB/s
	}
	got := map[string]Goal{}
	for _, g := range gs {
		got[g.Name] = g
	}
	for name, state := range want {
		if g, ok := got[name]; !ok || g.State != state {
			t.Errorf("goal %q: %+v, want state %q", name, g, state)
		}
	}
	if g := got["large file medium: ferry wall time / best peer's"]; !strings.HasPrefix(g.Measured, "0.40 ") {
		t.Errorf("measured %q, want 0.40 first", g.Measured)
	}
	if g := got["memory: peak RSS per ferry process, every run (budgets at their defaults)"]; g.Measured != "producer 300 MiB, worker 200 MiB" {
		t.Errorf("memory measured %q", g.Measured)
	}
}

func TestRow(t *testing.T) {
	r := run("gcloud_storage", Peer, 4, func(r *Run) {
		r.Wire = 100_000_000
		r.Codec = "gzip"
		r.Repeat = 2
		r.Procs = []Proc{{Name: "gcloud", CPU: 1500 * time.Millisecond, MaxRSSKB: 90_000}}
		r.StartedAt = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	})
	row := r.Row("bench1", "v1")
	if row.Method != "gcloud_storage" || row.Tier != "medium" || row.TotalMS != 4000 || row.UploadMS != 4000 ||
		row.RawMBps == nil || *row.RawMBps != 50 || row.Ratio != 2 || row.Status != "ok" || row.FerryVersion != "v1" || row.Codec != "gzip" {
		t.Errorf("row %+v", row)
	}
	labels := map[string]string{}
	for _, l := range row.Labels {
		labels[l.Key] = l.Value
	}
	for k, v := range map[string]string{"bench_run": "bench1", "workload": LargeFile, "role": "peer", "repeat": "2",
		"cpu_s.gcloud": "1.50", "peak_rss_kb.gcloud": "90000"} {
		if labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, labels[k], v)
		}
	}
	r.Err = errors.New("boom")
	if row := r.Row("bench1", "v1"); row.Status != "failed" || row.Error != "boom" {
		t.Errorf("failed run: status %q error %q", row.Status, row.Error)
	}
}

func TestTableAlignment(t *testing.T) {
	var b bytes.Buffer
	Table{Title: "T", Header: []string{"method", "MB/s"}, Rows: [][]string{{"a", "1.0"}, {"longer", "10.0"}}}.Write(&b)
	want := "\n== T\n  method MB/s\n  a       1.0\n  longer 10.0\n"
	if b.String() != want {
		t.Errorf("table:\n%q\nwant\n%q", b.String(), want)
	}
}

// Workload 7's goals compare the largest tree with the smallest by their
// file counts, not their names' order ("files-1000000" sorts before
// "files-200000").
func TestTreeGoalsCompareTreesByFileCount(t *testing.T) {
	tree := func(tier string, producerMiB int64) func(*Run) {
		return func(r *Run) {
			r.Workload, r.Tier = BigTree, tier
			r.Procs = []Proc{{Name: "producer", MaxRSSKB: producerMiB << 10}, {Name: "merger", MaxRSSKB: 80 << 10}, {Name: "worker-1", MaxRSSKB: 90 << 10}}
		}
	}
	rs := Group([]Run{run("ferry-2w", Ferry, 900, tree("files-1000000", 100)), run("ferry-2w", Ferry, 90, tree("files-200000", 95))})
	g := treeGoals(rs, limits)
	if len(g) != 2 || !strings.Contains(g[0].Name, "files-1000000") || g[0].State != "met" ||
		!strings.Contains(g[1].Name, "files-200000 to files-1000000") || g[1].State != "met" || !strings.Contains(g[1].Measured, "+5 %") {
		t.Fatalf("goals %+v", g)
	}
}

// Issue 19's compression goals: on loopback, ferry (its level adapting)
// against go_simple and against --codec none; on random bytes, zstd's CPU
// and wall time against --codec none.
func TestFreeLinkGoals(t *testing.T) {
	codecs := func(tier string, cpu time.Duration) func(*Run) {
		return func(r *Run) {
			r.Workload, r.Tier = Codecs, tier
			r.Procs = []Proc{{Name: "producer", CPU: cpu}}
		}
	}
	rs := Group([]Run{
		run("ferry-2w", Ferry, 3), run("go_simple", Peer, 4),
		run(FerryAdapt, Ferry, 2.5, codecs("medium", 0)), run(FerryNone, Ferry, 3.6, codecs("medium", 0)),
		run(FerryAdapt, Ferry, 3.2, codecs(RandomTier, 5*time.Second)), run(FerryNone, Ferry, 3.0, codecs(RandomTier, 3*time.Second)),
	})
	want := map[string]string{
		"free link 200 MB: ferry-2w wall time / go_simple's":                      "met",
		"codecs medium (free link): ferry zstd adaptive wall time / --codec none": "met",
		"incompressible 1 file, 200.0 MB: zstd CPU / --codec none":                "not met",
		"incompressible 1 file, 200.0 MB: zstd wall time / --codec none":          "met",
	}
	got := map[string]string{}
	for _, g := range freeLinkGoals(rs) {
		got[g.Name] = g.State
	}
	for name, state := range want {
		if got[name] != state {
			t.Errorf("goal %q: %q, want %q (all: %v)", name, got[name], state, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("goals %v, want %d", got, len(want))
	}
}

// levelNotes sum each adaptive ferry method's chunks per level over its
// runs; fixed levels and peers get no note.
func TestLevelNotes(t *testing.T) {
	lv := func(l ...benchrow.LevelUse) func(*Run) { return func(r *Run) { r.Codec, r.Levels = "zstd", l } }
	rs := Group([]Run{
		run("ferry-2w", Ferry, 3, lv(benchrow.LevelUse{Level: 1, Chunks: 2}, benchrow.LevelUse{Level: 6, Chunks: 3})),
		run("ferry-2w", Ferry, 3, lv(benchrow.LevelUse{Level: 6, Chunks: 4})),
		run("ferry-zstd3", Ferry, 3, lv(benchrow.LevelUse{Level: 3, Chunks: 9}), func(r *Run) { r.Level = 3 }),
	})
	notes := levelNotes(rs)
	if len(notes) != 1 || !strings.Contains(notes[0], "ferry-2w") || !strings.HasSuffix(notes[0], "over 2 runs: 1: 2 6: 7") {
		t.Fatalf("notes %q", notes)
	}
}

// The README's section is the summary, between markers, and nothing else
// of the README changes; a README without markers is refused by name.
func TestSpliceSummary(t *testing.T) {
	var sum bytes.Buffer
	WriteSummary(&sum, "Measured by `make bench` on 2026-12-02.", []Goal{{Name: "a|b", Target: ">= 1", Measured: "2", State: "met"}})
	if !strings.Contains(sum.String(), `| a\|b | >= 1 | 2 | met |`) {
		t.Fatalf("summary:\n%s", sum.String())
	}
	doc := []byte("# ferry\n\n## Performance\n\n" + SummaryBegin + "\nold figures\n" + SummaryEnd + "\n\n## Next\n")
	out, err := SpliceSummary(doc, sum.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	if strings.Contains(s, "old figures") || !strings.Contains(s, "on 2026-12-02.") ||
		!strings.HasPrefix(s, "# ferry\n\n## Performance\n\n"+SummaryBegin+"\n") || !strings.HasSuffix(s, SummaryEnd+"\n\n## Next\n") {
		t.Fatalf("spliced README:\n%s", s)
	}
	again, err := SpliceSummary(out, sum.Bytes())
	if err != nil || !bytes.Equal(again, out) {
		t.Fatalf("splicing twice changed the README: %v", err)
	}
	if _, err := SpliceSummary([]byte("# ferry\n"), sum.Bytes()); err == nil || !strings.Contains(err.Error(), "bench summary") {
		t.Fatalf("README without markers: %v", err)
	}
}

// A summary says from its command whether it is a whole run of make bench.
func TestPartialRun(t *testing.T) {
	for header, want := range map[string]string{
		"Measured by `make bench` from 2026-12-02 07:52":                                  "",
		"Measured by `BENCH_FULL=1 make bench` from 2026-12-02 07:52":                     "",
		"Measured by `BENCH_WORKLOADS=7 BENCH_FULL=1 make bench` from 2026-12-02 10:08":   "BENCH_WORKLOADS",
		"Measured by `BENCH_QUICK=1 make bench` from 2026-12-02 10:08":                    "BENCH_QUICK",
		"Measured by `make bench` from 2026-12-02; see BENCH_WORKLOADS=7 in the docs too": "",
	} {
		var sum bytes.Buffer
		WriteSummary(&sum, header, nil)
		if got := PartialRun(sum.Bytes()); got != want {
			t.Errorf("%q: PartialRun = %q, want %q", header, got, want)
		}
	}
}

// Issue 40 §8: the README shows the few figures a user chooses a tool by,
// with their spread over the repeats, not the goals table.
func TestHeadlinesShowTheSpread(t *testing.T) {
	runs := []Run{
		run(FerryCp, Ferry, 0.4), run(FerryCp, Ferry, 0.5), run(FerryCp, Ferry, 0.6),
		run("ferry-2w", Ferry, 0.9), run("go_simple", Peer, 0.5), run("gcloud_storage", Peer, 2),
	}
	var b bytes.Buffer
	WriteHeadlines(&b, "Measured by `make bench` on 2026-12-05.", Group(runs), "files-5000")
	out := b.String()
	for _, want := range []string{"| one 200 MB CSV, free link | 0.50 s (0.40–0.60) | 0.90 s | go_simple 0.50 s; gcloud_storage 2.00 s |"} {
		if !strings.Contains(out, want) {
			t.Errorf("headlines lack %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "small files") {
		t.Errorf("a workload that did not run has a row:\n%s", out)
	}
}
