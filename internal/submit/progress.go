package submit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/producer"
	"github.com/ferry-dev/ferry/internal/progress"
	"github.com/ferry-dev/ferry/internal/queue"
)

// progressBar draws progress on the terminal: compressed bytes from the
// producer, uploaded bytes from the transfer's chunk events (read on a
// temporary subscription of the events topic), composed from the done event.
type progressBar struct {
	p        *producer.Producer
	uploaded atomic.Int64
	paced    atomic.Int64 // 429s the workers waited out
	composed atomic.Bool  // the done event said ok
	start    time.Time
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	once     sync.Once
	q        *queue.Client
	sub      string
	d        *progress.Display
}

// startProgress subscribes to the transfer's events before it starts, so
// that none is missed (with eventsTopic "", it subscribes to nothing and
// shows only what the producer read and compressed); begin starts drawing.
// The display draws every every, as whole lines with lines (a log, not a
// terminal).
func startProgress(ctx context.Context, q *queue.Client, eventsTopic, tid string, p *producer.Producer, w io.Writer, mu *sync.Mutex,
	every time.Duration, lines bool) (*progressBar, error) {
	b := &progressBar{p: p, start: time.Now(), q: q}
	b.d = progress.NewDisplay(w, func(width int) string { return b.line(lines, width) }, progress.DisplayOptions{Every: every, Lines: lines, Mu: mu})
	if eventsTopic == "" { // no subscription allowed: the producer's side only
		b.ctx, b.cancel = context.WithCancel(ctx)
		return b, nil
	}
	var r [4]byte
	_, _ = rand.Read(r[:])
	b.sub = "ferry-progress-" + tid + "-" + hex.EncodeToString(r[:])
	if err := q.EnsureSubscription(ctx, queue.Subscription{ID: b.sub, Topic: eventsTopic, AckDeadline: 10 * time.Second, ExpireAfter: 24 * time.Hour}); err != nil {
		return nil, err
	}
	b.ctx, b.cancel = context.WithCancel(ctx)
	seen := map[[2]int]bool{}
	var seenMu sync.Mutex
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		_ = q.Receive(b.ctx, b.sub, queue.ReceiveSettings{MaxMessages: 100, MaxBytes: 16 << 20}, func(_ context.Context, m queue.Message) error {
			var ev message.Event
			if message.Decode(m.Data, &ev) != nil || ev.TransferID != tid || ev.Type != message.EventChunk {
				return nil
			}
			seenMu.Lock()
			defer seenMu.Unlock()
			for _, p := range ev.Parts {
				if k := [2]int{p.File, p.Index}; !seen[k] { // duplicates count once
					seen[k] = true
					b.uploaded.Add(p.RawBytes)
					b.paced.Add(int64(p.Paced))
				}
			}
			return nil
		})
	}()
	return b, nil
}

// begin starts drawing, once the transfer id has been printed.
func (b *progressBar) begin() { b.d.Start() }

// line is the bar's line, in width columns (0: no limit); in a log, with
// the time since the start.
func (b *progressBar) line(lines bool, width int) string {
	_, compressed := b.p.Progress()
	files, planned := b.p.Files()
	s := progress.State{Total: b.p.Planned(), Compressed: compressed, Uploaded: b.uploaded.Load(), Composed: b.composed.Load(), Elapsed: time.Since(b.start),
		Paced: b.paced.Load(), Files: files, FilesTotal: planned}
	if lines {
		return fmt.Sprintf("progress: %s (%s)", progress.Line(s), s.Elapsed.Round(time.Second))
	}
	return progress.LineIn(s, width)
}

// stop draws the last state (if drawing began), ends the line and removes
// the subscription, giving up on that after a few seconds.
func (b *progressBar) stop(composed bool) {
	b.once.Do(func() {
		b.cancel()
		b.wg.Wait()
		if composed {
			b.composed.Store(true)
		}
		b.d.Stop(true)
		ctx, cancel := context.WithTimeout(context.WithoutCancel(b.ctx), 5*time.Second)
		defer cancel()
		if b.sub != "" {
			_ = b.q.DeleteSubscription(ctx, b.sub)
		}
	})
}
