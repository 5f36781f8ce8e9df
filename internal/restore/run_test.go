package restore

import "testing"

// Issue 41 §4: the summary counts what this run wrote and downloaded, not
// what an interrupted run had written or what was only compared.
func TestSummaryLineSaysWhatMoved(t *testing.T) {
	s := Summary{Destination: "out", Objects: 5, Restored: 3, Skipped: 2, RawBytes: 4_000_000, ResumedBytes: 1_000_000, WireBytes: 1_300_000, Seconds: 1.2}
	want := "restored 3 of 5 objects to out in 1.2s: 3.0 MB written (1.0 MB more an interrupted run had written), 1.3 MB downloaded; 2 skipped as identical (only compared), 0 failed"
	if got := s.Line(); got != want {
		t.Fatalf("Line() = %q\nwant       %q", got, want)
	}
}
