package iobuf

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/ferry-dev/ferry/internal/crc32c"
)

func TestCopyFromAFileIsExactAndBorrowsItsBuffer(t *testing.T) {
	p := filepath.Join(t.TempDir(), "part")
	want := bytes.Repeat([]byte("ferry spool part "), 20_000) // 340 KB: several buffers
	if err := os.WriteFile(p, want, 0o644); err != nil {
		t.Fatal(err)
	}
	copyOnce := func() {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		h := crc32c.New()
		n, err := Copy(h, f)
		if err != nil || n != int64(len(want)) || h.Sum32() != crc32c.Checksum(want) {
			t.Fatalf("copied %d bytes with crc32c %08x, %v; want %d with %08x", n, h.Sum32(), err, len(want), crc32c.Checksum(want))
		}
	}
	copyOnce()
	// Opening the file allocates a little; the copy's buffer must not be
	// among it (io.Copy allocates 32 KiB each time).
	var before, after runtimeBytes
	before.read()
	for range 50 {
		copyOnce()
	}
	after.read()
	if per := (after - before) / 50; per > 16<<10 {
		t.Fatalf("each copy from a file allocated %d bytes; want well under one %d-byte buffer", per, Size)
	}
}

func TestCopyFromMemoryWritesItself(t *testing.T) {
	var out bytes.Buffer
	n, err := Copy(&out, bytes.NewReader([]byte("abc")))
	if err != nil || n != 3 || out.String() != "abc" {
		t.Fatalf("%d %v %q", n, err, out.String())
	}
}

func TestLargeBuffersComeBackAtMostAnEighthOverWhatWasAsked(t *testing.T) {
	for _, n := range []int{1 << 20, 1<<20 + 1, 8<<20 + 4096, 9 << 20, 100 << 20, 256 << 20} {
		b := Get(n)
		if len(b) != n || cap(b) < n || float64(cap(b)) > float64(n)*1.125 {
			t.Errorf("Get(%d): len %d cap %d, want len %[1]d and cap at most an eighth over", n, len(b), cap(b))
		}
		b[0], b[n-1] = 1, 2
		Put(b)
		again := Get(n)
		if cap(again) != cap(b) {
			t.Errorf("Get(%d) after a Put: cap %d, want the class's %d", n, cap(again), cap(b))
		}
	}
	if b := Get(1000); len(b) != 1000 || cap(b) != 1000 {
		t.Errorf("Get(1000): len %d cap %d; small buffers are not pooled", len(b), cap(b))
	}
	Put(make([]byte, 3<<20+5)) // not one of Get's: ignored
}
