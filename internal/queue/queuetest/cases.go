package queuetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/queue"
)

// hold keeps a handler busy for d: a scenario's duration (an ack deadline
// passing), not a wait for something to happen.
func hold(d time.Duration) { <-time.After(d) }

// Generous deadlines for what the cases wait for: a busy two-core machine
// is slow, Pub/Sub redelivers with backoff.
const (
	soon      = 2 * time.Minute
	pastLease = 12 * time.Second // longer than the 10 s ack deadline of the cases' subscriptions
)

// testAck: a handler that returns nil acks its message; data and attributes
// arrive as published, and the message does not come back once its ack
// deadline has passed.
func testAck(t *testing.T, h *harness) {
	topic, sub := h.pair(queue.Subscription{})
	var d deliveries
	h.receive(h.c, sub, queue.ReceiveSettings{MaxMessages: 4}, func(_ context.Context, m queue.Message) error {
		d.add(m)
		return nil
	})
	h.publish(topic, []byte("hello, ferry"))
	until(t, soon, "the message", func() bool { n, _ := d.counts(); return n >= 1 })
	hold(pastLease)
	ms := d.all()
	if len(ms) != 1 {
		t.Fatalf("%d deliveries of an acked message, want 1", len(ms))
	}
	if m := ms[0]; string(m.Data) != "hello, ferry" || m.Attributes["k"] != "v" || m.ID == "" {
		t.Fatalf("received %q, attributes %v, id %q; published %q with k=v", m.Data, m.Attributes, m.ID, "hello, ferry")
	}
}

// testNack: a handler error nacks; the message comes again, the same.
func testNack(t *testing.T, h *harness) {
	topic, sub := h.pair(queue.Subscription{})
	var d deliveries
	h.receive(h.c, sub, queue.ReceiveSettings{MaxMessages: 4}, func(_ context.Context, m queue.Message) error {
		if d.add(m) == 1 {
			return errors.New("transient")
		}
		return nil
	})
	h.publish(topic, []byte("again"))
	until(t, soon, "a redelivery after a nack", func() bool { n, _ := d.counts(); return n >= 2 })
	_, unique := d.counts()
	for _, m := range d.all() {
		if string(m.Data) != "again" || unique != 1 {
			t.Fatalf("redelivered %q (%d distinct ids), want the same message", m.Data, unique)
		}
	}
}

// testPermanent: an ErrPermanent acks (no redelivery) and copies the
// message to ReceiveSettings.DeadLetterTopic with its error.
func testPermanent(t *testing.T, h *harness) {
	topic, sub := h.pair(queue.Subscription{})
	dlTopic, dlSub := h.pair(queue.Subscription{})
	var d, dl deliveries
	h.receive(h.c, sub, queue.ReceiveSettings{MaxMessages: 4, DeadLetterTopic: dlTopic}, func(_ context.Context, m queue.Message) error {
		d.add(m)
		return queue.Permanent(errors.New("chunk 7 is corrupt"))
	})
	h.receive(h.c, dlSub, queue.ReceiveSettings{MaxMessages: 4}, func(_ context.Context, m queue.Message) error {
		dl.add(m)
		return nil
	})
	h.publish(topic, []byte("doomed"))
	until(t, soon, "the copy on the dead-letter topic", func() bool { n, _ := dl.counts(); return n >= 1 })
	hold(pastLease)
	if n, _ := d.counts(); n != 1 {
		t.Errorf("%d deliveries of a message that failed permanently, want 1 (it is acked)", n)
	}
	m := dl.all()[0]
	if string(m.Data) != "doomed" || !strings.Contains(m.Attributes["ferry_error"], "chunk 7 is corrupt") ||
		m.Attributes["ferry_subscription"] != sub || m.Attributes["k"] != "v" {
		t.Errorf("dead-letter copy %q with attributes %v", m.Data, m.Attributes)
	}
}

