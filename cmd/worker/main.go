// Command worker uploads chunks to GCS and verifies each with CRC32C; run any
// number of them at once. See `worker --help`.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/metrics"
	"github.com/ferry-dev/ferry/internal/queue"
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

func main() {
	if len(os.Args) > 1 {
		fmt.Fprint(os.Stderr, about+config.Usage(&config.Worker{}))
		if os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
			return
		}
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := realMain(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "worker: %v\n", err)
		os.Exit(1)
	}
}

func realMain(ctx context.Context) error {
	var cfg config.Worker
	if err := config.FromEnvironment(ctx, &cfg); err != nil {
		return err
	}
	log := logging.New(os.Stderr, cfg.Log.Level, cfg.Log.Format).With("worker", cfg.ID)
	store, err := gcs.New(ctx)
	if err != nil {
		return err
	}
	defer store.Close()
	q, err := queue.Dial(ctx, cfg.PubSub.Project, log)
	if err != nil {
		return err
	}
	defer q.Close()
	w := worker.New(store, q.Publisher(cfg.PubSub.EventsTopic), cfg.ID, 5, log)
	health, err := metrics.Start(ctx, cfg.HTTP.Addr, log)
	if err != nil {
		return err
	}
	health.SetReady(true)
	log.Info("worker receiving", "subscription", cfg.PubSub.ChunksSubscription, "concurrency", cfg.Concurrency)
	err = q.Receive(ctx, cfg.PubSub.ChunksSubscription, queue.ReceiveSettings{
		MaxMessages: cfg.Concurrency, MaxBytes: int(cfg.MaxOutstanding), Grace: cfg.ShutdownGrace, DeadLetterTopic: cfg.PubSub.ChunksDeadLetter,
	}, w.Handle)
	log.Info("worker stopped")
	return err
}
