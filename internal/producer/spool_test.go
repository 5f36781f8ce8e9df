package producer

import (
	"context"
	"errors"
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
	"github.com/ferry-dev/ferry/internal/spool"
	"github.com/ferry-dev/ferry/internal/spool/spooltest"
	"github.com/ferry-dev/ferry/internal/teststack"
	"github.com/ferry-dev/ferry/internal/testutil"
)

// workerSim plays the workers: it removes spool files named in published
// chunk messages, but first lets hold of them pile up, so the producer
// must wait for room.
type workerSim struct {
	fs    *spooltest.Mem
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
	fs := spooltest.NewMem()
	const spoolMax = 4 * (64<<10 + 1<<10) // four chunks
	w := &workerSim{fs: fs, hold: 4, names: make(chan string, 100), done: make(chan struct{})}
	go w.run()
	p := New(Options{Store: nopStore{}, Chunks: w, Events: &teststack.Recorder{}, Spool: fs, SpoolMax: spoolMax, InlineMax: 1 << 10, Concurrency: 2})
	_, err := p.Submit(context.Background(), Request{Sources: []string{src}, Destination: "gs://bkt/x", ChunkSize: 64 << 10})
	close(w.names)
	<-w.done
	testutil.OK(t, err)
	if fs.Writes() != 32 || fs.Peak() > spoolMax || fs.Looks() == 0 {
		t.Fatalf("%d spool writes, peak %d bytes (FERRY_SPOOL_MAX %d), %d looks at the spool; want 32 writes within the bound, having waited",
			fs.Writes(), fs.Peak(), spoolMax, fs.Looks())
	}
	t.Logf("peak %d of %d bytes; the producer looked at its files %d times", fs.Peak(), spoolMax, fs.Looks())
}

// TestSpoolWriteErrorFailsTheTransferCleanly: a full disk (ENOSPC on the
// third spool file) fails Submit with the cause and the chunk named, a
// failed event tells the merger (which removes the staging objects), and the
// transfer's spool files and its share of the bound are gone.
func TestSpoolWriteErrorFailsTheTransferCleanly(t *testing.T) {
	src := filepath.Join(t.TempDir(), "random.bin")
	writeRandom(t, src, 1<<20, 6)
	fs := spooltest.NewMem()
	fs.FailAt, fs.Err = 3, &os.PathError{Op: "write", Path: "spool/x", Err: syscall.ENOSPC}
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
	if names, _ := fs.Names(""); len(names) != 0 || p.spool.Usage() != 0 {
		t.Fatalf("left in the spool: %v (%d bytes counted)", names, p.spool.Usage())
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
	spool         *spooltest.Mem
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
	tid := message.NewTransferID("nightly")
	orphan := filepath.Join(spoolDir, spool.Name(tid, 0, 3)+spool.Temp+"123456")
	other := filepath.Join(spoolDir, spool.Name("t20200101t000000-00000000", 0, 1)+spool.Temp+"654321")
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
