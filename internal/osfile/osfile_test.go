package osfile

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// A lock held through one handle refuses another at once, and is free
// again once released.
func TestTryLockRefusesASecondHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	open := func() *os.File {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	a, b := open(), open()
	if err := TryLock(a); err != nil {
		t.Fatalf("first lock: %v", err)
	}
	if err := TryLock(b); !errors.Is(err, ErrLocked) {
		t.Fatalf("second lock while the first holds: %v, want ErrLocked", err)
	}
	if err := Unlock(a); err != nil {
		t.Fatal(err)
	}
	if err := TryLock(b); err != nil {
		t.Fatalf("lock after the first let go: %v", err)
	}
}

// WriteFile replaces a file whole, with the permissions asked, and leaves
// no temporary file beside it.
func TestWriteFileReplacesWhole(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "journal")
	for _, want := range []string{"t1\n", "t2-longer\n"} {
		if err := WriteFile(path, []byte(want), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != want {
			t.Fatalf("read %q, %v; want %q", got, err, want)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 {
		t.Fatalf("directory holds %d entries (%v), want the file alone", len(entries), err)
	}
	if fi, _ := os.Stat(path); runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
}

// What change detection reads: a change time that moves when the file
// changes (where the platform has one), the free space of a real file
// system, and a file's bytes on disk.
func TestChangeAndSpace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, make([]byte, 8192), 0o644); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	ino, ctime := Change(fi)
	if runtime.GOOS == "linux" || runtime.GOOS == "darwin" {
		if ino == 0 || ctime == 0 {
			t.Errorf("inode %d, ctime %d: want both", ino, ctime)
		}
		if d := time.Since(time.Unix(0, ctime)); d < -time.Minute || d > time.Hour {
			t.Errorf("ctime %v ago", d)
		}
	}
	if n := Allocated(fi); n <= 0 {
		t.Errorf("allocated %d bytes for 8 KiB", n)
	}
	free, err := FreeSpace(filepath.Dir(path))
	if err != nil || free <= 0 {
		t.Errorf("free space %d, %v", free, err)
	}
	if err := Readable(path); err != nil {
		t.Errorf("readable: %v", err)
	}
	if err := Readable(path + ".missing"); err == nil {
		t.Error("a missing file reads as readable")
	}
}
