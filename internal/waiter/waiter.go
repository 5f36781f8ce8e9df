// Package waiter waits for the done event of one transfer on the done topic:
// what `producer submit --wait` and the tests do. It subscribes before the
// transfer starts, so the event cannot be missed.
package waiter

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/queue"
)

// subscriber is what waiting for a done event needs of Pub/Sub.
type subscriber interface {
	EnsureSubscription(ctx context.Context, s queue.Subscription) error
	DeleteSubscription(ctx context.Context, id string) error
	Receive(ctx context.Context, subscription string, s queue.ReceiveSettings, h queue.Handler) error
}

var _ subscriber = (*queue.Client)(nil)

// Waiter waits for the done event of one transfer.
type Waiter struct {
	q   subscriber
	sub string
	tid string
}

// New creates a temporary subscription on the done topic for transfer tid.
// Close removes it; should the process die first, it expires by itself.
func New(ctx context.Context, q subscriber, doneTopic, tid string) (*Waiter, error) {
	var b [4]byte
	_, _ = rand.Read(b[:])
	w := &Waiter{q: q, sub: "ferry-wait-" + tid + "-" + hex.EncodeToString(b[:]), tid: tid}
	err := q.EnsureSubscription(ctx, queue.Subscription{ID: w.sub, Topic: doneTopic, AckDeadline: 10 * time.Second, ExpireAfter: 24 * time.Hour})
	if err != nil {
		return nil, err
	}
	return w, nil
}

// Wait blocks until the transfer's done event arrives or ctx ends.
func (w *Waiter) Wait(ctx context.Context) (message.Done, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var done message.Done
	found := false
	err := w.q.Receive(ctx, w.sub, queue.ReceiveSettings{MaxMessages: 10, MaxBytes: 10 << 20}, func(_ context.Context, m queue.Message) error {
		var d message.Done
		if err := message.Decode(m.Data, &d); err != nil || d.TransferID != w.tid {
			return nil // another transfer's event
		}
		done, found = d, true
		cancel()
		return nil
	})
	if found {
		return done, nil
	}
	if err == nil {
		err = ctx.Err()
	}
	return message.Done{}, fmt.Errorf("waiting for transfer %s: %w", w.tid, err)
}

// Close deletes the temporary subscription.
func (w *Waiter) Close(ctx context.Context) error { return w.q.DeleteSubscription(ctx, w.sub) }
