package progress

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ferry-dev/ferry/internal/benchrow"
)

func TestLine(t *testing.T) {
	tests := []struct {
		s    State
		want []string
	}{
		{State{Total: 200e6, Compressed: 100e6, Uploaded: 50e6, Elapsed: time.Second}, []string{" 25%", "compressed 100.0 MB", "uploaded 50.0 MB / 200.0 MB", "composed -", "100.0 MB/s"}},
		{State{Total: 200e6, Compressed: 200e6, Uploaded: 200e6, Elapsed: 2 * time.Second}, []string{"100%", "composing…"}},
		{State{Total: 200e6, Compressed: 200e6, Uploaded: 200e6, Composed: true, Elapsed: 2 * time.Second}, []string{"100%", "composed ✓"}},
		{State{Total: 0, Composed: true}, []string{"100%"}},
		{State{Total: -1, Compressed: 30e6, Uploaded: 20e6, Elapsed: time.Second}, []string{"compressed 30.0 MB  uploaded 20.0 MB  composed -  30.0 MB/s"}},
		// Issue 32 §2: the line says when GCS is pacing the uploads.
		{State{Total: 200e6, Compressed: 100e6, Uploaded: 50e6, Elapsed: time.Second, Paced: 37}, []string{"uploaded 50.0 MB", "GCS pacing (37 slow-downs)"}},
		// Issue 40 §7: files read of those planned, and the time left at
		// the upload rate so far (50 MB in 10 s: 150 MB more in 30 s).
		{State{Total: 200e6, Compressed: 100e6, Uploaded: 50e6, Elapsed: 10 * time.Second, Files: 120, FilesTotal: 300}, []string{"files 120/300", "ETA 30s"}},
	}
	for _, tc := range tests {
		got := Line(tc.s)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("Line(%+v) = %q, want %q in it", tc.s, got, w)
			}
		}
	}
}

// TestSameUnitsAsEverywhere: the bar prints a size as verify and the stage
// table do (result.FormatBytes, 10^6 bytes to the MB).
func TestSameUnitsAsEverywhere(t *testing.T) {
	const n = 10_000_086
	line := Line(State{Total: n, Compressed: n, Uploaded: n, Elapsed: time.Second})
	if want := benchrow.FormatBytes(n); !strings.Contains(line, "compressed "+want) {
		t.Fatalf("bar %q does not print %d bytes as %s", line, n, want)
	}
}

// At 80 and 120 columns a busy line fits, keeping the bar, what is
// uploaded of the total, the rate and the time left before what was
// compressed; a width
// no line fits cuts it.
func TestLineFitsTheTerminal(t *testing.T) {
	s := State{Total: 62.9e6, Compressed: 62.9e6, Uploaded: 4.2e6, Elapsed: 10 * time.Second, Files: 2000, FilesTotal: 2000, Paced: 3}
	whole := Line(s)
	if utf8.RuneCountInString(whole) <= 120 {
		t.Fatalf("the whole line is %d columns; the test needs one wider than 120: %q", utf8.RuneCountInString(whole), whole)
	}
	for _, width := range []int{79, 119} {
		got := LineIn(s, width)
		if n := utf8.RuneCountInString(got); n > width {
			t.Errorf("LineIn(%d) is %d columns: %q", width, n, got)
		}
		for _, want := range []string{"%", "uploaded 4.2 MB / 62.9 MB", "MB/s", "ETA"} {
			if !strings.Contains(got, want) {
				t.Errorf("LineIn(%d) = %q lost %q", width, got, want)
			}
		}
		t.Logf("%3d columns: %s", width, got)
		if strings.Contains(got, "compressed") {
			t.Errorf("LineIn(%d) = %q kept what was compressed before what it dropped", width, got)
		}
	}
	if got := LineIn(s, 20); utf8.RuneCountInString(got) > 20 || !strings.Contains(got, "%") {
		t.Errorf("LineIn(20) = %q, want the bar alone within 20 columns", got)
	}
	if got := LineIn(s, 8); utf8.RuneCountInString(got) != 8 {
		t.Errorf("LineIn(8) = %q, want it cut to 8 columns", got)
	}
	if got := LineIn(s, 0); got != whole {
		t.Errorf("LineIn(0) = %q, want the whole line %q", got, whole)
	}
}
