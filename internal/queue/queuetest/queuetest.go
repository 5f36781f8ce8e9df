// Package queuetest is the conformance suite of internal/queue: what ferry
// relies on from Pub/Sub, written once and run against every backend there
// is (the Java emulator, pstest, and a real project when FERRY_TEST_PROJECT
// is set), in both receive modes. In the manner of gocloud.dev's drivertest:
// Run(t, newTarget) with an explicit table of cases.
//
// Where a backend differs from Google Cloud Pub/Sub, the case says how and
// is skipped on that backend only (see differences); the skip follows the
// Kind of what actually started, never an environment variable.
//
// No case sleeps to synchronize or asserts a duration: waits poll for what
// they expect, with generous deadlines, so the suite passes on a busy
// machine. A handler that must hold its message for longer than an ack
// deadline holds it for a fixed time: that is the scenario, not a wait.
// Cases run in parallel (they mostly wait for Pub/Sub's clocks), so run the
// suite with -parallel well above the default of one per CPU (see
// WideParallel).
package queuetest

import (
	"context"
	"flag"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/queue"
)

// Kinds of backend.
const (
	Java   = "java"   // gcloud beta emulators pubsub start
	Pstest = "pstest" // cloud.google.com/go/pubsub/v2/pstest, in process
	Cloud  = "gcp"    // Google Cloud Pub/Sub, a real project
	Memory = "memory" // queue.Memory, ferry cp's in-process transport
)

// WideParallel raises -test.parallel to 16 unless the command line set it:
// the suite's cases mostly wait for ack deadlines to pass, and with the
// default of one per CPU they would wait one after another. Call it from
// TestMain before m.Run.
func WideParallel() {
	if !flag.Parsed() {
		flag.Parse()
	}
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", "16")
	}
}

// Target is one backend the suite runs against.
type Target struct {
	// Kind is Java, Pstest or Cloud: what actually answers.
	Kind string
	// Dial returns a new client of the backend; the suite closes it.
	Dial func(ctx context.Context, opts ...queue.Option) (*queue.Client, error)
	// MaxMessage is the largest message the backend takes (Pub/Sub: 10 MB
	// with attributes; pstest: its 4 MiB gRPC limit, framing included).
	MaxMessage int
}

// difference is a way a backend is known to differ from Google Cloud
// Pub/Sub, so that a case cannot hold there.
type difference struct {
	kind string
	mode queue.ReceiveMode // ModeAuto: in every mode
	why  string
}

// differences lists, per case, where a backend differs from Pub/Sub.
var differences = map[string][]difference{
	"LeaseExpiryRedeliversWhenTheReceiverDies": {{Java, queue.ModeStreaming,
		"the Java emulator gives a message leased on a streaming pull back about 100 s after the stream died, not when its 20 s lease ends (ferry pulls unary from it)"}},
	"TenThousandMessagesNoneLost": {{Pstest, queue.ModeStreaming,
		"pstest's streaming pull sends one message per stream every 10 ms tick (about 70/s), so 10,000 take minutes; its unary Pull is not limited so"}},
}

// Run runs every case against newTarget's backend, in unary and in
// streaming mode.
func Run(t *testing.T, newTarget func(t *testing.T) Target) {
	cases := []struct {
		name string
		fn   func(t *testing.T, h *harness)
	}{
		{"AckDeliversDataAndAttributes", testAck},
		{"NackRedelivers", testNack},
		{"PermanentIsAckedAndDeadLettered", testPermanent},
		{"LeaseExpiryRedeliversWhenTheReceiverDies", testLeaseExpiry},
		{"LeaseExtendedPastTheAckDeadline", testLeaseExtension},
		{"DeadLetterAfterMaxAttempts", testDeadLetter},
		{"TenThousandMessagesNoneLost", testManyMessages},
		{"FlowControlBoundsHandlers", testFlowControl},
		{"LargeMessageNearTheLimit", testLargeMessage},
		{"MessageOverTheLimitFails", testOverLimit},
	}
	for _, mode := range []queue.ReceiveMode{queue.ModeUnary, queue.ModeStreaming} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					tg := newTarget(t)
					for _, d := range differences[c.name] {
						if d.kind == tg.Kind && (d.mode == queue.ModeAuto || d.mode == mode) {
							t.Skipf("%s (%s mode): %s", tg.Kind, mode, d.why)
						}
					}
					c.fn(t, newHarness(t, tg, mode))
				})
			}
		})
	}
}

