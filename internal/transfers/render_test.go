package transfers

import (
	"strings"
	"testing"
	"time"
)

// What producer status and producer list print: the state and counts a
// user reads, the objects with their CRC32C, and where the rest are listed.
func TestWriteStatusAndList(t *testing.T) {
	start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	ended := Transfer{ID: "k1", State: "ok", Destination: "gs://b/tree", Files: 3, FilesDone: 3, Bytes: 3_000_000, BytesDone: 3_000_000,
		StartedAt: start, FinishedAt: start.Add(1500 * time.Millisecond), Listing: "gs://b/.ferry-done/k1.objects.ndjson",
		Objects: []Object{{Name: "gs://b/tree/a.zst", Size: 1000, CRC32C: "AAAAAA==", RawSize: 1_000_000, RawCRC32C: "BBBBBB=="}}}
	running := Transfer{ID: "t2", State: StateRunning, Destination: "gs://b/x", ChunksStaged: 2, WireStaged: 2_000_000}
	var b strings.Builder
	WriteStatus(&b, ended)
	out := b.String()
	for _, want := range []string{"state        ok", "files        3 of 3 done", "bytes        3.0 MB of 3.0 MB done", "finished     2026-12-01T09:00:01Z (1.5s)",
		"gs://b/tree/a.zst", "crc32c AAAAAA==", "… and 2 objects more in gs://b/.ferry-done/k1.objects.ndjson"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	// Issue 41 §4: what moved, beside what is stored, and what was only
	// compared.
	b.Reset()
	grew := ended
	grew.Appended, grew.AppendedBytes, grew.FilesWhole, grew.FilesSkipped, grew.BytesRead, grew.BytesSent = 1, 1_500_000, 2, 4, 1_520_000, 600_000
	WriteStatus(&b, grew)
	for _, want := range []string{"moved        1 file appended (its tail only), 2 sent whole: 1.5 MB read, 600.0 kB sent",
		"skipped      4 files not sent (unchanged or already there: only compared"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, b.String())
		}
	}
	// Issue 42 §5: one that failed before it started shows no duration
	// (it once showed about 292 years).
	b.Reset()
	WriteStatus(&b, Transfer{ID: "f1", State: "failed", FinishedAt: start})
	if out := b.String(); !strings.Contains(out, "2026-12-01T09:00:00Z\n") || strings.Contains(out, "(") {
		t.Errorf("status of a transfer that failed before it started:\n%s", out)
	}
	b.Reset()
	WriteStatus(&b, running)
	if out := b.String(); !strings.Contains(out, "not known until the producer has read everything") || !strings.Contains(out, "2 chunks, 2.0 MB compressed") {
		t.Errorf("status of a running transfer:\n%s", out)
	}
	b.Reset()
	WriteList(&b, []Transfer{ended, running})
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "TRANSFER") || !strings.Contains(lines[1], "3/3") || !strings.Contains(lines[2], "running") {
		t.Errorf("list:\n%s", b.String())
	}
	b.Reset()
	WriteList(&b, nil)
	if b.String() != "no transfers\n" {
		t.Errorf("empty list: %q", b.String())
	}
}

// The bucket is the flag's, else FERRY_BUCKETS' only one; the errors say
// which to give.
func TestBucket(t *testing.T) {
	if b, err := Bucket("gs://mine/", nil); b != "mine" || err != nil {
		t.Errorf("flag: %q, %v", b, err)
	}
	if b, err := Bucket("", []string{"only"}); b != "only" || err != nil {
		t.Errorf("one allowed: %q, %v", b, err)
	}
	if _, err := Bucket("", []string{"a", "b"}); err == nil || !strings.Contains(err.Error(), "FERRY_BUCKETS lists a, b") {
		t.Errorf("two allowed: %v", err)
	}
	if _, err := Bucket("Not_A_Bucket", nil); err == nil || !strings.Contains(err.Error(), "not a bucket name") {
		t.Errorf("bad name: %v", err)
	}
}
