package producer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/teststack"
	"github.com/ferry-dev/ferry/internal/testutil"
)

// TestSpoolWaitsWhileFull: a write that would pass the bound waits, looking
// again at the files it wrote, until a worker has removed enough of them.
func TestSpoolWaitsWhileFull(t *testing.T) {
	fs := newMemSpool()
	s := newSpool(fs, 100, nil)
	s.log = discard()
	ctx := context.Background()
	if waited, err := s.write(ctx, "t-a", [][]byte{make([]byte, 60)}, 60); err != nil || waited {
		t.Fatalf("first write: waited %v, %v; want no wait in an empty spool", waited, err)
	}
	done := make(chan error, 1)
	go func() {
		waited, err := s.write(ctx, "t-b", [][]byte{make([]byte, 60)}, 60)
		if err == nil && !waited {
			err = errors.New("the write into a full spool says it did not wait")
		}
		done <- err
	}()
	teststack.Until(t, 30*time.Second, "the writer to look at the spool twice while it is full", func() bool {
		fs.mu.Lock()
		defer fs.mu.Unlock()
		return fs.exists >= 2
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
	if u := s.usage(); u != 60 {
		t.Fatalf("spool usage %d, want 60", u)
	}
	testutil.OK(t, fs.Remove("t-b"))
	if b := s.backlog(); b != 0 {
		t.Fatalf("backlog %d once the workers removed every file, want 0", b)
	}
}

// workerSim plays the workers: it removes spool files named in published
// chunk messages, but first lets hold of them pile up, so the producer
// must wait for room.
type workerSim struct {
	fs    *memSpool
	hold  int
	names chan string
	done  chan struct{}
}

func (w *workerSim) Publish(_ context.Context, data []byte, _ map[string]string) error {
	c, _, err := message.DecodeChunk(data)
	if err != nil {
		return err
	}
	if c.Spool != "" {
		w.names <- c.Spool
	}
	return nil
}

func (w *workerSim) run() {
	defer close(w.done)
	var held []string
	for n := range w.names {
		held = append(held, n)
		if len(held) >= w.hold {
			for _, h := range held {
				_ = w.fs.Remove(h)
			}
			held = held[:0]
		}
	}
}

// TestSubmitKeepsTheSpoolWithinSpoolMax: a transfer whose spooled chunks
// add up to many times FERRY_SPOOL_MAX never holds more than that at once;
// it waits for the workers and then completes.
func TestSubmitKeepsTheSpoolWithinSpoolMax(t *testing.T) {
	src := filepath.Join(t.TempDir(), "random.bin")
	writeRandom(t, src, 2<<20, 5) // 32 chunks of 64 KiB, incompressible
	fs := newMemSpool()
	const spoolMax = 4 * (64<<10 + 1<<10) // four chunks
	w := &workerSim{fs: fs, hold: 4, names: make(chan string, 100), done: make(chan struct{})}
	go w.run()
	p := New(Options{Store: nopStore{}, Chunks: w, Events: &teststack.Recorder{}, Spool: fs, SpoolMax: spoolMax, InlineMax: 1 << 10, Concurrency: 2})
	_, err := p.Submit(context.Background(), Request{Sources: []string{src}, Destination: "gs://bkt/x", ChunkSize: 64 << 10})
	close(w.names)
	<-w.done
	testutil.OK(t, err)
	if fs.writes != 32 || fs.peak > spoolMax || fs.exists == 0 {
		t.Fatalf("%d spool writes, peak %d bytes (FERRY_SPOOL_MAX %d), %d looks at the spool; want 32 writes within the bound, having waited",
			fs.writes, fs.peak, spoolMax, fs.exists)
	}
	t.Logf("peak %d of %d bytes; the producer looked at its files %d times", fs.peak, spoolMax, fs.exists)
}

// TestSpoolWriteErrorFailsTheTransferCleanly: a full disk (ENOSPC on the
// third spool file) fails Submit with the cause and the chunk named, a
// failed event tells the merger (which removes the staging objects), and the
// transfer's spool files and its share of the bound are gone.
func TestSpoolWriteErrorFailsTheTransferCleanly(t *testing.T) {
	src := filepath.Join(t.TempDir(), "random.bin")
	writeRandom(t, src, 1<<20, 6)
	fs := newMemSpool()
	fs.failAt, fs.err = 3, &os.PathError{Op: "write", Path: "spool/x", Err: syscall.ENOSPC}
	events := &teststack.Recorder{}
	merger := &markerStore{events: events, spool: fs}
	p := New(Options{Store: merger, Chunks: &teststack.Recorder{}, Events: events, Spool: fs, InlineMax: 1 << 10, Concurrency: 2})
	_, err := p.Submit(context.Background(), Request{Sources: []string{src}, Destination: "gs://bkt/x", ChunkSize: 64 << 10})
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "spool chunk") || !strings.Contains(err.Error(), "random.bin") {
		t.Fatalf("Submit = %v, want ENOSPC with the chunk named", err)
	}
	var ev message.Event
	if msgs := events.Messages(); len(msgs) != 1 || message.Decode(msgs[0].Data, &ev) != nil || ev.Type != message.EventFailed ||
		!strings.Contains(ev.Error, "no space left on device") {
		t.Fatalf("events %v, want one failed event with the cause", msgs)
	}
	if merger.filesAtMarker == 0 {
		t.Fatal("spool files were removed before the transfer's done marker existed (or none were written)")
	}
	if names, _ := fs.Names(""); len(names) != 0 || p.spool.usage() != 0 {
		t.Fatalf("left in the spool: %v (%d bytes counted)", names, p.spool.usage())
	}
	if left := pipelineGoroutines(); len(left) > 0 {
		t.Fatalf("%d pipeline goroutines outlived Submit", len(left))
	}
}

// TestRealWriteErrorLeavesNoSpoolFile: the spool directory on a real file
// system refusing a write (RLIMIT_FSIZE makes the kernel answer EFBIG past
// 256 KiB, no root or tmpfs needed) fails the transfer with the kernel's
// error and leaves no spool file, whole or partial. It runs in a child
// process, since the limit holds for the whole process.
func TestRealWriteErrorLeavesNoSpoolFile(t *testing.T) {
	if dir := os.Getenv("FERRY_TEST_FSIZE_SPOOL"); dir != "" {
		realWriteErrorChild(t, dir)
		return
	}
	spool := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestRealWriteErrorLeavesNoSpoolFile$", "-test.v")
	cmd.Env = append(os.Environ(), "FERRY_TEST_FSIZE_SPOOL="+spool)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS") {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if left, _ := os.ReadDir(spool); len(left) != 0 {
		t.Fatalf("%d files left in the spool", len(left))
	}
	t.Logf("child:\n%s", out)
}

