package command

import (
	"io"

	"github.com/ferry-dev/ferry/internal/progress"
	"github.com/ferry-dev/ferry/internal/restore"
)

// bar draws the restore's progress on a terminal, and nothing elsewhere.
type bar struct {
	d  *progress.Display
	on bool // a terminal: the summary line follows the bar on stdout
}

func startBar(r *restore.Restorer, w io.Writer, on bool) *bar {
	b := &bar{d: progress.NewDisplay(w, func(int) string {
		p := r.Progress()
		return progress.RestoreLine(progress.Restore{Objects: p.Objects, Listed: p.Listed,
			Listing: p.Listing, Raw: p.Raw, RawTotal: p.RawTotal, Elapsed: p.Elapsed})
	}, progress.DisplayOptions{}), on: on}
	if on {
		b.d.Start()
	}
	return b
}

// stop draws the last state and ends the line.
func (b *bar) stop(restore.Summary) { b.d.Stop(true) }
