package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ferry-dev/ferry/internal/cli"
	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/plan"
	"github.com/ferry-dev/ferry/internal/result"
	"github.com/ferry-dev/ferry/internal/setup"
	"github.com/ferry-dev/ferry/internal/transfers"
)

const bucketHelp = "bucket of the transfers, BUCKET or gs://BUCKET (default: the one bucket FERRY_BUCKETS lists)"

func statusCommand() *cobra.Command {
	var bucket string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status [flags] TRANSFER_ID",
		Short: "show a transfer: state, files and bytes done, error",
		Long: `Shows a transfer from what its bucket holds: its state (running: the producer
is still reading; sealed: workers upload and the merger composes; then ok,
failed or cancelled), files and bytes done, the error if any, and the final
objects of an ended transfer with their CRC32C as gcloud storage shows it.
Sizes are raw (source) bytes, in MB of 10^6 bytes.`,
		Args: exactlyOneID,
		RunE: func(cmd *cobra.Command, args []string) error {
			var cfg config.Producer
			store, b, err := openBucket(cmd.Context(), &cfg, bucket)
			if err != nil {
				return err
			}
			defer store.Close()
			t, err := transfers.Status(cmd.Context(), store, b, args[0])
			if err != nil {
				return fmt.Errorf("%w (on %s)", err, cfg.Emulators.GCSEndpoint())
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), t)
			}
			printStatus(cmd.OutOrStdout(), t)
			return nil
		},
	}
	cmd.Flags().StringVar(&bucket, "bucket", "", bucketHelp)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the status as JSON")
	return cmd
}

func listCommand() *cobra.Command {
	var bucket string
	var limit int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list [flags]",
		Short: "list recent transfers: running ones, then ended ones, newest first",
		Long: `Lists the transfers of a bucket: those running (manifests and chunks under
.ferry/), newest first, then up to --limit that ended (done markers under
.ferry-done/, kept for FERRY_DONE_RETENTION), newest first.`,
		Args: cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 1 {
				return cli.Usagef("--limit %d: want 1 or more", limit)
			}
			var cfg config.Producer
			store, b, err := openBucket(cmd.Context(), &cfg, bucket)
			if err != nil {
				return err
			}
			defer store.Close()
			ts, err := transfers.List(cmd.Context(), store, b, limit)
			if err != nil {
				return fmt.Errorf("%w (on %s)", err, cfg.Emulators.GCSEndpoint())
			}
			if asJSON {
				if ts == nil {
					ts = []transfers.Transfer{}
				}
				return printJSON(cmd.OutOrStdout(), ts)
			}
			printList(cmd.OutOrStdout(), ts)
			return nil
		},
	}
	cmd.Flags().StringVar(&bucket, "bucket", "", bucketHelp)
	cmd.Flags().IntVar(&limit, "limit", 20, "most ended transfers to list")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the list as JSON")
	return cmd
}

func cancelCommand() *cobra.Command {
	var bucket string
	cmd := &cobra.Command{
		Use:   "cancel [flags] TRANSFER_ID",
		Short: "end a running transfer as cancelled",
		Long: `Publishes a cancel event for the transfer on FERRY_EVENTS_TOPIC. The merger
ends it cancelled: one done event, one benchmark row, staging removed; workers
drop its chunks that are still queued. Follow it with "producer status ID".
A transfer that has already ended is not cancelled (exit 1).`,
		Args: exactlyOneID,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			var cfg config.Producer
			if err := config.FromEnvironment(ctx, &cfg); err != nil {
				return err
			}
			b, err := bucketOf(bucket, cfg)
			if err != nil {
				return err
			}
			log := logging.New(cmd.ErrOrStderr(), cfg.Log.Level, cfg.Log.Format)
			c, err := setup.Connect(ctx, cfg.PubSub.Project, cfg.Emulators, log)
			if err != nil {
				return err
			}
			defer c.Close()
			t, err := transfers.Cancel(ctx, c.Store, c.Queue.Publisher(cfg.PubSub.ControlTopic), b, args[0])
			if errors.Is(err, transfers.ErrEnded) {
				return err
			}
			if err != nil {
				return fmt.Errorf("%w (on %s and %s)", err, cfg.Emulators.GCSEndpoint(), cfg.Emulators.PubSubEndpoint())
			}
			fmt.Fprintf(cmd.OutOrStdout(), "cancel requested for transfer %s (%s); the merger ends it cancelled: producer status %s\n", t.ID, t.State, t.ID)
			return nil
		},
	}
	cmd.Flags().StringVar(&bucket, "bucket", "", bucketHelp)
	return cmd
}

func exactlyOneID(_ *cobra.Command, args []string) error {
	if len(args) != 1 {
		return cli.Usagef("want one TRANSFER_ID (the id producer submit printed), got %d arguments", len(args))
	}
	if err := transfers.CheckID(args[0]); err != nil {
		return &cli.UsageError{Err: err}
	}
	return nil
}

