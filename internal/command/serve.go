package command

import (
	"context"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/ferry-dev/ferry/internal/cli"
	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/metrics"
	"github.com/ferry-dev/ferry/internal/pool"
	"github.com/ferry-dev/ferry/internal/producer"
	"github.com/ferry-dev/ferry/internal/queue"
	"github.com/ferry-dev/ferry/internal/requests"
	"github.com/ferry-dev/ferry/internal/setup"
	"github.com/ferry-dev/ferry/internal/submit"
)

func serveCommand(version string) *cobra.Command {
	return &cobra.Command{
		Use:   "serve",
		Short: "run the transfer requests published to FERRY_REQUESTS_TOPIC",
		Long: `Runs transfer requests from FERRY_REQUESTS_SUBSCRIPTION until SIGTERM, reading
sources only under FERRY_SOURCE_ROOTS. Serves /metrics, /healthz and /readyz on
FERRY_HTTP_ADDR.`,
		Args: cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return serve(cmd.Context(), version) },
	}
}

func serve(ctx context.Context, version string) error {
	var cfg config.Producer
	svc, err := setup.Start(ctx, &cfg)
	if err != nil {
		return err
	}
	defer svc.Close()
	setup.MemoryLimit(int64(cfg.MemoryLimit) * int64(cfg.Requests))
	store, q, log := svc.Store, svc.Queue, svc.Log
	o := producer.ConfigOptions(&cfg)
	o.Store, o.Chunks, o.Events, o.ID, o.Log = store, q.Publisher(cfg.PubSub.ChunksTopic), q.Publisher(cfg.PubSub.ControlTopic), submit.HostID(), log
	o.Pool = pool.NewWalker(pool.WalkerOptions{Store: store, Shards: q.Publisher(cfg.PubSub.ShardsTopic), Files: cfg.ShardFiles,
		Bytes: int64(cfg.ShardBytes), Log: log})
	o.Version, o.MaxRate = version, int64(cfg.MaxRate)
	srv := requests.New(producer.New(o), q.Publisher(cfg.PubSub.DoneTopic), requests.Options{
		Defaults:    requests.Defaults{Codec: codec.Codec(cfg.Codec), Level: cfg.Level, ChunkSize: int64(cfg.ChunkSize), Method: cfg.Method},
		SourceRoots: cfg.SourceRoots, Buckets: cfg.Buckets.Allowed, IDSecret: cfg.IDSecret, Log: log,
	})
	go watchStalls(ctx, srv, svc.Health, cfg.RequestStall, log)
	svc.Health.SetReady(true)
	log.Info("producer serving requests", "subscription", cfg.PubSub.RequestsSubscription, "version", version)
	err = q.Receive(ctx, cfg.PubSub.RequestsSubscription, queue.ReceiveSettings{
		MaxMessages: cfg.Requests, MaxBytes: 16 << 20, DeadLetterTopic: cfg.PubSub.RequestsDeadLetter,
	}, srv.Handle)
	log.Info("producer stopped")
	return err
}

// watchStalls turns /readyz to 503 while the requests in flight make no
// progress for longer than stall, and back once they do or end.
func watchStalls(ctx context.Context, srv *requests.Server, h *metrics.Health, stall time.Duration, log *slog.Logger) {
	t := time.NewTicker(min(stall/10, 30*time.Second))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			err := srv.Stalled(now, stall)
			if h.Problem("requests", err) {
				if err != nil {
					log.Error("requests stalled; /readyz answers 503", "err", err)
				} else {
					log.Info("requests progress again")
				}
			}
		}
	}
}
