// Command worker uploads chunks to GCS and verifies each with CRC32C; run any
// number of them at once. See `worker --help`.
package main

import (
	"context"
	"os"

	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/metrics"
	"github.com/ferry-dev/ferry/internal/queue"
	"github.com/ferry-dev/ferry/internal/setup"
	"github.com/ferry-dev/ferry/internal/worker"
)

const about = `worker — upload ferry's chunks to GCS, verified by CRC32C.

Usage: worker

Receives chunk messages from FERRY_CHUNKS_SUBSCRIPTION, checks each chunk's
CRC32C, uploads it under a DoesNotExist precondition with the CRC32C sent,
publishes a chunk-uploaded event and acks. On SIGTERM it stops receiving and
lets running uploads finish within FERRY_SHUTDOWN_GRACE. Finds the emulators
through PUBSUB_EMULATOR_HOST and STORAGE_EMULATOR_HOST when they are set.

`

func main() { setup.Main("worker", about, &config.Worker{}, realMain) }

func realMain(ctx context.Context) error {
	var cfg config.Worker
	if err := config.FromEnvironment(ctx, &cfg); err != nil {
		return err
	}
	log := logging.New(os.Stderr, cfg.Log.Level, cfg.Log.Format).With("worker", cfg.ID)
	c, err := setup.Connect(ctx, cfg.PubSub.Project, log)
	if err != nil {
		return err
	}
	defer c.Close()
	w := worker.New(c.Store, c.Queue.Publisher(cfg.PubSub.EventsTopic), cfg.ID, cfg.MaxAttempts, log)
	health, err := metrics.Start(ctx, cfg.HTTP.Addr, log)
	if err != nil {
		return err
	}
	health.SetReady(true)
	log.Info("worker receiving", "subscription", cfg.PubSub.ChunksSubscription, "concurrency", cfg.Concurrency)
	err = c.Queue.Receive(ctx, cfg.PubSub.ChunksSubscription, queue.ReceiveSettings{
		MaxMessages: cfg.Concurrency, MaxBytes: int(cfg.MaxOutstanding), Grace: cfg.ShutdownGrace, DeadLetterTopic: cfg.PubSub.ChunksDeadLetter,
	}, w.Handle)
	log.Info("worker stopped")
	return err
}