// openBucket loads cfg, picks the bucket and opens GCS.
func openBucket(ctx context.Context, cfg *config.Producer, flag string) (*gcs.Store, string, error) {
	if err := config.FromEnvironment(ctx, cfg); err != nil {
		return nil, "", err
	}
	b, err := bucketOf(flag, *cfg)
	if err != nil {
		return nil, "", err
	}
	store, err := setup.OpenStore(ctx, cfg.Emulators)
	return store, b, err
}

// bucketOf is --bucket, or else the one bucket FERRY_BUCKETS allows.
func bucketOf(flag string, cfg config.Producer) (string, error) {
	b := strings.TrimSuffix(strings.TrimPrefix(flag, "gs://"), "/")
	if b == "" {
		switch allowed := cfg.Buckets.Allowed; len(allowed) {
		case 1:
			b = allowed[0]
		case 0:
			return "", cli.Usagef("which bucket? give --bucket (FERRY_BUCKETS, which would say, is empty)")
		default:
			return "", cli.Usagef("which bucket? give --bucket (FERRY_BUCKETS lists %s)", strings.Join(allowed, ", "))
		}
	}
	if _, err := plan.ParseDestination("gs://" + b); err != nil {
		return "", cli.Usagef("--bucket %q: not a bucket name", flag)
	}
	return b, nil
}

func printJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}

func printStatus(w io.Writer, t transfers.Transfer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, format string, a ...any) { fmt.Fprintf(tw, "%s\t"+format+"\n", append([]any{k}, a...)...) }
	row("transfer", "%s", t.ID)
	row("state", "%s", t.State)
	if t.Destination != "" {
		row("destination", "%s", t.Destination)
	}
	switch {
	case t.State == transfers.StateRunning:
		row("files", "not known until the producer has read everything")
	case t.Ended() && t.Files == 0:
		row("files", "%d done", t.FilesDone)
		if t.BytesDone > 0 {
			row("bytes", "%s done", result.FormatBytes(float64(t.BytesDone)))
		}
	default:
		row("files", "%d of %d done", t.FilesDone, t.Files)
		row("bytes", "%s of %s done", result.FormatBytes(float64(t.BytesDone)), result.FormatBytes(float64(t.Bytes)))
	}
	if !t.Ended() {
		row("staged", "%s, %s compressed", result.Count(t.ChunksStaged, "chunk"), result.FormatBytes(float64(t.WireStaged)))
	}
	if !t.StartedAt.IsZero() {
		row("started", "%s", t.StartedAt.UTC().Format(time.RFC3339))
	}
	if !t.FinishedAt.IsZero() {
		row("finished", "%s (%s)", t.FinishedAt.UTC().Format(time.RFC3339), result.FormatMS(t.FinishedAt.Sub(t.StartedAt).Milliseconds()))
	}
	if t.Error != "" {
		row("error", "%s", t.Error)
	}
	if t.Listing != "" {
		row("listing", "%s (every object and skipped file, NDJSON)", t.Listing)
	}
	_ = tw.Flush()
	if len(t.Objects) == 0 {
		return
	}
	fmt.Fprintln(w, "objects (CRC32C as gcloud storage shows it; raw: the source file)")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, o := range t.Objects {
		fmt.Fprintf(tw, "  %s\t%s\tcrc32c %s\traw %s\tcrc32c %s\n", o.Name, result.FormatBytes(float64(o.Size)), o.CRC32C,
			result.FormatBytes(float64(o.RawSize)), o.RawCRC32C)
	}
	_ = tw.Flush()
	if more := t.FilesDone - len(t.Objects); more > 0 {
		fmt.Fprintf(w, "  … and %s more in %s\n", result.Count(more, "object"), t.Listing)
	}
}

func printList(w io.Writer, ts []transfers.Transfer) {
	if len(ts) == 0 {
		fmt.Fprintln(w, "no transfers")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TRANSFER\tSTATE\tFILES\tSIZE\tSTARTED\tDESTINATION")
	for _, t := range ts {
		files, size := "-", "-"
		switch {
		case t.Files > 0:
			files = fmt.Sprintf("%d/%d", t.FilesDone, t.Files)
			size = result.FormatBytes(float64(t.Bytes))
		case t.Ended():
			files = fmt.Sprintf("%d", t.FilesDone)
			size = result.FormatBytes(float64(t.BytesDone))
		}
		started := "-"
		if !t.StartedAt.IsZero() {
			started = t.StartedAt.UTC().Format(time.RFC3339)
		}
		dest := t.Destination
		if dest == "" {
			dest = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.State, files, size, started, dest)
	}
	_ = tw.Flush()
}
