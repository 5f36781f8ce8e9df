package submit

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferry-dev/ferry/internal/result"
)

// walkLine shows on a terminal what the walk of a large tree has found, until
// the transfer starts and the progress bar takes the line over.
type walkLine struct {
	files atomic.Int64
	bytes atomic.Int64
	w     io.Writer
	mu    *sync.Mutex // held while writing to w
	done  chan struct{}
	wg    sync.WaitGroup
	once  sync.Once
}

func startWalkLine(w io.Writer, mu *sync.Mutex) *walkLine {
	l := &walkLine{w: w, mu: mu, done: make(chan struct{})}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-l.done:
				return
			case <-t.C:
				l.mu.Lock()
				fmt.Fprintf(l.w, "\r\033[Kwalking the sources: %s, %s found", result.Count(int(l.files.Load()), "file"), result.FormatBytes(float64(l.bytes.Load())))
				l.mu.Unlock()
			}
		}
	}()
	return l
}

// found is plan.Selection.Found.
func (l *walkLine) found(files int, bytes int64) {
	l.files.Store(int64(files))
	l.bytes.Store(bytes)
}

// stop ends the line and clears it; it is safe to call more than once.
func (l *walkLine) stop() {
	l.once.Do(func() {
		close(l.done)
		l.wg.Wait()
		l.mu.Lock()
		fmt.Fprint(l.w, "\r\033[K")
		l.mu.Unlock()
	})
}
