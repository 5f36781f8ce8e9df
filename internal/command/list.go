package command

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ferry-dev/ferry/internal/cli"
	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/transfers"
)

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
			store, b, err := OpenBucket(cmd.Context(), &cfg, bucket)
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
				return cli.PrintJSON(cmd.OutOrStdout(), ts)
			}
			transfers.WriteList(cmd.OutOrStdout(), ts)
			return nil
		},
	}
	cmd.Flags().StringVar(&bucket, "bucket", "", BucketHelp)
	cmd.Flags().IntVar(&limit, "limit", 20, "most ended transfers to list")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the list as JSON")
	return cmd
}
