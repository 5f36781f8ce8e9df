package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/iobuf"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/pool"
	"github.com/ferry-dev/ferry/internal/producer"
	"github.com/ferry-dev/ferry/internal/queue"
	"github.com/ferry-dev/ferry/internal/setup"
	"github.com/ferry-dev/ferry/internal/worker"
)

// Agent runs one host of the pool until ctx ends: it claims shards on
// cfg's shards subscription and sends each with the engine ferry cp wires
// in memory (the producer's pipeline handing chunks to this process's own
// uploaders, no chunk byte leaving the host but to GCS), reporting each
// chunk to the fleet's merger on the events topic as workers do. ready is
// called once it receives.
func Agent(ctx context.Context, cfg *config.Agent, c *setup.Clients, log *slog.Logger, version string, ready func()) error {
	cp := cfg.Copy()
	pcfg, wcfg := cp.Producer(), cp.Worker()
	mem := queue.NewMemory(queue.MemoryOptions{MaxMessage: int(cp.MessageMax()) + 1<<20, Backlog: cp.Backlog(),
		Release: func(topic string, data []byte) {
			if topic == wcfg.PubSub.ChunksTopic {
				iobuf.Put(data)
			}
		}})
	local := mem.Client(log, queue.WithHold(c.Store.Reachable))
	defer func() { _ = local.Close() }()
	ps := wcfg.PubSub // the in-process names
	for _, t := range []string{ps.ChunksTopic, ps.ChunksDeadLetter} {
		if err := local.EnsureTopic(ctx, t); err != nil {
			return err
		}
	}
	if err := local.EnsureSubscription(ctx, queue.Subscription{ID: ps.ChunksSubscription, Topic: ps.ChunksTopic,
		DeadLetterTopic: ps.ChunksDeadLetter, MaxAttempts: wcfg.MaxAttempts}); err != nil {
		return err
	}
	w, err := worker.New(worker.Options{Store: c.Store, Events: c.Queue.Publisher(cfg.PubSub.EventsTopic), ID: cfg.ID,
		MaxAttempts: wcfg.MaxAttempts, Buckets: cfg.Buckets, MaxRate: int64(cfg.MaxRate), Log: log,
		Requests: wcfg.RequestCap(), RequestMemory: wcfg.RequestBytes()})
	if err != nil {
		return err
	}
	defer w.Close()
	tr := newTracker(local.Publisher(ps.ChunksTopic), wcfg.MaxAttempts)
	o := producer.ConfigOptions(&pcfg)
	o.Store, o.Events, o.ID, o.Log, o.Version = c.Store, c.Queue.Publisher(cfg.PubSub.ControlTopic), cfg.ID, log, version
	p := pool.NewAgent(pool.AgentOptions{Store: c.Store, Producer: producer.New(o), Buckets: cfg.Buckets.Allowed, MaxChunks: cfg.MaxChunks,
		MessageMax: int64(pcfg.MessageMax)})

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		return local.Receive(context.WithoutCancel(gctx), ps.ChunksSubscription, queue.ReceiveSettings{
			MaxMessages: wcfg.Concurrency, MaxBytes: int(wcfg.MaxOutstanding), Grace: wcfg.ShutdownGrace, DeadLetterTopic: ps.ChunksDeadLetter,
		}, tr.handle(w.Handle))
	})
	shards := c.Queue.Publisher(cfg.PubSub.ShardsTopic) // a shard this agent cannot read, for the agents that have not tried it
	// The heartbeat producer doctor --pool reads: this agent answers, and
	// can (or cannot) read its roots. Removed once the agent stops.
	var sending atomic.Int64
	buckets := heartBuckets(cfg.Buckets.Allowed)
	heart := pool.NewHeart(pool.HeartOptions{Store: c.Store, Buckets: buckets.list, Agent: cfg.ID, Version: version,
		Roots: cfg.SourceRoots, Shards: func() int { return int(sending.Load()) }, Log: log})
	buckets.added = heart.Kick
	hctx, stopHeart := context.WithCancel(context.WithoutCancel(ctx))
	beating := make(chan struct{})
	go func() { defer close(beating); heart.Run(hctx) }()
	ready()
	log.Info("agent receiving", "agent", cfg.ID, "subscription", cfg.PubSub.ShardsSubscription, "roots", cfg.SourceRoots, "version", version)
	err = c.Queue.Receive(ctx, cfg.PubSub.ShardsSubscription, queue.ReceiveSettings{
		MaxMessages: cfg.Shards, MaxBytes: 1 << 20, Grace: cfg.Grace, DeadLetterTopic: cfg.PubSub.ShardsDeadLetter,
	}, func(ctx context.Context, m queue.Message) error {
		sending.Add(1)
		defer sending.Add(-1)
		return sendShard(ctx, p, tr, cfg, m, log, buckets, shards)
	})
	stopHeart()
	// The shards are done or left to another agent: what they handed the
	// uploaders is stored or will be sent again with them.
	_ = local.Close()
	_ = g.Wait()
	<-beating
	return err
}

