package queue_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ferry-dev/ferry/internal/queue"
)

type gauge struct{ n atomic.Int64 }

func (g *gauge) Inc() { g.n.Add(1) }
func (g *gauge) Dec() { g.n.Add(-1) }

// The middleware every subscription's handler runs in: a panic becomes an
// error the message comes back with; the gauge counts a message while it
// is handled; a failure at the dead-letter threshold becomes permanent, and
// a permanent failure is reported before the ack, the report's own failure
// bringing the message back.
func TestMiddleware(t *testing.T) {
	ctx := context.Background()
	var order []string
	mark := func(name string) queue.Middleware {
		return func(h queue.Handler) queue.Handler {
			return func(ctx context.Context, m queue.Message) error { order = append(order, name); return h(ctx, m) }
		}
	}
	_ = queue.Chain(func(context.Context, queue.Message) error { order = append(order, "h"); return nil }, mark("a"), mark("b"))(ctx, queue.Message{})
	if strings.Join(order, ",") != "a,b,h" {
		t.Errorf("Chain ran %v, want a, b, then the handler", order)
	}

	boom := queue.Chain(func(context.Context, queue.Message) error { panic("index out of range") }, queue.Recover(nil))
	if err := boom(ctx, queue.Message{ID: "m7"}); err == nil || errors.Is(err, queue.ErrPermanent) || !strings.Contains(err.Error(), "message m7: handler panicked: index out of range") {
		t.Errorf("Recover: %v, want a transient error naming the message and the panic", err)
	}

	var g gauge
	during := int64(-1)
	_ = queue.Chain(func(context.Context, queue.Message) error { during = g.n.Load(); return nil }, queue.InFlight(&g))(ctx, queue.Message{})
	if during != 1 || g.n.Load() != 0 {
		t.Errorf("InFlight: %d while handling, %d after; want 1 and 0", during, g.n.Load())
	}

	fail := errors.New("GCS said 503")
	var reported []error
	report := func(_ context.Context, _ queue.Message, err error) error {
		reported = append(reported, err)
		return nil
	}
	h := queue.Chain(func(context.Context, queue.Message) error { return fail }, queue.OnPermanent(report), queue.GiveUpAfter(5))
	if err := h(ctx, queue.Message{DeliveryAttempt: 4}); !errors.Is(err, fail) || errors.Is(err, queue.ErrPermanent) || len(reported) != 0 {
		t.Errorf("attempt 4 of 5: %v, %d reports; want the failure as it is, unreported", err, len(reported))
	}
	err := h(ctx, queue.Message{DeliveryAttempt: 5})
	if !errors.Is(err, queue.ErrPermanent) || !strings.Contains(err.Error(), "gave up after 5 attempts: GCS said 503") || len(reported) != 1 {
		t.Errorf("attempt 5 of 5: %v, %d reports; want it permanent and reported once", err, len(reported))
	}
	unsaid := errors.New("events topic unreachable")
	h = queue.Chain(func(context.Context, queue.Message) error { return queue.Permanent(fail) },
		queue.OnPermanent(func(context.Context, queue.Message, error) error { return unsaid }))
	if err := h(ctx, queue.Message{}); !errors.Is(err, unsaid) || errors.Is(err, queue.ErrPermanent) {
		t.Errorf("a report that fails: %v, want the report's error, transient", err)
	}
}
