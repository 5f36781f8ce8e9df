package queue

import (
	"context"
	"errors"
	"time"

	"cloud.google.com/go/pubsub/v2"
)

// receiveStreaming is ModeStreaming: the client library's streaming pull,
// with its flow control bounding the messages and bytes outstanding (so that
// no more than MaxMessages handlers run at once) and its lease management
// extending deadlines in steps of leaseDeadline while a handler runs. Acks
// and lease extensions travel in the library's batches.
func (d *pubsubDriver) receiveStreaming(ctx, hctx context.Context, subscription string, s ReceiveSettings, h Handler) error {
	c := d.c
	sub := d.ps.Subscriber(subscription)
	maxBytes := s.MaxBytes
	if maxBytes <= 0 {
		maxBytes = -1 // no bound
	}
	sub.ReceiveSettings = pubsub.ReceiveSettings{
		MaxOutstandingMessages: max(1, s.MaxMessages),
		MaxOutstandingBytes:    maxBytes,
		NumGoroutines:          1,
		// A handler may run for as long as a transfer lasts; its message
		// stays leased, in steps that bring it back soon if we die.
		MaxExtension:               24 * time.Hour,
		MaxDurationPerAckExtension: leaseDeadline,
		EnablePerStreamFlowControl: true,
		// Running handlers end Grace after ctx (hctx); their acks need a
		// moment more.
		ShutdownOptions: &pubsub.ShutdownOptions{Behavior: pubsub.ShutdownBehaviorWaitForProcessing, Timeout: s.Grace + callTimeout},
	}
	bo := newBackoff()
	for {
		if !c.waitHold(ctx, subscription) {
			return nil
		}
		sctx, stop := context.WithCancelCause(ctx)
		go c.watch(sctx, subscription)
		err := sub.Receive(sctx, func(_ context.Context, pm *pubsub.Message) {
			if ctx.Err() != nil {
				pm.Nack() // shutting down: to another process, now
				return
			}
			if c.hold != nil && c.hold(ctx) != nil {
				pm.Nack()
				stop(errStopped) // wait for the hold to lift, not pulling
				return
			}
			m := Message{ID: pm.ID, Data: pm.Data, Attributes: pm.Attributes}
			if pm.DeliveryAttempt != nil {
				m.DeliveryAttempt = *pm.DeliveryAttempt
			}
			if c.run(hctx, subscription, s, m, h) {
				pm.Ack()
			} else {
				pm.Nack()
			}
		})
		held := errors.Is(context.Cause(sctx), errStopped)
		stop(nil)
		switch {
		case ctx.Err() != nil:
			return nil
		case err == nil && held:
			continue
		case err == nil:
			err = errors.New("stream ended")
		}
		err = c.fail(ctx, "streaming pull from "+subscription, err)
		if fatal(err) {
			return err
		}
		if !c.retry(ctx, subscription, &bo, err) {
			return nil
		}
	}
}

// watch probes Pub/Sub every probeEvery while a stream runs, so that the
// health function learns of an outage the stream rides out silently.
func (c *Client) watch(ctx context.Context, subscription string) {
	t := time.NewTicker(probeEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := c.Probe(ctx); err != nil && ctx.Err() == nil {
				c.log.Warn("Pub/Sub does not answer; the stream keeps retrying", "subscription", subscription, "err", err)
			}
		}
	}
}
