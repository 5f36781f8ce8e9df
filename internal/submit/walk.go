package submit

import (
	"io"
	"sync"
	"sync/atomic"

	"github.com/ferry-dev/ferry/internal/benchrow"
	"github.com/ferry-dev/ferry/internal/progress"
)

// walkLine shows on a terminal what the walk of a large tree has found, until
// the transfer starts and the progress bar takes the line over.
type walkLine struct {
	files atomic.Int64
	bytes atomic.Int64
	d     *progress.Display
}

func startWalkLine(w io.Writer, mu *sync.Mutex) *walkLine {
	l := &walkLine{}
	l.d = progress.NewDisplay(w, func(int) string {
		return "walking the sources: " + benchrow.Count(int(l.files.Load()), "file") + ", " + benchrow.FormatBytes(float64(l.bytes.Load())) + " found"
	}, progress.DisplayOptions{Mu: mu})
	l.d.Start()
	return l
}

// found is plan.Selection.Found.
func (l *walkLine) found(files int, bytes int64) {
	l.files.Store(int64(files))
	l.bytes.Store(bytes)
}

// stop ends the line and clears it; it is safe to call more than once.
func (l *walkLine) stop() { l.d.Stop(false) }