func realWriteErrorChild(t *testing.T, spoolDir string) {
	// a.csv compresses: its two spool files are written, then removed when
	// random.bin's first chunk (256 KiB of noise: a little more once
	// compressed) passes the limit.
	srcDir := t.TempDir()
	testutil.WriteCSV(t, filepath.Join(srcDir, "a.csv"), 300_000, 1)
	writeRandom(t, filepath.Join(srcDir, "random.bin"), 600<<10, 7)
	written := 0
	signal.Ignore(syscall.SIGXFSZ)
	lim := syscall.Rlimit{Cur: 256 << 10, Max: 256 << 10}
	testutil.OK(t, syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim))
	p := New(Options{Store: nopStore{}, Chunks: &teststack.Recorder{}, Events: &teststack.Recorder{}, SpoolDir: spoolDir, InlineMax: 1 << 10,
		FailGrace: time.Millisecond, Concurrency: 1, Publishers: 1, MemoryLimit: 1 << 20})
	p.o.Chunks = publishFunc(func() { left, _ := os.ReadDir(spoolDir); written = max(written, len(left)) })
	_, err := p.Submit(context.Background(), Request{Sources: []string{srcDir}, Destination: "gs://bkt/x", ChunkSize: 256 << 10})
	if !errors.Is(err, syscall.EFBIG) || !strings.Contains(err.Error(), "random.bin") {
		t.Fatalf("Submit = %v, want the kernel's EFBIG for random.bin", err)
	}
	if written == 0 {
		t.Fatal("no spool file was written before the error; the test proves nothing")
	}
	t.Logf("Submit failed as it should: %v", err)
}

