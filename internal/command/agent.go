package command

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/ferry-dev/ferry/internal/cli"
	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/engine"
	"github.com/ferry-dev/ferry/internal/setup"
)

const agentAbout = `ferry agent — one host of a pool that sends a transfer across many machines.

Run it on every host that mounts the share (FERRY_SOURCE_ROOTS), with the
fleet's environment. A transfer submitted with --pool (or "pool": true on
ferry-requests) is walked once by the producer that takes it and cut into
shards on FERRY_SHARDS_TOPIC; each agent claims shards from
FERRY_SHARDS_SUBSCRIPTION and reads, compresses and uploads their files
itself, so no chunk byte crosses Pub/Sub or a shared spool. The merger
composes and confirms the objects as for any transfer. An agent killed
mid-shard loses nothing: the shard is claimed again by another. Serves
/metrics, /healthz and /readyz on FERRY_HTTP_ADDR.`

func agentCommand(version string) *cobra.Command {
	return cli.Service("agent", version, agentAbout, &config.Agent{}, func(ctx context.Context) error {
		var cfg config.Agent
		svc, err := setup.Start(ctx, &cfg)
		if err != nil {
			return err
		}
		defer svc.Close()
		setup.MemoryLimit(int64(cfg.Memory))
		return engine.Agent(ctx, &cfg, svc.Clients, svc.Log.With("agent", cfg.ID), version, func() { svc.Health.SetReady(true) })
	})
}
