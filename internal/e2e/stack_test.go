package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/api/option"

	"github.com/ferry-dev/ferry/internal/benchrow"
	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/localstack"
	"github.com/ferry-dev/ferry/internal/merger"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/producer"
	"github.com/ferry-dev/ferry/internal/queue"
	"github.com/ferry-dev/ferry/internal/teststack"
	"github.com/ferry-dev/ferry/internal/waiter"
	"github.com/ferry-dev/ferry/internal/worker"
)

var (
	fakeGCS *localstack.GCS
	// pubsubKind is the kind of Pub/Sub emulator that started: skips
	// follow it, not an environment variable.
	pubsubKind string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "ferry-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	// The binaries tests build (binaries): half a gigabyte a run, which
	// piles up on a machine that runs the suite often.
	defer func() {
		if binDir != "" {
			_ = os.RemoveAll(binDir)
		}
	}()
	emu, err := localstack.StartPubSub(ctx, localstack.PubSubOptions{Kind: os.Getenv("FERRY_TEST_PUBSUB"), Dir: dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, "pubsub emulator:", err)
		return 1
	}
	defer emu.Stop()
	fmt.Fprintf(os.Stderr, "e2e: Pub/Sub emulator %s on %s\n", emu.Kind, emu.Host)
	fmt.Fprintf(os.Stderr, "ferry-test: pubsub=%s\n", emu.Kind) // for make test's summary
	pubsubKind = emu.Kind
	fakeGCS, err = localstack.StartGCS(0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer fakeGCS.Stop()
	os.Setenv("PUBSUB_EMULATOR_HOST", emu.Host)
	os.Setenv("STORAGE_EMULATOR_HOST", fakeGCS.Host)
	return m.Run()
}

var stackSeq atomic.Int64

// stack is one isolated ferry deployment on the shared emulators: its own
// topics, subscriptions, bucket, spool and results file.
type stack struct {
	t       *testing.T
	q       *queue.Client
	store   *gcs.Store
	ps      config.PubSub
	bucket  string
	spool   string
	results string
	keys    string // FERRY_KEY_DIR: producer submit's end keys
	// gcsHost is the host:port of the GCS the stack runs on, when it has
	// its own (stackOptions.gcs).
	gcsHost string
	prod    *producer.Producer
	// What went through the stack's own workers and merger, for tests
	// that wait until everything published has been handled.
	chunksPublished, chunksHandled atomic.Int64
	eventsPublished, eventsHandled atomic.Int64
	// handled counts the events each merger handled.
	handled []atomic.Int64
}

type stackOptions struct {
	workers   int
	inlineMax int64
	// noMerger leaves the merger to the test (a real process, say).
	noMerger bool
	// mergers is how many mergers receive from the events subscription,
	// each with its own sink on the results file (default 1).
	mergers int
	// duplicateChunks publishes every chunk message twice.
	duplicateChunks bool
	// workerEndpoint, when set, is the GCS JSON API endpoint the workers
	// use (e.g. a fault-injecting proxy in front of fake-gcs-server), as
	// "http://host:port/storage/v1/".
	workerEndpoint string
	// bundleMax bundles small files (FERRY_BUNDLE_MAX); 0: none.
	bundleMax int64
	// pubsub runs FERRY_TRANSPORT=pubsub: workers have no spool at all.
	pubsub bool
	// gcs, when set, is the fake-gcs-server every part of the stack uses
	// instead of the shared one (a filesystem backend, say).
	gcs *localstack.GCS
	// endpoint, when set, is the GCS JSON API endpoint every part of the
	// stack uses (a proxy in front of the shared fake, as a bucket's limit
	// is every client's), as "http://host:port/storage/v1/".
	endpoint string
}

func newStack(t *testing.T, o stackOptions) *stack {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	name := strings.ToLower(regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(t.Name(), "-"))
	name = fmt.Sprintf("t%d-%.30s", stackSeq.Add(1), name)
	s := &stack{t: t, bucket: strings.Trim(name, "-"), spool: t.TempDir(), results: filepath.Join(t.TempDir(), "results.ndjson"), keys: t.TempDir()}
	s.ps = config.PubSub{Project: "ferry-test", ChunksTopic: name + "-chunks", ChunksSubscription: name + "-chunks-w",
		EventsTopic: name + "-events", EventsSubscription: name + "-events-m", DoneTopic: name + "-done",
		ControlTopic: name + "-control", ControlSubscription: name + "-control-m", ControlDeadLetter: name + "-control-dead",
		ChunksDeadLetter: name + "-chunks-dead", EventsDeadLetter: name + "-events-dead",
		RequestsTopic: name + "-requests", RequestsSubscription: name + "-requests-p", RequestsDeadLetter: name + "-requests-dead",
		ShardsTopic: name + "-shards", ShardsSubscription: name + "-shards-a", ShardsDeadLetter: name + "-shards-dead"}
	var err error
	if s.q, err = queue.Dial(ctx, s.ps.Project, nil); err != nil {
		t.Fatal(err)
	}
	if err := localstack.Provision(ctx, s.q, s.ps); err != nil {
		t.Fatal(err)
	}
	var storeOpts []option.ClientOption
	if o.gcs != nil {
		o.gcs.CreateBucket(s.bucket)
		storeOpts = append(storeOpts, option.WithEndpoint("http://"+o.gcs.Host+"/storage/v1/"))
		if o.workerEndpoint == "" {
			o.workerEndpoint = "http://" + o.gcs.Host + "/storage/v1/"
		}
	} else {
		fakeGCS.CreateBucket(s.bucket)
	}
	if o.endpoint != "" {
		storeOpts = append(storeOpts, option.WithEndpoint(o.endpoint))
		if o.workerEndpoint == "" {
			o.workerEndpoint = o.endpoint
		}
	}
	if s.store, err = gcs.New(ctx, storeOpts...); err != nil {
		t.Fatal(err)
	}
	events := counting{s.q.Publisher(s.ps.EventsTopic), &s.eventsPublished}
	control := counting{s.q.Publisher(s.ps.ControlTopic), &s.eventsPublished}
	running := make(chan struct{}, o.workers+2*max(o.mergers, 1))
	goroutines := o.workers
	workerStore := s.store
	if o.workerEndpoint != "" {
		if workerStore, err = gcs.New(ctx, option.WithEndpoint(o.workerEndpoint)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { workerStore.Close() })
	}
	for i := 0; i < o.workers; i++ {
		spool := s.spool
		if o.pubsub {
			spool = ""
		}
		w, err := worker.New(worker.Options{Store: workerStore, Events: events, ID: fmt.Sprintf("w%d", i), MaxAttempts: 5, SpoolDir: spool})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close() })
		go func() {
			defer func() { running <- struct{}{} }()
			_ = s.q.Receive(ctx, s.ps.ChunksSubscription, queue.ReceiveSettings{MaxMessages: 4, MaxBytes: 64 << 20, DeadLetterTopic: s.ps.ChunksDeadLetter},
				counted(w.Handle, &s.chunksHandled))
		}()
	}
	if !o.noMerger {
		s.handled = make([]atomic.Int64, max(o.mergers, 1))
		for i := range s.handled {
			sink, err := benchrow.OpenFile(s.results)
			if err != nil {
				t.Fatal(err)
			}
			m := merger.New(merger.Options{Store: s.store, Done: s.q.Publisher(s.ps.DoneTopic), Sink: sink, Version: "test"})
			for _, sub := range []struct {
				id, dead string
				h        queue.Handler
			}{{s.ps.EventsSubscription, s.ps.EventsDeadLetter, m.HandleEvents}, {s.ps.ControlSubscription, s.ps.ControlDeadLetter, m.HandleControl}} {
				goroutines++
				go func() {
					defer func() { running <- struct{}{} }()
					_ = s.q.Receive(ctx, sub.id, queue.ReceiveSettings{MaxMessages: 8, MaxBytes: 64 << 20, DeadLetterTopic: sub.dead},
						counted(func(ctx context.Context, msg queue.Message) error { s.handled[i].Add(1); return sub.h(ctx, msg) }, &s.eventsHandled))
				}()
			}
			goroutines++
			go func() {
				defer func() { running <- struct{}{} }()
				m.RunSweeps(ctx) // as cmd/merger runs it
			}()
		}
	}
	var chunks publisher = counting{s.q.Publisher(s.ps.ChunksTopic), &s.chunksPublished}
	if o.duplicateChunks {
		chunks = twice{chunks}
	}
	transport := config.TransportSpool
	if o.pubsub {
		transport = config.TransportPubSub
	}
	s.prod = producer.New(producer.Options{Store: s.store, Chunks: chunks, Events: control, Transport: transport,
		MessageMax: 3 << 20, // below pstest's 4 MiB
		SpoolDir:   s.spool, InlineMax: o.inlineMax, BundleMax: o.bundleMax, Concurrency: 2, MemoryLimit: 64 << 20})
	t.Cleanup(func() {
		cancel()
		for i := 0; i < goroutines; i++ {
			<-running
		}
		s.q.Close()
		s.store.Close()
	})
	return s
}

