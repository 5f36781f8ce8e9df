package progress

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/term"
)

// Display redraws one line every so often until stopped: in place on a
// terminal, or, with Lines, as a line of its own each time (a log). It is
// the one loop behind every progress line ferry draws: cp's and submit's
// bar, the walk line before a transfer starts, restore's bar. It is safe
// for concurrent use.
type Display struct {
	w     io.Writer
	mu    *sync.Mutex // held while writing to w; shared with what else writes there
	every time.Duration
	lines bool
	line  func(width int) string

	startOnce, stopOnce sync.Once
	started             bool // guarded by mu
	done                chan struct{}
	wg                  sync.WaitGroup
}

// DisplayOptions say where and how often a Display draws.
type DisplayOptions struct {
	// Every is how often it draws (default 200 ms).
	Every time.Duration
	// Lines draws whole lines (a log, not a terminal) instead of
	// redrawing one.
	Lines bool
	// Mu, when set, is held while the display writes, by it and by any
	// other writer of the same terminal.
	Mu *sync.Mutex
}

// NewDisplay returns a display of line on w; Start starts it. line is
// given the columns it may take: one less than the terminal's width, read
// again at every draw (a resize), or 0 (no limit) in a log; a line that
// takes more is cut.
func NewDisplay(w io.Writer, line func(width int) string, o DisplayOptions) *Display {
	if o.Every <= 0 {
		o.Every = 200 * time.Millisecond
	}
	if o.Mu == nil {
		o.Mu = &sync.Mutex{}
	}
	return &Display{w: w, mu: o.Mu, every: o.Every, lines: o.Lines, line: line, done: make(chan struct{})}
}

// Start starts drawing; a second call does nothing.
func (d *Display) Start() {
	d.startOnce.Do(func() {
		d.mu.Lock()
		d.started = true
		d.mu.Unlock()
		d.wg.Go(func() {
			t := time.NewTicker(d.every)
			defer t.Stop()
			for {
				select {
				case <-d.done:
					return
				case <-t.C:
					d.draw()
				}
			}
		})
	})
}

func (d *Display) draw() {
	if d.lines {
		s := d.line(0)
		d.mu.Lock()
		defer d.mu.Unlock()
		fmt.Fprintln(d.w, s)
		return
	}
	// The last column stays free: a line that filled it would make some
	// terminals wrap, and the next redraw would leave a line behind.
	width := max(terminalWidth(d.w)-1, 0)
	s := cut(d.line(width), width)
	d.mu.Lock()
	defer d.mu.Unlock()
	fmt.Fprintf(d.w, "\r\033[K%s", s)
}

// terminalWidth is the width of the terminal w is, 0 when it is none.
func terminalWidth(w io.Writer) int {
	f, ok := w.(*os.File)
	if !ok {
		return 0
	}
	cols, _, err := term.GetSize(int(f.Fd()))
	if err != nil {
		return 0
	}
	return cols
}

// Stop stops drawing. On a terminal, a display that started then either
// draws its last state and ends the line (keep), or clears the line for
// what comes next (!keep). It is safe to call more than once; the first
// call decides.
func (d *Display) Stop(keep bool) {
	d.stopOnce.Do(func() {
		d.startOnce.Do(func() {}) // a display stopped before it started never starts
		close(d.done)
		d.wg.Wait()
		d.mu.Lock()
		started := d.started
		d.mu.Unlock()
		if !started || d.lines {
			return
		}
		if keep {
			d.draw()
			d.mu.Lock()
			_, _ = io.WriteString(d.w, "\n")
			d.mu.Unlock()
			return
		}
		d.mu.Lock()
		_, _ = io.WriteString(d.w, "\r\033[K")
		d.mu.Unlock()
	})
}
