// Package queue is the only part of ferry that imports the Pub/Sub client. It
// publishes messages and runs plain handler functions on received ones,
// mapping a handler's result onto Pub/Sub:
//
//   - nil: Ack.
//   - an error wrapping ErrPermanent: the message can never succeed; it is
//     logged and acked (a Nack would loop). The handler has already recorded
//     the failure where users see it.
//   - any other error: Nack, so Pub/Sub redelivers with backoff and finally
//     moves the message to the subscription's dead-letter topic.
//
// Every call it makes has a deadline, and an unreachable Pub/Sub gives an
// error naming the endpoint and what chose it (PUBSUB_EMULATOR_HOST=…, or
// Google Cloud Pub/Sub); Receive rides out an outage with backoff instead of
// returning. The client library honours PUBSUB_EMULATOR_HOST, so the same
// code runs against the emulator and Google Cloud. The conformance suite in
// queuetest holds what this package promises, on every backend.
package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/reach"
)

// Message is a received message, free of the client library's types.
type Message struct {
	ID         string
	Data       []byte
	Attributes map[string]string
	// DeliveryAttempt counts deliveries when the subscription has a
	// dead-letter policy; 0 when unknown.
	DeliveryAttempt int
}

// Handler processes one message. It must be idempotent: Pub/Sub delivers at
// least once.
type Handler func(ctx context.Context, m Message) error

// Middleware wraps a Handler.
type Middleware func(Handler) Handler

// ErrPermanent marks an error that retrying cannot fix.
var ErrPermanent = errors.New("permanent error")

// ErrUnreachable marks an error of a call that got no answer from Pub/Sub:
// refused, reset, or no answer within the call's deadline. It is
// reach.ErrUnreachable, GCS's too.
var ErrUnreachable = reach.ErrUnreachable

// Permanent wraps err so that errors.Is(err, ErrPermanent) holds.
func Permanent(err error) error {
	if err == nil || errors.Is(err, ErrPermanent) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrPermanent, err)
}

// Deadlines of the calls this package makes. A call that gets no answer
// within its deadline fails with an error naming the endpoint.
const (
	// callTimeout bounds calls that carry no payload: acks, lease
	// extensions, admin calls, a Pull answered at once.
	callTimeout = 10 * time.Second
	// publishFloor and publishRate bound a Publish: the floor, plus the
	// message's bytes at a rate any working link beats.
	publishFloor = 10 * time.Second
	publishRate  = 1 << 20 // bytes per second
	// diagnoseTimeout bounds the probe that tells, after a publish timed
	// out, whether Pub/Sub refused the message or did not answer at all.
	diagnoseTimeout = 3 * time.Second
)

// Client publishes and receives. It is safe for concurrent use.
type Client struct {
	log *slog.Logger
	// endpoint names where this client connects and what chose it, for
	// errors: "PUBSUB_EMULATOR_HOST=127.0.0.1:8085" or "Google Cloud Pub/Sub (pubsub.googleapis.com:443)".
	endpoint string
	health   func(error)
	hold     func(context.Context) error
	// d carries the messages: Pub/Sub (Dial) or the in-process Memory
	// (Memory.Client).
	d driver
}

// driver is the transport under a Client: Google Cloud Pub/Sub or its
// emulator (pubsubDriver), or the in-process Memory (memDriver). The Client
// around it keeps what every transport shares: what a handler's result
// means (run), holds, health, and the endpoint errors name. Each driver
// passes the conformance suite (queuetest) on its own.
type driver interface {
	project() string
	probe(ctx context.Context, d time.Duration) error
	ensureTopic(ctx context.Context, id string) error
	deleteTopic(ctx context.Context, id string) error
	ensureSubscription(ctx context.Context, s Subscription) error
	deleteSubscription(ctx context.Context, id string) error
	topicKMSKey(ctx context.Context, id string) (string, error)
	describeSubscription(ctx context.Context, id string) (SubscriptionInfo, error)
	testTopicPermissions(ctx context.Context, id string, perms []string) ([]string, error)
	publish(ctx context.Context, topic string, data []byte, attrs map[string]string) error
	// receive is Receive once the handlers' context (hctx, which
	// outlives ctx by the grace period) is made.
	receive(ctx, hctx context.Context, subscription string, s ReceiveSettings, h Handler) error
	close() error
}

