package queue

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	pubsubapi "cloud.google.com/go/pubsub/v2/apiv1"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/googleapis/gax-go/v2"
)

// receiveUnary is ModeUnary: it pulls with unary Pull calls, never more
// messages than it can start at once, so a message it holds is always being
// handled. (With streaming pull the client buffers messages it has not
// started, does not release them on shutdown, and the Java emulator was seen
// to sit on such messages for minutes.) A settler sends acks, nacks and lease
// extensions in batches.
func (d *pubsubDriver) receiveUnary(ctx, hctx context.Context, subscription string, s ReceiveSettings, h Handler) error {
	c := d.c
	name := c.SubscriptionName(subscription)
	admin := d.ps.SubscriptionAdminClient
	slots := make(chan struct{}, max(1, s.MaxMessages))
	var held atomic.Int64 // message bytes held

	st := newSettler(d, name, subscription, cap(slots))
	defer st.close() // after the handlers: it flushes their acks
	var running sync.WaitGroup
	defer running.Wait() // bounded: handlers' context ends Grace after ctx

	bo := newBackoff()
	for {
		if !c.waitHold(ctx, subscription) {
			return nil
		}
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
		req.ReturnImmediately = d.emulator //nolint:staticcheck // deprecated, and needed by the emulator (see pubsubDriver.emulator)
		timeout := callTimeout
		if !d.emulator {
			timeout = pullTimeout
		}
		pctx, cancel := withTimeout(ctx, timeout)
		resp, err := admin.Pull(pctx, req, noRetry)
		got := 0
		if err == nil {
			got = len(resp.ReceivedMessages)
		}
		for i := got; i < want; i++ {
			<-slots
		}
		if err != nil && !d.emulator && ctx.Err() == nil && pctx.Err() != nil {
			err = nil // Google Cloud had nothing for pullTimeout: an empty Pull
		}
		if err != nil {
			if ctx.Err() != nil {
				cancel()
				return nil
			}
			err = c.fail(pctx, "pull from "+subscription, err)
			cancel()
			if fatal(err) {
				return err
			}
			if !c.retry(ctx, subscription, &bo, err) {
				return nil
			}
			continue
		}
		cancel()
		bo = newBackoff()
		c.report(nil)
		if got == 0 {
			if d.emulator {
				sleep(ctx, emptyPause)
			}
			continue
		}
		ids := make([]string, got)
		for i, rm := range resp.ReceivedMessages {
			ids[i] = rm.GetAckId()
		}
		st.lease(ids)
		for _, rm := range resp.ReceivedMessages {
			size := int64(len(rm.GetMessage().GetData()))
			held.Add(size)
			running.Add(1)
			go func() {
				defer running.Done()
				defer func() { held.Add(-size); <-slots }()
				pm := rm.GetMessage()
				if ctx.Err() != nil {
					st.settle(rm.GetAckId(), false) // shutting down: to another process, now
					return
				}
				m := Message{ID: pm.GetMessageId(), Data: pm.GetData(), Attributes: pm.GetAttributes(), DeliveryAttempt: int(rm.GetDeliveryAttempt())}
				st.settle(rm.GetAckId(), c.run(hctx, subscription, s, m, h))
			}()
		}
	}
}

// noRetry makes a Pull fail at once when Pub/Sub cannot be reached: Receive
// retries on its own, with backoff it logs, rather than inside the call.
var noRetry = gax.WithRetry(func() gax.Retryer { return nil })

// Batching of acks, nacks and lease extensions: an ack waits up to ackDelay
// for others to share its request, and a request carries at most
// ackBatchMax ids (Pub/Sub takes up to 2,500 and 512 KiB).
const (
	ackDelay    = 5 * time.Millisecond
	ackBatchMax = 1000
)

// settler owns the ack ids of one unary receiver: those leased (renewed
// every leaseRenew while their handler runs), and those waiting to be acked
// or nacked. One goroutine sends its requests, so a slow Pub/Sub slows the
// handlers' settling, never multiplies the calls.
type settler struct {
	c                  *Client
	admin              *pubsubapi.SubscriptionAdminClient
	name, subscription string
	ops                chan op
	done               chan struct{}
}

