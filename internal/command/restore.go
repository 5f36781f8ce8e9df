package command

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/ferry-dev/ferry/internal/cli"
	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/restore"
	"github.com/ferry-dev/ferry/internal/setup"
)

const restoreAbout = `restore — bring objects back out of GCS, proven intact.

Restores gs://BUCKET/OBJECT to DEST (a file, or a directory to put it in),
or every object under gs://BUCKET/PREFIX into the directory DEST, keeping
their paths relative to the prefix.

Objects ferry wrote are decompressed (zstd objects frame by frame in
parallel, using the seek table at their end) and their size and CRC32C are
checked against the object's metadata; ferry's .zst/.gz extension is
dropped. Other objects are downloaded as stored. Every byte range is checked
against the object's CRC32C. An output appears under its name only once
proven; one that exists with the same bytes is skipped, one with other bytes
is an error unless --overwrite. An interrupted restore resumes where it
stopped when run again. ferry's own .ferry/ and .ferry-done/ objects are
never restored, and no name may leave DEST.

Each file gets back its modification time and permission bits (never setuid
or setgid) from the object's metadata, ferry's or gcloud storage cp
--preserve-posix's (same keys); its owner and group too when restore runs as
root or with --preserve-posix, and it says once when it cannot.

--to csv gives back delimited text for what producer submit --convert parquet
sent: each directory of Parquet parts (prices.csv/part-00000.parquet, …)
becomes the file of the directory's name (prices.csv; tab-separated for
.tsv) holding the parts' rows in order, every value as ferry read it (a
seed-like CSV comes back byte for byte). Other objects come back as usual.
The objects are restored into DEST/.ferry-to-csv first (an interrupted run
resumes there), then written out and that directory removed.`

type restoreFlags struct {
	o      restore.Options
	memory config.Bytes
	json   bool
	to     string
}

// Restore is the restore command: bin/restore's, and ferry restore's
// (name "restore" either way).
func Restore(version string) *cobra.Command {
	var f restoreFlags
	cmd := &cobra.Command{
		Use:     "restore [flags] gs://BUCKET/PREFIX[/OBJECT] DEST",
		Short:   "bring objects back out of GCS, proven intact",
		Long:    restoreAbout,
		Version: version,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 2 {
				return cli.Usagef("want gs://BUCKET/PREFIX[/OBJECT] and DEST, got %q", args)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRestore(cmd, args[0], args[1], f)
		},
	}
	fs := cmd.Flags()
	fs.Var(&f.memory, "memory", "bound on download buffers and decoder windows held at once (default FERRY_RESTORE_MEMORY, 256MiB)")
	fs.IntVar(&f.o.Concurrency, "concurrency", 0, "byte ranges downloading at once, across all objects (default FERRY_RESTORE_CONCURRENCY, 16)")
	f.o.RangeSize = defaultRangeSize
	fs.Var((*config.Bytes)(&f.o.RangeSize), "range-size", "most bytes one download request covers")
	fs.DurationVar(&f.o.Timeout, "timeout", defaultRequestTimeout, "deadline of each request to GCS")
	fs.BoolVar(&f.o.Overwrite, "overwrite", false, "replace outputs that exist with other bytes")
	fs.BoolVar(&f.o.PreservePosix, "preserve-posix", false, "restore owners and groups from the objects' metadata also when not root (as root they always are); the mode bits always are")
	fs.BoolVar(&f.json, "json", false, "print a JSON summary on stdout")
	fs.StringVar(&f.to, "to", "", "csv: write each directory of Parquet parts (producer submit --convert parquet) back as the delimited file it came from; DEST is a directory")
	cli.Env(cmd, &config.Restore{})
	return cmd
}

// restore's defaults, for ferry cp gs://… DEST too.
const (
	defaultRangeSize      = 16 << 20
	defaultRequestTimeout = 2 * time.Minute
)

// download is ferry cp gs://BUCKET/PATH DEST: a restore at its defaults,
// with cp's --json and --overwrite.
func download(cmd *cobra.Command, src, dest string, asJSON, overwrite bool) error {
	f := restoreFlags{json: asJSON}
	f.o.Overwrite = overwrite
	f.o.RangeSize, f.o.Timeout = defaultRangeSize, defaultRequestTimeout
	return runRestore(cmd, src, dest, f)
}

