// Package gctune lowers the collector's GOGC while work that makes garbage
// fast runs (a conversion to Parquet), unless the user set GOGC.
package gctune

import (
	"os"
	"runtime/debug"
	"sync"
)

// ConvertGC is the collector's GOGC while a transfer converts to Parquet.
// A conversion makes garbage at several times its input rate (arrow's
// column writers), so at the default GOGC the heap grows to the runtime's
// limit and past the budget: 364 MB of peak RSS at the default 256 MiB
// budget on the 200 MB seed-like CSV, 341 MB at GOGC=25, for the same CPU.
const ConvertGC = 25

// Tuner lowers GOGC while any converting transfer runs, unless the
// user set GOGC.
type Tuner struct {
	mu    sync.Mutex
	n     int
	saved int
}

// Converting is the tuner of conversions to Parquet.
var Converting Tuner

// Start lowers GOGC for a converting transfer; the function it returns
// puts it back once the last one ends.
func (g *Tuner) Start() func() {
	if _, set := os.LookupEnv("GOGC"); set {
		return func() {}
	}
	g.mu.Lock()
	if g.n == 0 {
		g.saved = debug.SetGCPercent(ConvertGC)
	}
	g.n++
	g.mu.Unlock()
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.n--; g.n == 0 {
			debug.SetGCPercent(g.saved)
		}
	}
}