// pubsubDriver is Google Cloud Pub/Sub, or its emulator, through the
// client library.
type pubsubDriver struct {
	c  *Client
	ps *pubsub.Client
	// emulator: the Java emulator keeps a cancelled long-polling Pull
	// alive and leases the next messages to it, so that a stopped process
	// holds them for a whole ack deadline (seen: 20 s stalls after a worker
	// stopped). Against it, Pull returns at once instead; Pub/Sub itself
	// deprecates that flag, so it is used only there. Receive also pulls
	// with unary Pull there (ModeAuto), streaming pull against Google Cloud.
	emulator bool

	mu   sync.Mutex
	pubs map[string]*pubsub.Publisher
}

// Option configures a Client.
type Option func(*options)

type options struct {
	emulator string
	health   func(error)
	hold     func(context.Context) error
}

// WithEmulator connects to the emulator at host:port, as
// PUBSUB_EMULATOR_HOST does (tests use it to reach two emulators at once).
func WithEmulator(host string) Option { return func(o *options) { o.emulator = host } }

// WithHealth makes the client report whether Pub/Sub answers: fn(nil) after
// a call that got an answer, fn(err) after one that did not (or that Pub/Sub
// refused, such as a Pull from a missing subscription). fn must be cheap and
// safe for concurrent use; services feed it to /readyz.
func WithHealth(fn func(err error)) Option { return func(o *options) { o.health = fn } }

// WithHold makes every Receive of this client pull only while hold returns
// nil: a worker that cannot reach GCS stops taking messages it could not
// upload, instead of burning their delivery attempts. hold is called before
// each Pull and must be cheap when all is well (gcs.Store.Reachable is).
func WithHold(hold func(ctx context.Context) error) Option {
	return func(o *options) { o.hold = hold }
}

// Dial connects to Pub/Sub for project. It makes no call: an unreachable
// Pub/Sub shows up on the first call (see Probe).
func Dial(ctx context.Context, project string, log *slog.Logger, opts ...Option) (*Client, error) {
	var o options
	for _, f := range opts {
		f(&o)
	}
	c := &Client{log: logging.OrDiscard(log), health: o.health, hold: o.hold}
	d := &pubsubDriver{c: c, pubs: map[string]*pubsub.Publisher{}}
	var copts []option.ClientOption
	switch env := os.Getenv("PUBSUB_EMULATOR_HOST"); {
	case o.emulator != "":
		d.emulator, c.endpoint = true, "Pub/Sub emulator at "+o.emulator
		copts = []option.ClientOption{option.WithEndpoint(o.emulator), option.WithoutAuthentication(),
			option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())), option.WithTelemetryDisabled()}
	case env != "":
		d.emulator, c.endpoint = true, "PUBSUB_EMULATOR_HOST="+env
	default:
		c.endpoint = "Google Cloud Pub/Sub (pubsub.googleapis.com:443)"
	}
	ps, err := pubsub.NewClient(ctx, project, copts...)
	if err != nil {
		return nil, fmt.Errorf("pubsub client for project %s at %s: %w", project, c.endpoint, err)
	}
	d.ps, c.d = ps, d
	return c, nil
}

// Endpoint names where the client connects and what chose it.
func (c *Client) Endpoint() string { return c.endpoint }

// Close flushes every publisher, then closes the connection. Every Publish
// has returned by then (stored, or failed at its deadline), so flushing only
// ends the library's retries of messages whose Publish gave up: it is given
// callTimeout, not the library's PublishSettings.Timeout.
func (c *Client) Close() error { return c.d.close() }

func (d *pubsubDriver) close() error {
	d.mu.Lock()
	pubs := d.pubs
	d.pubs = map[string]*pubsub.Publisher{}
	d.mu.Unlock()
	stopped := make(chan struct{})
	go func() {
		for _, p := range pubs {
			p.Stop()
		}
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(callTimeout):
		d.c.log.Warn("publishers still retrying at close; dropping what Publish already gave up on", "endpoint", d.c.endpoint)
	}
	return d.ps.Close()
}

// PublishSettings are the batching settings of every publisher made after
// they are set; benchmarks compare others (see BenchmarkPublish).
var PublishSettings = struct {
	DelayThreshold time.Duration
	CountThreshold int
}{DelayThreshold: time.Millisecond, CountThreshold: 100}

