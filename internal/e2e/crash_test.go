package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/benchrow"
	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/faultproxy"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/localstack"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/plan"
	"github.com/ferry-dev/ferry/internal/producer"
	"github.com/ferry-dev/ferry/internal/teststack"
	"github.com/ferry-dev/ferry/internal/testutil"
	"github.com/ferry-dev/ferry/internal/verify"
)

// slowProxy delays the requests match selects by delay, in front of
// fake-gcs-server; a process that uses it as STORAGE_EMULATOR_HOST has those
// requests in flight for that long.
func slowProxy(t *testing.T, match func(*http.Request) bool, delay time.Duration) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.Start("http://"+fakeGCS.Host, faultproxy.Plan{Match: match, Delay: delay,
		Decide: func(int, *http.Request) faultproxy.Fault { return faultproxy.Slow }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func hostOf(p *faultproxy.Proxy) string { return strings.TrimPrefix(p.URL(), "http://") }

// verifyAll proves every file of req present and intact under its final name.
func (s *stack) verifyAll(req producer.Request) {
	s.t.Helper()
	_, files, err := plan.Resolve(req.Sources, req.Destination, req.Codec)
	if err != nil {
		s.t.Fatal(err)
	}
	for _, f := range files {
		if _, err := verify.Object(context.Background(), s.store, s.bucket, f.Object, req.Codec, f.Path); err != nil {
			s.t.Fatal(err)
		}
	}
}

func rowsOf(t *testing.T, path, tid string) []benchrow.Row {
	t.Helper()
	rows, err := benchrow.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []benchrow.Row
	for _, r := range rows {
		if r.TransferID == tid {
			out = append(out, r)
		}
	}
	return out
}

// Fault 1: kill -9 a worker with a large chunk upload in flight. The message
// comes back, another worker finishes, the object is byte-identical.
func TestKill9WorkerMidUpload(t *testing.T) {
	s := newStack(t, stackOptions{noMerger: true, inlineMax: 4 << 10})
	proxy := slowProxy(t, faultproxy.Uploads, time.Minute)
	s.start("merger", "merger", s.env())
	a := s.start("worker-a", "worker", s.env("STORAGE_EMULATOR_HOST="+hostOf(proxy), "FERRY_WORKER_ID=a"))

	src := filepath.Join(t.TempDir(), "large_upload.csv")
	testutil.WriteCSV(t, src, 20_000_000, 11)
	req := producer.Request{Sources: []string{src}, Destination: "gs://" + s.bucket + "/k9", Codec: codec.Zstd, ChunkSize: 8 << 20}
	wait := s.transferAsync(req)
	teststack.Until(t, 30*time.Second, "an 8 MiB chunk upload in flight in worker a", func() bool { return proxy.Counts().Matched >= 1 })
	a.kill9()
	s.start("worker-b", "worker", s.env("FERRY_WORKER_ID=b"))

	done, err := wait()
	if err != nil || done.Status != message.StatusOK {
		t.Fatalf("transfer: %v, done %+v", err, done)
	}
	s.verifyAll(req)
	s.assertClean()
	if row := s.row(done.TransferID); row.Status != "ok" || row.Workers != 1 {
		t.Fatalf("row %+v, want ok with every chunk uploaded by worker b", row)
	}
}

// Fault 2: kill -9 the merger between the composes of a two-level tree, then
// restart it. The transfer completes with no orphaned intermediates.
func TestKill9MergerBetweenComposes(t *testing.T) {
	s := newStack(t, stackOptions{workers: 2, noMerger: true, inlineMax: 4 << 10})
	// The final compose (the one not into .ferry/) hangs in merger a.
	finalCompose := func(r *http.Request) bool {
		return strings.HasSuffix(r.URL.Path, "/compose") && !strings.Contains(r.URL.Path, "/o/.ferry/")
	}
	proxy := slowProxy(t, finalCompose, time.Minute)
	a := s.start("merger-a", "merger", s.env("STORAGE_EMULATOR_HOST="+hostOf(proxy)))

	src := filepath.Join(t.TempDir(), "tree.csv")
	testutil.WriteCSV(t, src, 3_000_000, 12)
	req := producer.Request{Sources: []string{src}, Destination: "gs://" + s.bucket + "/tree", Codec: codec.Zstd, ChunkSize: 64 << 10}
	wait := s.transferAsync(req)
	teststack.Until(t, 60*time.Second, "merger a to start the final compose", func() bool { return proxy.Counts().Matched >= 1 })
	var intermediates int
	_ = s.store.List(context.Background(), s.bucket, message.StagingRoot, func(a gcs.Attrs) error {
		if strings.Contains(a.Name, "/i/") {
			intermediates++
		}
		return nil
	})
	if intermediates != 2 {
		t.Fatalf("%d intermediate composites before the final compose, want 2 (46 chunks in groups of 32)", intermediates)
	}
	a.kill9()
	if _, err := s.store.Attrs(context.Background(), s.bucket, "tree/tree.csv.zst"); err == nil {
		t.Fatal("the final object exists although its compose never ran")
	}
	s.start("merger-b", "merger", s.env())

	done, err := wait()
	if err != nil || done.Status != message.StatusOK {
		t.Fatalf("transfer: %v, done %+v", err, done)
	}
	s.verifyAll(req)
	s.assertClean() // no orphaned intermediates
	if rows := rowsOf(t, s.results, done.TransferID); len(rows) != 1 || rows[0].Chunks != 46 {
		t.Fatalf("rows %+v, want one row of 46 chunks", rows)
	}
}

// Fault 3: kill -9 the producer in the middle of a file, then submit the
// same request with the same idempotency key: a new run of the same
// transfer. Unchanged, compression is deterministic, so the second run
// republishes the same chunks: workers find those already uploaded present
// with the right CRC32C. Changed in between (the nightly job's file was
// rewritten), what the first run stored is replaced and its chunks still
// queued are dropped (issue 17 §4): the transfer does not fail on its own
// earlier run's objects. Pub/Sub mostly delivers the first run's chunks
// first; TestChunksOfAnEarlierRunAreDropped (worker) forces the order in
// which one comes last. Either way it completes once, with one final
// object holding the file as it is now and one row. A third submit with
// the key reports the finished transfer and starts nothing.
func TestKill9ProducerThenResubmitSameKey(t *testing.T) {
	for _, changed := range []bool{false, true} {
		t.Run(map[bool]string{false: "unchanged", true: "changed"}[changed], func(t *testing.T) {
			kill9ProducerThenResubmit(t, changed)
		})
	}
}

func kill9ProducerThenResubmit(t *testing.T, changed bool) {
	s := newStack(t, stackOptions{workers: 2, inlineMax: 4 << 10})
	src := filepath.Join(t.TempDir(), "big.csv")
	testutil.WriteCSV(t, src, 60_000_000, 13)
	dest := "gs://" + s.bucket + "/resubmit"
	key := fmt.Sprintf("nightly-2026-11-29-%v", changed)
	args := []string{"submit", "--idempotency-key", key, "--chunk-size", "1MiB", src, dest}
	slow := s.env("FERRY_COMPRESS_CONCURRENCY=1")

	first := s.start("producer-1", "producer", slow, args...)
	tid := message.NewTransferID(key)
	teststack.Until(t, 60*time.Second, "chunks of the first producer uploaded", func() bool {
		n := 0
		_ = s.store.List(context.Background(), s.bucket, message.ChunkPrefix(tid), func(gcs.Attrs) error { n++; return nil })
		return n >= 3
	})
	first.kill9()
	if _, err := s.store.ReadAll(context.Background(), s.bucket, message.ManifestObject(tid)); err == nil {
		t.Fatal("the first producer sealed its manifest before it was killed; the test needs a bigger file")
	}
	if changed {
		testutil.WriteCSV(t, src, 60_000_000, 14)
	}

	second := s.start("producer-2", "producer", s.env(), append([]string{"submit", "--wait", "--timeout", "2m"}, args[1:]...)...)
	if code := second.wait(3 * time.Minute); code != 0 {
		t.Fatalf("second submit exited %d:\n%s", code, second.out.String())
	}
	req := producer.Request{Sources: []string{src}, Destination: dest, Codec: codec.Zstd, ChunkSize: 1 << 20}
	s.verifyAll(req)
	s.assertClean()
	if rows := rowsOf(t, s.results, tid); len(rows) != 1 || rows[0].Status != "ok" {
		t.Fatalf("rows %+v, want exactly one ok row", rows)
	}
	var finals []string
	_ = s.store.List(context.Background(), s.bucket, "resubmit/", func(a gcs.Attrs) error { finals = append(finals, a.Name); return nil })
	if len(finals) != 1 {
		t.Fatalf("final objects %v, want one", finals)
	}

	third := s.start("producer-3", "producer", s.env(), append([]string{"submit", "--wait"}, args[1:]...)...)
	if code := third.wait(time.Minute); code != 0 || !strings.Contains(third.out.String(), "already ended") {
		t.Fatalf("third submit exited %d:\n%s", code, third.out.String())
	}
	if rows := rowsOf(t, s.results, tid); len(rows) != 1 {
		t.Fatalf("%d rows after the third submit, want 1", len(rows))
	}
}

// Fault 8: SIGTERM to a worker with uploads in flight, as when a VM leaves
// its instance group. It stops receiving, finishes what runs within
// FERRY_SHUTDOWN_GRACE, exits 0, and the rest is redelivered.
func TestSIGTERMWorkerFinishesInFlightAndExitsZero(t *testing.T) {
	s := newStack(t, stackOptions{inlineMax: 4 << 10})
	proxy := slowProxy(t, faultproxy.Uploads, 1500*time.Millisecond)
	a := s.start("worker-a", "worker", s.env("STORAGE_EMULATOR_HOST="+hostOf(proxy), "FERRY_WORKER_ID=a",
		"FERRY_WORKER_CONCURRENCY=2", "FERRY_SHUTDOWN_GRACE=10s"))

	src := filepath.Join(t.TempDir(), "many_chunks.csv")
	testutil.WriteCSV(t, src, 2_000_000, 14)
	req := producer.Request{Sources: []string{src}, Destination: "gs://" + s.bucket + "/term", Codec: codec.Zstd, ChunkSize: 128 << 10}
	wait := s.transferAsync(req)
	teststack.Until(t, 30*time.Second, "uploads in flight in worker a", func() bool { return proxy.Counts().Matched >= 1 })
	inFlight := proxy.Counts().Matched
	sent := time.Now()
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := a.wait(2 * time.Minute); code != 0 {
		t.Fatalf("worker a exited %d after SIGTERM, want 0:\n%s", code, a.out.String())
	}
	took := time.Since(sent) // measured, not asserted: a busy machine is slow
	if !strings.Contains(a.out.String(), "worker stopped") {
		t.Errorf("worker a did not log an orderly stop:\n%s", tail(a.out.String(), 2000))
	}
	t.Logf("worker a: %d uploads in flight at SIGTERM, stopped after %v", inFlight, took)
	s.start("worker-b", "worker", s.env("FERRY_WORKER_ID=b"))

	done, err := wait()
	if err != nil || done.Status != message.StatusOK {
		t.Fatalf("transfer: %v, done %+v", err, done)
	}
	s.verifyAll(req)
	s.assertClean()
	if row := s.row(done.TransferID); row.Workers != 2 {
		t.Errorf("row says %d workers uploaded chunks, want 2 (a finished its in-flight uploads, b the rest)", row.Workers)
	}
}

// Issue 28 §11: a file's final compose deletes its chunks as part of the
// call (deleteSourceObjects, which the local stack's shim honours as GCS
// does), so that staging never lingers as soft-deleted objects. A merger
// killed after one file's final compose and before the next leaves that
// file's chunks gone; the next merger finds the composing marker, credits
// the composed file from its final object (size, CRC32C, transfer), and
// ends the transfer ok with every byte in place and nothing left behind.
func TestMergerKilledAfterAFinalComposeDeletedItsChunks(t *testing.T) {
	g, err := localstack.StartGCSWith(localstack.GCSOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Stop)
	s := newStack(t, stackOptions{workers: 2, noMerger: true, inlineMax: 4 << 10, gcs: g})
	proxy, a := hangingComposeOfB(t, g, s)

	dir := filepath.Join(t.TempDir(), "two")
	testutil.OK(t, os.MkdirAll(dir, 0o755))
	testutil.WriteCSV(t, filepath.Join(dir, "a.csv"), 600_000, 21)
	testutil.WriteCSV(t, filepath.Join(dir, "b.csv"), 600_000, 22)
	req := producer.Request{Sources: []string{dir}, Destination: "gs://" + s.bucket + "/out", Codec: codec.Zstd, ChunkSize: 64 << 10}
	wait := s.transferAsync(req)
	ctx := context.Background()
	chunksOfA := func() int {
		n := 0
		_ = s.store.List(ctx, s.bucket, message.StagingRoot, func(a gcs.Attrs) error {
			if strings.Contains(a.Name, "/c/000000/") {
				n++
			}
			return nil
		})
		return n
	}
	// The compose call deletes its sources after the composed object is
	// visible (in GCS as in the shim), so the test waits for both; a compose
	// that never deletes them fails here, naming how many are left.
	teststack.UntilSays(t, 60*time.Second, "a.csv composed, its chunks deleted by that compose (deleteSourceObjects), and b.csv's final compose hanging in merger a", func() (bool, string) {
		if _, err := s.store.Attrs(ctx, s.bucket, "out/two/a.csv.zst"); err != nil {
			return false, "a.csv.zst not there yet"
		}
		left, hung := chunksOfA(), proxy.Counts().Matched
		return left == 0 && hung >= 1, fmt.Sprintf("%d of a.csv's chunks left, %d composes of b.csv held", left, hung)
	})
	a.kill9()
	s.start("merger-b", "merger", s.env("STORAGE_EMULATOR_HOST="+g.Host))

	done, err := wait()
	if err != nil || done.Status != message.StatusOK || done.Files != 2 {
		t.Fatalf("transfer: %v, done %+v", err, done)
	}
	s.verifyAll(req)
	s.assertClean()
}

// Issue 30: a merger killed (-9) after it composed an append onto a grown
// file's object and before the transfer's end: the object it composed
// holds the whole file, the next merger ends the transfer ok over it, and
// the earlier bytes are never lost or sent twice.
func TestMergerKilledAfterAnAppendsCompose(t *testing.T) {
	g, s, dir, req, done0 := grownStack(t, 600_000, 31, 3000)
	testutil.WriteCSV(t, filepath.Join(dir, "b.csv"), 600_000, 32) // new: its compose hangs in merger a
	proxy, a := hangingComposeOfB(t, g, s)
	wait := s.transferAsync(req)
	ctx := context.Background()
	teststack.UntilSays(t, 60*time.Second, "a.csv's append composed by merger a, and b.csv's final compose hanging there", func() (bool, string) {
		at, err := s.store.Attrs(ctx, s.bucket, "out/logs/a.csv.zst")
		if err != nil {
			return false, err.Error()
		}
		appended := at.Metadata[message.MetaTransfer] != done0.TransferID
		return appended && proxy.Counts().Matched >= 1, fmt.Sprintf("a.csv.zst by %s, %d composes of b.csv held", at.Metadata[message.MetaTransfer], proxy.Counts().Matched)
	})
	a.kill9()
	s.start("merger-b", "merger", s.env("STORAGE_EMULATOR_HOST="+g.Host))
	done, err := wait()
	if err != nil || done.Status != message.StatusOK || done.Files != 2 || done.Appended != 1 {
		t.Fatalf("transfer: %v, done %+v; want ok over 2 files, a.csv appended", err, done)
	}
	for _, n := range []string{"a.csv", "b.csv"} {
		if _, err := verify.Object(ctx, s.store, s.bucket, "out/logs/"+n+".zst", codec.Zstd, filepath.Join(dir, n)); err != nil {
			t.Fatalf("%s: %v", n, err)
		}
	}
	s.assertClean()
}

// Issue 30: another writer replaces a grown file's object while the
// merger appends to it (here, as the final compose is on its way): GCS
// (the local stack's shim) refuses the compose on the generation the
// producer proved, the transfer fails naming the file, and the other
// writer's object stays as it wrote it.
func TestAnAppendRacingAnotherWriterFailsCleanly(t *testing.T) {
	g, s, _, req, _ := grownStack(t, 300_000, 41, 500)
	other := []byte("another writer's object\n")
	ctx := context.Background()
	final := func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/a.csv.zst/compose") }
	proxy, err := faultproxy.Start("http://"+g.Host, faultproxy.Plan{Match: final, Decide: func(int, *http.Request) faultproxy.Fault {
		// The other writer, just before the compose reaches GCS.
		_, err := s.store.Upload(ctx, s.bucket, "out/logs/a.csv.zst", bytes.NewReader(other), gcs.UploadOptions{Size: int64(len(other)), CRC32C: crc32c.Checksum(other)})
		if err != nil {
			t.Errorf("the other writer: %v", err)
		}
		return faultproxy.None
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	s.start("merger-a", "merger", s.env("STORAGE_EMULATOR_HOST="+hostOf(proxy)))
	done, _ := s.transfer(req)
	if done.Status != message.StatusFailed || !strings.Contains(done.Error, "changed while it was appended to") || proxy.Counts().Matched != 1 {
		t.Fatalf("done %+v (%d composes of a.csv.zst seen); want failed: the object changed", done, proxy.Counts().Matched)
	}
	got, err := s.store.ReadAll(ctx, s.bucket, "out/logs/a.csv.zst")
	if err != nil || !bytes.Equal(got, other) {
		t.Fatalf("the other writer's object is now %d bytes (%v)", len(got), err)
	}
}

// grownStack is a stack of its own GCS (returned: mergers start against it
// or a proxy in front), no merger running, where logs/a.csv of size bytes
// was sent by a merger since killed and then grew by lines records; req
// sends the directory again with --skip-unchanged. It returns the first
// transfer's done event.
func grownStack(t *testing.T, size int64, seed int64, lines int) (*localstack.GCS, *stack, string, producer.Request, message.Done) {
	g, err := localstack.StartGCSWith(localstack.GCSOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Stop)
	s := newStack(t, stackOptions{workers: 2, noMerger: true, inlineMax: 4 << 10, gcs: g})
	dir := filepath.Join(t.TempDir(), "logs")
	testutil.OK(t, os.MkdirAll(dir, 0o755))
	src := filepath.Join(dir, "a.csv")
	testutil.WriteCSV(t, src, size, seed)
	req := producer.Request{Sources: []string{dir}, Destination: "gs://" + s.bucket + "/out", Codec: codec.Zstd, ChunkSize: 64 << 10, SkipUnchanged: true}
	first := s.start("merger-0", "merger", s.env("STORAGE_EMULATOR_HOST="+g.Host))
	done0, err := s.transfer(req)
	if err != nil || done0.Status != message.StatusOK {
		t.Fatalf("first transfer: %v, done %+v", err, done0)
	}
	first.kill9()
	fh, err := os.OpenFile(src, os.O_APPEND|os.O_WRONLY, 0)
	testutil.OK(t, err)
	_, err = fh.WriteString(strings.Repeat("2026-12-04,XYZ,US0000000000,NYSE,USD,1.0,1.0,1.0,1.0,1.0,100\n", lines))
	testutil.OK(t, err)
	testutil.OK(t, fh.Close())
	return g, s, dir, req, done0
}

// hangingComposeOfB starts merger a behind a proxy to g that holds every
// compose of b.csv.zst for a minute.
func hangingComposeOfB(t *testing.T, g *localstack.GCS, s *stack) (*faultproxy.Proxy, *proc) {
	hangB := func(r *http.Request) bool {
		return strings.HasSuffix(r.URL.Path, "/compose") && strings.HasSuffix(strings.TrimSuffix(r.URL.Path, "/compose"), "/b.csv.zst")
	}
	proxy, err := faultproxy.Start("http://"+g.Host, faultproxy.Plan{Match: hangB, Delay: time.Minute,
		Decide: func(int, *http.Request) faultproxy.Fault { return faultproxy.Slow }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	return proxy, s.start("merger-a", "merger", s.env("STORAGE_EMULATOR_HOST="+hostOf(proxy)))
}