// publishFunc is a publisher that calls f for every message.
type publishFunc func()

func (f publishFunc) Publish(context.Context, []byte, map[string]string) error { f(); return nil }

// markerStore plays the merger for a failed transfer: the done marker
// exists once a failed event was published. It notes how many spool files
// were still there when the producer first saw the marker.
type markerStore struct {
	nopStore
	events        *teststack.Recorder
	spool         *memSpool
	filesAtMarker int
}

func (m *markerStore) ReadAll(_ context.Context, _, name string) ([]byte, error) {
	if !strings.HasPrefix(name, message.DoneRoot) || len(m.events.Messages()) == 0 {
		return nil, gcs.ErrNotFound
	}
	if m.filesAtMarker == 0 {
		names, _ := m.spool.Names("")
		m.filesAtMarker = len(names)
	}
	return []byte("{}"), nil
}

// TestResubmitRemovesTheKilledRunsTemporaryFiles: a producer killed while it
// wrote a spool file leaves the temporary file behind; the run that
// resubmits the same transfer removes it once it has sealed, and touches
// no other transfer's files.
func TestResubmitRemovesTheKilledRunsTemporaryFiles(t *testing.T) {
	spoolDir := t.TempDir()
	tid := NewTransferID("nightly")
	orphan := filepath.Join(spoolDir, spoolName(tid, 0, 3)+spoolTemp+"123456")
	other := filepath.Join(spoolDir, spoolName("t20200101t000000-00000000", 0, 1)+spoolTemp+"654321")
	for _, f := range []string{orphan, other} {
		testutil.OK(t, os.WriteFile(f, []byte("half a frame"), 0o644))
	}
	src := filepath.Join(t.TempDir(), "f.csv")
	testutil.OK(t, os.WriteFile(src, []byte("a,b\n1,2\n"), 0o644))
	p := New(Options{Store: nopStore{}, Chunks: nopPublisher{}, Events: &teststack.Recorder{}, SpoolDir: spoolDir})
	_, err := p.Submit(context.Background(), Request{Sources: []string{src}, Destination: "gs://bkt/x", ChunkSize: 1 << 20, IdempotencyKey: "nightly"})
	testutil.OK(t, err)
	if _, err := os.Stat(orphan); !os.IsNotExist(err) {
		t.Errorf("the killed run's temporary file %s is still there (%v)", filepath.Base(orphan), err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("another transfer's file was touched: %v", err)
	}
}

// Issue 17 §4: a temporary spool file of an attempt that is never
// resubmitted goes once it is older than orphanAge; a fresh one (a write
// under way) stays.
func TestPrepareSweepsOrphanedTemporaryFiles(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "t1-000001"+spoolTemp+"123")
	fresh := filepath.Join(dir, "t2-000001"+spoolTemp+"456")
	done := filepath.Join(dir, "t1-000002")
	for _, p := range []string{old, fresh, done} {
		testutil.OK(t, os.WriteFile(p, []byte("x"), 0o644))
	}
	long := time.Now().Add(-2 * orphanAge)
	testutil.OK(t, os.Chtimes(old, long, long))
	testutil.OK(t, os.Chtimes(done, long, long))
	testutil.OK(t, dirSpool{dir}.Prepare())
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
	fs := newMemSpool()
	s := newSpool(fs, 1<<30, discard())
	ctx := context.Background()
	for i := range backlogPresent + 2 {
		if _, err := s.write(ctx, fmt.Sprintf("t-%02d", i), [][]byte{make([]byte, 10)}, 10); err != nil {
			t.Fatal(err)
		}
	}
	testutil.OK(t, fs.Remove("t-00"))                                  // the oldest: seen
	testutil.OK(t, fs.Remove(fmt.Sprintf("t-%02d", backlogPresent+1))) // the newest, behind 16 present: not looked at
	if b, want := s.backlog(), int64(10*(backlogPresent+1)); b != want {
		t.Fatalf("backlog %d, want %d (the oldest file gone, the newest not looked at)", b, want)
	}
	s.mu.Lock()
	s.reclaimLocked()
	s.mu.Unlock()
	if u, want := s.usage(), int64(10*backlogPresent); u != want {
		t.Fatalf("usage %d after a full reclaim, want %d", u, want)
	}
}
