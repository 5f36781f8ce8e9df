package verdict

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// cpuGroups are the rows of one method in a CPU table: ferry's processes
// by kind (its workers summed), a peer's processes, and the local stack's
// servers, each with the CPU of every successful repeat.
func cpuGroups(g Result) (names []string, cpu map[string][]float64) {
	cpu = map[string][]float64{}
	for _, r := range g.OK {
		seen := map[string]float64{}
		for _, p := range r.Procs {
			name := p.Name
			if strings.HasPrefix(name, "worker-") {
				name = "workers"
			}
			seen[name] += p.CPU.Seconds()
		}
		if r.ServerCPU > 0 {
			seen["server"] = r.ServerCPU.Seconds()
		}
		for name, v := range seen {
			cpu[name] = append(cpu[name], v)
		}
	}
	for name := range cpu {
		names = append(names, name)
	}
	order := map[string]int{"producer": 0, "workers": 1, "merger": 2, "server": 9}
	sort.Slice(names, func(i, j int) bool {
		oi, iok := order[names[i]]
		oj, jok := order[names[j]]
		if !iok {
			oi = 5
		}
		if !jok {
			oj = 5
		}
		if oi != oj {
			return oi < oj
		}
		return names[i] < names[j]
	})
	return names, cpu
}

// CPUTable is the CPU each method's processes used on one workload tier,
// read from the processes' own accounting (rusage; the servers' from
// /proc): CPU-seconds per GB of source and per 1,000 files, medians over
// the repeats, and in cores of the wall time. The note names what the wall
// time waited on: the process that kept most of a core busy, or none
// (waiting on the network or the disk) when none kept half a core.
func CPUTable(rs []Result, workload, tier string) Table {
	rs = Select(rs, workload, tier)
	t := Table{Title: fmt.Sprintf("CPU: %s %s (%s)", workload, tier, sizeOf(rs)),
		Header: []string{"method", "process", "CPU s", "s per GB", "s per 1,000 files", "cores of wall"}, Left: true}
	for _, g := range rs {
		if len(g.OK) == 0 {
			continue
		}
		names, cpu := cpuGroups(g)
		bytes := g.Median(func(r Run) float64 { return float64(r.Bytes) })
		files := g.Median(func(r Run) float64 { return float64(r.Files) })
		wall := g.Wall.Median
		var ownTotal float64
		busiest, busiestCores := "", 0.0
		for _, name := range names {
			c := Summarize(cpu[name]).Median
			if name != "server" {
				ownTotal += c
			}
			cores := 0.0
			if wall > 0 {
				cores = c / wall
			}
			if cores > busiestCores {
				busiest, busiestCores = name, cores
			}
			t.Rows = append(t.Rows, []string{g.Method, name, ftoa(c, 2), perGB(c, bytes), perKFiles(c, files), ftoa(cores, 2)})
		}
		if len(names) > 1 {
			t.Rows = append(t.Rows, []string{g.Method, "all but the server", ftoa(ownTotal, 2), perGB(ownTotal, bytes), perKFiles(ownTotal, files), ftoa(ownTotal/max(wall, 1e-9), 2)})
		}
		switch {
		case busiestCores >= 0.5:
			t.Notes = append(t.Notes, fmt.Sprintf("%s: the wall time (%s s) waited on %s (%.2f cores)", g.Method, Secs(wall), busiest, busiestCores))
		case busiest != "":
			t.Notes = append(t.Notes, fmt.Sprintf("%s: no process kept half a core busy over the wall time (%s s): it waited on the network or the disk", g.Method, Secs(wall)))
		}
	}
	if workload == Append {
		t.Notes = append(t.Notes, "appends: per GB and per file of the whole grown file, of which the second sync read 1 %; ferry's workers and merger ran before the clock (a fleet serving hourly growth) and are not counted, the peers' whole processes are")
	}
	return t
}

func perGB(cpu, bytes float64) string {
	if bytes <= 0 {
		return "-"
	}
	return ftoa(cpu/(bytes/1e9), 2)
}

func perKFiles(cpu, files float64) string {
	if files <= 0 {
		return "-"
	}
	return ftoa(cpu/(files/1000), 3)
}

// IdleCPU is what a process used per minute with nothing to do.
type IdleCPU struct {
	Name   string
	CPU    time.Duration
	Window time.Duration
}

// IdleTable is the idle cost of ferry's services: CPU per minute of a
// worker and a merger with nothing to receive.
func IdleTable(idle []IdleCPU) Table {
	t := Table{Title: "CPU of an idle fleet", Header: []string{"process", "CPU s", "over", "CPU s per minute"}, Left: true}
	for _, i := range idle {
		per := 0.0
		if i.Window > 0 {
			per = i.CPU.Seconds() / i.Window.Minutes()
		}
		t.Rows = append(t.Rows, []string{i.Name, ftoa(i.CPU.Seconds(), 2), Secs(i.Window.Seconds()) + " s", ftoa(per, 3)})
	}
	return t
}
