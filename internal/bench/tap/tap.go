// Package tap counts the chunk message bytes that cross Pub/Sub while a
// bench run goes on: a subscription of its own on the stack's chunks topic
// (workload 12 shows that a pooled transfer sends none).
package tap

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sethvargo/go-envconfig"

	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/queue"
	"github.com/ferry-dev/ferry/internal/setup"
)

// Chunks is a subscription on the chunks topic that counts what reaches it.
type Chunks struct {
	q      *queue.Client
	sub    string
	n      atomic.Int64
	cancel context.CancelFunc
	done   chan struct{}
}

// Subscribe subscribes to the chunks topic of the stack whose environment
// is env (its FERRY_* and emulator variables), for one run.
func Subscribe(ctx context.Context, env map[string]string) (*Chunks, error) {
	var ps config.PubSub
	if err := config.Load(ctx, &ps, envconfig.MapLookuper(env)); err != nil {
		return nil, err
	}
	c, err := setup.Connect(ctx, ps.Project, config.Emulators{PubSub: env["PUBSUB_EMULATOR_HOST"], GCS: env["STORAGE_EMULATOR_HOST"]}, nil)
	if err != nil {
		return nil, fmt.Errorf("the chunks tap: %w", err)
	}
	t := &Chunks{q: c.Queue, sub: fmt.Sprintf("bench-chunks-tap-%d", time.Now().UnixNano()), done: make(chan struct{})}
	if err := c.Queue.EnsureSubscription(ctx, queue.Subscription{ID: t.sub, Topic: ps.ChunksTopic}); err != nil {
		c.Close()
		return nil, fmt.Errorf("the chunks tap on %s: %w", ps.ChunksTopic, err)
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	t.cancel = cancel
	go func() {
		defer close(t.done)
		_ = c.Queue.Receive(rctx, t.sub, queue.ReceiveSettings{MaxMessages: 16}, func(_ context.Context, m queue.Message) error {
			t.n.Add(int64(len(m.Data)))
			return nil
		})
	}()
	return t, nil
}

// Bytes is what the tap received, after a moment for what is in flight.
func (t *Chunks) Bytes() int64 {
	time.Sleep(time.Second) // a bench measurement, not a test: what was published reaches the tap
	return t.n.Load()
}

// Close ends the subscription and deletes it.
func (t *Chunks) Close() {
	t.cancel()
	<-t.done
	_ = t.q.DeleteSubscription(context.Background(), t.sub)
	_ = t.q.Close()
}