type publisher interface {
	Publish(ctx context.Context, data []byte, attrs map[string]string) error
}

// twice publishes every message two times, as a publisher retrying after a
// lost acknowledgement does.
type twice struct{ p publisher }

func (t twice) Publish(ctx context.Context, data []byte, attrs map[string]string) error {
	if err := t.p.Publish(ctx, data, attrs); err != nil {
		return err
	}
	return t.p.Publish(ctx, data, attrs)
}

// counting is a publisher that counts what it published.
type counting struct {
	p publisher
	n *atomic.Int64
}

func (c counting) Publish(ctx context.Context, data []byte, attrs map[string]string) error {
	err := c.p.Publish(ctx, data, attrs)
	if err == nil {
		c.n.Add(1)
	}
	return err
}

// counted is h, counting the messages it handled.
func counted(h queue.Handler, n *atomic.Int64) queue.Handler {
	return func(ctx context.Context, m queue.Message) error {
		defer n.Add(1)
		return h(ctx, m)
	}
}

// settle waits until the stack's workers and merger have handled at least
// as many messages as were published to them: nothing is left in flight.
func (s *stack) settle() {
	s.t.Helper()
	teststack.Until(s.t, 2*time.Minute, "every chunk message and event to be handled", func() bool {
		return s.chunksHandled.Load() >= s.chunksPublished.Load() && s.eventsHandled.Load() >= s.eventsPublished.Load()
	})
}