// runRestore restores src into dest and reports: a progress bar and a summary
// line on a terminal, the summary as JSON with --json, failures on stderr.
func runRestore(cmd *cobra.Command, src, dest string, f restoreFlags) error {
	ctx, stdout, stderr := cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr()
	var cfg config.Restore
	if err := config.FromEnvironment(ctx, &cfg); err != nil {
		return err
	}
	if !cmd.Flags().Changed("memory") {
		f.memory = cfg.Memory
	}
	if !cmd.Flags().Changed("concurrency") {
		f.o.Concurrency = cfg.Concurrency
	}
	f.o.Requests = cfg.Requests
	f.o.Memory = int64(f.memory)
	if err := f.o.Validate(); err != nil {
		return &cli.UsageError{Err: err}
	}
	if err := restore.CheckArgs(src, dest); err != nil {
		return &cli.UsageError{Err: err}
	}
	if err := restore.CheckToCSV(f.to); err != nil {
		return &cli.UsageError{Err: err}
	}
	into := dest
	if f.to == "csv" {
		into = filepath.Join(dest, restore.StageDir)
	}
	toStdout := dest == "-"
	if toStdout {
		if f.json || f.to != "" {
			return cli.Usagef("DEST - writes the object's bytes on stdout: --json and --to would mix with them")
		}
		// The object is restored, and proven, into a directory of its own
		// first; only then do its bytes go to stdout.
		tmp, err := os.MkdirTemp("", "ferry-restore-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		into = tmp
		stdout = stderr // the summary and the bar; stdout is the data's
	}
	store, err := setup.OpenStore(ctx, cfg.Emulators)
	if err != nil {
		return err
	}
	defer store.Close()
	store.SetLog(logging.New(stderr, "warn", "text")) // GCS's push-back, should it come
	r, err := restore.New(store, f.o)
	if err != nil {
		return &cli.UsageError{Err: err}
	}
	bar := startBar(r, stdout, logging.IsTerminal(stdout) && !f.json)
	sum, err := r.Run(ctx, src, into)
	bar.stop(sum)
	if toStdout && err == nil {
		sum.Destination = dest
		err = copyOut(cmd.OutOrStdout(), into, src)
	}
	var csvSum *restore.CSVSummary
	if f.to == "csv" && err == nil {
		cs, cerr := restore.ToCSV(ctx, dest, f.o.Overwrite)
		if cerr != nil {
			err = fmt.Errorf("--to csv: %w (the restored objects stay in %s; run again to finish)", cerr, into)
		}
		sum.Destination, csvSum = dest, &cs
	}
	if errors.Is(err, restore.ErrUsage) {
		return &cli.UsageError{Err: err}
	}
	if f.json {
		if jerr := cli.PrintJSON(stdout, struct {
			restore.Summary
			*restore.CSVSummary
		}{sum, csvSum}); jerr != nil {
			return jerr
		}
	} else {
		// On a terminal after the bar, elsewhere on its own: what moved.
		w := stderr
		if bar.on {
			w = stdout
		}
		fmt.Fprintln(w, sum.Line())
		if csvSum != nil && csvSum.Files > 0 {
			fmt.Fprintf(stderr, "restore: %d delimited files written back from their Parquet parts (%d rows)\n", csvSum.Files, csvSum.Rows)
		}
	}
	if sum.Note != "" {
		fmt.Fprintf(stderr, "restore: %s\n", sum.Note)
	}
	if sum.Failed > 1 {
		for _, e := range sum.Errors {
			fmt.Fprintf(stderr, "restore: %s\n", e)
		}
		if more := sum.Failed - int64(len(sum.Errors)); more > 0 {
			fmt.Fprintf(stderr, "restore: … and %d more\n", more)
		}
	}
	return err
}

// copyOut writes the one file restored under dir to w: DEST - takes one
// object, not a prefix of several.
func copyOut(w io.Writer, dir, src string) error {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		return err
	}
	if len(files) != 1 {
		return cli.Usagef("%s names %d objects; DEST - writes one (give a directory for more)", src, len(files))
	}
	in, err := os.Open(files[0])
	if err != nil {
		return err
	}
	defer in.Close()
	if _, err := io.Copy(w, in); err != nil {
		return fmt.Errorf("write %s to stdout: %w", src, err)
	}
	return nil
}
