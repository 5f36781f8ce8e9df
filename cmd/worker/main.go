// Command worker uploads chunks to GCS and verifies each with CRC32C; run any
// number of them at once. See `worker --help`.
package main

import (
	"context"
	"fmt"

	"github.com/ferry-dev/ferry/internal/cli"
	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/queue"
	"github.com/ferry-dev/ferry/internal/setup"
	"github.com/ferry-dev/ferry/internal/worker"
)

const about = `worker — upload ferry's chunks to GCS, verified by CRC32C.

Receives chunk messages from FERRY_CHUNKS_SUBSCRIPTION, checks each chunk's
CRC32C, uploads it under a DoesNotExist precondition with the CRC32C sent,
publishes a chunk-uploaded event and acks. On SIGTERM it stops receiving and
lets running uploads finish within FERRY_SHUTDOWN_GRACE. Finds the emulators
through PUBSUB_EMULATOR_HOST and STORAGE_EMULATOR_HOST when they are set.`

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() { cli.Main(cli.Service("worker", version, about, &config.Worker{}, realMain)) }

func realMain(ctx context.Context) error {
	var cfg config.Worker
	svc, err := setup.Start(ctx, &cfg)
	if err != nil {
		return err
	}
	defer svc.Close()
	setup.MemoryLimit(worker.Budget(int64(cfg.MaxOutstanding), cfg.Concurrency))
	log := svc.Log.With("worker", cfg.ID)
	spool := ""
	if cfg.Spool.Transport == config.TransportSpool {
		spool = cfg.Spool.Dir
	}
	w, err := worker.New(worker.Options{Store: svc.Store, Events: svc.Queue.Publisher(cfg.PubSub.EventsTopic),
		ID: cfg.ID, MaxAttempts: cfg.MaxAttempts, SpoolDir: spool, Buckets: cfg.Buckets, MaxRate: int64(cfg.MaxRate), Log: log})
	if err != nil {
		return fmt.Errorf("FERRY_SPOOL_DIR=%s: %w", cfg.Spool.Dir, err)
	}
	defer w.Close()
	svc.Health.SetReady(true)
	log.Info("worker receiving", "subscription", cfg.PubSub.ChunksSubscription, "concurrency", cfg.Concurrency, "version", version)
	err = svc.Queue.Receive(ctx, cfg.PubSub.ChunksSubscription, queue.ReceiveSettings{
		MaxMessages: cfg.Concurrency, MaxBytes: int(cfg.MaxOutstanding), Grace: cfg.ShutdownGrace, DeadLetterTopic: cfg.PubSub.ChunksDeadLetter,
	}, w.Handle)
	log.Info("worker stopped")
	return err
}