// harness is one case's client and its own topics and subscriptions.
type harness struct {
	t      *testing.T
	target Target
	mode   queue.ReceiveMode
	c      *queue.Client
	prefix string
	seq    atomic.Int64
}

var runSeq atomic.Int64

func newHarness(t *testing.T, tg Target, mode queue.ReceiveMode) *harness {
	c, err := tg.Dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	name := strings.ToLower(regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(t.Name(), "-"))
	if len(name) > 60 {
		name = name[len(name)-60:]
	}
	h := &harness{t: t, target: tg, mode: mode, c: c,
		prefix: fmt.Sprintf("qt%d-%d-%s", time.Now().UnixNano()%1e6, runSeq.Add(1), strings.Trim(name, "-"))}
	t.Cleanup(func() { _ = c.Close() })
	return h
}

// topic creates a topic of the case's own, deleted at cleanup.
func (h *harness) topic() string {
	h.t.Helper()
	id := fmt.Sprintf("%s-t%d", h.prefix, h.seq.Add(1))
	if err := h.c.EnsureTopic(context.Background(), id); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { _ = h.c.DeleteTopic(context.Background(), id) })
	return id
}

// subscription creates s (ID filled in), deleted at cleanup.
func (h *harness) subscription(s queue.Subscription) string {
	h.t.Helper()
	s.ID = fmt.Sprintf("%s-s%d", h.prefix, h.seq.Add(1))
	if s.AckDeadline == 0 {
		s.AckDeadline = 10 * time.Second
	}
	if err := h.c.EnsureSubscription(context.Background(), s); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { _ = h.c.DeleteSubscription(context.Background(), s.ID) })
	return s.ID
}

// pair is a topic with one subscription.
func (h *harness) pair(s queue.Subscription) (topic, sub string) {
	s.Topic = h.topic()
	return s.Topic, h.subscription(s)
}

// publish sends messages, concurrently, and fails the case on an error.
func (h *harness) publish(topic string, msgs ...[]byte) {
	h.t.Helper()
	p := h.c.Publisher(topic)
	errs := make(chan error, len(msgs))
	sem := make(chan struct{}, 256)
	for _, m := range msgs {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			errs <- p.Publish(context.Background(), m, map[string]string{"k": "v"})
		}()
	}
	for range msgs {
		if err := <-errs; err != nil {
			h.t.Fatal(err)
		}
	}
}

// receiver is a running Receive; stop ends it and returns its error.
type receiver struct {
	cancel context.CancelFunc
	done   chan error
}

func (h *harness) receive(c *queue.Client, sub string, s queue.ReceiveSettings, fn queue.Handler) *receiver {
	ctx, cancel := context.WithCancel(context.Background())
	s.Mode = h.mode
	r := &receiver{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- c.Receive(ctx, sub, s, fn) }()
	h.t.Cleanup(func() {
		if err := r.stop(h.t); err != nil {
			h.t.Errorf("Receive from %s: %v", sub, err)
		}
	})
	return r
}

// stop cancels the receiver and waits for it to return.
func (r *receiver) stop(t *testing.T) error {
	r.cancel()
	select {
	case err, ok := <-r.done:
		if ok {
			close(r.done)
		}
		return err
	case <-time.After(2 * time.Minute):
		t.Errorf("Receive did not return within 2 minutes of its context's end")
		return nil
	}
}

// until polls cond every 10 ms until it holds, failing the case with what
// after d.
func until(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// deliveries records what a handler saw. It is safe for concurrent use.
type deliveries struct {
	mu   sync.Mutex
	byID map[string][]queue.Message
	n    int
}

func (d *deliveries) add(m queue.Message) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.byID == nil {
		d.byID = map[string][]queue.Message{}
	}
	d.byID[m.ID] = append(d.byID[m.ID], m)
	d.n++
	return len(d.byID[m.ID])
}

func (d *deliveries) counts() (total, unique int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n, len(d.byID)
}

func (d *deliveries) all() []queue.Message {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []queue.Message
	for _, ms := range d.byID {
		out = append(out, ms...)
	}
	return out
}