// testLeaseExpiry: a receiver whose process dies while it handles a message
// (its connection closes; it never acks or nacks) loses the message to
// another receiver once the lease expires.
func testLeaseExpiry(t *testing.T, h *harness) {
	topic, sub := h.pair(queue.Subscription{})
	dying, err := h.target.Dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got atomic.Bool
	release := make(chan struct{})
	r := h.receive(dying, sub, queue.ReceiveSettings{MaxMessages: 1, Grace: time.Minute}, func(_ context.Context, m queue.Message) error {
		got.Store(true)
		<-release
		return nil // too late: the connection is gone
	})
	h.publish(topic, []byte("orphan"))
	until(t, soon, "the first receiver to take the message", got.Load)
	_ = dying.Close() // the process dies: no ack, no nack, no more lease extensions
	close(release)
	if err := r.stop(t); err != nil {
		t.Errorf("the dying receiver: %v", err)
	}

	var d deliveries
	h.receive(h.c, sub, queue.ReceiveSettings{MaxMessages: 1}, func(_ context.Context, m queue.Message) error {
		d.add(m)
		return nil
	})
	until(t, soon, "the orphaned message to come to another receiver", func() bool { n, _ := d.counts(); return n >= 1 })
	if m := d.all()[0]; string(m.Data) != "orphan" {
		t.Fatalf("received %q, want the orphaned message", m.Data)
	}
}

// testLeaseExtension: a handler that runs for longer than the ack deadline
// (and than the receiver's own first lease) keeps its message: no second
// delivery while it runs, though the receiver has a free slot.
func testLeaseExtension(t *testing.T, h *harness) {
	topic, sub := h.pair(queue.Subscription{AckDeadline: 10 * time.Second})
	var d deliveries
	var done atomic.Bool
	h.receive(h.c, sub, queue.ReceiveSettings{MaxMessages: 2}, func(_ context.Context, m queue.Message) error {
		if d.add(m) == 1 {
			hold(25 * time.Second) // past the 10 s ack deadline and the 20 s lease step
			done.Store(true)
		}
		return nil
	})
	h.publish(topic, []byte("slow"))
	until(t, soon, "the slow handler to finish", done.Load)
	if n, _ := d.counts(); n != 1 {
		t.Fatalf("%d deliveries while the handler ran for 25 s, want 1: the lease was not extended", n)
	}
}

// testDeadLetter: a message nacked on every delivery moves to the
// subscription's dead-letter topic after MaxAttempts deliveries, each
// numbered.
func testDeadLetter(t *testing.T, h *harness) {
	dlTopic, dlSub := h.pair(queue.Subscription{})
	const attempts = 5
	topic, sub := h.pair(queue.Subscription{DeadLetterTopic: dlTopic, MaxAttempts: attempts})
	var d, dl deliveries
	h.receive(h.c, sub, queue.ReceiveSettings{MaxMessages: 4}, func(_ context.Context, m queue.Message) error {
		d.add(m)
		return fmt.Errorf("attempt %d fails", m.DeliveryAttempt)
	})
	h.receive(h.c, dlSub, queue.ReceiveSettings{MaxMessages: 4}, func(_ context.Context, m queue.Message) error {
		dl.add(m)
		return nil
	})
	h.publish(topic, []byte("hopeless"))
	until(t, 3*time.Minute, "the message on the dead-letter topic", func() bool { n, _ := dl.counts(); return n >= 1 })
	if m := dl.all()[0]; string(m.Data) != "hopeless" {
		t.Errorf("dead-lettered %q", m.Data)
	}
	ms := d.all()
	seen := map[int]bool{}
	for _, m := range ms {
		seen[m.DeliveryAttempt] = true
	}
	for a := 1; a <= attempts; a++ {
		if !seen[a] {
			t.Errorf("no delivery numbered %d among %d deliveries (attempts seen %v)", a, len(ms), seen)
		}
	}
}

