// Command verify proves a finished transfer intact: it downloads every final
// object, decompresses it with restore's code and with the stock zstd/gzip
// CLI (the codec is the object's own ferry-codec), compares the bytes with
// the sources, and prints the transfer's stage table from the
// benchmark rows. `make run` ends with it; users can run it after any
// transfer.
package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ferry-dev/ferry/internal/benchrow"
	"github.com/ferry-dev/ferry/internal/cli"
	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/plan"
	"github.com/ferry-dev/ferry/internal/setup"
	"github.com/ferry-dev/ferry/internal/verify"
)

const about = `verify — prove a ferry transfer intact.

Pairs each source file with its final object as producer submit names it
(.zst, .gz or no extension, as the object's ferry-codec metadata says),
downloads the object, decompresses it with restore's code and with the
stock CLI, and compares the bytes and CRC32Cs. Exits 1 on the first difference. Sizes are
in MB of 10^6 bytes; --long lists each object with its CRC32C as GCS and
gcloud storage show it (base64), and the source's as gcloud storage hash
prints it.`

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

type flags struct {
	results, transfer string
	long              bool
}

func main() { cli.Main(command()) }

func command() *cobra.Command {
	var f flags
	cmd := &cobra.Command{
		Use:     "verify [flags] SOURCE... gs://BUCKET/PREFIX",
		Short:   "prove a ferry transfer intact",
		Long:    about,
		Version: version,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) < 2 {
				return cli.Usagef("verify needs at least one SOURCE and the gs://BUCKET/PREFIX it was transferred to")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return realMain(cmd.Context(), cmd.OutOrStdout(), args, f)
		},
	}
	cmd.Flags().StringVar(&f.results, "results", "", "NDJSON benchmark rows; with --transfer, print that transfer's stage table")
	cmd.Flags().StringVar(&f.transfer, "transfer", "", "transfer id whose stage table to print")
	cmd.Flags().BoolVarP(&f.long, "long", "l", false, "list every object with its sizes and CRC32Cs")
	cli.Env(cmd, &config.Verify{})
	return cmd
}

func realMain(ctx context.Context, stdout io.Writer, args []string, f flags) error {
	var cfg config.Verify
	if err := config.FromEnvironment(ctx, &cfg); err != nil {
		return err
	}
	// Object names without extension; verify.Find adds the object's own.
	dest, files, err := plan.Resolve(args[:len(args)-1], args[len(args)-1], codec.None)
	if err != nil {
		return &cli.UsageError{Err: err}
	}
	store, err := setup.OpenStore(ctx, cfg.Emulators)
	if err != nil {
		return err
	}
	defer store.Close()
	sources := make([]verify.Source, len(files))
	for i, file := range files {
		sources[i] = verify.Source{Path: file.Path, Base: file.Object}
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	var each func(verify.Source, verify.Report)
	if f.long {
		each = func(src verify.Source, rep verify.Report) {
			fmt.Fprintf(tw, "%s\t%s\tcrc32c %s\t%s\t%s\tcrc32c %s\n", rep.Object, benchrow.FormatBytes(float64(rep.WireSize)), crc32c.Base64(rep.WireCRC32C),
				src.Path, benchrow.FormatBytes(float64(rep.RawSize)), crc32c.Base64(rep.RawCRC32C))
		}
	}
	tot, err := verify.Transfer(ctx, store, dest.Bucket, sources, each)
	_ = tw.Flush()
	if err != nil {
		return fmt.Errorf("%w (on %s)", err, cfg.Emulators.GCSEndpoint())
	}
	tools := ""
	for _, t := range []string{"zstd", "gzip"} {
		if tot.CLIs[t] > 0 {
			tools += fmt.Sprintf(", stock %s -d: %d", t, tot.CLIs[t])
		}
	}
	fmt.Fprintf(stdout, "verified %s under %s: %s raw, %s wire; bytes and CRC32C identical to the sources (Go decoder: %d%s)\n",
		benchrow.Count(tot.Objects, "object"), dest, benchrow.FormatBytes(float64(tot.Raw)), benchrow.FormatBytes(float64(tot.Wire)), tot.Objects, tools)
	if f.results == "" || f.transfer == "" {
		return nil
	}
	rows, err := benchrow.ReadFile(f.results)
	if err != nil {
		return err
	}
	for _, r := range rows {
		if r.TransferID == f.transfer {
			fmt.Fprintf(stdout, "\ntransfer %s (%s, %s tier)\n", f.transfer, r.Method, r.Tier)
			benchrow.StageTable(stdout, r)
			return nil
		}
	}
	return fmt.Errorf("%s has no row for transfer %s", f.results, f.transfer)
}
