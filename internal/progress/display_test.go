package progress

import (
	"strings"
	"sync"
	"testing"
)

// lockedBuffer is a writer the display and the test read under one lock.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) { return l.b.Write(p) }

// A display that started ends with its last state on a line of its own
// (keep), or leaves the line clear (not keep); one that never started
// writes nothing, and never starts after Stop.
func TestDisplayEndsAsAsked(t *testing.T) {
	for _, tc := range []struct {
		start, keep bool
		want        string
	}{
		{true, true, "\r\033[Klast\n"},
		{true, false, "\r\033[K"},
		{false, true, ""},
	} {
		var w lockedBuffer
		d := NewDisplay(&w, func(int) string { return "last" }, DisplayOptions{Every: 1 << 40, Mu: &w.mu})
		if tc.start {
			d.Start()
		}
		d.Stop(tc.keep)
		d.Stop(!tc.keep) // the first call decides
		d.Start()
		if got := w.b.String(); got != tc.want {
			t.Errorf("started %v, keep %v: wrote %q, want %q", tc.start, tc.keep, got, tc.want)
		}
	}
}

// In lines mode (a log, not a terminal) each draw is a whole line, and
// Stop adds nothing.
func TestDisplayInLinesWritesWholeLines(t *testing.T) {
	var w lockedBuffer
	n := 0
	d := NewDisplay(&w, func(int) string { n++; return "progress: x" }, DisplayOptions{Every: 1 << 40, Lines: true, Mu: &w.mu})
	d.Start()
	d.draw()
	d.draw()
	d.Stop(true)
	if got := w.b.String(); got != "progress: x\nprogress: x\n" || n != 2 {
		t.Errorf("wrote %q after %d draws", got, n)
	}
}