// testManyMessages: 10,000 messages, received in any order by a receiver
// handling 100 at once: none is lost. Pub/Sub delivers at least once, so
// duplicates are counted and reported, not failed.
func testManyMessages(t *testing.T, h *harness) {
	const n = 10_000
	topic, sub := h.pair(queue.Subscription{AckDeadline: 60 * time.Second})
	msgs := make([][]byte, n)
	for i := range msgs {
		msgs[i] = fmt.Appendf(nil, "%05d", i)
	}
	start := time.Now()
	h.publish(topic, msgs...)
	published := time.Since(start)
	seen := make([]atomic.Int32, n)
	var total, unique atomic.Int64
	start = time.Now()
	h.receive(h.c, sub, queue.ReceiveSettings{MaxMessages: 100, MaxBytes: 16 << 20}, func(_ context.Context, m queue.Message) error {
		var i int
		if _, err := fmt.Sscanf(string(m.Data), "%05d", &i); err != nil || i < 0 || i >= n {
			t.Errorf("received %q, which was never published", m.Data)
			return nil
		}
		total.Add(1)
		if seen[i].Add(1) == 1 {
			unique.Add(1)
		}
		return nil
	})
	until(t, 5*time.Minute, fmt.Sprintf("all %d messages", n), func() bool { return unique.Load() == n })
	received := time.Since(start)
	t.Logf("%s, %s mode: %d messages published in %v, received in %v (%.0f/s); %d duplicate deliveries",
		h.target.Kind, h.mode, n, published.Round(time.Millisecond), received.Round(time.Millisecond),
		n/received.Seconds(), total.Load()-n)
}

// testFlowControl: no more than MaxMessages handlers run at once.
func testFlowControl(t *testing.T, h *harness) {
	const n, limit = 60, 3
	topic, sub := h.pair(queue.Subscription{})
	msgs := make([][]byte, n)
	for i := range msgs {
		msgs[i] = fmt.Appendf(nil, "m%d", i)
	}
	h.publish(topic, msgs...)
	var running, peak atomic.Int32
	var d deliveries
	h.receive(h.c, sub, queue.ReceiveSettings{MaxMessages: limit}, func(_ context.Context, m queue.Message) error {
		r := running.Add(1)
		defer running.Add(-1)
		for p := peak.Load(); r > p && !peak.CompareAndSwap(p, r); p = peak.Load() {
		}
		hold(20 * time.Millisecond) // so that handlers overlap
		d.add(m)
		return nil
	})
	until(t, soon, "every message", func() bool { _, u := d.counts(); return u == n })
	if p := peak.Load(); p > limit {
		t.Fatalf("%d handlers ran at once, MaxMessages is %d", p, limit)
	}
	t.Logf("at most %d handlers at once (MaxMessages %d)", peak.Load(), limit)
}

// payload is n deterministic bytes that do not compress to nothing.
func payload(n int) []byte {
	b := make([]byte, n)
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

// testLargeMessage: a message just under the backend's limit arrives intact.
func testLargeMessage(t *testing.T, h *harness) {
	size := h.target.MaxMessage - 64<<10 // room for the attributes and framing
	topic, sub := h.pair(queue.Subscription{AckDeadline: 60 * time.Second})
	want := payload(size)
	var d deliveries
	h.receive(h.c, sub, queue.ReceiveSettings{MaxMessages: 2, MaxBytes: 64 << 20}, func(_ context.Context, m queue.Message) error {
		d.add(m)
		return nil
	})
	h.publish(topic, want)
	until(t, soon, fmt.Sprintf("the %d-byte message", size), func() bool { n, _ := d.counts(); return n >= 1 })
	if got := d.all()[0].Data; !bytes.Equal(got, want) {
		t.Fatalf("received %d bytes with crc32 %08x, published %d with %08x", len(got), crc32.ChecksumIEEE(got), len(want), crc32.ChecksumIEEE(want))
	}
}

// testOverLimit: a message over the backend's limit fails to publish with an
// error naming the topic; it does not hang.
func testOverLimit(t *testing.T, h *harness) {
	topic := h.topic()
	err := h.c.Publisher(topic).Publish(context.Background(), payload(h.target.MaxMessage+1), nil)
	if err == nil {
		t.Fatalf("published %d bytes, over the %d-byte limit", h.target.MaxMessage+1, h.target.MaxMessage)
	}
	if !strings.Contains(err.Error(), topic) {
		t.Fatalf("error %q does not name topic %s", err, topic)
	}
	t.Logf("%s: %v", h.target.Kind, err)
}
