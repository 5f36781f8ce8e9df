// Package engine wires ferry's one engine: the producer's pipeline, the
// workers' uploads and the merger's end of a transfer, talking through a
// queue client. Its wirings sit side by side: over Pub/Sub, cmd/worker and
// cmd/merger each run one service (Worker, Merger), and producers submit
// to them; in one process (InProcess, ferry cp's), the same services run
// on the in-process transport (queue.Memory) beside the submit. The
// objects, manifest, listing and row are the same whichever wiring moved
// the data.
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ferry-dev/ferry/internal/benchrow"
	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/loader"
	"github.com/ferry-dev/ferry/internal/merger"
	"github.com/ferry-dev/ferry/internal/queue"
	"github.com/ferry-dev/ferry/internal/setup"
	"github.com/ferry-dev/ferry/internal/worker"
)

// Worker receives chunk messages on cfg's chunks subscription and uploads
// them, until ctx ends; running uploads then have cfg.ShutdownGrace. ready
// is called once it receives.
func Worker(ctx context.Context, cfg config.Worker, c *setup.Clients, log *slog.Logger, version string, ready func()) error {
	spool := ""
	if cfg.Spool.Transport == config.TransportSpool {
		spool = cfg.Spool.Dir
	}
	w, err := worker.New(worker.Options{Store: c.Store, Events: c.Queue.Publisher(cfg.PubSub.EventsTopic),
		ID: cfg.ID, MaxAttempts: cfg.MaxAttempts, SpoolDir: spool, Buckets: cfg.Buckets, MaxRate: int64(cfg.MaxRate), Log: log,
		Requests: cfg.RequestCap(), RequestMemory: cfg.RequestBytes()})
	if err != nil {
		return fmt.Errorf("FERRY_SPOOL_DIR=%s: %w", cfg.Spool.Dir, err)
	}
	defer w.Close()
	ready()
	log.Info("worker receiving", "subscription", cfg.PubSub.ChunksSubscription, "concurrency", cfg.Concurrency, "version", version)
	err = c.Queue.Receive(ctx, cfg.PubSub.ChunksSubscription, queue.ReceiveSettings{
		MaxMessages: cfg.Concurrency, MaxBytes: int(cfg.MaxOutstanding), Grace: cfg.ShutdownGrace, DeadLetterTopic: cfg.PubSub.ChunksDeadLetter,
	}, w.Handle)
	win := w.Window().Stats()
	log.Info("worker stopped", "requests_in_flight", win.Limit, "requests_in_flight_peak", win.Peak, "window_cuts", win.Cuts)
	return err
}

// Merger receives the workers' events and the control events on cfg's
// subscriptions and finishes transfers, until ctx ends; it also runs the
// sweeps and, with FERRY_BQ_DATASET, the loader of benchmark rows. ready
// is called once it receives.
func Merger(ctx context.Context, cfg config.Merger, c *setup.Clients, log *slog.Logger, version string, ready func()) error {
	store, q := c.Store, c.Queue
	sink, load, err := rowSink(ctx, cfg, store, log)
	if err != nil {
		return err
	}
	tables, closeTables, err := tableLoads(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer func() { _ = closeTables() }()
	m := merger.New(merger.Options{
		Store: store, Done: q.Publisher(cfg.PubSub.DoneTopic), Sink: sink, Tables: tables, Loads: cfg.Loads,
		TableBatchWindow: cfg.TableBatchWindow, TableBatchMax: cfg.TableBatchMax,
		ComposeConcurrency: cfg.ComposeConcurrency, Version: version, Buckets: cfg.Buckets, Log: log,
		TransferTimeout: cfg.TransferTimeout, DoneRetention: cfg.DoneRetention, MaxAttempts: cfg.MaxAttempts,
	})
	// Receiving, the sweeps (stalled transfers, old done markers) and the
	// BigQuery loader are one group: each stops with the process, and an
	// end of receiving ends the others.
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { m.RunSweeps(gctx); return nil })
	if load != nil {
		g.Go(func() error { load(gctx); return nil })
	}
	ready()
	log.Info("merger receiving", "subscription", cfg.PubSub.EventsSubscription, "control", cfg.PubSub.ControlSubscription, "version", version)
	receive := func(sub, deadLetter string, h queue.Handler) func() error {
		return func() error {
			err := q.Receive(gctx, sub, queue.ReceiveSettings{
				MaxMessages: cfg.Concurrency, MaxBytes: int(cfg.Memory / 4), Grace: cfg.Grace, DeadLetterTopic: deadLetter,
			}, h)
			if err == nil {
				err = errReceiveEnded
			}
			return err
		}
	}
	// The workers' events and what producers and submitters say travel on
	// topics of their own, so that who may publish decides what is said.
	g.Go(receive(cfg.PubSub.EventsSubscription, cfg.PubSub.EventsDeadLetter, m.HandleEvents))
	g.Go(receive(cfg.PubSub.ControlSubscription, cfg.PubSub.ControlDeadLetter, m.HandleControl))
	if err := g.Wait(); err != nil && !errors.Is(err, errReceiveEnded) {
		return err
	}
	return nil
}

