package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/plan"
	"github.com/ferry-dev/ferry/internal/producer"
	"github.com/ferry-dev/ferry/internal/progress"
	"github.com/ferry-dev/ferry/internal/queue"
)

// progressBar draws progress on the terminal: compressed bytes from the
// producer, uploaded bytes from the transfer's chunk events (read on a
// temporary subscription of the events topic), composed from the done event.
type progressBar struct {
	total    int64
	p        *producer.Producer
	uploaded atomic.Int64
	start    time.Time
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	once     sync.Once
	q        *queue.Client
	sub      string
}

func startProgress(ctx context.Context, q *queue.Client, eventsTopic string, req producer.Request, p *producer.Producer) (*progressBar, error) {
	_, files, err := plan.Resolve(req.Sources, req.Destination, req.Codec)
	if err != nil {
		return nil, err
	}
	b := &progressBar{p: p, start: time.Now(), q: q}
	for _, f := range files {
		b.total += f.Size
	}
	var r [4]byte
	_, _ = rand.Read(r[:])
	b.sub = "ferry-progress-" + req.TransferID + "-" + hex.EncodeToString(r[:])
	if err := q.EnsureSubscription(ctx, queue.Subscription{ID: b.sub, Topic: eventsTopic, AckDeadline: 10 * time.Second, ExpireAfter: 24 * time.Hour}); err != nil {
		return nil, err
	}
	ctx, b.cancel = context.WithCancel(ctx)
	seen := map[[2]int]bool{}
	var mu sync.Mutex
	b.wg.Add(2)
	go func() {
		defer b.wg.Done()
		_ = q.Receive(ctx, b.sub, queue.ReceiveSettings{MaxMessages: 100, MaxBytes: 16 << 20}, func(_ context.Context, m queue.Message) error {
			var ev message.Event
			if message.Decode(m.Data, &ev) != nil || ev.TransferID != req.TransferID || ev.Type != message.EventChunk {
				return nil
			}
			mu.Lock()
			defer mu.Unlock()
			for _, p := range ev.Parts {
				if k := [2]int{p.File, p.Index}; !seen[k] { // duplicates count once
					seen[k] = true
					b.uploaded.Add(p.RawBytes)
				}
			}
			return nil
		})
	}()
	go func() {
		defer b.wg.Done()
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				progress.Draw(os.Stdout, b.state(false))
			}
		}
	}()
	return b, nil
}

func (b *progressBar) state(composed bool) progress.State {
	_, compressed := b.p.Progress()
	return progress.State{Total: b.total, Compressed: compressed, Uploaded: b.uploaded.Load(), Composed: composed, Elapsed: time.Since(b.start)}
}

// stop draws the last state, ends the line and removes the subscription.
func (b *progressBar) stop(composed bool) {
	b.once.Do(func() {
		b.cancel()
		b.wg.Wait()
		progress.Draw(os.Stdout, b.state(composed))
		_, _ = os.Stdout.WriteString("\n")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = b.q.DeleteSubscription(ctx, b.sub)
	})
}
