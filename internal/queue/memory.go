package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferry-dev/ferry/internal/logging"
)

// Memory is ferry's in-process transport: topics and subscriptions in one
// process's memory, for `ferry cp`, which runs the producer, the workers
// and the merger in one process. A Client of it (Memory.Client) is the same
// *Client the services use with Pub/Sub, over a driver of its own
// (memDriver) instead of the Pub/Sub one: Publish, Receive and the admin
// calls keep their meaning, and Receive runs handlers through the same
// code (run: ack, nack, permanent errors copied to the dead-letter topic),
// so the services cannot tell which transport carries their messages. It
// passes the conformance suite (queuetest) as the emulators do.
//
// Where it differs from Pub/Sub, on purpose:
//   - a message is never copied: a subscriber gets the publisher's bytes,
//     so a publisher must not change them after Publish (ferry's never do);
//   - Publish waits while a subscription of the topic holds more than
//     MemoryOptions.Backlog bytes not yet taken (Pub/Sub would store them),
//     so that what waits for the workers stays within the process's
//     memory budget; a subscription that holds nothing takes any message;
//   - leases never expire while the process lives: a running handler keeps
//     its message, and a Client's Close gives its messages back at once
//     (the process of a Pub/Sub receiver that died loses them when their
//     lease ends);
//   - nothing outlives the process: on a crash, messages are lost with it.
//     ferry keeps in GCS everything it needs to finish or clean up a
//     transfer, so `ferry cp` run again picks up from there.
type Memory struct {
	o       MemoryOptions
	mu      sync.Mutex
	topics  map[string]map[string]*memSub // topic → its subscriptions
	subs    map[string]*memSub
	seq     atomic.Int64 // message ids
	clients atomic.Int64 // client ids, owners of leases
}

// MemoryOptions bound a Memory.
type MemoryOptions struct {
	// MaxMessage is the largest message, data and attributes (default
	// 10 MB, as Pub/Sub).
	MaxMessage int
	// Backlog bounds the bytes a subscription holds that no receiver has
	// taken yet; Publish waits for room. 0: no bound.
	Backlog int64
	// Release, when set, is handed a message's data once every
	// subscription of its topic has acked it: nobody reads it again, and
	// its publisher's buffer may be reused (iobuf.Put). A message that
	// went to a dead-letter topic is never released.
	Release func(topic string, data []byte)
}

// NewMemory returns an empty in-process transport.
func NewMemory(o MemoryOptions) *Memory {
	if o.MaxMessage <= 0 {
		o.MaxMessage = 10_000_000
	}
	return &Memory{o: o, topics: map[string]map[string]*memSub{}, subs: map[string]*memSub{}}
}

// memEndpoint names the in-process transport in errors.
const memEndpoint = "the in-process queue"

// Client returns a new client of m: what Dial returns for Pub/Sub.
func (m *Memory) Client(log *slog.Logger, opts ...Option) *Client {
	var o options
	for _, f := range opts {
		f(&o)
	}
	c := &Client{log: logging.OrDiscard(log), endpoint: memEndpoint, health: o.health, hold: o.hold}
	c.d = &memDriver{m: m, c: c, owner: m.clients.Add(1)}
	return c
}

// memDriver is one Client's view of a Memory: its leases carry owner, and
// once closed it takes no more.
type memDriver struct {
	m      *Memory
	c      *Client
	owner  int64
	closed bool // guarded by m.mu
}

func (d *memDriver) project() string                            { return "in-process" }
func (d *memDriver) probe(context.Context, time.Duration) error { return nil }

func (d *memDriver) ensureTopic(_ context.Context, id string) error {
	d.m.ensureTopic(id)
	return nil
}

func (d *memDriver) deleteTopic(_ context.Context, id string) error {
	d.m.deleteTopic(id)
	return nil
}

func (d *memDriver) ensureSubscription(_ context.Context, s Subscription) error {
	return d.m.ensureSubscription(s)
}

func (d *memDriver) deleteSubscription(_ context.Context, id string) error {
	d.m.deleteSubscription(id)
	return nil
}

func (d *memDriver) topicKMSKey(_ context.Context, id string) (string, error) {
	return "", fmt.Errorf("get topic %s: %w", id, errNoSettings)
}

func (d *memDriver) describeSubscription(_ context.Context, id string) (SubscriptionInfo, error) {
	return SubscriptionInfo{}, fmt.Errorf("get subscription %s: %w", id, errNoSettings)
}

func (d *memDriver) testTopicPermissions(_ context.Context, id string, _ []string) ([]string, error) {
	return nil, fmt.Errorf("test permissions on topic %s: %w", id, errNoSettings)
}

