// Package setup is what every ferry binary does before its real work, once
// package cli has parsed its command line: load its configuration, build
// the logger, connect to GCS and Pub/Sub (the emulators, when configured)
// and serve the health endpoints. It keeps the mains thin and alike.
package setup

import (
	"context"
	"log/slog"
	"os"

	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/metrics"
	"github.com/ferry-dev/ferry/internal/queue"
	"golang.org/x/sync/errgroup"
)

// serviceConfig is a service's configuration: it checks itself and has the
// shared parts.
type serviceConfig interface {
	Validate() error
	Shared() (config.PubSub, config.Log, config.HTTP)
	EmulatorHosts() config.Emulators
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
	emu := cfg.EmulatorHosts()
	store, err := OpenStore(ctx, emu)
	if err != nil {
		return nil, err
	}
	store.SetHealth(reporter(h, "gcs", log))
	store.SetLog(log)
	store = store.WithKMSKey(kmsKey(cfg))
	q, err := queue.Dial(ctx, ps.Project, log, append(queueOptions(emu), queue.WithHold(store.Reachable), queue.WithHealth(reporter(h, "pubsub", log)))...)
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
	case *config.Agent:
		return c.Buckets.KMSKey
	}
	return ""
}

// Clients are the connections a service uses.
type Clients struct {
	Store *gcs.Store
	Queue *queue.Client
}

// Connect opens GCS and Pub/Sub (the emulators emu names, else Google Cloud)
// and checks that both answer, each within 10 s: a command run against a
// stopped stack fails at once with an error naming the endpoint and the
// variable that chose it, instead of hanging.
func Connect(ctx context.Context, project string, emu config.Emulators, log *slog.Logger) (*Clients, error) {
	store, err := OpenStore(ctx, emu)
	if err != nil {
		return nil, err
	}
	store.SetLog(log)
	q, err := queue.Dial(ctx, project, log, queueOptions(emu)...)
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

// OpenStore opens GCS: the emulator emu.GCS names, as STORAGE_EMULATOR_HOST
// would (whether that came from the environment or FERRY_ENV_FILE), else
// Google Cloud Storage. It makes no call.
func OpenStore(ctx context.Context, emu config.Emulators) (*gcs.Store, error) {
	if emu.GCS != "" && emu.GCS != os.Getenv("STORAGE_EMULATOR_HOST") {
		return gcs.NewEmulator(ctx, emu.GCS) // set by FERRY_ENV_FILE
	}
	return gcs.New(ctx) // errors name STORAGE_EMULATOR_HOST when it is set
}

// queueOptions point the Pub/Sub client at the emulator emu.PubSub names
// when the environment does not already (FERRY_ENV_FILE set it).
func queueOptions(emu config.Emulators) []queue.Option {
	if emu.PubSub != "" && emu.PubSub != os.Getenv("PUBSUB_EMULATOR_HOST") {
		return []queue.Option{queue.WithEmulator(emu.PubSub)}
	}
	return nil
}

// Close flushes publishers and closes both clients, Pub/Sub first.
func (c *Clients) Close() {
	c.Queue.Close()
	c.Store.Close()
}
