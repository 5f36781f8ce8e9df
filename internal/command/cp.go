package command

import (
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ferry-dev/ferry/internal/cli"
	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/copier"
	"github.com/ferry-dev/ferry/internal/setup"
	"github.com/ferry-dev/ferry/internal/submit"
)

const cpAbout = `Copies each SOURCE (a file, a directory, or - for standard input) to
gs://BUCKET/PREFIX, compressed with zstd (NAME.zst; --codec none keeps the
names); gs://BUCKET/PATH DEST copies back, as ferry restore does (DEST -:
stdout). It exits 0 only once every object is confirmed in a listing of the
bucket with the size and CRC32C predicted from its chunks; nothing partial
is ever visible under the destination.

Everything runs in this one process, within FERRY_CP_MEMORY. Ctrl-C cancels
and removes what was staged; after a crash, the same command again finishes
the transfer. A second copy into the same objects is refused while one runs.

Exit status: 0 success, 1 the transfer failed or was interrupted, 2 a usage
or configuration error. docs/usage.md has the rest.`

func cpCommand(version string) *cobra.Command {
	f := NewFlags()
	var uploads int
	cmd := &cobra.Command{
		Use: "cp [flags] SOURCE... gs://BUCKET/PREFIX",
		Example: `  ferry cp data/ gs://my-bucket/landing
  ferry cp gs://my-bucket/landing/data/ ./back/      # and back, as ferry restore does
  ferry cp --skip-unchanged logs/ gs://my-bucket/logs
  pg_dump mydb | ferry cp - gs://my-bucket/dumps/mydb.sql`,
		Short: "copy files and directories to gs://BUCKET/PREFIX, in this one process",
		Long:  cpAbout,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 2 && strings.HasPrefix(args[0], "gs://") && !strings.HasPrefix(args[1], "gs://") {
				// Out of GCS: the restore engine, its checks and resume.
				var upOnly []string
				cmd.Flags().Visit(func(fl *pflag.Flag) {
					if fl.Name != "json" && fl.Name != "overwrite" {
						upOnly = append(upOnly, "--"+fl.Name)
					}
				})
				if len(upOnly) > 0 {
					return cli.Usagef("%s: a copy out of GCS takes --overwrite and --json only (ferry restore has the rest)", strings.Join(upOnly, ", "))
				}
				return download(cmd, args[0], args[1], f.JSON(), f.overwrite)
			}
			ctx := cmd.Context()
			var cfg config.Copy
			if err := config.FromEnvironment(ctx, &cfg); err != nil {
				return err
			}
			if cmd.Flags().Changed("uploads") {
				if uploads < 1 || uploads > config.MaxRequests {
					return cli.Usagef("--uploads %d: want 1 to %d", uploads, config.MaxRequests)
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
	cmd.Flags().IntVarP(&uploads, "uploads", "j", 0, "most requests in flight, a cap (default FERRY_CP_UPLOADS, 512)")
	fs := cmd.Flags()
	fs.Lookup("chunk-size").Usage = "chunk size, 1MiB to 1GiB (default FERRY_CHUNK_SIZE, 8MiB)"
	fs.Lookup("json").Usage = "print one JSON document on stdout: the done event, or the error"
	cli.Brief(cmd)
	cli.Group(cmd, "Copying", "no-clobber", "overwrite", "skip-unchanged", "checksum", "recursive", "codec", "level", "dry-run")
	cli.Group(cmd, "Filters and links", "exclude", "include", "files-from", "follow-symlinks", "ignore-symlinks", "skip-unreadable")
	cli.Group(cmd, "Speed", "uploads", "max-rate", "chunk-size", "timeout")
	cli.Group(cmd, "Tables", "convert", "bq-table", "bq-write")
	cli.Group(cmd, "Output and help", "json", "help-all", "help")
	cli.Group(cmd, cli.Advanced, "no-append", "convert-match", "schema", "encoding", "quote", "null-marker", "infer-rows", "bad-rows",
		"parquet-compression", "method", "label", "idempotency-key")
	cli.Env(cmd, &config.Copy{})
	return cmd
}