// errReceiveEnded stops the group when receiving ends without an error
// (shutdown), so the sweeps and the loader stop with it.
var errReceiveEnded = errors.New("receiving ended")

// tableLoads runs the table loads transfers ask for (--bq-table): in
// BigQuery when the merger has FERRY_BQ_DATASET, as jobs of the rows'
// project (FERRY_BQ_PROJECT, else FERRY_PROJECT) in FERRY_BQ_LOCATION,
// else as lines of FERRY_LOADS_FILE.
func tableLoads(ctx context.Context, cfg config.Merger, log *slog.Logger) (merger.TableLoader, func() error, error) {
	b := cfg.BigQuery
	if b.Dataset == "" {
		if len(cfg.Loads.Datasets) > 0 {
			log.Info("table loads are written to FERRY_LOADS_FILE, not run: FERRY_BQ_DATASET is empty", "file", cfg.LoadsFile)
		}
		return loader.NewLocalTables(cfg.LoadsFile), func() error { return nil }, nil
	}
	project := b.Project
	if project == "" {
		project = cfg.PubSub.Project
	}
	t, err := loader.NewTables(ctx, project, b.Location)
	if err != nil {
		return nil, nil, err
	}
	return t, t.Close, nil
}

// rowSink is where benchmark rows go: staged in GCS and loaded into BigQuery
// when FERRY_BQ_DATASET is set (load then runs the loader until its context
// ends), else the local NDJSON file (load is nil).
func rowSink(ctx context.Context, cfg config.Merger, store *gcs.Store, log *slog.Logger) (merger.Sink, func(context.Context), error) {
	b := cfg.BigQuery
	if b.Dataset == "" {
		f, err := benchrow.OpenFile(cfg.ResultsFile)
		if err != nil {
			return nil, nil, fmt.Errorf("FERRY_RESULTS_FILE: %w", err)
		}
		return f, nil, nil
	}
	project := b.Project
	if project == "" {
		project = cfg.PubSub.Project
	}
	bq, err := loader.NewBigQuery(ctx, project, b.Dataset, b.Location)
	if err != nil {
		return nil, nil, err
	}
	l := loader.New(loader.Options{Store: store, Warehouse: bq, Bucket: b.ResultsBucket, Batch: b.LoadBatch, MaxAge: b.LoadMaxAge, Log: log})
	load := func(ctx context.Context) { l.Run(ctx, min(b.LoadMaxAge/4, 15*time.Second)) }
	log.Info("benchmark rows go to BigQuery", "project", project, "dataset", b.Dataset, "location", b.Location, "staging_bucket", b.ResultsBucket)
	return loader.NewStaged(store, b.ResultsBucket), load, nil
}
