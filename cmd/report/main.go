// Command report summarises ferry's benchmark rows — the NDJSON files the
// merger appends one row per transfer to — as the seed notebook did: text
// tables per method and tier, per stage and per codec on stdout and, with
// --html, one self-contained HTML page with the same tables and three
// charts that opens offline.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ferry-dev/ferry/internal/report"
	"github.com/ferry-dev/ferry/internal/result"
)

const help = `report — benchmark tables and charts from ferry's results files.

Usage: report [--html FILE] [--title TITLE] RESULTS.ndjson...

Reads every benchmark row (one JSON object a line, as the merger writes
them, e.g. .run/results.ndjson) of the given files and prints to stdout:
  - per method and tier: runs, median size, wire size, ratio, total time
    and MB/s, fastest first within a tier;
  - where the time goes: median compress, upload, compose, verify and
    total time per method and tier;
  - per codec and level: median ratio and compress MB/s;
  - failed rows per method, if any.
Only rows with status "ok" count in the medians.

With --html FILE it also writes one self-contained HTML page (inline CSS
and SVG charts, no JavaScript, nothing fetched from the network): the
tables, a throughput bar chart by method and tier, a stacked stage chart
and a compression speed-against-ratio scatter chart.

Exit status: 0 on success, 1 when a file cannot be read or written (the
message names the file and, for a bad row, its line), 2 on a usage error.

Flags:
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, time.Now))
}

func run(args []string, stdout, stderr io.Writer, now func() time.Time) int {
	flags := flag.NewFlagSet("report", flag.ContinueOnError)
	flags.SetOutput(stderr)
	htmlOut := flags.String("html", "", "also write the HTML page to `FILE`")
	title := flags.String("title", report.DefaultTitle, "the HTML page's `TITLE` (say \"sample\" when the rows are made up)")
	flags.Usage = func() {
		fmt.Fprintln(flags.Output(), "usage: report [--html FILE] RESULTS.ndjson... (report --help explains)")
	}
	// Flags may come before or after the files.
	var files []string
	for {
		if err := flags.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprint(stdout, help)
				flags.SetOutput(stdout)
				flags.PrintDefaults()
				return 0
			}
			return 2
		}
		args = flags.Args()
		if len(args) == 0 {
			break
		}
		files = append(files, args[0])
		args = args[1:]
	}
	if len(files) == 0 {
		fmt.Fprintln(stderr, "report: no results file given")
		flags.Usage()
		return 2
	}
	var rows []result.Row
	for _, f := range files {
		rs, err := result.ReadFile(f)
		if err != nil {
			if !strings.Contains(err.Error(), f) {
				err = fmt.Errorf("%s: %w", f, err)
			}
			fmt.Fprintf(stderr, "report: %v\n", err)
			return 1
		}
		rows = append(rows, rs...)
	}
	report.Tables(stdout, rows)
	if *htmlOut != "" {
		if err := writeHTML(*htmlOut, rows, now(), *title); err != nil {
			fmt.Fprintf(stderr, "report: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "\nHTML report: %s\n", *htmlOut)
	}
	return 0
}

// writeHTML writes the page to path through a temporary file beside it, so
// a reader never sees half a page.
func writeHTML(path string, rows []result.Row, generated time.Time, title string) error {
	var buf bytes.Buffer
	if err := report.HTMLTitled(&buf, rows, generated, title); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the temporary name means nothing to the user
		}
		return fmt.Errorf("%s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(buf.Bytes()); err != nil {
		tmp.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