func (d *memDriver) publish(ctx context.Context, topic string, data []byte, attrs map[string]string) error {
	return d.m.publish(ctx, topic, data, attrs)
}

func (d *memDriver) close() error {
	d.m.close(d)
	return nil
}

// memSub is one subscription: the messages ready for a receiver, those
// waiting out a nack's backoff, and those leased to a running handler.
type memSub struct {
	Subscription
	ready    []*memMsg
	waiting  int64              // bytes ready or backing off: the backlog
	leased   map[int64]memLease // by lease token
	tokens   int64
	notify   chan struct{} // closed when a message becomes ready
	room     chan struct{} // closed when the backlog shrinks
	detached bool          // deleted: receivers stop
}

type memMsg struct {
	Message
	size  int64
	topic string
	refs  *atomic.Int32 // subscriptions that have not acked it yet
}

type memLease struct {
	msg   *memMsg
	owner int64
}

func newMemSub(s Subscription) *memSub {
	return &memSub{Subscription: s, leased: map[int64]memLease{}, notify: make(chan struct{}), room: make(chan struct{})}
}

// wake tells waiting receivers that a message is ready.
func (s *memSub) wake() {
	close(s.notify)
	s.notify = make(chan struct{})
}

// freed tells waiting publishers that the backlog shrank.
func (s *memSub) freed() {
	close(s.room)
	s.room = make(chan struct{})
}

func (s *memSub) push(m *memMsg) {
	s.ready = append(s.ready, m)
	s.waiting += m.size
	s.wake()
}

func (m *Memory) ensureTopic(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.topics[id] == nil {
		m.topics[id] = map[string]*memSub{}
	}
}

func (m *Memory) deleteTopic(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.topics, id)
}

func (m *Memory) ensureSubscription(s Subscription) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.subs[s.ID]; ok {
		return nil
	}
	t, ok := m.topics[s.Topic]
	if !ok {
		return fmt.Errorf("create subscription %s on %s at %s: %w: topic %s", s.ID, s.Topic, memEndpoint, ErrNotFound, s.Topic)
	}
	sub := newMemSub(s)
	m.subs[s.ID] = sub
	t[s.ID] = sub
	return nil
}

func (m *Memory) deleteSubscription(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	sub, ok := m.subs[id]
	if !ok {
		return
	}
	delete(m.subs, id)
	if t := m.topics[sub.Topic]; t != nil {
		delete(t, id)
	}
	sub.detached = true
	sub.wake()
	sub.freed()
}

// publish delivers a message to every subscription of topic, once each has
// room under the backlog bound.
func (m *Memory) publish(ctx context.Context, topic string, data []byte, attrs map[string]string) error {
	size := len(data)
	for k, v := range attrs {
		size += len(k) + len(v)
	}
	op := fmt.Sprintf("publish %d bytes to %s at %s", len(data), topic, memEndpoint)
	if size > m.o.MaxMessage {
		return fmt.Errorf("%s: message of %d bytes over the %d-byte limit", op, size, m.o.MaxMessage)
	}
	m.mu.Lock()
	for {
		subs, ok := m.topics[topic]
		if !ok {
			m.mu.Unlock()
			return fmt.Errorf("%s: %w: topic %s", op, ErrNotFound, topic)
		}
		var full *memSub
		for _, s := range subs {
			if m.o.Backlog > 0 && s.waiting > 0 && s.waiting+int64(size) > m.o.Backlog {
				full = s
				break
			}
		}
		if full == nil {
			id := strconv.FormatInt(m.seq.Add(1), 10)
			refs := new(atomic.Int32)
			refs.Store(int32(len(subs)))
			for _, s := range subs {
				a := make(map[string]string, len(attrs))
				for k, v := range attrs {
					a[k] = v
				}
				s.push(&memMsg{Message: Message{ID: id, Data: data, Attributes: a}, size: int64(size), topic: topic, refs: refs})
			}
			m.mu.Unlock()
			return nil
		}
		room := full.room
		m.mu.Unlock()
		select {
		case <-room:
		case <-ctx.Done():
			return fmt.Errorf("%s: waited for room in subscription %s (%d bytes held): %w", op, full.ID, full.waiting, context.Cause(ctx))
		}
		m.mu.Lock()
	}
}

// errMemClosed ends the Receive of a client that was closed.
var errMemClosed = errors.New("client closed")

