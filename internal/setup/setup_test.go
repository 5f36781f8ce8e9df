package setup

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/pstest"

	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/localstack"
	"github.com/ferry-dev/ferry/internal/queue"
	"github.com/ferry-dev/ferry/internal/teststack"
)

// TestConnectNamesTheUnreachableBackend: a command run against a stack that
// is not there fails, within the probes' deadline, with an error naming the
// variable that chose the endpoint, instead of hanging.
func TestConnectNamesTheUnreachableBackend(t *testing.T) {
	ps := pstest.NewServer()
	defer func() { _ = ps.Close() }()
	fake, err := localstack.StartGCS(0)
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Stop()
	for _, tc := range []struct{ gcs, pubsub, want string }{
		{"127.0.0.1:1", ps.Addr, "STORAGE_EMULATOR_HOST=127.0.0.1:1"},
		{fake.Host, "127.0.0.1:1", "PUBSUB_EMULATOR_HOST=127.0.0.1:1"},
		{fake.Host, ps.Addr, ""},
	} {
		t.Setenv("STORAGE_EMULATOR_HOST", tc.gcs)
		t.Setenv("PUBSUB_EMULATOR_HOST", tc.pubsub)
		c, err := Connect(context.Background(), "ferry-test", config.Emulators{GCS: tc.gcs, PubSub: tc.pubsub}, nil)
		if tc.want == "" {
			if err != nil {
				t.Fatalf("both backends up: %v", err)
			}
			c.Close()
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("Connect with %s: %v; want an error naming it", tc.want, err)
		}
		t.Log(err)
	}
}

// TestServiceRidesOutOutages: a service started by Start keeps receiving
// through a Pub/Sub outage and a GCS outage: /readyz answers 503 naming the
// backend while it is gone, Receive does not return, and messages published
// after the backend is back are handled.
func TestServiceRidesOutOutages(t *testing.T) {
	ps := pstest.NewServer()
	defer func() { _ = ps.Close() }()
	// The service reaches Pub/Sub through a link the test can cut: the
	// server keeps its topics, subscriptions and messages while it is away,
	// as Pub/Sub does through a network outage.
	link := newLink(t, ps.Addr)
	psHost := link.addr
	fake, err := localstack.StartGCS(0)
	if err != nil {
		t.Fatal(err)
	}
	fake.CreateBucket("b")
	t.Setenv("PUBSUB_EMULATOR_HOST", psHost)
	t.Setenv("STORAGE_EMULATOR_HOST", fake.Host)
	t.Setenv("FERRY_PROJECT", "ferry-test")
	t.Setenv("FERRY_HTTP_ADDR", "127.0.0.1:0")
	t.Setenv("FERRY_LOG_LEVEL", "error")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var cfg config.Worker
	svc, err := Start(ctx, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	provision := func() {
		t.Helper()
		if err := svc.Queue.EnsureTopic(ctx, "t"); err != nil {
			t.Fatal(err)
		}
		if err := svc.Queue.EnsureSubscription(ctx, queue.Subscription{ID: "s", Topic: "t", AckDeadline: 10 * time.Second}); err != nil {
			t.Fatal(err)
		}
	}
	provision()
	var mu sync.Mutex
	handled := map[string]bool{}
	done := make(chan error, 1)
	svc.Health.SetReady(true)
	go func() {
		done <- svc.Queue.Receive(ctx, "s", queue.ReceiveSettings{MaxMessages: 2, Mode: queue.ModeUnary}, func(ctx context.Context, m queue.Message) error {
			// As a worker does: the message's work needs GCS.
			if _, err := svc.Store.Attrs(ctx, "b", "x"); err != nil && !errors.Is(err, gcs.ErrNotFound) {
				return err
			}
			mu.Lock()
			handled[string(m.Data)] = true
			mu.Unlock()
			return nil
		})
	}()
	isHandled := func(s string) func() bool {
		return func() bool { mu.Lock(); defer mu.Unlock(); return handled[s] }
	}
	publish := func(s string) {
		t.Helper()
		if err := svc.Queue.Publisher("t").Publish(ctx, []byte(s), nil); err != nil {
			t.Fatal(err)
		}
	}
	readyz := func() (int, string) {
		rec := httptest.NewRecorder()
		svc.Health.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		return rec.Code, rec.Body.String()
	}
	returned := func() bool {
		select {
		case err := <-done:
			t.Fatalf("Receive returned during an outage: %v", err)
		default:
		}
		return false
	}

	publish("before")
	teststack.Until(t, 2*time.Minute, "the first message", isHandled("before"))
	if code, body := readyz(); code != 200 {
		t.Fatalf("/readyz %d %q with both backends up", code, body)
	}

	// Pub/Sub goes away, and comes back on the same address.
	link.cut()
	teststack.Until(t, 2*time.Minute, "/readyz to name Pub/Sub", func() bool {
		code, body := readyz()
		return code == 503 && strings.Contains(body, "pubsub unreachable") && strings.Contains(body, "PUBSUB_EMULATOR_HOST="+psHost)
	})
	returned()
	link.restore()
	publish("after pubsub")
	teststack.Until(t, 2*time.Minute, "a message after Pub/Sub came back", isHandled("after pubsub"))
	teststack.Until(t, 2*time.Minute, "/readyz 200 again", func() bool { code, _ := readyz(); return code == 200 })

	// GCS goes away: the handler fails, /readyz names GCS; it comes back on
	// the same port.
	port, _ := strconv.ParseUint(fake.Host[strings.LastIndex(fake.Host, ":")+1:], 10, 16)
	fake.Stop()
	publish("during gcs")
	teststack.Until(t, 2*time.Minute, "/readyz to name GCS", func() bool {
		code, body := readyz()
		return code == 503 && strings.Contains(body, "gcs unreachable") && strings.Contains(body, "STORAGE_EMULATOR_HOST="+fake.Host)
	})
	returned()
	again, err := localstack.StartGCS(uint16(port))
	if err != nil {
		t.Fatal(err)
	}
	defer again.Stop()
	again.CreateBucket("b")
	teststack.Until(t, 2*time.Minute, "the message held during the GCS outage", isHandled("during gcs"))
	teststack.Until(t, 2*time.Minute, "/readyz 200 again", func() bool { code, _ := readyz(); return code == 200 })
	returned()
}

// link is a TCP proxy on loopback to target that the test can cut (close
// its listener and every connection) and restore on the same address.
type link struct {
	t      *testing.T
	addr   string
	target string
	mu     sync.Mutex
	ln     net.Listener
	conns  []net.Conn
}

func newLink(t *testing.T, target string) *link {
	l := &link{t: t, target: target}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l.addr = ln.Addr().String()
	l.serve(ln)
	t.Cleanup(l.cut)
	return l
}

func (l *link) serve(ln net.Listener) {
	l.mu.Lock()
	l.ln = ln
	l.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", l.target)
			if err != nil {
				_ = c.Close()
				continue
			}
			l.mu.Lock()
			l.conns = append(l.conns, c, up)
			l.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); _ = up.Close() }()
			go func() { _, _ = io.Copy(c, up); _ = c.Close() }()
		}
	}()
}

