// Package setup is what every ferry binary does before its real work: handle
// --help, catch SIGINT and SIGTERM, and connect to GCS and Pub/Sub. It keeps
// the mains thin and alike.
package setup

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/metrics"
	"github.com/ferry-dev/ferry/internal/queue"
	"golang.org/x/sync/errgroup"
)

// Main runs a service that takes no arguments: any argument prints about and
// the environment variables of cfg (exit 0 for --help, 2 otherwise); run gets
// a context cancelled by SIGINT or SIGTERM, and its error exits 1.
func Main(name, about string, cfg any, run func(ctx context.Context) error) {
	if len(os.Args) > 1 {
		fmt.Fprint(os.Stderr, about+config.Usage(cfg))
		if os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
			return
		}
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}

// serviceConfig is a service's configuration: it checks itself and has the
// shared parts.
type serviceConfig interface {
	Validate() error
	Shared() (config.PubSub, config.Log, config.HTTP)
}

// Service is what a long-running service starts with: its configuration
// loaded, a logger, clients, and /metrics, /healthz and /readyz served.
type Service struct {
	*Clients
	Log    *slog.Logger
	Health *metrics.Health
}

// Start loads cfg from the environment (and FERRY_ENV_FILE), builds the
// logger, serves the health endpoints and connects. Close the Service when
// done; mark it ready once it receives.
//
// An unreachable backend does not stop a service: Start makes no call, and
// Receive retries with backoff while /readyz answers 503 naming the backend
// (which the clients report to Health). Receive also stops pulling while GCS
// does not answer, so that messages are not taken only to fail.
func Start(ctx context.Context, cfg serviceConfig) (*Service, error) {
	if err := config.FromEnvironment(ctx, cfg); err != nil {
		return nil, err
	}
	ps, lc, hc := cfg.Shared()
	log := logging.New(os.Stderr, lc.Level, lc.Format)
	h, err := metrics.Start(ctx, hc.Addr, log)
	if err != nil {
		return nil, err
	}
	store, err := gcs.New(ctx)
	if err != nil {
		return nil, err
	}
	store.SetHealth(reporter(h, "gcs", log))
	store = store.WithKMSKey(kmsKey(cfg))
	q, err := queue.Dial(ctx, ps.Project, log, queue.WithHold(store.Reachable), queue.WithHealth(reporter(h, "pubsub", log)))
	if err != nil {
		store.Close()
		return nil, err
	}
	return &Service{Clients: &Clients{Store: store, Queue: q}, Log: log, Health: h}, nil
}

// reporter feeds what a client finds to Health, and logs when a backend
// stops or starts answering (the error names the endpoint).
func reporter(h *metrics.Health, backend string, log *slog.Logger) func(error) {
	return func(err error) {
		if !h.Backend(backend, err) {
			return
		}
		if err != nil {
			log.Warn("backend unreachable; /readyz answers 503 until it answers again", "backend", backend, "err", err)
		} else {
			log.Info("backend answers again", "backend", backend)
		}
	}
}

// kmsKey is FERRY_KMS_KEY of the services that write objects.
func kmsKey(cfg serviceConfig) string {
	switch c := cfg.(type) {
	case *config.Producer:
		return c.Buckets.KMSKey
	case *config.Worker:
		return c.Buckets.KMSKey
	case *config.Merger:
		return c.Buckets.KMSKey
	}
	return ""
}

// Clients are the connections a service uses.
type Clients struct {
	Store *gcs.Store
	Queue *queue.Client
}

// Connect opens GCS and Pub/Sub (the emulators, when their variables are
// set) and checks that both answer, each within 10 s: a command run against
// a stopped stack fails at once with an error naming the endpoint and the
// variable that chose it, instead of hanging.
func Connect(ctx context.Context, project string, log *slog.Logger) (*Clients, error) {
	store, err := gcs.New(ctx)
	if err != nil {
		return nil, err
	}
	q, err := queue.Dial(ctx, project, log)
	if err != nil {
		store.Close()
		return nil, err
	}
	c := &Clients{Store: store, Queue: q}
	probes, pctx := errgroup.WithContext(ctx)
	probes.Go(func() error { return store.Probe(pctx) })
	probes.Go(func() error { return q.Probe(pctx) })
	if err := probes.Wait(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Close flushes publishers and closes both clients, Pub/Sub first.
func (c *Clients) Close() {
	c.Queue.Close()
	c.Store.Close()
}
