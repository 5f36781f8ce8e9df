package progress

import (
	"strings"
	"testing"
	"time"

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
