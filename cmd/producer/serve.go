package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/producer"
	"github.com/ferry-dev/ferry/internal/queue"
	"github.com/ferry-dev/ferry/internal/requests"
	"github.com/ferry-dev/ferry/internal/setup"
)

func serve(ctx context.Context, args []string) error {
	var cfg config.Producer
	fs := flag.NewFlagSet("producer serve", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: producer serve\n\nRuns transfer requests from FERRY_REQUESTS_SUBSCRIPTION until SIGTERM.\n\n%s", config.Usage(&cfg))
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	svc, err := setup.Start(ctx, &cfg)
	if err != nil {
		return err
	}
	defer svc.Close()
	store, q, log := svc.Store, svc.Queue, svc.Log
	o := producer.ConfigOptions(&cfg)
	o.Store, o.Chunks, o.Events, o.ID, o.Log = store, q.Publisher(cfg.PubSub.ChunksTopic), q.Publisher(cfg.PubSub.EventsTopic), hostID(), log
	srv := requests.New(producer.New(o), q.Publisher(cfg.PubSub.DoneTopic), requests.Options{
		Defaults:    requests.Defaults{Codec: codec.Codec(cfg.Codec), Level: cfg.Level, ChunkSize: int64(cfg.ChunkSize), Method: cfg.Method},
		SourceRoots: cfg.SourceRoots, Buckets: cfg.Buckets.Allowed, Log: log,
	})
	svc.Health.SetReady(true)
	log.Info("producer serving requests", "subscription", cfg.PubSub.RequestsSubscription)
	err = q.Receive(ctx, cfg.PubSub.RequestsSubscription, queue.ReceiveSettings{
		MaxMessages: cfg.Requests, MaxBytes: 16 << 20, DeadLetterTopic: cfg.PubSub.RequestsDeadLetter,
	}, srv.Handle)
	log.Info("producer stopped")
	return err
}
