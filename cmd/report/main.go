// Command report summarises ferry's benchmark rows — the NDJSON files the
// merger appends one row per transfer to — as the seed notebook did: text
// tables per method and tier, per stage and per codec on stdout and, with
// --html, one self-contained HTML page with the same tables and three
// charts that opens offline.
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"time"

	"github.com/google/renameio/v2"
	"github.com/spf13/cobra"

	"github.com/ferry-dev/ferry/internal/bench/report"
	"github.com/ferry-dev/ferry/internal/benchrow"
	"github.com/ferry-dev/ferry/internal/cli"
)

const help = `report — benchmark tables and charts from ferry's results files.

Reads every benchmark row (one JSON object a line, as the merger writes
them, e.g. .run/results.ndjson) of the given files and prints to stdout:
  - per method and tier: runs, median size, wire size, ratio, total time
    and MB/s, fastest first within a tier;
  - where the time goes: median compress, upload, compose, verify and
    total time per method and tier;
  - per codec and level: median ratio and compress MB/s;
  - failed rows per method, if any.
Only rows with status "ok" count in the medians. Sizes and rates are in
decimal units: MB = 10^6 bytes, MB/s = 10^6 bytes per second.

With --html FILE it also writes one self-contained HTML page (inline CSS
and SVG charts, no JavaScript, nothing fetched from the network): the
tables, a throughput bar chart by method and tier, a stacked stage chart
and a compression speed-against-ratio scatter chart.

Exit status: 0 on success, 1 when a file cannot be read or written (the
message names the file and, for a bad row, its line), 2 on a usage error.`

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() { cli.Main(command(time.Now)) }

// run is main with its arguments, outputs and clock given, for tests.
func run(args []string, stdout, stderr io.Writer, now func() time.Time) int {
	return cli.Run(context.Background(), command(now), args, stdout, stderr)
}

func command(now func() time.Time) *cobra.Command {
	var htmlOut, title string
	cmd := &cobra.Command{
		Use:     "report [--html FILE] [--title TITLE] RESULTS.ndjson...",
		Short:   "benchmark tables and charts from ferry's results files",
		Long:    help,
		Version: version,
		Args: func(_ *cobra.Command, files []string) error {
			if len(files) == 0 {
				return cli.Usagef("no results file given")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, files []string) error {
			return realMain(cmd.OutOrStdout(), files, htmlOut, title, now())
		},
	}
	cmd.Flags().StringVar(&htmlOut, "html", "", "also write the HTML page to `FILE`")
	cmd.Flags().StringVar(&title, "title", report.DefaultTitle, "the HTML page's `TITLE` (say \"sample\" when the rows are made up)")
	return cmd
}

func realMain(stdout io.Writer, files []string, htmlOut, title string, generated time.Time) error {
	var rows []benchrow.Row
	for _, f := range files {
		rs, err := benchrow.ReadFile(f)
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s: no benchmark rows there yet: the merger appends one per transfer to its FERRY_RESULTS_FILE (make run writes .run/results.ndjson): %w", f, err)
		}
		if err != nil {
			if !strings.Contains(err.Error(), f) {
				err = fmt.Errorf("%s: %w", f, err)
			}
			return err
		}
		rows = append(rows, rs...)
	}
	report.Tables(stdout, rows)
	if htmlOut != "" {
		if err := writeHTML(htmlOut, rows, generated, title); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "\nHTML report: %s\n", htmlOut)
	}
	return nil
}

// writeHTML writes the page to path through a temporary file beside it, so
// a reader never sees half a page.
func writeHTML(path string, rows []benchrow.Row, generated time.Time, title string) error {
	var buf bytes.Buffer
	if err := report.HTMLTitled(&buf, rows, generated, title); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := renameio.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // a temporary name means nothing to the user
		}
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