// sendShard handles one shard message: sent, gone, or refused.
func sendShard(ctx context.Context, p *pool.Agent, tr *tracker, cfg *config.Agent, m queue.Message, log *slog.Logger, hb *heartbeatBuckets,
	shards publisher) error {
	var s message.Shard
	if err := message.Decode(m.Data, &s); err != nil {
		log.Error("shard message dropped", "err", err)
		return queue.Permanent(err)
	}
	if err := s.Check(); err != nil {
		log.Error("shard message dropped", "err", err)
		return queue.Permanent(err)
	}
	hb.saw(s.Bucket)
	log = log.With("transfer_id", s.TransferID, "shard", s.Index, "agent", cfg.ID)
	chunks := tr.shard()
	defer chunks.close()
	d, err := sendWithin(ctx, cfg.ShardTimeout, func(ctx context.Context) (*message.ShardDone, error) {
		return p.Shard(ctx, s, pool.ShardOptions{Agent: cfg.ID, Roots: cfg.SourceRoots, Chunks: chunks})
	})
	var se *producer.SourceError
	switch {
	case err == nil:
		log.Info("shard sent", "files", d.Totals.Files, "bytes", d.Totals.Bytes, "wire_bytes", d.Totals.WireBytes, "ms", d.CompressMS)
		return nil
	case errors.Is(err, pool.ErrShardGone):
		log.Info("shard dropped", "reason", err)
		return nil
	case errors.Is(err, message.ErrMalformed):
		// No agent can send it: its transfer fails with the reason.
		log.Error("shard refused", "err", err)
		if rerr := p.RefuseShard(ctx, s, cfg.ID, err); rerr != nil {
			return rerr
		}
		return queue.Permanent(err)
	case errors.As(err, &se):
		if nerr := p.NoteRefusal(ctx, s, cfg.ID, err); nerr != nil {
			log.Warn("refusal not recorded", "err", nerr)
		}
		if m.DeliveryAttempt < cfg.MaxAttempts {
			log.Warn("this agent cannot send the shard; another may", "attempt", m.DeliveryAttempt, "err", err)
			return err
		}
		// Its deliveries ran out, perhaps all to this agent (one that
		// refuses is always free to take the next): while an agent that
		// answers has not tried the shard, it is published again for it.
		if again, rerr := roundAgain(ctx, p, shards, cfg.ID, s); again {
			log.Warn("this agent cannot send the shard and its deliveries ran out: published again for the agents that have not tried it", "round", s.Round+1, "err", err)
			return nil
		} else if rerr != nil {
			log.Warn("the shard could not be published again", "err", rerr)
		}
		log.Error("no agent could send the shard: its transfer fails", "attempt", m.DeliveryAttempt, "round", s.Round, "err", err)
		return p.RefuseShard(ctx, s, cfg.ID, err)
	}
	log.Warn("shard failed; it is sent again", "attempt", m.DeliveryAttempt, "err", err)
	return err
}

// roundAgain publishes shard s once more, its round counted, when agents
// other than self answer and have not refused it; it reports whether it
// did.
func roundAgain(ctx context.Context, p *pool.Agent, shards publisher, self string, s message.Shard) (bool, error) {
	if s.Round >= message.MaxShardRounds {
		return false, nil
	}
	others, err := p.Untried(ctx, s, self, time.Now())
	if err != nil || len(others) == 0 {
		return false, err
	}
	s.Round++
	if err := shards.Publish(ctx, message.Encode(&s), map[string]string{"transfer_id": s.TransferID}); err != nil {
		return false, err
	}
	return true, nil
}

// publisher sends one message.
type publisher interface {
	Publish(context.Context, []byte, map[string]string) error
}

// heartbeatBuckets are where an agent's heartbeat goes: FERRY_BUCKETS, or,
// where that is empty (the local stack: any bucket), the buckets of the
// shards it was sent, at most 16.
type heartbeatBuckets struct {
	mu      sync.Mutex
	fixed   bool
	buckets []string
	added   func() // a bucket was added: beat now
}

func heartBuckets(allowed []string) *heartbeatBuckets {
	return &heartbeatBuckets{fixed: len(allowed) > 0, buckets: slices.Clone(allowed)}
}

