package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/producer"
	"github.com/ferry-dev/ferry/internal/result"
	"github.com/ferry-dev/ferry/internal/setup"
	"github.com/ferry-dev/ferry/internal/waiter"
)

type labels map[string]string

func (l labels) String() string { return fmt.Sprint(map[string]string(l)) }
func (l labels) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("label %q: want KEY=VALUE", s)
	}
	l[k] = v
	return nil
}

func submit(ctx context.Context, args []string) error {
	var cfg config.Producer
	if err := config.FromEnvironment(ctx, &cfg); err != nil {
		return err
	}
	fs := flag.NewFlagSet("producer submit", flag.ContinueOnError)
	chunk := cfg.ChunkSize
	fs.Var(&chunk, "chunk-size", "chunk size, e.g. 32MiB (grows so no file needs more than 1000 chunks)")
	codecName := fs.String("codec", cfg.Codec, "codec: zstd, gzip or none")
	level := fs.Int("level", cfg.Level, "compression level; 0 means the codec's default (zstd 3, gzip 6)")
	method := fs.String("method", cfg.Method, "method name recorded in the benchmark row")
	key := fs.String("idempotency-key", "", "the same key always names the same transfer")
	overwrite := fs.Bool("overwrite", false, "replace final objects that exist (atomically)")
	wait := fs.Bool("wait", false, "block until the done event; exit 0 only on success")
	timeout := fs.Duration("timeout", 0, "with --wait, give up after this long (0: no limit)")
	asJSON := fs.Bool("json", false, "with --wait, print the done event as JSON on stdout")
	lbl := labels{}
	fs.Var(lbl, "label", "KEY=VALUE label for the benchmark row (repeatable)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: producer submit [flags] SOURCE... gs://BUCKET/PREFIX\n\nFlags:\n")
		fs.PrintDefaults()
		fmt.Fprintf(fs.Output(), "\n%s", config.Usage(&cfg))
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() < 2 {
		fs.Usage()
		return usageError{errors.New("submit needs at least one SOURCE and a gs://BUCKET/PREFIX destination")}
	}
	c, err := codec.Parse(*codecName)
	if err != nil {
		return usageError{fmt.Errorf("--codec: %w", err)}
	}
	req := producer.Request{
		Sources: fs.Args()[:fs.NArg()-1], Destination: fs.Arg(fs.NArg() - 1), Codec: c, Level: *level,
		ChunkSize: int64(chunk), Method: *method, Labels: lbl, IdempotencyKey: *key, Overwrite: *overwrite,
	}
	if err := producer.Validate(req); err != nil {
		return usageError{err}
	}
	req.TransferID = producer.NewTransferID(req.IdempotencyKey)

	// On a terminal a progress bar replaces the info logs; elsewhere the
	// command is silent but for its result.
	showBar := logging.IsTerminal(os.Stdout) && !*asJSON
	logLevel := cfg.Log.Level
	if showBar && logLevel == "info" {
		logLevel = "warn"
	}
	log := logging.New(os.Stderr, logLevel, cfg.Log.Format)
	clients, err := setup.Connect(ctx, cfg.PubSub.Project, log)
	if err != nil {
		return err
	}
	defer clients.Close()
	store, q := clients.Store, clients.Queue

	var w *waiter.Waiter
	if *wait {
		if w, err = waiter.New(ctx, q, cfg.PubSub.DoneTopic, req.TransferID); err != nil {
			return err
		}
		defer func() { _ = w.Close(context.WithoutCancel(ctx)) }()
	}
	o := producer.ConfigOptions(&cfg)
	o.Store, o.Chunks, o.Events, o.ID, o.Log = store, q.Publisher(cfg.PubSub.ChunksTopic), q.Publisher(cfg.PubSub.EventsTopic), hostID(), log
	p := producer.New(o)
	fmt.Println(req.TransferID)
	var bar *progressBar
	if showBar {
		if bar, err = startProgress(ctx, q, cfg.PubSub.EventsTopic, req, p); err != nil {
			return err
		}
		defer bar.stop(false)
	}
	man, err := p.Submit(ctx, req)
	var already *producer.AlreadyDoneError
	if errors.As(err, &already) {
		// The same idempotency key: report the transfer that ran.
		log.Info("transfer already ended; not started again", "transfer_id", req.TransferID, "status", already.Done.Status)
		return report(already.Done, *asJSON)
	}
	if err != nil {
		return err
	}
	var raw int64
	for _, f := range man.Files {
		raw += f.Size
	}
	log.Info("all chunks published", "transfer_id", man.TransferID, "files", len(man.Files), "bytes", raw,
		"compress_ms", man.CompressMS, "compress_mbps", fmt.Sprintf("%.1f", result.MBps(raw, man.CompressMS)))
	if w == nil {
		return nil
	}
	wctx := ctx
	if *timeout > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}
	done, err := w.Wait(wctx)
	if err != nil {
		return err
	}
	if bar != nil {
		bar.stop(done.Status == message.StatusOK)
	}
	return report(done, *asJSON)
}

// report prints a done event and turns a failed transfer into an error.
func report(done message.Done, asJSON bool) error {
	if asJSON {
		b, _ := json.MarshalIndent(done, "", "  ")
		fmt.Println(string(b))
	}
	if done.Status != message.StatusOK {
		return fmt.Errorf("transfer %s failed: %s", done.TransferID, done.Error)
	}
	fmt.Fprintf(os.Stderr, "transfer %s ok: %d objects in %s\n", done.TransferID, len(done.Objects), result.FormatMS(done.Timings.Total))
	return nil
}

func hostID() string {
	h, _ := os.Hostname()
	return fmt.Sprintf("%s-%d", h, os.Getpid())
}
