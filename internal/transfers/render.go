package transfers

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ferry-dev/ferry/internal/benchrow"
	"github.com/ferry-dev/ferry/internal/message"
)

// Bucket is the bucket a command about transfers looks in: flag (BUCKET or
// gs://BUCKET), or else the one bucket allowed (FERRY_BUCKETS) lists.
func Bucket(flag string, allowed []string) (string, error) {
	b := strings.TrimSuffix(strings.TrimPrefix(flag, "gs://"), "/")
	if b == "" {
		switch len(allowed) {
		case 1:
			b = allowed[0]
		case 0:
			return "", errors.New("which bucket? give --bucket (FERRY_BUCKETS, which would say, is empty)")
		default:
			return "", fmt.Errorf("which bucket? give --bucket (FERRY_BUCKETS lists %s)", strings.Join(allowed, ", "))
		}
	}
	if !message.ValidBucket(b) {
		return "", fmt.Errorf("--bucket %.64q: not a bucket name", flag)
	}
	return b, nil
}

// WriteStatus renders t as producer status prints it: one "key  value" line
// each, then its final objects (at most the done event's, with where the
// rest are).
func WriteStatus(w io.Writer, t Transfer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, format string, a ...any) { fmt.Fprintf(tw, "%s\t"+format+"\n", append([]any{k}, a...)...) }
	row("transfer", "%s", t.ID)
	row("state", "%s", t.State)
	if t.Destination != "" {
		row("destination", "%s", t.Destination)
	}
	switch {
	case t.State == StateRunning:
		row("files", "not known until the producer has read everything")
	case t.Ended() && t.Files == 0:
		row("files", "%d done", t.FilesDone)
		if t.BytesDone > 0 {
			row("bytes", "%s done", benchrow.FormatBytes(float64(t.BytesDone)))
		}
	default:
		row("files", "%d of %d done", t.FilesDone, t.Files)
		row("bytes", "%s of %s done", benchrow.FormatBytes(float64(t.BytesDone)), benchrow.FormatBytes(float64(t.Bytes)))
	}
	if sh := t.Shards; sh != nil {
		total := fmt.Sprintf("of %d", sh.Total)
		if t.State == StateRunning {
			total = fmt.Sprintf("of %d so far: the walk may cut more", sh.Total)
		}
		row("shards", "%d done, %d claimed, %d waiting (%s)", sh.Done, sh.Claimed, sh.Waiting, total)
		for _, g := range sh.Agents {
			line := fmt.Sprintf("%s sent, %s", benchrow.FormatBytes(float64(g.Bytes)), benchrow.Count(g.Done, "shard"))
			if g.Claimed > 0 {
				line += fmt.Sprintf("; holds %d, claimed since %s", g.Claimed, g.Since.UTC().Format(time.RFC3339))
			}
			if g.Refused > 0 {
				line += fmt.Sprintf("; could not read %s", benchrow.Count(g.Refused, "shard"))
			}
			row("  agent "+g.Agent, "%s", line)
		}
	} else if len(t.Agents) > 0 {
		for _, a := range t.Agents {
			row("  agent "+a.Agent, "%s sent", benchrow.FormatBytes(float64(a.Bytes)))
		}
	}
	if !t.Ended() {
		row("staged", "%s, %s compressed", benchrow.Count(t.ChunksStaged, "chunk"), benchrow.FormatBytes(float64(t.WireStaged)))
	}
	if !t.StartedAt.IsZero() {
		row("started", "%s", t.StartedAt.UTC().Format(time.RFC3339))
	}
	switch {
	case !t.FinishedAt.IsZero() && !t.StartedAt.IsZero() && !t.FinishedAt.Before(t.StartedAt):
		row("finished", "%s (%s)", t.FinishedAt.UTC().Format(time.RFC3339), benchrow.FormatMS(t.FinishedAt.Sub(t.StartedAt).Milliseconds()))
	case !t.FinishedAt.IsZero():
		// Ended before it started to send (refused, failed before
		// sealing): no duration to tell.
		row("finished", "%s", t.FinishedAt.UTC().Format(time.RFC3339))
	}
	if t.Error != "" {
		row("error", "%s", t.Error)
	}
	if t.Listing != "" {
		row("listing", "%s (every object and skipped file, NDJSON)", t.Listing)
	}
	if t.Ended() && (t.BytesRead > 0 || t.FilesSkipped > 0) {
		m := benchrow.Moved{Whole: t.FilesWhole, Appended: t.Appended, Converted: t.FilesConverted, Read: t.BytesRead, Sent: t.BytesSent}
		row("moved", "%s", m)
	}
	if t.FilesSkipped > 0 {
		row("skipped", "%s not sent (unchanged or already there: only compared; the listing says each one's reason)", benchrow.Count(t.FilesSkipped, "file"))
	}
	if t.Appended > 0 {
		row("appended", "%s grew and went as their tail only: %s", benchrow.Count(t.Appended, "file"), benchrow.FormatBytes(float64(t.AppendedBytes)))
	}
	if t.Rejected > 0 {
		row("rejected", "%s left out (--bad-rows), each named in a rejects.ndjson beside its file's parts", benchrow.Count(int(t.Rejected), "record"))
	}
	if l := t.Load; l != nil {
		if l.JobID == "" {
			row("table", "%s: nothing loaded: every file to load was unchanged (--skip-unchanged)", l.Table)
		} else if l.Rows < 0 { // objects as sent, on the local stack: nothing counted them
			row("table", "%s: load job %s written to the loads file (%s)", l.Table, l.JobID, l.Location)
		} else {
			row("table", "%s: %d rows loaded by job %s (%s)", l.Table, l.Rows, l.JobID, l.Location)
		}
	}
	_ = tw.Flush()
	if len(t.Objects) == 0 {
		return
	}
	fmt.Fprintln(w, "objects (CRC32C as gcloud storage shows it; raw: the source file)")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, o := range t.Objects {
		fmt.Fprintf(tw, "  %s\t%s\tcrc32c %s\traw %s\tcrc32c %s\n", o.Name, benchrow.FormatBytes(float64(o.Size)), o.CRC32C,
			benchrow.FormatBytes(float64(o.RawSize)), o.RawCRC32C)
	}
	_ = tw.Flush()
	if more := t.FilesDone - len(t.Objects); more > 0 {
		fmt.Fprintf(w, "  … and %s more in %s\n", benchrow.Count(more, "object"), t.Listing)
	}
}

// WriteList renders ts as producer list prints them: a table, one
// transfer a line.
func WriteList(w io.Writer, ts []Transfer) {
	if len(ts) == 0 {
		fmt.Fprintln(w, "no transfers")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TRANSFER\tSTATE\tFILES\tSIZE\tSTARTED\tDESTINATION")
	for _, t := range ts {
		files, size := "-", "-"
		switch {
		case t.Files > 0:
			files = fmt.Sprintf("%d/%d", t.FilesDone, t.Files)
			size = benchrow.FormatBytes(float64(t.Bytes))
		case t.Ended():
			files = fmt.Sprintf("%d", t.FilesDone)
			size = benchrow.FormatBytes(float64(t.BytesDone))
		}
		started := "-"
		if !t.StartedAt.IsZero() {
			started = t.StartedAt.UTC().Format(time.RFC3339)
		}
		dest := t.Destination
		if dest == "" {
			dest = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.State, files, size, started, dest)
	}
	_ = tw.Flush()
}
