package command

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/ferry-dev/ferry/internal/progress"
	"github.com/ferry-dev/ferry/internal/restore"
)

// bar draws the restore's progress on a terminal, and nothing elsewhere.
type bar struct {
	r    *restore.Restorer
	w    io.Writer
	on   bool
	done chan struct{}
	wg   sync.WaitGroup
}

func startBar(r *restore.Restorer, w io.Writer, on bool) *bar {
	b := &bar{r: r, w: w, on: on, done: make(chan struct{})}
	if !on {
		return b
	}
	b.wg.Go(func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-b.done:
				return
			case <-t.C:
				b.draw()
			}
		}
	})
	return b
}

func (b *bar) draw() {
	p := b.r.Progress()
	fmt.Fprintf(b.w, "\r\033[K%s", progress.RestoreLine(progress.Restore{Objects: p.Objects, Listed: p.Listed,
		Listing: p.Listing, Raw: p.Raw, RawTotal: p.RawTotal, Elapsed: p.Elapsed}))
}

// stop draws the last state and the summary line.
func (b *bar) stop(s restore.Summary) {
	if !b.on {
		return
	}
	close(b.done)
	b.wg.Wait()
	b.draw()
	fmt.Fprintln(b.w)
}
