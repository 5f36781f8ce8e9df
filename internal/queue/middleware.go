package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
)

// What every handler of a subscription does around its own work, in the
// manner of watermill's middleware: Chain wraps a handler in middlewares,
// the first outermost.

// Chain returns h wrapped in mws: mws[0] sees a message first and its
// result last.
func Chain(h Handler, mws ...Middleware) Handler {
	for i := len(mws) - 1; i >= 0; i-- {
		h = mws[i](h)
	}
	return h
}

// Recover turns a panic in a handler into an error, logged with its stack,
// so one bad message is redelivered (and dead-lettered at the limit)
// instead of ending the process and every message it holds.
func Recover(log *slog.Logger) Middleware {
	return func(h Handler) Handler {
		return func(ctx context.Context, m Message) (err error) {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("message %s: handler panicked: %v", m.ID, r)
					if log != nil {
						log.Error("handler panicked; the message will be redelivered", "message_id", m.ID, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
					}
				}
			}()
			return h(ctx, m)
		}
	}
}

// Gauge is what InFlight counts on (a prometheus.Gauge).
type Gauge interface {
	Inc()
	Dec()
}

// InFlight counts the messages being handled on g.
func InFlight(g Gauge) Middleware {
	return func(h Handler) Handler {
		return func(ctx context.Context, m Message) error {
			g.Inc()
			defer g.Dec()
			return h(ctx, m)
		}
	}
}

// GiveUpAfter makes a failure on delivery attempt n or later permanent:
// that is the subscription's dead-letter threshold, and the last chance to
// say why the message could not be handled. n ≤ 0 never gives up.
func GiveUpAfter(n int) Middleware {
	return func(h Handler) Handler {
		return func(ctx context.Context, m Message) error {
			err := h(ctx, m)
			if err != nil && !errors.Is(err, ErrPermanent) && n > 0 && m.DeliveryAttempt >= n {
				err = Permanent(fmt.Errorf("gave up after %d attempts: %w", m.DeliveryAttempt, err))
			}
			return err
		}
	}
}

// OnPermanent calls fn with a permanent failure before the message is
// acked; fn's error (transient: it could not say so) is returned instead,
// and the message comes back.
func OnPermanent(fn func(ctx context.Context, m Message, err error) error) Middleware {
	return func(h Handler) Handler {
		return func(ctx context.Context, m Message) error {
			err := h(ctx, m)
			if err != nil && errors.Is(err, ErrPermanent) {
				if ferr := fn(ctx, m, err); ferr != nil {
					return ferr
				}
			}
			return err
		}
	}
}
