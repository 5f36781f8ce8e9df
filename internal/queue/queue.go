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
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2"

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
}

// Dial connects to Pub/Sub for project.
func Dial(ctx context.Context, project string, log *slog.Logger) (*Client, error) {
	ps, err := pubsub.NewClient(ctx, project)
	if err != nil {
		return nil, fmt.Errorf("pubsub client for project %s: %w", project, err)
	}
	return &Client{ps: ps, log: logging.OrDiscard(log), pubs: map[string]*pubsub.Publisher{}}, nil
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
	// MaxBytes bounds the message bytes held at once.
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

// Receive runs h on messages of subscription until ctx is cancelled, then
// stops pulling, waits up to Grace for running handlers and returns nil.
func (c *Client) Receive(ctx context.Context, subscription string, s ReceiveSettings, h Handler) error {
	sub := c.ps.Subscriber(subscription)
	sub.ReceiveSettings.MaxOutstandingMessages = s.MaxMessages
	sub.ReceiveSettings.MaxOutstandingBytes = s.MaxBytes
	sub.ReceiveSettings.NumGoroutines = 1
	// Extend leases in short steps, so that a message held by a process
	// that died comes back within this long rather than the usual minute.
	sub.ReceiveSettings.MaxDurationPerAckExtension = 15 * time.Second
	sub.ReceiveSettings.ShutdownOptions = &pubsub.ShutdownOptions{
		Timeout:  s.Grace + 5*time.Second,
		Behavior: pubsub.ShutdownBehaviorWaitForProcessing,
	}

	// Handlers outlive ctx by the grace period, so that an upload in flight
	// when SIGTERM arrives can finish and be acked.
	hctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		time.AfterFunc(s.Grace, cancel)
	})
	defer stop()

	err := sub.Receive(ctx, func(_ context.Context, pm *pubsub.Message) {
		if ctx.Err() != nil {
			// Shutting down: messages not started yet go back at once,
			// to be redelivered to a process that stays.
			pm.Nack()
			return
		}
		m := Message{ID: pm.ID, Data: pm.Data, Attributes: pm.Attributes}
		if pm.DeliveryAttempt != nil {
			m.DeliveryAttempt = *pm.DeliveryAttempt
		}
		err := h(hctx, m)
		switch {
		case err == nil:
			pm.Ack()
		case errors.Is(err, ErrPermanent):
			if s.DeadLetterTopic != "" {
				attrs := map[string]string{"ferry_error": truncate(err.Error(), 1000), "ferry_subscription": subscription}
				for k, v := range pm.Attributes {
					attrs[k] = v
				}
				if perr := c.Publisher(s.DeadLetterTopic).Publish(hctx, pm.Data, attrs); perr != nil {
					c.log.Warn("could not dead-letter a failed message; will be redelivered", "message_id", m.ID, "err", perr)
					pm.Nack()
					return
				}
			}
			c.log.Error("message failed permanently; acked", "subscription", subscription, "message_id", m.ID,
				"dead_letter_topic", s.DeadLetterTopic, "err", err)
			pm.Ack()
		default:
			c.log.Warn("message failed; will be redelivered", "subscription", subscription, "message_id", m.ID,
				"attempt", m.DeliveryAttempt, "err", err)
			pm.Nack()
		}
	})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("receive from %s: %w", subscription, err)
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
