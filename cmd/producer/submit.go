package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/ferry-dev/ferry/internal/cli"
	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/producer"
	"github.com/ferry-dev/ferry/internal/result"
	"github.com/ferry-dev/ferry/internal/setup"
	"github.com/ferry-dev/ferry/internal/waiter"
)

// submitFlags are submit's flags. Those left unset take their defaults from
// the environment (FERRY_CHUNK_SIZE, FERRY_CODEC, …), with the same limits.
type submitFlags struct {
	chunkSize, maxRate                         config.Bytes
	codec, method, key                         string
	level                                      int
	overwrite, noClobber, skipUnchanged, recur bool
	wait, json                                 bool
	timeout                                    time.Duration
	labels                                     labels
}

func submitCommand() *cobra.Command {
	f := &submitFlags{labels: labels{}}
	cmd := &cobra.Command{
		Use:   "submit [flags] SOURCE... gs://BUCKET/PREFIX",
		Short: "transfer files and directories to gs://BUCKET/PREFIX",
		Long: `Transfers each SOURCE, a file or a directory (always walked recursively; a
directory keeps its own name, as with gcloud storage cp -r), to
gs://BUCKET/PREFIX/<relative path>.zst. Flags may come before or after the
arguments.

Prints the transfer id on stdout once the transfer has started. With --wait it
blocks until the transfer's done event and exits 0 only if the transfer
succeeded. --timeout bounds the whole command: connecting, reading and
publishing, and waiting.

Exit status: 0 success, 1 the transfer failed or could not start, 2 a usage
or configuration error.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return submit(cmd.Context(), cmd, f, args)
		},
	}
	fs := cmd.Flags()
	fs.SortFlags = false
	fs.Var(&f.chunkSize, "chunk-size", "chunk size, 1MiB to 1GiB; grows so no file needs more than FERRY_MAX_CHUNKS chunks (default FERRY_CHUNK_SIZE, 32MiB)")
	fs.StringVar(&f.codec, "codec", "", "zstd, gzip or none (default FERRY_CODEC, zstd)")
	fs.IntVar(&f.level, "level", 0, "compression level; 0 means the codec's default (zstd 3, gzip 6)")
	fs.StringVar(&f.method, "method", "", "method name recorded in the benchmark row (default FERRY_METHOD, ferry)")
	fs.Var(f.labels, "label", "KEY=VALUE label for the benchmark row (repeatable)")
	fs.StringVar(&f.key, "idempotency-key", "", "the same key always names the same transfer")
	fs.BoolVar(&f.overwrite, "overwrite", false, "replace final objects that exist (atomically)")
	fs.BoolVarP(&f.noClobber, "no-clobber", "n", false, "skip files whose final object exists, as gcloud storage cp -n")
	fs.BoolVar(&f.skipUnchanged, "skip-unchanged", false, "skip files whose final object has the same size, mtime and CRC32C")
	fs.BoolVarP(&f.recur, "recursive", "r", false, "accepted for gcloud habits: directories are always copied recursively")
	fs.Var(&f.maxRate, "max-rate", "most bytes per second this producer sends, e.g. 7MB (default FERRY_MAX_RATE, 0: no limit)")
	fs.BoolVar(&f.wait, "wait", false, "block until the done event; exit 0 only on success")
	fs.DurationVar(&f.timeout, "timeout", 0, "give up after this long, whatever the command is doing (0: no limit)")
	fs.BoolVar(&f.json, "json", false, "with --wait, print the done event as JSON on stdout")
	cmd.MarkFlagsMutuallyExclusive("overwrite", "no-clobber")
	cmd.MarkFlagsMutuallyExclusive("overwrite", "skip-unchanged")
	return cmd
}

// request checks the command line against the configuration and builds the
// request; every error is a usage error naming the flag or argument.
func (f *submitFlags) request(cmd *cobra.Command, cfg config.Producer, args []string) (producer.Request, error) {
	if len(args) < 2 {
		return producer.Request{}, cli.Usagef("submit needs at least one SOURCE and a gs://BUCKET/PREFIX destination")
	}
	if f.json && !f.wait {
		return producer.Request{}, cli.Usagef("--json prints the done event, so it needs --wait")
	}
	if f.timeout < 0 {
		return producer.Request{}, cli.Usagef("--timeout %s: want 0 (no limit) or more", f.timeout)
	}
	changed := cmd.Flags().Changed
	if !changed("chunk-size") {
		f.chunkSize = cfg.ChunkSize
	} else if err := config.CheckChunkSize(f.chunkSize); err != nil {
		return producer.Request{}, cli.Usagef("--chunk-size: %w", err)
	}
	if !changed("max-rate") {
		f.maxRate = cfg.MaxRate
	}
	if !changed("codec") {
		f.codec = cfg.Codec
		if !changed("level") {
			f.level = cfg.Level
		}
	}
	if !changed("method") {
		f.method = cfg.Method
	}
	c, err := codec.Parse(f.codec)
	if err != nil {
		return producer.Request{}, cli.Usagef("--codec: %w", err)
	}
	req := producer.Request{
		Sources: args[:len(args)-1], Destination: args[len(args)-1], Codec: c, Level: f.level,
		ChunkSize: int64(f.chunkSize), Method: f.method, Labels: f.labels, IdempotencyKey: f.key,
		Overwrite: f.overwrite, NoClobber: f.noClobber, SkipUnchanged: f.skipUnchanged,
	}
	if err := producer.Validate(req); err != nil {
		return producer.Request{}, &cli.UsageError{Err: err}
	}
	req.TransferID = producer.NewTransferID(req.IdempotencyKey)
	return req, nil
}

func submit(ctx context.Context, cmd *cobra.Command, f *submitFlags, args []string) error {
	var cfg config.Producer
	if err := config.FromEnvironment(ctx, &cfg); err != nil {
		return err
	}
	req, err := f.request(cmd, cfg, args)
	if err != nil {
		return err
	}
	// --timeout bounds everything from here on, network calls included.
	if f.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.timeout)
		defer cancel()
	}
	stdout := cmd.OutOrStdout()
	// On a terminal a progress bar replaces the info logs; elsewhere the
	// command is silent but for its result.
	showBar := logging.IsTerminal(stdout) && !f.json
	logLevel := cfg.Log.Level
	if showBar && logLevel == "info" {
		logLevel = "warn"
	}
	log := logging.New(cmd.ErrOrStderr(), logLevel, cfg.Log.Format)
	emu := cfg.Emulators
	st := &step{timeout: f.timeout}
	st.set("connecting to %s and %s for %s", emu.GCSEndpoint(), emu.PubSubEndpoint(), req.Destination)
	clients, err := setup.Connect(ctx, cfg.PubSub.Project, emu, log)
	if err != nil {
		return st.fail(ctx, err)
	}
	defer clients.Close()
	store, q := clients.Store, clients.Queue
	cleanup := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	}

	var w *waiter.Waiter
	if f.wait {
		// Subscribe before the transfer starts, so its done event cannot
		// be missed.
		st.set("subscribing to topic %s on %s", cfg.PubSub.DoneTopic, emu.PubSubEndpoint())
		if w, err = waiter.New(ctx, q, cfg.PubSub.DoneTopic, req.TransferID); err != nil {
			return st.fail(ctx, err)
		}
		defer func() {
			cctx, cancel := cleanup()
			defer cancel()
			_ = w.Close(cctx)
		}()
	}
	var bar *progressBar
	var out sync.Mutex // the id line and the bar share stdout
	o := producer.ConfigOptions(&cfg)
	o.Store, o.Chunks, o.Events, o.ID, o.Log = store, q.Publisher(cfg.PubSub.ChunksTopic), q.Publisher(cfg.PubSub.EventsTopic), hostID(), log
	o.Version, o.MaxRate = version, int64(f.maxRate)
	o.Started = func(id string) {
		out.Lock()
		fmt.Fprintln(stdout, id)
		out.Unlock()
		st.set("sending the chunks of transfer %s to topic %s on %s", id, cfg.PubSub.ChunksTopic, emu.PubSubEndpoint())
		if bar != nil {
			bar.begin()
		}
	}
	p := producer.New(o)
	if showBar {
		st.set("subscribing to topic %s on %s", cfg.PubSub.EventsTopic, emu.PubSubEndpoint())
		if bar, err = startProgress(ctx, q, cfg.PubSub.EventsTopic, req, p, stdout, &out); err != nil {
			return st.fail(ctx, err)
		}
		defer bar.stop(false)
	}
	st.set("checking destination %s on %s", req.Destination, emu.GCSEndpoint())
	man, err := p.Submit(ctx, req)
	var already *producer.AlreadyDoneError
	if errors.As(err, &already) {
		// The same idempotency key: report the transfer that ran.
		fmt.Fprintln(stdout, req.TransferID)
		log.Info("transfer already ended; not started again", "transfer_id", req.TransferID, "status", already.Done.Status)
		return report(stdout, cmd.ErrOrStderr(), already.Done, f.json)
	}
	if err != nil {
		return st.fail(ctx, err)
	}
	var raw int64
	for _, mf := range man.Files {
		raw += mf.Size
	}
	log.Info("all chunks published", "transfer_id", man.TransferID, "files", len(man.Files), "bytes", raw,
		"compress_ms", man.CompressMS, "compress_mbps", fmt.Sprintf("%.1f", result.MBps(raw, man.CompressMS)))
	if w == nil {
		return nil
	}
	st.set("waiting for the done event of transfer %s on topic %s (%s)", req.TransferID, cfg.PubSub.DoneTopic, emu.PubSubEndpoint())
	done, err := w.Wait(ctx)
	if err != nil {
		return st.fail(ctx, err)
	}
	if bar != nil {
		bar.stop(done.Status == message.StatusOK)
	}
	return report(stdout, cmd.ErrOrStderr(), done, f.json)
}

// step is what the command is doing, so an error says where it was and which
// endpoint it was talking to.
type step struct {
	mu      sync.Mutex
	what    string
	timeout time.Duration
}

func (s *step) set(format string, a ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.what = fmt.Sprintf(format, a...)
}

// fail wraps err with the step; an input error is already clear alone.
func (s *step) fail(ctx context.Context, err error) error {
	var input *producer.InputError
	if errors.As(err, &input) {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.timeout > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("gave up after --timeout %s while %s: %w", s.timeout, s.what, err)
	}
	return fmt.Errorf("%s: %w", s.what, err)
}

// report prints a done event and turns a failed transfer into an error.
func report(stdout, stderr io.Writer, done message.Done, asJSON bool) error {
	if asJSON {
		b, _ := json.MarshalIndent(done, "", "  ")
		fmt.Fprintln(stdout, string(b))
	}
	if done.Status != message.StatusOK {
		return fmt.Errorf("transfer %s %s: %s", done.TransferID, done.Status, done.Error)
	}
	var raw int64
	for _, o := range done.Objects {
		raw += o.RawSize
	}
	fmt.Fprintf(stderr, "transfer %s ok: %s, %s in %s\n", done.TransferID, result.Count(len(done.Objects), "object"),
		result.FormatBytes(float64(raw)), result.FormatMS(done.Timings.Total))
	return nil
}

// labels is the repeatable --label KEY=VALUE.
type labels map[string]string

func (l labels) String() string { return fmt.Sprint(map[string]string(l)) }
func (l labels) Type() string   { return "KEY=VALUE" }
func (l labels) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("label %q: want KEY=VALUE", s)
	}
	l[k] = v
	return nil
}

func hostID() string {
	h, _ := os.Hostname()
	return fmt.Sprintf("%s-%d", h, os.Getpid())
}
