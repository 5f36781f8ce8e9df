// Command worker uploads chunks to GCS and verifies each with CRC32C; run any
// number of them at once. See `worker --help`.
package main

import (
	"context"

	"github.com/ferry-dev/ferry/internal/cli"
	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/engine"
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
	setup.MemoryLimit(worker.Budget(int64(cfg.MaxOutstanding), cfg.RequestBytes()))
	return engine.Worker(ctx, cfg, svc.Clients, svc.Log.With("worker", cfg.ID), version, func() { svc.Health.SetReady(true) })
}
