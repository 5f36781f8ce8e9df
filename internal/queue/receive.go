package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/googleapis/gax-go/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ReceiveMode is how Receive gets messages.
type ReceiveMode int

const (
	// ModeAuto is unary Pull against an emulator and streaming pull against
	// Google Cloud.
	ModeAuto ReceiveMode = iota
	// ModeUnary pulls with unary Pull calls, never more messages than it
	// can start at once: a message it holds is always being handled, and
	// nothing sits in a buffer when the process stops. Acks, nacks and lease
	// extensions travel in batches.
	ModeUnary
	// ModeStreaming uses the client library's streaming pull with flow
	// control (Subscriber.Receive): one long-lived stream, acks batched by
	// the library. The Java emulator was seen to sit on messages such a
	// stream had buffered when it stopped, for minutes; hence ModeAuto.
	ModeStreaming
)

func (m ReceiveMode) String() string {
	switch m {
	case ModeUnary:
		return "unary"
	case ModeStreaming:
		return "streaming"
	}
	return "auto"
}

// ReceiveSettings bound the work a receiver holds at once.
type ReceiveSettings struct {
	// MaxMessages is how many messages are handled at once.
	MaxMessages int
	// MaxBytes bounds the message bytes held at once; 0 means no bound.
	MaxBytes int
	// Grace is how long running handlers may go on after ctx is cancelled;
	// after it their context is cancelled and their messages are left to
	// redelivery.
	Grace time.Duration
	// DeadLetterTopic, when set, receives a copy of every message that
	// failed permanently, with its error in the "ferry_error" attribute,
	// before the message is acked: operators find there what never
	// succeeded, as they find what ran out of delivery attempts.
	DeadLetterTopic string
	// Mode chooses unary or streaming pull; the zero value, ModeAuto, is
	// right outside tests and benchmarks.
	Mode ReceiveMode
}

// Lease timing: a message being handled is kept leased in steps of
// leaseDeadline, renewed every leaseRenew, so that the message of a process
// that died comes back within leaseDeadline.
const (
	leaseDeadline = 20 * time.Second
	leaseRenew    = 7 * time.Second
	emptyPause    = 25 * time.Millisecond // the emulator answers an empty Pull at once; Pub/Sub waits
	// pullTimeout bounds a Pull against Google Cloud, which waits for
	// messages before it answers; the emulator answers at once.
	pullTimeout = 30 * time.Second
	// probeEvery is how often a streaming receiver checks that Pub/Sub
	// answers, for /readyz: the stream itself retries silently.
	probeEvery = 15 * time.Second
)

// Receive runs h on messages of subscription until ctx is cancelled, then
// stops pulling, waits up to Grace for running handlers and returns nil.
//
// It rides out an unreachable Pub/Sub: it logs, reports to the client's
// health function, and retries with capped exponential backoff (0.5 s to
// 30 s), for as long as ctx lasts. It returns an error only when Pub/Sub
// answers that it never will: the subscription does not exist, permission
// is denied, or the request is invalid.
func (c *Client) Receive(ctx context.Context, subscription string, s ReceiveSettings, h Handler) error {
	// Handlers outlive ctx by the grace period, so that an upload in flight
	// when SIGTERM arrives can finish and be acked.
	hctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(s.Grace, cancel) })
	defer stop()
	return c.d.receive(ctx, hctx, subscription, s, h)
}

// receive pulls as s.Mode says: ModeAuto is unary Pull against an
// emulator, streaming pull against Google Cloud.
func (d *pubsubDriver) receive(ctx, hctx context.Context, subscription string, s ReceiveSettings, h Handler) error {
	mode := s.Mode
	if mode == ModeAuto {
		mode = ModeStreaming
		if d.emulator {
			mode = ModeUnary
		}
	}
	if mode == ModeStreaming {
		return d.receiveStreaming(ctx, hctx, subscription, s, h)
	}
	return d.receiveUnary(ctx, hctx, subscription, s, h)
}

// run applies h to m and says whether to ack it.
func (c *Client) run(hctx context.Context, subscription string, s ReceiveSettings, m Message, h Handler) bool {
	err := h(hctx, m)
	switch {
	case err == nil:
		return true
	case errors.Is(err, ErrPermanent):
		if s.DeadLetterTopic != "" {
			attrs := map[string]string{"ferry_error": truncate(err.Error(), 1000), "ferry_subscription": subscription}
			for k, v := range m.Attributes {
				attrs[k] = v
			}
			if perr := c.Publisher(s.DeadLetterTopic).Publish(hctx, m.Data, attrs); perr != nil {
				c.log.Warn("could not dead-letter a failed message; will be redelivered", "message_id", m.ID, "err", perr)
				return false
			}
		}
		c.log.Error("message failed permanently; acked", "subscription", subscription, "message_id", m.ID,
			"dead_letter_topic", s.DeadLetterTopic, "err", err)
		return true
	default:
		c.log.Warn("message failed; will be redelivered", "subscription", subscription, "message_id", m.ID,
			"attempt", m.DeliveryAttempt, "err", err)
		return false
	}
}

// fatal reports whether Pub/Sub answered that a Receive can never work.
func fatal(err error) bool {
	switch status.Code(err) {
	case codes.NotFound, codes.PermissionDenied, codes.InvalidArgument:
		return true
	}
	return false
}

// retry logs a failed attempt to receive, reports it and waits out the
// backoff; it reports whether ctx is still live.
func (c *Client) retry(ctx context.Context, subscription string, bo *gax.Backoff, err error) bool {
	c.report(err)
	d := pause(bo)
	c.log.Warn("cannot receive; retrying", "subscription", subscription, "endpoint", c.endpoint, "retry_in", d.Round(time.Millisecond), "err", err)
	return sleep(ctx, d)
}

// waitHold returns once the client's hold lets it pull (true), or when ctx
// ends (false), logging while it waits.
func (c *Client) waitHold(ctx context.Context, subscription string) bool {
	if c.hold == nil {
		return ctx.Err() == nil
	}
	bo, waited := newBackoff(), false
	for {
		err := c.hold(ctx)
		if ctx.Err() != nil {
			return false
		}
		if err == nil {
			if waited {
				c.log.Info("pulling again", "subscription", subscription)
			}
			return true
		}
		d := pause(&bo)
		waited = true
		c.log.Warn("not pulling: the handlers could not do their work; retrying", "subscription", subscription, "retry_in", d.Round(time.Millisecond), "err", err)
		if !sleep(ctx, d) {
			return false
		}
	}
}

// newBackoff is the wait between failed receives: gax's, from 0.5 s
// doubling to 30 s, with full jitter.
func newBackoff() gax.Backoff {
	return gax.Backoff{Initial: 500 * time.Millisecond, Max: 30 * time.Second}
}

// minPause is the shortest wait between failed receives. gax draws each
// wait at random below its limit (full jitter), which can come out at a
// few nanoseconds: a spin against an endpoint that is down.
const minPause = 50 * time.Millisecond

// pause is the backoff's next wait, never shorter than minPause.
func pause(bo *gax.Backoff) time.Duration {
	return max(bo.Pause(), minPause)
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// errStopped ends a stream whose hold failed, so that Receive waits.
var errStopped = fmt.Errorf("stream stopped")