// Publisher publishes to one topic.
type Publisher struct {
	c     *Client
	topic string
}

// Publisher returns the publisher of topic (an id in the client's project).
//
// Messages published at once travel in one request: the client waits up to
// 1 ms (or 100 messages) for a batch. ferry's publishers wait for each
// message to be stored, from a handful of goroutines, so a longer wait costs
// more than batching gains: on the Java emulator 16 publishers sent 2,400
// messages/s with 1 ms and 1,350 with 5 ms; only 256 publishers at once gain
// from 5 ms (BenchmarkPublish).
func (c *Client) Publisher(topic string) *Publisher { return &Publisher{c: c, topic: topic} }

// publisher is the library's publisher of topic, made once.
func (d *pubsubDriver) publisher(topic string) *pubsub.Publisher {
	d.mu.Lock()
	defer d.mu.Unlock()
	p, ok := d.pubs[topic]
	if !ok {
		p = d.ps.Publisher(topic)
		p.PublishSettings.DelayThreshold = PublishSettings.DelayThreshold
		p.PublishSettings.CountThreshold = PublishSettings.CountThreshold
		// The library retries a batch until this, also after Publish gave
		// up (publishTimeout); Close waits for it.
		p.PublishSettings.Timeout = publishTimeout(pubsub.MaxPublishRequestBytes)
		d.pubs[topic] = p
	}
	return p
}

// publishTimeout bounds one Publish of n bytes.
func publishTimeout(n int) time.Duration {
	return publishFloor + time.Duration(n)*time.Second/publishRate
}

// Publish sends one message and returns once Pub/Sub has stored it, or
// fails within publishTimeout with an error naming the endpoint. It is safe
// for concurrent use; the client library retries transient errors.
func (p *Publisher) Publish(ctx context.Context, data []byte, attrs map[string]string) error {
	return p.c.d.publish(ctx, p.topic, data, attrs)
}

func (d *pubsubDriver) publish(ctx context.Context, topic string, data []byte, attrs map[string]string) error {
	c := d.c
	t := publishTimeout(len(data))
	pctx, cancel := context.WithTimeoutCause(ctx, t, fmt.Errorf("not stored within %v", t))
	defer cancel()
	_, err := d.publisher(topic).Publish(pctx, &pubsub.Message{Data: data, Attributes: attrs}).Get(pctx)
	if err == nil {
		c.report(nil)
		return nil
	}
	op := fmt.Sprintf("publish %d bytes to %s", len(data), topic)
	if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		// The library retries what Pub/Sub refuses as well as what it
		// cannot reach, and does not say which: ask.
		if perr := d.probe(ctx, diagnoseTimeout); perr == nil {
			return fmt.Errorf("%s at %s: %w (Pub/Sub answers, but refused the message until then; is it over the backend's size limit?)", op, c.endpoint, context.Cause(pctx))
		}
	}
	return c.fail(pctx, op, err)
}

// withTimeout is ctx bounded by d, with a cause that says so.
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, d, fmt.Errorf("no answer within %v", d))
}

// fail wraps the error of call op: a call that got no answer says so and
// names the endpoint, and is reported to the health function. ctx is the
// call's own context (its cause says which deadline passed).
func (c *Client) fail(ctx context.Context, op string, err error) error {
	if unreachable(ctx, err) {
		err = reach.Wrap(ctx, op, c.endpoint, err)
		c.report(err)
		return err
	}
	if ctx.Err() == nil {
		c.report(nil) // an answer, if not the one hoped for
	} // else the caller gave up: that says nothing about Pub/Sub
	return fmt.Errorf("%s at %s: %w", op, c.endpoint, err)
}

// unreachable reports whether err means that Pub/Sub did not answer, as
// opposed to answering with an error. A ctx cancelled by the caller is
// neither: it is reported as it is.
func unreachable(ctx context.Context, err error) bool {
	if errors.Is(ctx.Err(), context.Canceled) {
		return false
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return errors.Is(err, context.DeadlineExceeded)
}

// report passes what a call found to the health function.
func (c *Client) report(err error) {
	if c.health != nil {
		c.health(err)
	}
}
