package benchrow

import (
	"bytes"
	"strings"
	"testing"
)

// TestFormatBytesIsSI: sizes print in the units MB/s uses, 10^6 bytes to
// the MB: the 10,000,086-byte file is 10.0 MB everywhere.
func TestFormatBytesIsSI(t *testing.T) {
	for b, want := range map[float64]string{0: "-", 999: "999 B", 1000: "1.0 kB", 10_000_086: "10.0 MB", 1.2e9: "1.20 GB", 3e12: "3.00 TB"} {
		if got := FormatBytes(b); got != want {
			t.Errorf("FormatBytes(%.0f) = %q, want %q", b, got, want)
		}
	}
}

func TestCountAgrees(t *testing.T) {
	for n, want := range map[int]string{0: "0 objects", 1: "1 object", 2: "2 objects"} {
		if got := Count(n, "object"); got != want {
			t.Errorf("Count(%d) = %q, want %q", n, got, want)
		}
	}
	var b bytes.Buffer
	StageTable(&b, Row{Workers: 1, Chunks: 1, Codec: "zstd", Level: 3, SizeBytes: 10_000_086, WireBytes: 3_500_000, Status: "ok"})
	if out := b.String(); !strings.Contains(out, "upload (1 worker)") || !strings.Contains(out, "compose (1 chunk)") || !strings.Contains(out, "Original: 10.0 MB") {
		t.Errorf("stage table:\n%s", out)
	}
	b.Reset()
	StageTable(&b, Row{Workers: 1, Chunks: 7, Codec: "zstd", Levels: []LevelUse{{1, 2, 10}, {3, 4, 20}, {6, 1, 5}}, Status: "ok"})
	if out := b.String(); !strings.Contains(out, "compress (zstd 1-6)") || !strings.Contains(out, "Levels (chunks): 1: 2 3: 4 6: 1") {
		t.Errorf("stage table of an adaptive transfer:\n%s", out)
	}
}

// Summarize is the spread bench tables and report medians share: min,
// median (the mean of the middle two for an even count) and max, without
// reordering its input.
func TestSummarize(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want Summary
	}{
		{nil, Summary{}},
		{[]float64{3}, Summary{1, 3, 3, 3}},
		{[]float64{5, 1, 3}, Summary{3, 1, 3, 5}},
		{[]float64{4, 1, 3, 2}, Summary{4, 1, 2.5, 4}},
	} {
		in := append([]float64(nil), c.in...)
		if got := Summarize(c.in); got != c.want {
			t.Errorf("Summarize(%v) = %+v, want %+v", c.in, got, c.want)
		}
		for i := range in {
			if in[i] != c.in[i] {
				t.Errorf("Summarize reordered its input: %v", c.in)
			}
		}
	}
}
