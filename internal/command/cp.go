package command

import (
	"github.com/spf13/cobra"

	"github.com/ferry-dev/ferry/internal/cli"
	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/copier"
	"github.com/ferry-dev/ferry/internal/setup"
	"github.com/ferry-dev/ferry/internal/submit"
)

const cpAbout = `Copies each SOURCE, a file or a directory (always walked recursively; a
directory keeps its own name, as with gcloud storage cp -r), to
gs://BUCKET/PREFIX/<relative path>.zst, and exits 0 only once every object is
confirmed in a listing of the bucket with the size and CRC32C predicted from
the chunks. SOURCE - reads standard input into one object.

Everything runs in this process: the files are read and compressed on every
core, the chunks uploaded FERRY_CP_UPLOADS (--uploads) at once, each checked
with CRC32C, and composed into the final objects; nothing partial is ever
visible under the destination. The process's memory stays within
FERRY_CP_MEMORY, whatever the file sizes and counts.

On a terminal a progress line shows files, bytes, rate and time left;
elsewhere a line a minute goes to stderr. Ctrl-C stops reading, cancels the
transfer (its staging objects are removed), says so and exits 1. After a
crash (kill -9, a reboot), run the same command again: it takes up the
transfer the first run started, finishes it and removes what that run left.
While one transfer writes under a destination, another that could write the
same objects (the same command again, a directory above or below) is refused
before it sends anything, naming the one that runs.

The flags are producer submit's (docs/usage.md): filters (--exclude,
--include, --files-from), --dry-run, -n, --skip-unchanged (a file that grew
is sent as its tail only) with --checksum, --overwrite, links,
--convert parquet with --bq-table, --codec, --level, --max-rate, --json,
--timeout. The summary line and --json's done event are submit --wait's.
Benchmark rows go to FERRY_RESULTS_FILE (by default results.ndjson in
ferry's state directory), or to BigQuery with FERRY_BQ_DATASET.

Exit status: 0 success, 1 the transfer failed, was interrupted or could not
start, 2 a usage or configuration error.`

func cpCommand(version string) *cobra.Command {
	f := NewFlags()
	var uploads int
	cmd := &cobra.Command{
		Use: "cp [flags] SOURCE... gs://BUCKET/PREFIX",
		Example: `  ferry cp data/ gs://my-bucket/landing
  ferry cp --skip-unchanged logs/ gs://my-bucket/logs
  pg_dump mydb | ferry cp - gs://my-bucket/dumps/mydb.sql`,
		Short: "copy files and directories to gs://BUCKET/PREFIX, in this one process",
		Long:  cpAbout,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			var cfg config.Copy
			if err := config.FromEnvironment(ctx, &cfg); err != nil {
				return err
			}
			if cmd.Flags().Changed("uploads") {
				if uploads < 1 || uploads > 1000 {
					return cli.Usagef("--uploads %d: want 1 to 1000", uploads)
				}
				cfg.Uploads = uploads
			}
			pcfg := cfg.Producer()
			req, err := f.Request(cmd, pcfg, args)
			if err != nil {
				return err
			}
			setup.MemoryLimit(int64(cfg.Memory))
			return copier.Run(ctx, &cfg, submit.Options{
				Request: req, JSON: f.JSON(), DryRun: f.DryRun(), Timeout: f.Timeout(), MaxRate: f.MaxRate(),
				Version: version, ID: submit.HostID(), Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr(),
			})
		},
	}
	f.Register(cmd, false)
	cmd.Flags().IntVarP(&uploads, "uploads", "j", 16, "chunk messages uploaded at once (default FERRY_CP_UPLOADS, 16)")
	cli.Env(cmd, &config.Copy{})
	return cmd
}
