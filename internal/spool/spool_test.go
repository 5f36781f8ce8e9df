package spool_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/spool"
	"github.com/ferry-dev/ferry/internal/spool/spooltest"
	"github.com/ferry-dev/ferry/internal/teststack"
	"github.com/ferry-dev/ferry/internal/testutil"
)

// TestSpoolWaitsWhileFull: a write that would pass the bound waits, looking
// again at the files it wrote, until a worker has removed enough of them.
func TestSpoolWaitsWhileFull(t *testing.T) {
	fs := spooltest.NewMem()
	s := spool.New(fs, 100, nil)
	ctx := context.Background()
	if waited, err := s.Write(ctx, "t-a", [][]byte{make([]byte, 60)}, 60); err != nil || waited {
		t.Fatalf("first write: waited %v, %v; want no wait in an empty spool", waited, err)
	}
	done := make(chan error, 1)
	go func() {
		waited, err := s.Write(ctx, "t-b", [][]byte{make([]byte, 60)}, 60)
		if err == nil && !waited {
			err = errors.New("the write into a full spool says it did not wait")
		}
		done <- err
	}()
	teststack.Until(t, 30*time.Second, "the writer to look at the spool twice while it is full", func() bool {
		return fs.Looks() >= 2
	})
	if ok, _ := fs.Exists("t-b"); ok {
		t.Fatal("t-b was written while the spool was full")
	}
	testutil.OK(t, fs.Remove("t-a")) // a worker finished t-a
	select {
	case err := <-done:
		testutil.OK(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("the write did not go on once the spool had room")
	}
	if u := s.Usage(); u != 60 {
		t.Fatalf("spool usage %d, want 60", u)
	}
	testutil.OK(t, fs.Remove("t-b"))
	if b := s.Backlog(); b != 0 {
		t.Fatalf("backlog %d once the workers removed every file, want 0", b)
	}
}

// TestPrepareSweepsOrphanedTemporaryFiles: a temporary spool file of an attempt that is never
// resubmitted goes once it is older than orphanAge; a fresh one (a write
// under way) stays.
func TestPrepareSweepsOrphanedTemporaryFiles(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "t1-000001"+spool.Temp+"123")
	fresh := filepath.Join(dir, "t2-000001"+spool.Temp+"456")
	done := filepath.Join(dir, "t1-000002")
	for _, p := range []string{old, fresh, done} {
		testutil.OK(t, os.WriteFile(p, []byte("x"), 0o644))
	}
	long := time.Now().Add(-2 * spool.OrphanAge)
	testutil.OK(t, os.Chtimes(old, long, long))
	testutil.OK(t, os.Chtimes(done, long, long))
	testutil.OK(t, spool.Dir{Path: dir}.Prepare())
	for p, want := range map[string]bool{old: false, fresh: true, done: true} {
		if _, err := os.Stat(p); (err == nil) != want {
			t.Errorf("%s: exists %v, want %v", filepath.Base(p), err == nil, want)
		}
	}
}

// backlog looks at the oldest spool files only: a file a worker removed
// behind more than backlogPresent files still there counts until a full
// reclaim (a write into a full spool) finds it gone.
func TestBacklogLooksAtTheOldestFiles(t *testing.T) {
	fs := spooltest.NewMem()
	s := spool.New(fs, 1<<30, nil)
	ctx := context.Background()
	for i := range spool.BacklogPresent + 2 {
		if _, err := s.Write(ctx, fmt.Sprintf("t-%02d", i), [][]byte{make([]byte, 10)}, 10); err != nil {
			t.Fatal(err)
		}
	}
	testutil.OK(t, fs.Remove("t-00"))                                        // the oldest: seen
	testutil.OK(t, fs.Remove(fmt.Sprintf("t-%02d", spool.BacklogPresent+1))) // the newest, behind 16 present: not looked at
	if b, want := s.Backlog(), int64(10*(spool.BacklogPresent+1)); b != want {
		t.Fatalf("backlog %d, want %d (the oldest file gone, the newest not looked at)", b, want)
	}
	s.Reclaim()
	if u, want := s.Usage(), int64(10*spool.BacklogPresent); u != want {
		t.Fatalf("usage %d after a full reclaim, want %d", u, want)
	}
}