// take leases the next ready message of subscription to owner, waiting for
// one until ctx ends.
func (m *Memory) take(ctx context.Context, d *memDriver, subscription string) (Message, int64, error) {
	m.mu.Lock()
	for {
		if d.closed {
			m.mu.Unlock()
			return Message{}, 0, errMemClosed
		}
		s, ok := m.subs[subscription]
		if !ok {
			m.mu.Unlock()
			return Message{}, 0, fmt.Errorf("pull from %s at %s: %w: subscription %s", subscription, memEndpoint, ErrNotFound, subscription)
		}
		if len(s.ready) > 0 {
			msg := s.ready[0]
			s.ready[0] = nil
			s.ready = s.ready[1:]
			s.waiting -= msg.size
			s.freed()
			msg.DeliveryAttempt++
			s.tokens++
			s.leased[s.tokens] = memLease{msg: msg, owner: d.owner}
			out := msg.Message
			m.mu.Unlock()
			return out, s.tokens, nil
		}
		notify := s.notify
		m.mu.Unlock()
		select {
		case <-notify:
		case <-ctx.Done():
			return Message{}, 0, ctx.Err()
		}
		m.mu.Lock()
	}
}

// settle acks or nacks the message of lease token. A lease taken back (its
// client closed) is gone: its ack is too late, as on Pub/Sub.
func (m *Memory) settle(subscription string, token int64, ack bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.subs[subscription]
	if !ok {
		return
	}
	l, ok := s.leased[token]
	if !ok {
		return
	}
	delete(s.leased, token)
	if !ack {
		m.redeliver(s, l.msg, true)
		return
	}
	if msg := l.msg; msg.refs != nil && msg.refs.Add(-1) == 0 && m.o.Release != nil {
		m.o.Release(msg.topic, msg.Data)
	}
}

// redeliver gives a message that was not acked back to its subscription:
// after the subscription's backoff when nacked (now when its receiver
// went away), or to the dead-letter topic once it has had MaxAttempts
// deliveries. m.mu is held.
func (m *Memory) redeliver(s *memSub, msg *memMsg, backoff bool) {
	if s.DeadLetterTopic != "" && s.MaxAttempts > 0 && msg.DeliveryAttempt >= s.MaxAttempts {
		if subs, ok := m.topics[s.DeadLetterTopic]; ok {
			for _, d := range subs {
				// No refs: its data is never released, whoever acks.
				d.push(&memMsg{Message: Message{ID: msg.ID, Data: msg.Data, Attributes: msg.Attributes}, size: msg.size, topic: s.DeadLetterTopic})
			}
		}
		return
	}
	if !backoff {
		s.push(msg)
		return
	}
	s.waiting += msg.size // still the subscription's backlog
	time.AfterFunc(memBackoff(s.MinBackoff, msg.DeliveryAttempt), func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		s.waiting -= msg.size
		if !s.detached {
			s.push(msg)
		}
	})
}

// memBackoff is the wait before a nacked message comes again: Pub/Sub's
// retry policy, the minimum (1 s unless set) doubling with each delivery
// up to 60 s.
func memBackoff(minimum time.Duration, attempt int) time.Duration {
	if minimum <= 0 {
		minimum = time.Second
	}
	d := minimum
	for i := 1; i < attempt && d < time.Minute; i++ {
		d *= 2
	}
	return min(d, time.Minute)
}

// close takes back every lease of client d and gives its messages back at
// once; d takes no more.
func (m *Memory) close(d *memDriver) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d.closed = true
	for _, s := range m.subs {
		for token, l := range s.leased {
			if l.owner == d.owner {
				delete(s.leased, token)
				m.redeliver(s, l.msg, false)
			}
		}
		s.wake() // its receivers see it closed
	}
}

// receive is Receive on the in-process transport: at most MaxMessages
// handlers and MaxBytes of their messages at once, each message acked or
// nacked by run.
func (d *memDriver) receive(ctx, hctx context.Context, subscription string, s ReceiveSettings, h Handler) error {
	c := d.c
	slots := make(chan struct{}, max(1, s.MaxMessages))
	var held atomic.Int64
	room := make(chan struct{}, 1)
	var running sync.WaitGroup
	defer running.Wait() // bounded: handlers' context ends Grace after ctx
	for {
		if !c.waitHold(ctx, subscription) {
			return nil
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		for s.MaxBytes > 0 && held.Load() >= int64(s.MaxBytes) {
			select {
			case <-room:
			case <-ctx.Done():
				<-slots
				return nil
			}
		}
		m, token, err := d.m.take(ctx, d, subscription)
		if err != nil {
			<-slots
			if ctx.Err() != nil || errors.Is(err, errMemClosed) {
				return nil
			}
			return err
		}
		size := int64(len(m.Data))
		held.Add(size)
		running.Add(1)
		go func() {
			defer running.Done()
			defer func() {
				held.Add(-size)
				<-slots
				select {
				case room <- struct{}{}:
				default:
				}
			}()
			d.m.settle(subscription, token, c.run(hctx, subscription, s, m, h))
		}()
	}
}
