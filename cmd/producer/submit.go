package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ferry-dev/ferry/internal/cli"
	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/plan"
	"github.com/ferry-dev/ferry/internal/producer"
	submitpkg "github.com/ferry-dev/ferry/internal/submit"
)

// submitFlags are submit's flags. Those left unset take their defaults from
// the environment (FERRY_CHUNK_SIZE, FERRY_CODEC, …), with the same limits.
type submitFlags struct {
	chunkSize, maxRate                         config.Bytes
	codec, method, key                         string
	level                                      int
	overwrite, noClobber, skipUnchanged, recur bool
	checksum                                   bool
	wait, json                                 bool
	timeout                                    time.Duration
	labels                                     labels
}

func submitCommand() *cobra.Command {
	f := &submitFlags{labels: labels{}}
	cmd := &cobra.Command{
		Use: "submit [flags] SOURCE... gs://BUCKET/PREFIX",
		Example: `  producer submit data/ gs://my-bucket/landing --wait
  producer submit -n --skip-unchanged data/ gs://my-bucket/landing
  pg_dump mydb | producer submit - gs://my-bucket/dumps/mydb.sql`,
		Short: "transfer files and directories to gs://BUCKET/PREFIX",
		Long: `Transfers each SOURCE, a file or a directory (always walked recursively; a
directory keeps its own name, as with gcloud storage cp -r), to
gs://BUCKET/PREFIX/<relative path>.zst. Flags may come before or after the
arguments.

SOURCE - reads standard input (pg_dump | producer submit - gs://b/dumps/db.sql)
into one object, named as gcloud storage cp - names it, plus the codec's
extension: gs://b/dumps/db.sql.zst. Memory stays within FERRY_PRODUCER_MEMORY;
chunks start at --chunk-size and double every FERRY_MAX_CHUNKS/16 chunks up to
what that memory (or, with FERRY_TRANSPORT=pubsub, FERRY_MESSAGE_MAX) allows,
so the longest stream is about 73 GB at the defaults (9.37 GB with
FERRY_TRANSPORT=pubsub); a longer one fails, naming the variables to raise.

-n skips files whose final object exists. --skip-unchanged skips files whose
final object has the source's size and mtime (ferry-raw-size, ferry-mtime:
one listing of the destination, no file read) and replaces those that
changed; with --checksum it compares size and CRC32C, reading the files.
Skipped files are counted in the done event and the benchmark row.

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
	fs.BoolVar(&f.skipUnchanged, "skip-unchanged", false, "skip files whose final object has the same size and mtime (from its metadata; no file is read) and replace those that changed, as rsync does")
	fs.BoolVar(&f.checksum, "checksum", false, "with --skip-unchanged, compare size and CRC32C instead of mtime: reads every file of the same size")
	fs.BoolVarP(&f.recur, "recursive", "r", false, "accepted for gcloud habits: directories are always copied recursively")
	fs.Var(&f.maxRate, "max-rate", "most bytes per second this producer sends, e.g. 7MB (default FERRY_MAX_RATE, 0: no limit)")
	fs.BoolVar(&f.wait, "wait", false, "block until the done event; exit 0 only on success")
	fs.DurationVar(&f.timeout, "timeout", 0, "give up after this long, whatever the command is doing (0: no limit)")
	fs.BoolVar(&f.json, "json", false, "with --wait, print the done event as JSON on stdout")
	cmd.MarkFlagsMutuallyExclusive("overwrite", "no-clobber")
	cmd.MarkFlagsMutuallyExclusive("no-clobber", "skip-unchanged")
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
		Overwrite: f.overwrite, NoClobber: f.noClobber, SkipUnchanged: f.skipUnchanged, Checksum: f.checksum,
	}
	if plan.IsStdin(req.Sources) {
		req.Stdin = cmd.InOrStdin()
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
	return submitpkg.Run(ctx, &cfg, submitpkg.Options{
		Request: req, Wait: f.wait, JSON: f.json, Timeout: f.timeout, MaxRate: int64(f.maxRate),
		Version: version, ID: hostID(), Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr(),
	})
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
