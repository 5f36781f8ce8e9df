package bench

import (
	"fmt"
	"io"

	"github.com/ferry-dev/ferry/internal/bench/verdict"
)

// Summary writes this run's summary (after Run or Print): the headline
// figures, and how many of the goals the run met.
func (b *Bench) Summary(w io.Writer, header string) {
	rs := verdict.Group(b.runs)
	verdict.WriteHeadlines(w, header, rs, b.data.smallTier())
	gs := verdict.Goals(rs, b.cfg.LinkMBps, b.data.smallTier(), DefaultLimits())
	met := 0
	for _, g := range gs {
		if g.State == "met" {
			met++
		}
	}
	fmt.Fprintf(w, "\nThe same run met %d of its %d goals; each goal, target and figure is in [docs/performance.md](docs/performance.md).\n", met, len(gs))
}
