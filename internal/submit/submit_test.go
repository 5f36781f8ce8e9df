package submit

import (
	"bytes"
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/internal/message"
)

// Report: an ok transfer prints one summary line on stderr that counts the
// skipped files; one that did not end ok is an error naming its status and
// cause; --json prints the done event on stdout either way.
func TestReport(t *testing.T) {
	var out, errOut bytes.Buffer
	ok := message.Done{TransferID: "t1", Status: message.StatusOK, FilesSkipped: 3, Files: 1, Bytes: 2_000_000,
		Objects: []message.DoneObject{{Name: "gs://b/x.zst", RawSize: 2_000_000}}, Timings: message.StageTimingMS{Total: 1500}}
	if err := Report(&out, &errOut, ok, false); err != nil || out.Len() != 0 {
		t.Fatalf("Report = %v, stdout %q", err, out.String())
	}
	if want := "transfer t1 ok: 1 object, 2.0 MB in 1.5s (3 files skipped)\n"; errOut.String() != want {
		t.Fatalf("stderr %q, want %q", errOut.String(), want)
	}
	errOut.Reset()
	if err := Report(&out, &errOut, message.Done{TransferID: "t3", Status: message.StatusOK, FilesSkipped: 1000, Timings: message.StageTimingMS{Total: 108}}, false); err != nil {
		t.Fatal(err)
	}
	if want := "transfer t3 ok: 0 objects in 108ms (1000 files skipped)\n"; errOut.String() != want {
		t.Fatalf("stderr %q, want %q", errOut.String(), want)
	}
	// Issue 41 §4: a file that grew moved its tail only, and the line
	// says so instead of counting the whole object as moved.
	errOut.Reset()
	grew := message.Done{TransferID: "t4", Status: message.StatusOK, Files: 2, Bytes: 151_500_000, Appended: 1, AppendedBytes: 1_500_133,
		FilesWhole: 1, BytesRead: 1_500_133 + 2_000, BytesSent: 510_000 + 1_000, FilesSkipped: 2, Timings: message.StageTimingMS{Total: 576}}
	if err := Report(&out, &errOut, grew, false); err != nil {
		t.Fatal(err)
	}
	if want := "transfer t4 ok in 576ms: 1 file appended (its tail only), 1 sent whole: 1.5 MB read, 511.0 kB sent; 2 objects, 151.5 MB now stored (2 files skipped)\n"; errOut.String() != want {
		t.Fatalf("stderr %q, want %q", errOut.String(), want)
	}
	out.Reset()
	failed := message.Done{TransferID: "t2", Status: message.StatusFailed, Error: "source x: no such file"}
	err := Report(&out, &errOut, failed, true)
	if err == nil || err.Error() != "transfer t2 failed: source x: no such file" || !strings.Contains(out.String(), `"status": "failed"`) {
		t.Fatalf("Report = %v, stdout %q", err, out.String())
	}
}

// Issue 42 §3: a done event's error is text from a message: printed with
// its control characters escaped (a forged one cleared the submitter's
// screen and printed a fake log line), and bounded.
func TestAnEndedErrorIsPrintable(t *testing.T) {
	err := &EndedError{Done: message.Done{TransferID: "t", Status: message.StatusFailed, Error: "\x1b[2J\rINFO all ok\n" + strings.Repeat("x", 10<<10)}}
	got := err.Error()
	if strings.ContainsAny(got, "\x1b\r\n") || !strings.HasPrefix(got, `transfer t failed: \x1b[2J\rINFO all ok\n`) || len(got) > message.MaxErrorBytes+200 {
		t.Fatalf("error %.200q (%d bytes): want the control characters escaped and the text bounded", got, len(got))
	}
}
