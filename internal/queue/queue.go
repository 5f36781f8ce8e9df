// Package queue is the only part of ferry that imports the Pub/Sub client. It
// publishes messages and runs plain handler functions on received ones,
// mapping a handler's result onto Pub/Sub:
//
//   - nil: Ack.
//   - an error wrapping ErrPermanent: the message can never succeed; it is
//     logged and acked (a Nack would loop). The handler has already recorded
//     the failure where users see it.
//   - any other error: Nack, so Pub/Sub redelivers with backoff and finally
//     moves the message to the subscription's dead-letter topic.
//
// The client library honours PUBSUB_EMULATOR_HOST, so the same code runs
// against the emulator and Google Cloud.
package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/ferry-dev/ferry/internal/logging"
)

// Message is a received message, free of the client library's types.
type Message struct {
	ID         string
	Data       []byte
	Attributes map[string]string
	// DeliveryAttempt counts deliveries when the subscription has a
	// dead-letter policy; 0 when unknown.
	DeliveryAttempt int
}

// Handler processes one message. It must be idempotent: Pub/Sub delivers at
// least once.
type Handler func(ctx context.Context, m Message) error

// Middleware wraps a Handler.
type Middleware func(Handler) Handler

// ErrPermanent marks an error that retrying cannot fix.
var ErrPermanent = errors.New("permanent error")

// Permanent wraps err so that errors.Is(err, ErrPermanent) holds.
func Permanent(err error) error {
	if err == nil || errors.Is(err, ErrPermanent) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrPermanent, err)
}

// Client publishes and receives. It is safe for concurrent use.
type Client struct {
	ps  *pubsub.Client
	log *slog.Logger

	mu   sync.Mutex
	pubs map[string]*pubsub.Publisher
	// emulator: the Java emulator keeps a cancelled long-polling Pull
	// alive and leases the next messages to it, so that a stopped process
	// holds them for a whole ack deadline (seen: 20 s stalls after a worker
	// stopped). Against it, Pull returns at once instead; Pub/Sub itself
	// deprecates that flag, so it is used only there.
	emulator bool
}

// Dial connects to Pub/Sub for project.
func Dial(ctx context.Context, project string, log *slog.Logger) (*Client, error) {
	ps, err := pubsub.NewClient(ctx, project)
	if err != nil {
		return nil, fmt.Errorf("pubsub client for project %s: %w", project, err)
	}
	return &Client{ps: ps, log: logging.OrDiscard(log), pubs: map[string]*pubsub.Publisher{},
		emulator: os.Getenv("PUBSUB_EMULATOR_HOST") != ""}, nil
}

// Close flushes every publisher, then closes the connection.
func (c *Client) Close() error {
	c.mu.Lock()
	for _, p := range c.pubs {
		p.Stop()
	}
	c.pubs = map[string]*pubsub.Publisher{}
	c.mu.Unlock()
	return c.ps.Close()
}

// Publisher publishes to one topic.
type Publisher struct {
	p     *pubsub.Publisher
	topic string
}

// Publisher returns the publisher of topic (an id in the client's project).
func (c *Client) Publisher(topic string) *Publisher {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.pubs[topic]
	if !ok {
		p = c.ps.Publisher(topic)
		// ferry's messages are few and each one gates work: send them
		// promptly rather than waiting to fill a batch.
		p.PublishSettings.DelayThreshold = time.Millisecond
		c.pubs[topic] = p
	}
	return &Publisher{p: p, topic: topic}
}

// Publish sends one message and returns once Pub/Sub has stored it. It is
// safe for concurrent use; the client library retries transient errors.
func (p *Publisher) Publish(ctx context.Context, data []byte, attrs map[string]string) error {
	if _, err := p.p.Publish(ctx, &pubsub.Message{Data: data, Attributes: attrs}).Get(ctx); err != nil {
		return fmt.Errorf("publish to %s: %w", p.topic, err)
	}
	return nil
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
}

// Lease timing: a message being handled is kept leased in steps of
// leaseDeadline, renewed every leaseRenew, so that the message of a process
// that died comes back within leaseDeadline.
const (
	leaseDeadline = 20 * time.Second
	leaseRenew    = 7 * time.Second
	emptyPause    = 25 * time.Millisecond // the emulator answers an empty Pull at once; Pub/Sub waits
)

