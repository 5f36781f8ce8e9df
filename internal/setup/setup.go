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
// logger, connects and serves the health endpoints. Close the Service when
// done; mark it ready once it receives.
func Start(ctx context.Context, cfg serviceConfig) (*Service, error) {
	if err := config.FromEnvironment(ctx, cfg); err != nil {
		return nil, err
	}
	ps, lc, hc := cfg.Shared()
	log := logging.New(os.Stderr, lc.Level, lc.Format)
	c, err := Connect(ctx, ps.Project, log)
	if err != nil {
		return nil, err
	}
	c.Store = c.Store.WithKMSKey(kmsKey(cfg))
	h, err := metrics.Start(ctx, hc.Addr, log)
	if err != nil {
		c.Close()
		return nil, err
	}
	return &Service{Clients: c, Log: log, Health: h}, nil
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

// Connect opens GCS and Pub/Sub (the emulators, when their variables are set).
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
	return &Clients{Store: store, Queue: q}, nil
}

// Close flushes publishers and closes both clients, Pub/Sub first.
func (c *Clients) Close() {
	c.Queue.Close()
	c.Store.Close()
}
