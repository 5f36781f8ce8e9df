package queue_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/localstack"
	"github.com/ferry-dev/ferry/internal/queue"
	"github.com/ferry-dev/ferry/internal/queue/queuetest"
	"github.com/ferry-dev/ferry/internal/teststack"
)

// The emulators this test binary started, by kind; javaErr says why the Java
// emulator is missing, if it is.
var (
	emulators = map[string]*localstack.PubSub{}
	javaErr   error
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

// run starts both emulators (the Java one unless FERRY_TEST_PUBSUB=pstest;
// with FERRY_TEST_PUBSUB=java a missing Java emulator fails the run).
func run(m *testing.M) int {
	queuetest.WideParallel()
	ctx := context.Background()
	want := os.Getenv("FERRY_TEST_PUBSUB")
	if want != "pstest" {
		dir, err := os.MkdirTemp("", "ferry-queue-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		emu, err := localstack.StartPubSub(ctx, localstack.PubSubOptions{Kind: "java", Dir: dir})
		if err != nil {
			if want == "java" {
				fmt.Fprintln(os.Stderr, "FERRY_TEST_PUBSUB=java: the Java Pub/Sub emulator did not start:", err)
				return 1
			}
			javaErr = err
		} else {
			defer emu.Stop()
			emulators[emu.Kind] = emu
		}
	} else {
		javaErr = fmt.Errorf("FERRY_TEST_PUBSUB=pstest")
	}
	emu, err := localstack.StartPubSub(ctx, localstack.PubSubOptions{Kind: "pstest"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer emu.Stop()
	emulators[emu.Kind] = emu
	for k, e := range emulators {
		fmt.Fprintf(os.Stderr, "queue: Pub/Sub emulator %s on %s\n", k, e.Host)
	}
	// For make test's summary: the Java emulator, or the fallback.
	if emulators[queuetest.Java] != nil {
		fmt.Fprintln(os.Stderr, "ferry-test: pubsub=java")
	} else {
		fmt.Fprintf(os.Stderr, "ferry-test: pubsub=pstest (%v)\n", javaErr)
	}
	return m.Run()
}

// emulatorTarget is the suite's target for the emulator of kind, or skips.
func emulatorTarget(t *testing.T, kind string) queuetest.Target {
	emu := emulators[kind]
	if emu == nil {
		t.Skipf("no %s Pub/Sub emulator: %v", kind, javaErr)
	}
	max := 10_000_000 // Pub/Sub's limit, which the Java emulator keeps
	if emu.Kind == queuetest.Pstest {
		max = 4 << 20 // pstest's gRPC server takes requests of at most 4 MiB
	}
	return queuetest.Target{Kind: emu.Kind, MaxMessage: max, Dial: func(ctx context.Context, opts ...queue.Option) (*queue.Client, error) {
		return queue.Dial(ctx, "ferry-test", nil, append(opts, queue.WithEmulator(emu.Host))...)
	}}
}

func TestConformanceJavaEmulator(t *testing.T) {
	t.Parallel()
	tg := emulatorTarget(t, queuetest.Java)
	queuetest.Run(t, func(*testing.T) queuetest.Target { return tg })
}

func TestConformancePstest(t *testing.T) {
	t.Parallel()
	tg := emulatorTarget(t, queuetest.Pstest)
	queuetest.Run(t, func(*testing.T) queuetest.Target { return tg })
}

// TestConformanceMemory runs the suite against the in-process transport
// (ferry cp's): every client of a target is a client of one Memory, as
// every client of an emulator is a client of that emulator.
func TestConformanceMemory(t *testing.T) {
	t.Parallel()
	mem := queue.NewMemory(queue.MemoryOptions{MaxMessage: 10_000_000, Backlog: 64 << 20})
	tg := queuetest.Target{Kind: queuetest.Memory, MaxMessage: 10_000_000, Dial: func(_ context.Context, opts ...queue.Option) (*queue.Client, error) {
		return mem.Client(nil, opts...), nil
	}}
	queuetest.Run(t, func(*testing.T) queuetest.Target { return tg })
}

// TestMemoryBacklogHoldsPublishers: where Pub/Sub would store a message,
// the in-process transport makes its publisher wait while a subscription
// holds its backlog bound, so that chunks waiting for the workers stay
// within the process's memory; a taken message makes room.
func TestMemoryBacklogHoldsPublishers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem := queue.NewMemory(queue.MemoryOptions{Backlog: 100})
	c := mem.Client(nil)
	defer c.Close()
	if err := c.EnsureTopic(ctx, "chunks"); err != nil {
		t.Fatal(err)
	}
	if err := c.EnsureSubscription(ctx, queue.Subscription{ID: "workers", Topic: "chunks"}); err != nil {
		t.Fatal(err)
	}
	p := c.Publisher("chunks")
	// One message over the bound is taken by an empty subscription.
	if err := p.Publish(ctx, make([]byte, 150), nil); err != nil {
		t.Fatalf("the first message, into an empty subscription: %v", err)
	}
	published := make(chan error, 1)
	go func() { published <- p.Publish(ctx, []byte("second"), nil) }()
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	err := p.Publish(short, []byte("third"), nil)
	if err == nil || !strings.Contains(err.Error(), "waited for room in subscription workers") {
		t.Fatalf("publish into a full subscription gave %v, want it to wait and name the subscription", err)
	}
	var got atomic.Int32
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		_ = c.Receive(rctx, "workers", queue.ReceiveSettings{MaxMessages: 1}, func(_ context.Context, m queue.Message) error {
			if got.Add(1) == 2 {
				stop()
			}
			return nil
		})
	}()
	if err := <-published; err != nil {
		t.Fatalf("the waiting publish once the first message was taken: %v", err)
	}
	select {
	case <-rctx.Done():
	case <-time.After(time.Minute):
		t.Fatalf("%d of the 2 messages published were received", got.Load())
	}
}

// TestConformanceCloud runs the suite against Google Cloud Pub/Sub in
// FERRY_TEST_PROJECT, with Application Default Credentials (see README,
// "Running the conformance suites against a project").
func TestConformanceCloud(t *testing.T) {
	t.Parallel()
	project := os.Getenv("FERRY_TEST_PROJECT")
	if project == "" {
		t.Skip("FERRY_TEST_PROJECT is not set: no real Pub/Sub to test")
	}
	if os.Getenv("PUBSUB_EMULATOR_HOST") != "" {
		t.Fatal("FERRY_TEST_PROJECT and PUBSUB_EMULATOR_HOST are both set: unset the emulator to test the real service")
	}
	tg := queuetest.Target{Kind: queuetest.Cloud, MaxMessage: 10_000_000, Dial: func(ctx context.Context, opts ...queue.Option) (*queue.Client, error) {
		return queue.Dial(ctx, project, nil, opts...)
	}}
	queuetest.Run(t, func(*testing.T) queuetest.Target { return tg })
}

// TestUnreachableEndpointIsNamed: every call to a closed port fails within
// its deadline with ErrUnreachable, naming the variable that chose it.
func TestUnreachableEndpointIsNamed(t *testing.T) {
	t.Setenv("PUBSUB_EMULATOR_HOST", "127.0.0.1:1")
	c, err := queue.Dial(context.Background(), "ferry-test", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	var wg sync.WaitGroup
	for name, call := range map[string]func() error{
		"Publish":     func() error { return c.Publisher("t").Publish(ctx, []byte("x"), nil) },
		"EnsureTopic": func() error { return c.EnsureTopic(ctx, "t") },
		"EnsureSubscription": func() error {
			return c.EnsureSubscription(ctx, queue.Subscription{ID: "s", Topic: "t", AckDeadline: 10 * time.Second})
		},
		"Probe": func() error { return c.Probe(ctx) },
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			err := call()
			t.Logf("%s: %v after %v", name, err, time.Since(start).Round(time.Millisecond))
			if !errors.Is(err, queue.ErrUnreachable) || !strings.Contains(err.Error(), "PUBSUB_EMULATOR_HOST=127.0.0.1:1") {
				t.Errorf("%s on a closed port: %v; want ErrUnreachable naming PUBSUB_EMULATOR_HOST=127.0.0.1:1", name, err)
			}
		}()
	}
	wg.Wait()
}

// TestReceiveBacksOffWhileUnreachable: Receive from a closed port does not
// return and does not spin: it reports the outage to the health function
// and logs each retry, waiting at random below a limit that doubles (gax),
// until its context ends.
func TestReceiveBacksOffWhileUnreachable(t *testing.T) {
	t.Setenv("PUBSUB_EMULATOR_HOST", "127.0.0.1:1")
	var logs teststack.SyncBuffer
	var healthErr atomic.Value
	c, err := queue.Dial(context.Background(), "ferry-test", slog.New(slog.NewJSONHandler(&logs, nil)),
		queue.WithHealth(func(err error) {
			if err != nil {
				healthErr.Store(err)
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- c.Receive(ctx, "s", queue.ReceiveSettings{MaxMessages: 1, Mode: queue.ModeUnary}, func(context.Context, queue.Message) error { return nil })
	}()
	var waits []time.Duration
	deadline := time.Now().Add(2 * time.Minute)
	for len(waits) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("no three retries logged within 2 minutes:\n%s", logs.String())
		}
		select {
		case err := <-done:
			t.Fatalf("Receive returned while Pub/Sub was unreachable: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
		waits = waits[:0]
		for _, line := range strings.Split(logs.String(), "\n") {
			var rec struct {
				Msg, Endpoint, Err string
				RetryIn            time.Duration `json:"retry_in"`
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "cannot receive; retrying" {
				if !strings.Contains(rec.Err, "PUBSUB_EMULATOR_HOST=127.0.0.1:1") {
					t.Fatalf("logged error %q does not name the endpoint", rec.Err)
				}
				waits = append(waits, rec.RetryIn)
			}
		}
	}
	// gax's backoff: the limit starts at 0.5 s and doubles, and each wait
	// is drawn at random below it (full jitter), so the waits stay under
	// 0.5 s, 1 s, 2 s without growing every time; the queue never waits
	// less than 50 ms, which a draw near zero would otherwise do.
	for i, w := range waits {
		if limit := 500 * time.Millisecond << i; w < 50*time.Millisecond || w > limit {
			t.Errorf("retry %d waited %v, want [50ms, %v]; all: %v", i+1, w, limit, waits)
		}
	}
	if err, _ := healthErr.Load().(error); !errors.Is(err, queue.ErrUnreachable) {
		t.Errorf("health function heard %v, want ErrUnreachable", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Receive returned %v after its context ended, want nil", err)
	}
}

// TestMemoryReleasesAMessageOnceEverySubscriptionAckedIt: a buffer given
// back too early would be overwritten under a handler still reading it,
// so release waits for the last ack; a nack does not release it.
func TestMemoryReleasesAMessageOnceEverySubscriptionAckedIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	released := make(chan string, 10)
	mem := queue.NewMemory(queue.MemoryOptions{Release: func(topic string, data []byte) { released <- topic + ":" + string(data) }})
	c := mem.Client(nil)
	defer c.Close()
	if err := c.EnsureTopic(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if err := c.EnsureTopic(ctx, "dead"); err != nil {
		t.Fatal(err)
	}
	for _, s := range []queue.Subscription{{ID: "a", Topic: "t"}, {ID: "b", Topic: "t", DeadLetterTopic: "dead", MaxAttempts: 5, MinBackoff: time.Millisecond}} {
		if err := c.EnsureSubscription(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Publisher("t").Publish(ctx, []byte("m1"), nil); err != nil {
		t.Fatal(err)
	}
	// receive handles one message on sub with h, then stops.
	receive := func(sub string, h func(queue.Message) error) {
		rctx, stop := context.WithCancel(ctx)
		defer stop()
		_ = c.Receive(rctx, sub, queue.ReceiveSettings{MaxMessages: 1}, func(_ context.Context, m queue.Message) error {
			defer stop()
			return h(m)
		})
	}
	receive("a", func(queue.Message) error { return nil })
	if len(released) != 0 {
		t.Fatalf("released %q while subscription b had not acked it", <-released)
	}
	receive("b", func(queue.Message) error { return errors.New("not yet") }) // a nack
	if len(released) != 0 {
		t.Fatalf("released %q after a nack", <-released)
	}
	receive("b", func(queue.Message) error { return nil })
	select {
	case got := <-released:
		if got != "t:m1" {
			t.Fatalf("released %q, want t:m1", got)
		}
	case <-time.After(time.Minute): // a hang, not a speed
		t.Fatal("the message acked by both subscriptions was not released")
	}
}
