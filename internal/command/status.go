package command

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ferry-dev/ferry/internal/cli"
	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/setup"
	"github.com/ferry-dev/ferry/internal/transfers"
)

// BucketHelp is the help of a --bucket flag of the transfer
const BucketHelp = "bucket of the transfers, BUCKET or gs://BUCKET (default: the one bucket FERRY_BUCKETS lists)"

// Status is the status command (producer status, ferry status).
func Status() *cobra.Command {
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
		Args: ExactlyOneID,
		RunE: func(cmd *cobra.Command, args []string) error {
			var cfg config.Producer
			store, b, err := OpenBucket(cmd.Context(), &cfg, bucket)
			if err != nil {
				return err
			}
			defer store.Close()
			t, err := transfers.Status(cmd.Context(), store, b, args[0])
			if err != nil {
				return fmt.Errorf("%w (on %s)", err, cfg.Emulators.GCSEndpoint())
			}
			if asJSON {
				return cli.PrintJSON(cmd.OutOrStdout(), t)
			}
			transfers.WriteStatus(cmd.OutOrStdout(), t)
			return nil
		},
	}
	cmd.Flags().StringVar(&bucket, "bucket", "", BucketHelp)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the status as JSON")
	return cmd
}

// ExactlyOneID accepts one argument, a transfer id.
func ExactlyOneID(_ *cobra.Command, args []string) error {
	if len(args) != 1 {
		return cli.Usagef("want one TRANSFER_ID (the id producer submit printed), got %d arguments", len(args))
	}
	if err := transfers.CheckID(args[0]); err != nil {
		return &cli.UsageError{Err: err}
	}
	return nil
}

// OpenBucket loads cfg, picks the bucket and opens GCS.
func OpenBucket(ctx context.Context, cfg *config.Producer, flag string) (*gcs.Store, string, error) {
	if err := config.FromEnvironment(ctx, cfg); err != nil {
		return nil, "", err
	}
	b, err := BucketOf(flag, *cfg)
	if err != nil {
		return nil, "", err
	}
	store, err := setup.OpenStore(ctx, cfg.Emulators)
	return store, b, err
}

// BucketOf is --bucket, or else the one bucket FERRY_BUCKETS allows.
func BucketOf(flag string, cfg config.Producer) (string, error) {
	b, err := transfers.Bucket(flag, cfg.Buckets.Allowed)
	if err != nil {
		return "", &cli.UsageError{Err: err}
	}
	return b, nil
}
