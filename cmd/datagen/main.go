// Command datagen writes the deterministic synthetic CSV files that ferry's
// upload benchmarks use. See package internal/datagen for the data itself.
package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/renameio/v2"
	"github.com/spf13/cobra"

	"github.com/ferry-dev/ferry/internal/bench/datagen"
	"github.com/ferry-dev/ferry/internal/cli"
	"github.com/ferry-dev/ferry/internal/config"
)

const about = `datagen writes synthetic daily OHLCV stock data as CSV
(date,symbol,isin,exchange,currency,open,high,low,close,adj_close,volume).
It compresses like the reference notebook's upload files: about 2.8x with
zstd -3, 2.9x with gzip -6 and 1.6x with lz4. The output depends only on
the size and --seed, so every run and machine produces the same bytes.

Tiers:
%s
Sizes accept a kB, MB, GB (powers of 1000) or KiB, MiB, GiB suffix and
underscores, e.g. 200MB or 1_000_000. --out - writes to standard output.`

const examples = `  datagen --tier medium --out medium.csv
  datagen --size 50MB --seed 7 --out sample.csv
  datagen --many 1000 --dir small-files --each 100kB`

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

type flags struct {
	tier, out, dir string
	size, each     config.Bytes
	seed           int64
	many           int
}

func main() { cli.Main(command()) }

func command() *cobra.Command {
	f := flags{each: 100_000}
	var tiers strings.Builder
	for _, t := range datagen.Tiers {
		fmt.Fprintf(&tiers, "  %-7s %14s bytes\n", t.Name, group(t.Size))
	}
	cmd := &cobra.Command{
		Use: `datagen (--tier NAME | --size BYTES) --out FILE [--seed N]
  datagen --many N --dir DIR [--each BYTES] [--seed N]`,
		Short: "write the seed-like synthetic CSV data sets",
		// The usage lines above say which flags go together.
		DisableFlagsInUseLine: true,
		Long:                  fmt.Sprintf(about, tiers.String()),
		Example:               examples,
		Version:               version,
		Args:                  cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return realMain(cmd, f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	fs.SortFlags = false
	fs.StringVar(&f.tier, "tier", "", "size tier `NAME`: small, medium or large")
	fs.Var(&f.size, "size", "target size in `BYTES` (the file ends at the first row boundary at or after it)")
	fs.Int64Var(&f.seed, "seed", 1, "random seed `N`; the same seed and size give the same bytes")
	fs.StringVar(&f.out, "out", "", "output `FILE` (- for standard output)")
	fs.IntVar(&f.many, "many", 0, "write `N` small files part-00000.csv ... instead of one file")
	fs.StringVar(&f.dir, "dir", "", "`DIR` for the --many files (created if missing)")
	fs.Var(&f.each, "each", "approximate size of each --many file in `BYTES`")
	return cmd
}

// check returns the usage error of a flag combination, if any.
func (f *flags) check(set func(string) bool) error {
	switch {
	case set("many") && f.many <= 0:
		return cli.Usagef("--many %d: want a positive number of files", f.many)
	case set("many") && (set("out") || set("tier") || set("size")):
		return cli.Usagef("--many cannot be combined with --out, --tier or --size")
	case set("many") && f.dir == "":
		return cli.Usagef("--many needs --dir")
	case set("many") && f.each <= 0:
		return cli.Usagef("--each %d: want a positive size", f.each)
	case !set("many") && (set("dir") || set("each")):
		return cli.Usagef("--dir and --each only apply with --many")
	case !set("many") && set("tier") && set("size"):
		return cli.Usagef("give either --tier or --size, not both")
	case !set("many") && !set("tier") && !set("size"):
		return cli.Usagef("one of --tier or --size is required")
	case !set("many") && set("size") && f.size <= 0:
		return cli.Usagef("--size %d: want a positive size", f.size)
	case !set("many") && f.out == "":
		return cli.Usagef("--out is required (or use --many)")
	}
	if set("tier") {
		t, err := datagen.TierByName(f.tier)
		if err != nil {
			return cli.Usagef("--tier %v", err)
		}
		f.size = config.Bytes(t.Size)
	}
	return nil
}

func realMain(cmd *cobra.Command, f flags, stdout, stderr io.Writer) error {
	set := cmd.Flags().Changed
	if err := f.check(set); err != nil {
		return err
	}
	start := time.Now()
	var n int64
	var where string
	var err error
	if set("many") {
		where = fmt.Sprintf("%d files in %s", f.many, f.dir)
		if err = datagen.WriteManySmall(f.dir, f.many, int64(f.each), f.seed); err == nil {
			n, err = totalSize(f.dir, f.many)
		}
		if err != nil {
			err = fmt.Errorf("--dir %s: %w", f.dir, err)
		}
	} else {
		where = f.out
		if where == "-" {
			where = "standard output"
		}
		n, err = writeFile(f.out, int64(f.size), f.seed, stdout)
	}
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	fmt.Fprintf(stderr, "datagen: wrote %s bytes to %s in %.2fs (%.0f MB/s)\n",
		group(n), where, elapsed.Seconds(), float64(n)/1e6/max(elapsed.Seconds(), 1e-9))
	return nil
}

// writeFile writes the CSV to path via a temporary file that is renamed into
// place on success, so an interrupted run never leaves a truncated FILE.
func writeFile(path string, size, seed int64, stdout io.Writer) (int64, error) {
	if path == "-" {
		return datagen.WriteCSV(stdout, size, seed)
	}
	f, err := renameio.NewPendingFile(path, renameio.WithPermissions(0o644))
	if err != nil {
		return 0, fmt.Errorf("--out %s: %w", path, err)
	}
	defer func() { _ = f.Cleanup() }() // after the replace, there is nothing to clean up
	n, err := datagen.WriteCSV(f, size, seed)
	if err == nil {
		err = f.CloseAtomicallyReplace()
	}
	if err != nil {
		return n, fmt.Errorf("--out %s: %w", path, err)
	}
	return n, nil
}

func totalSize(dir string, n int) (int64, error) {
	var total int64
	for i := range n {
		fi, err := os.Stat(filepath.Join(dir, fmt.Sprintf("part-%05d.csv", i)))
		if err != nil {
			return total, err
		}
		total += fi.Size()
	}
	return total, nil
}

// group formats n with thousands separators: 1200000000 -> 1_200_000_000.
func group(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "_" + s[i:]
	}
	return s
}
