package submit

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/ferry-dev/ferry/internal/benchrow"
	"github.com/ferry-dev/ferry/internal/producer"
)

// DryRunLine is one line of `producer submit --dry-run --json`: a file
// that would be sent, one that would be skipped and why, or (Action
// "total", last) the totals.
type DryRunLine struct {
	Action   string `json:"action"` // send, append, skip or total
	Path     string `json:"path,omitempty"`
	Object   string `json:"object,omitempty"`
	Size     int64  `json:"size,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Files    int    `json:"files,omitempty"`
	Bytes    int64  `json:"bytes,omitempty"`
	Skipped  int    `json:"skipped,omitempty"`
	Excluded int    `json:"excluded,omitempty"`
	// Appended is, for an append, the bytes the object holds already
	// (Size is then the tail's).
	Appended int64 `json:"onto,omitempty"`
	// Parts and Schema are set on the first part of a file converted to
	// Parquet: how many parts it has, and their schema in BigQuery's JSON
	// format.
	Parts  int             `json:"parts,omitempty"`
	Schema json.RawMessage `json:"schema,omitempty"`

	schemaText string
}

// PrintDryRun prints what a transfer would send and skip, one line each,
// then the totals: as text, or with asJSON as one DryRunLine a line.
func PrintDryRun(w io.Writer, d *producer.DryRun, asJSON bool) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	bucket := d.Plan.Dest.Bucket
	total := DryRunLine{Action: "total", Excluded: d.Plan.Excluded}
	reasons := map[string]int{}
	emit := func(l DryRunLine) error {
		if asJSON {
			return enc.Encode(l)
		}
		var err error
		switch l.Action {
		case "append":
			_, err = fmt.Fprintf(bw, "append  %s  +%s onto the object's %s  (%s)\n", l.Object, benchrow.FormatBytes(float64(l.Size)),
				benchrow.FormatBytes(float64(l.Appended)), l.Path)
		case "send":
			_, err = fmt.Fprintf(bw, "send  %s  %s  (%s)\n", l.Object, benchrow.FormatBytes(float64(l.Size)), l.Path)
			if err == nil && l.Schema != nil {
				_, err = fmt.Fprintf(bw, "      as %d Parquet parts of schema: %s\n", l.Parts, l.schemaText)
			}
		default:
			_, err = fmt.Fprintf(bw, "skip  %s  %s  (%s)\n", l.Object, l.Reason, l.Path)
		}
		return err
	}
	for _, f := range d.Plan.Files {
		l := DryRunLine{Action: "send", Path: f.Rel, Object: "gs://" + bucket + "/" + f.Object, Size: f.Size}
		if f.Append != nil {
			// Only the tail is read, compressed and sent.
			l.Action, l.Size, l.Appended = "append", f.Size-f.Append.RawSize, f.Append.RawSize
		}
		total.Files++
		total.Bytes += l.Size
		if f.Part != nil && f.Part.Index == 0 {
			ts := f.Part.TableSchema()
			sj, err := ts.MarshalJSON()
			if err != nil {
				return err
			}
			l.Parts, l.Schema, l.schemaText = f.Part.Count, sj, strings.ReplaceAll(ts.String(), "\n", ", ")
		}
		if err := emit(l); err != nil {
			return err
		}
	}
	skip := func(path, object, reason string) error {
		total.Skipped++
		reasons[reason]++
		return emit(DryRunLine{Action: "skip", Path: path, Object: "gs://" + bucket + "/" + object, Reason: reason})
	}
	for _, s := range d.Plan.Skipped {
		if err := skip(s.Rel, s.Object, s.Reason); err != nil {
			return err
		}
	}
	for _, s := range d.Skipped {
		if err := skip(s.Path, s.Object, s.Reason); err != nil {
			return err
		}
	}
	if asJSON {
		if err := enc.Encode(total); err != nil {
			return err
		}
		return bw.Flush()
	}
	fmt.Fprintf(bw, "dry run: would send %s, %s to %s; skip %s%s; %d excluded by filters; nothing was sent\n",
		benchrow.Count(total.Files, "file"), benchrow.FormatBytes(float64(total.Bytes)), d.Plan.Dest,
		benchrow.Count(total.Skipped, "file"), reasonList(reasons), total.Excluded)
	return bw.Flush()
}

func reasonList(reasons map[string]int) string {
	if len(reasons) == 0 {
		return ""
	}
	var parts []string
	for r, n := range reasons {
		parts = append(parts, fmt.Sprintf("%d %s", n, r))
	}
	sort.Strings(parts)
	return " (" + strings.Join(parts, ", ") + ")"
}
