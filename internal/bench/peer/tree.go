package peer

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// clockTick is the kernel's USER_HZ, the unit of /proc/PID/stat's times:
// 100 on every Linux this runs on.
const clockTick = 100

// TreeCPU is the CPU time (user and system) the process pid and every
// living descendant of it have used so far, from /proc: what a server
// (fake-gcs-server and the Java Pub/Sub emulator it started) spent, read
// before and after a run. Processes that have ended count through their
// parent's cutime and cstime once it waited for them. 0 where /proc is not.
func TreeCPU(pid int) time.Duration {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	parent := map[int]int{}
	ticks := map[int]int64{}
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // ended meanwhile
		}
		// pid (comm) state ppid … utime(14) stime(15) cutime(16) cstime(17): comm may hold spaces.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(b[i+1:])
		if len(f) < 15 {
			continue
		}
		id, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		ppid, _ := strconv.Atoi(string(f[1]))
		parent[id] = ppid
		var t int64
		for _, k := range []int{11, 12, 13, 14} { // utime stime cutime cstime, after the state field
			v, _ := strconv.ParseInt(string(f[k]), 10, 64)
			t += v
		}
		ticks[id] = t
	}
	var sum int64
	for id, t := range ticks {
		for a := id; a != 0; a = parent[a] {
			if a == pid {
				sum += t
				break
			}
			if parent[a] == a {
				break
			}
		}
	}
	return time.Duration(sum) * time.Second / clockTick
}