// Receive runs h on messages of subscription until ctx is cancelled, then
// stops pulling, waits up to Grace for running handlers and returns nil.
//
// It pulls with unary Pull calls, never more messages than it can start at
// once: a message it holds is always being handled. (With streaming pull the
// client buffers messages it has not started, does not release them on
// shutdown, and the Java emulator was seen to sit on such messages for
// minutes.)
func (c *Client) Receive(ctx context.Context, subscription string, s ReceiveSettings, h Handler) error {
	name := c.SubscriptionName(subscription)
	admin := c.ps.SubscriptionAdminClient
	slots := make(chan struct{}, max(1, s.MaxMessages))
	var held atomic.Int64 // message bytes held

	// Handlers outlive ctx by the grace period, so that an upload in flight
	// when SIGTERM arrives can finish and be acked.
	hctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(s.Grace, cancel) })
	defer stop()

	var running sync.WaitGroup
	defer running.Wait() // bounded: handlers' context ends Grace after ctx
	failures := 0
	for {
		// Wait for a free slot, and room under the byte bound.
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		for s.MaxBytes > 0 && held.Load() >= int64(s.MaxBytes) {
			if !sleep(ctx, emptyPause) {
				<-slots
				return nil
			}
		}
		want := 1
		for want < cap(slots) {
			select {
			case slots <- struct{}{}:
				want++
				continue
			default:
			}
			break
		}
		req := &pubsubpb.PullRequest{Subscription: name, MaxMessages: int32(want)}
		req.ReturnImmediately = c.emulator //nolint:staticcheck // deprecated, and needed by the emulator (see Client.emulator)
		resp, err := admin.Pull(ctx, req)
		got := 0
		if err == nil {
			got = len(resp.ReceivedMessages)
		}
		for i := got; i < want; i++ {
			<-slots
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			failures++
			if failures > 10 {
				return fmt.Errorf("receive from %s: %w", subscription, err)
			}
			c.log.Warn("pull failed; retrying", "subscription", subscription, "err", err)
			sleep(ctx, time.Duration(failures)*time.Second)
			continue
		}
		failures = 0
		if got == 0 {
			sleep(ctx, emptyPause)
			continue
		}
		for _, rm := range resp.ReceivedMessages {
			size := int64(len(rm.GetMessage().GetData()))
			held.Add(size)
			running.Add(1)
			go func() {
				defer running.Done()
				defer func() { held.Add(-size); <-slots }()
				c.handle(ctx, hctx, name, subscription, s, rm, h)
			}()
		}
	}
}

// handle runs h on one message, keeps its lease while h runs, and settles it.
func (c *Client) handle(ctx, hctx context.Context, name, subscription string, s ReceiveSettings, rm *pubsubpb.ReceivedMessage, h Handler) {
	admin := c.ps.SubscriptionAdminClient
	ackIDs := []string{rm.GetAckId()}
	modack := func(d time.Duration) error {
		mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		return admin.ModifyAckDeadline(mctx, &pubsubpb.ModifyAckDeadlineRequest{Subscription: name, AckIds: ackIDs, AckDeadlineSeconds: int32(d / time.Second)})
	}
	settle := func(ack bool) {
		var err error
		if ack {
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			err = admin.Acknowledge(actx, &pubsubpb.AcknowledgeRequest{Subscription: name, AckIds: ackIDs})
			cancel()
		} else {
			err = modack(0) // a nack: deliver again now
		}
		if err != nil {
			c.log.Warn("could not settle a message; it will be redelivered", "subscription", subscription, "ack", ack, "err", err)
		}
	}
	_ = modack(leaseDeadline)
	leased := make(chan struct{})
	defer close(leased)
	go func() {
		t := time.NewTicker(leaseRenew)
		defer t.Stop()
		for {
			select {
			case <-leased:
				return
			case <-t.C:
				_ = modack(leaseDeadline)
			}
		}
	}()

	pm := rm.GetMessage()
	m := Message{ID: pm.GetMessageId(), Data: pm.GetData(), Attributes: pm.GetAttributes(), DeliveryAttempt: int(rm.GetDeliveryAttempt())}
	if ctx.Err() != nil {
		settle(false) // shutting down: to another process, now
		return
	}
	err := h(hctx, m)
	switch {
	case err == nil:
		settle(true)
	case errors.Is(err, ErrPermanent):
		if s.DeadLetterTopic != "" {
			attrs := map[string]string{"ferry_error": truncate(err.Error(), 1000), "ferry_subscription": subscription}
			for k, v := range m.Attributes {
				attrs[k] = v
			}
			if perr := c.Publisher(s.DeadLetterTopic).Publish(hctx, m.Data, attrs); perr != nil {
				c.log.Warn("could not dead-letter a failed message; will be redelivered", "message_id", m.ID, "err", perr)
				settle(false)
				return
			}
		}
		c.log.Error("message failed permanently; acked", "subscription", subscription, "message_id", m.ID,
			"dead_letter_topic", s.DeadLetterTopic, "err", err)
		settle(true)
	default:
		c.log.Warn("message failed; will be redelivered", "subscription", subscription, "message_id", m.ID,
			"attempt", m.DeliveryAttempt, "err", err)
		settle(false)
	}
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
