package engine

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/iobuf"
	"github.com/ferry-dev/ferry/internal/queue"
	"github.com/ferry-dev/ferry/internal/setup"
)

// Local is the engine in one process (ferry cp's): GCS, the in-process
// transport with the fleet's topics and subscriptions, and, once started,
// the uploaders and the merger receiving on it. A submit over Clients is
// then the whole transfer.
type Local struct {
	Clients *setup.Clients
	c       LocalConfig
	stop    context.CancelFunc
	run     *errgroup.Group
	once    sync.Once
}

// LocalConfig describes a Local.
type LocalConfig struct {
	Copy     *config.Copy // the budget and its bounds
	Producer config.Producer
	Worker   config.Worker
	Merger   config.Merger
	Log      *slog.Logger
	Version  string
}

// OpenLocal opens GCS (probed: an unreachable endpoint is named before
// anything else) and the in-process transport with its topology.
func OpenLocal(ctx context.Context, c LocalConfig) (*Local, error) {
	store, err := setup.OpenStore(ctx, c.Copy.Emulators)
	if err != nil {
		return nil, err
	}
	store.SetLog(c.Log)
	if err := store.Probe(ctx); err != nil {
		_ = store.Close()
		return nil, err
	}
	store = store.WithKMSKey(c.Copy.Buckets.KMSKey)
	chunks := c.Producer.PubSub.ChunksTopic
	mem := queue.NewMemory(queue.MemoryOptions{MaxMessage: int(c.Copy.MessageMax()) + 1<<20, Backlog: c.Copy.Backlog(),
		// A chunk message acked is uploaded and announced: its buffer
		// serves the producer's next one.
		Release: func(topic string, data []byte) {
			if topic == chunks {
				iobuf.Put(data)
			}
		}})
	q := mem.Client(c.Log, queue.WithHold(store.Reachable))
	l := &Local{Clients: &setup.Clients{Store: store, Queue: q}, c: c}
	if err := topology(ctx, q, c.Producer.PubSub, c.Worker.MaxAttempts); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// Start runs the uploaders and the merger, until Close. stopped is called
// (once or more) when the transfer cannot end any more: a service stopped
// on its own, or a message ran out of its deliveries, so that nothing
// waits for it forever.
func (l *Local) Start(ctx context.Context, id string, stopped func(cause error)) {
	fctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	g, _ := errgroup.WithContext(fctx)
	l.stop, l.run = stop, g
	serve := func(name string, run func() error) {
		g.Go(func() error {
			err := run()
			if fctx.Err() == nil {
				stopped(fmt.Errorf("the in-process %s stopped: %v", name, err))
			}
			return err
		})
	}
	wcfg, log, q := l.c.Worker, l.c.Log, l.Clients.Queue
	wcfg.ID = "cp-" + id
	serve("uploaders", func() error {
		return Worker(fctx, wcfg, l.Clients, log.With("worker", wcfg.ID), l.c.Version, func() {})
	})
	serve("merger", func() error { return Merger(fctx, l.c.Merger, l.Clients, log, l.c.Version, func() {}) })
	for _, dl := range deadLetters(l.c.Producer.PubSub) {
		serve("dead-letter watch", func() error {
			return q.Receive(fctx, dl+deadLetterWatch, queue.ReceiveSettings{MaxMessages: 1}, func(_ context.Context, m queue.Message) error {
				if m.Attributes["ferry_error"] == "" { // a permanent failure is its handler's to report
					stopped(fmt.Errorf("a message of the transfer ran out of its %d deliveries and went to the in-process dead-letter topic %s: the warnings above say why", wcfg.MaxAttempts, dl))
				}
				return nil
			})
		})
	}
}

// Stop stops the services, if started, and waits for them; a second call
// does nothing.
func (l *Local) Stop() {
	l.once.Do(func() {
		if l.stop == nil {
			return
		}
		l.stop()
		if err := l.run.Wait(); err != nil {
			l.c.Log.Warn("the in-process fleet stopped with an error", "err", err)
		}
	})
}

// Close stops the services and closes the clients.
func (l *Local) Close() {
	l.Stop()
	_ = l.Clients.Queue.Close()
	_ = l.Clients.Store.Close()
}

// deadLetterWatch is the suffix of the subscription a Local reads each
// dead-letter topic through: a message that lands there can never end the
// transfer, so cp stops waiting for it and says so.
const deadLetterWatch = "-watch"

// deadLetters are the dead-letter topics of the in-process subscriptions.
func deadLetters(ps config.PubSub) []string {
	return []string{ps.ChunksDeadLetter, ps.EventsDeadLetter, ps.ControlDeadLetter}
}

// topology creates the in-process topics and subscriptions, dead-letter
// topics included, as terraform does for the fleet.
func topology(ctx context.Context, q *queue.Client, ps config.PubSub, attempts int) error {
	for _, t := range []string{ps.ChunksTopic, ps.ChunksDeadLetter, ps.EventsTopic, ps.EventsDeadLetter, ps.ControlTopic, ps.ControlDeadLetter, ps.DoneTopic} {
		if err := q.EnsureTopic(ctx, t); err != nil {
			return err
		}
	}
	for _, s := range []queue.Subscription{
		{ID: ps.ChunksSubscription, Topic: ps.ChunksTopic, DeadLetterTopic: ps.ChunksDeadLetter, MaxAttempts: attempts},
		{ID: ps.EventsSubscription, Topic: ps.EventsTopic, DeadLetterTopic: ps.EventsDeadLetter, MaxAttempts: attempts},
		{ID: ps.ControlSubscription, Topic: ps.ControlTopic, DeadLetterTopic: ps.ControlDeadLetter, MaxAttempts: attempts},
	} {
		if err := q.EnsureSubscription(ctx, s); err != nil {
			return err
		}
	}
	for _, dl := range deadLetters(ps) {
		if err := q.EnsureSubscription(ctx, queue.Subscription{ID: dl + deadLetterWatch, Topic: dl}); err != nil {
			return err
		}
	}
	return nil
}