// transfer submits req and waits for its done event.
func (s *stack) transfer(req producer.Request) (message.Done, error) {
	s.t.Helper()
	return s.transferAsync(req)()
}

// transferAsync subscribes to the done topic, submits req in the background
// and returns a function that waits for the transfer's done event and the
// submit's error.
func (s *stack) transferAsync(req producer.Request) func() (message.Done, error) {
	s.t.Helper()
	return s.transferWith(s.prod, req)
}

// transferWith is transferAsync with producer p instead of the stack's.
func (s *stack) transferWith(p *producer.Producer, req producer.Request) func() (message.Done, error) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	req.TransferID = message.NewTransferID(req.IdempotencyKey)
	w, err := waiter.New(ctx, s.q, s.ps.DoneTopic, req.TransferID)
	if err != nil {
		cancel()
		s.t.Fatal(err)
	}
	type outcome struct {
		done            message.Done
		submit, waitErr error
	}
	ch := make(chan outcome, 1)
	go func() {
		var o outcome
		o.submit = func() error { _, err := p.Submit(ctx, req); return err }()
		// A failed submit still ends with a done event.
		o.done, o.waitErr = w.Wait(ctx)
		ch <- o
	}()
	return func() (message.Done, error) {
		s.t.Helper()
		defer cancel()
		defer func() { _ = w.Close(context.Background()) }()
		o := <-ch
		if o.waitErr != nil {
			s.t.Fatalf("no done event for transfer %s (submit: %v): %v", req.TransferID, o.submit, o.waitErr)
		}
		return o.done, o.submit
	}
}

// staging lists what is left under the bucket's .ferry/ prefix, done markers
// aside.
func (s *stack) staging() []string {
	s.t.Helper()
	var left []string
	err := s.store.List(context.Background(), s.bucket, message.StagingRoot, func(a gcs.Attrs) error {
		if !strings.HasPrefix(a.Name, message.AgentRoot) { // a running agent's heartbeat is no transfer's
			left = append(left, a.Name)
		}
		return nil
	})
	if err != nil {
		s.t.Fatal(err)
	}
	return left
}

// assertClean fails the test unless the staging prefix and the spool empty
// out. The merger publishes the done event before it removes the staging
// objects, and a worker removes its spool file after it announced the chunk,
// so both are empty soon after the done event, not necessarily at it.
func (s *stack) assertClean() {
	s.t.Helper()
	teststack.UntilSays(s.t, time.Minute, "no staging objects and no spool files", func() (bool, string) {
		left := s.staging()
		spool, _ := os.ReadDir(s.spool)
		names := make([]string, len(spool))
		for i, e := range spool {
			names[i] = e.Name()
		}
		return len(left) == 0 && len(spool) == 0, fmt.Sprintf("left behind: staging objects %v, spool files %v", left, names)
	})
}

// row returns the benchmark row of transfer tid, failing unless there is
// exactly one.
func (s *stack) row(tid string) benchrow.Row {
	s.t.Helper()
	rows, err := benchrow.ReadFile(s.results)
	if err != nil {
		s.t.Fatal(err)
	}
	var found []benchrow.Row
	for _, r := range rows {
		if r.TransferID == tid {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		s.t.Fatalf("%d benchmark rows for transfer %s, want 1", len(found), tid)
	}
	return found[0]
}