type op struct {
	ids  []string
	kind int // opLease, opAck, opNack
}

const (
	opLease = iota
	opAck
	opNack
)

func newSettler(d *pubsubDriver, name, subscription string, capacity int) *settler {
	st := &settler{c: d.c, admin: d.ps.SubscriptionAdminClient, name: name, subscription: subscription, ops: make(chan op, 2*capacity+16), done: make(chan struct{})}
	go st.loop()
	return st
}

// lease starts keeping ids leased: their deadline is set to leaseDeadline
// soon, and renewed until they are settled.
func (st *settler) lease(ids []string) { st.ops <- op{ids: ids, kind: opLease} }

// settle acks (ack) or nacks an id; it stops its lease.
func (st *settler) settle(id string, ack bool) {
	k := opNack
	if ack {
		k = opAck
	}
	st.ops <- op{ids: []string{id}, kind: k}
}

// close sends what is pending and stops; call it once no handler runs.
func (st *settler) close() {
	close(st.ops)
	<-st.done
}

func (st *settler) loop() {
	defer close(st.done)
	held := map[string]bool{}  // leased, handler running
	fresh := map[string]bool{} // leased, deadline not yet set
	var acks, nacks []string   // to send
	renew := time.NewTicker(leaseRenew)
	defer renew.Stop()
	flush := time.NewTimer(time.Hour)
	flush.Stop()
	armed := false
	send := func() {
		st.modack(keys(fresh), leaseDeadline)
		clear(fresh)
		st.ack(acks)
		st.modack(nacks, 0) // a nack: deliver again now
		acks, nacks = acks[:0], nacks[:0]
		armed = false
	}
	for {
		select {
		case o, ok := <-st.ops:
			if !ok {
				send()
				return
			}
			for _, id := range o.ids {
				switch o.kind {
				case opLease:
					held[id], fresh[id] = true, true
				case opAck:
					delete(held, id)
					delete(fresh, id)
					acks = append(acks, id)
				case opNack:
					delete(held, id)
					delete(fresh, id)
					nacks = append(nacks, id)
				}
			}
			switch {
			case len(acks)+len(nacks)+len(fresh) >= ackBatchMax:
				send()
			case !armed:
				flush.Reset(ackDelay)
				armed = true
			}
		case <-flush.C:
			send()
		case <-renew.C:
			st.modack(keys(held), leaseDeadline)
		}
	}
}

// ack acknowledges ids, ackBatchMax per request.
func (st *settler) ack(ids []string) {
	for len(ids) > 0 {
		n := min(len(ids), ackBatchMax)
		ctx, cancel := withTimeout(context.Background(), callTimeout)
		err := st.admin.Acknowledge(ctx, &pubsubpb.AcknowledgeRequest{Subscription: st.name, AckIds: ids[:n]})
		if err != nil {
			err = st.c.fail(ctx, "acknowledge", err)
			st.c.log.Warn("could not ack messages; they will be redelivered", "subscription", st.subscription, "messages", n, "err", err)
		}
		cancel()
		ids = ids[n:]
	}
}

// modack sets the ack deadline of ids to d, ackBatchMax per request.
func (st *settler) modack(ids []string, d time.Duration) {
	for len(ids) > 0 {
		n := min(len(ids), ackBatchMax)
		ctx, cancel := withTimeout(context.Background(), callTimeout)
		err := st.admin.ModifyAckDeadline(ctx, &pubsubpb.ModifyAckDeadlineRequest{
			Subscription: st.name, AckIds: ids[:n], AckDeadlineSeconds: int32(d / time.Second)})
		if err != nil {
			err = st.c.fail(ctx, "modify ack deadline", err)
			st.c.log.Warn("could not extend or end a lease; the messages come back when it expires", "subscription", st.subscription,
				"messages", n, "deadline", d, "err", err)
		}
		cancel()
		ids = ids[n:]
	}
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