// cut closes the listener and every connection through the link.
func (l *link) cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ln != nil {
		_ = l.ln.Close()
		l.ln = nil
	}
	for _, c := range l.conns {
		_ = c.Close()
	}
	l.conns = nil
}

// restore listens on the link's address again.
func (l *link) restore() {
	ln, err := net.Listen("tcp", l.addr)
	if err != nil {
		l.t.Fatalf("restore the link on %s: %v", l.addr, err)
	}
	l.serve(ln)
}

// TestConnectUsesTheConfiguredEmulators: hosts that came from
// configuration (an env file, say), not from the process environment, are
// the ones the clients talk to.
func TestConnectUsesTheConfiguredEmulators(t *testing.T) {
	for _, k := range []string{"PUBSUB_EMULATOR_HOST", "STORAGE_EMULATOR_HOST"} {
		t.Setenv(k, "") // restored after the test
		_ = os.Unsetenv(k)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	gcs, err := localstack.StartGCS(0)
	if err != nil {
		t.Fatal(err)
	}
	defer gcs.Stop()
	gcs.CreateBucket("setup-test")
	ps, err := localstack.StartPubSub(ctx, localstack.PubSubOptions{Kind: "pstest"})
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Stop()

	c, err := Connect(ctx, "ferry-test", config.Emulators{PubSub: ps.Host, GCS: gcs.Host}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Store.BucketExists(ctx, "setup-test"); err != nil {
		t.Fatalf("the store does not reach the configured fake-gcs-server: %v", err)
	}
	if err := c.Queue.EnsureTopic(ctx, "setup-test"); err != nil {
		t.Fatalf("the queue does not reach the configured emulator: %v", err)
	}
	if err := c.Queue.EnsureSubscription(ctx, queue.Subscription{ID: "setup-test-sub", Topic: "setup-test", AckDeadline: 10 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if os.Getenv("PUBSUB_EMULATOR_HOST") != "" || os.Getenv("STORAGE_EMULATOR_HOST") != "" {
		t.Fatal("Connect changed the process environment")
	}
}
