package queue_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/ferry-dev/ferry/internal/localstack"
	"github.com/ferry-dev/ferry/internal/queue"
	"github.com/ferry-dev/ferry/internal/queue/queuetest"
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