func (b *heartbeatBuckets) saw(bucket string) {
	b.mu.Lock()
	added := !b.fixed && len(b.buckets) < 16 && !slices.Contains(b.buckets, bucket)
	if added {
		b.buckets = append(b.buckets, bucket)
	}
	b.mu.Unlock()
	if added && b.added != nil {
		b.added()
	}
}

func (b *heartbeatBuckets) list() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.buckets)
}

// sendWithin runs send, and gives up on it after timeout even when it does
// not return (a read of a hung share does not end with its context): the
// shard is then nacked and claimed by another agent, and what this one
// writes of it later changes nothing (pages and done objects are written
// only where none is, and a shard's chunks are the same bytes whoever
// sends them).
func sendWithin(ctx context.Context, timeout time.Duration, send func(context.Context) (*message.ShardDone, error)) (*message.ShardDone, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	type result struct {
		d   *message.ShardDone
		err error
	}
	ch := make(chan result, 1)
	go func() {
		defer cancel()
		d, err := send(ctx)
		ch <- result{d, err}
	}()
	select {
	case r := <-ch:
		return r.d, r.err
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("the shard was not sent within FERRY_AGENT_SHARD_TIMEOUT=%s: left to another agent", timeout)
		}
		return nil, ctx.Err()
	}
}

// tracker knows, for each shard being sent, how many of its chunk messages
// the uploaders have not finished with: a shard's page is written only
// once every chunk of it is stored and announced.
type tracker struct {
	pub interface {
		Publish(context.Context, []byte, map[string]string) error
	}
	attempts int

	mu     sync.Mutex
	next   int
	shards map[string]*shardChunks
}

// shardChunks are one shard's chunk messages in flight.
type shardChunks struct {
	t       *tracker
	id      string
	pending int
	err     error
	idle    chan struct{} // closed while nothing is pending
}

func newTracker(pub interface {
	Publish(context.Context, []byte, map[string]string) error
}, attempts int) *tracker {
	return &tracker{pub: pub, attempts: attempts, shards: map[string]*shardChunks{}}
}

// shardAttr is the chunk message attribute naming its shard in the tracker.
const shardAttr = "ferry_shard"

func (t *tracker) shard() *shardChunks {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.next++
	s := &shardChunks{t: t, id: strconv.Itoa(t.next), idle: make(chan struct{})}
	close(s.idle)
	t.shards[s.id] = s
	return s
}

// Publish hands a chunk message of the shard to the uploaders.
func (s *shardChunks) Publish(ctx context.Context, data []byte, attrs map[string]string) error {
	a := maps.Clone(attrs)
	if a == nil {
		a = map[string]string{}
	}
	a[shardAttr] = s.id
	s.t.mu.Lock()
	if s.pending == 0 {
		s.idle = make(chan struct{})
	}
	s.pending++
	s.t.mu.Unlock()
	if err := s.t.pub.Publish(ctx, data, a); err != nil {
		s.finish(err)
		return err
	}
	return nil
}

// finish notes one chunk message done with, err its failure.
func (s *shardChunks) finish(err error) {
	s.t.mu.Lock()
	defer s.t.mu.Unlock()
	if err != nil && s.err == nil {
		s.err = err
	}
	if s.pending--; s.pending == 0 {
		close(s.idle)
	}
}

// Wait returns once every chunk message published is stored and
// announced, or with the first failure.
func (s *shardChunks) Wait(ctx context.Context) error {
	s.t.mu.Lock()
	idle := s.idle
	s.t.mu.Unlock()
	select {
	case <-idle:
	case <-ctx.Done():
		return ctx.Err()
	}
	s.t.mu.Lock()
	defer s.t.mu.Unlock()
	return s.err
}

func (s *shardChunks) close() {
	s.t.mu.Lock()
	defer s.t.mu.Unlock()
	delete(s.t.shards, s.id)
}

// handle wraps the uploaders' handler: a message acked, failed for good, or
// on its last delivery is done with for its shard.
func (t *tracker) handle(h queue.Handler) queue.Handler {
	return func(ctx context.Context, m queue.Message) error {
		err := h(ctx, m)
		final := err == nil || errors.Is(err, queue.ErrPermanent) || (m.DeliveryAttempt >= t.attempts && t.attempts > 0)
		if !final {
			return err
		}
		t.mu.Lock()
		s := t.shards[m.Attributes[shardAttr]]
		t.mu.Unlock()
		if s != nil {
			if err != nil {
				err = fmt.Errorf("a chunk message failed on delivery %d: %w", m.DeliveryAttempt, err)
			}
			s.finish(err)
		}
		return err
	}
}
