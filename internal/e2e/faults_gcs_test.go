package e2e

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/faultproxy"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/plan"
	"github.com/ferry-dev/ferry/internal/producer"
	"github.com/ferry-dev/ferry/internal/testutil"
	"github.com/ferry-dev/ferry/internal/verify"
)

// Fault 6: faults between the workers and GCS. The workers reach
// fake-gcs-server through a proxy that resets upload connections in the
// middle of the body, answers 503, or forwards slowly; the producer and the
// merger go direct. The worker does not retry an upload itself: the message
// is nacked and Pub/Sub redelivers it, at most 5 times (the retry policy asks
// for a 1 s minimum backoff; the Java emulator redelivers a first nack within
// about 100 ms, later ones after 1-3 s). So faults are bounded to one per
// object, and every transfer must still end ok with byte-identical objects,
// and no partial object may ever be visible under a final name.
func TestFaultsBetweenWorkersAndGCS(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault faultproxy.Fault
	}{
		{"reset mid-body", faultproxy.Reset},
		{"503", faultproxy.Status503},
		{"slow", faultproxy.Slow},
	} {
		t.Run(tc.name, func(t *testing.T) { testGCSFault(t, tc.fault) })
	}
}

func testGCSFault(t *testing.T, fault faultproxy.Fault) {
	start := time.Now()
	const chunk = 64 << 10
	dir := filepath.Join(t.TempDir(), "faulty")
	big, small := filepath.Join(dir, "big.csv"), filepath.Join(dir, "small.csv")
	testutil.WriteCSV(t, big, 700_000, 61)  // 11 chunks through the spool, composed by the merger
	testutil.WriteCSV(t, small, 40_000, 62) // one chunk: the worker writes the final object itself
	prefix := "faults"
	req := producer.Request{Sources: []string{dir}, Destination: "gs://bucket-set-below/" + prefix,
		Codec: codec.Zstd, Level: 3, ChunkSize: chunk, Method: "e2e-gcs-faults"} // a fixed level: predictWire's

	_, files, err := plan.Resolve(req.Sources, req.Destination, req.Codec)
	if err != nil {
		t.Fatal(err)
	}
	finals := map[string]string{} // local path → final object name
	for _, f := range files {
		finals[f.Path] = f.Object
	}
	smallObject := finals[small]

	// Reset and 503 hit the first upload of the single-chunk final object
	// and of every third other upload, once per object: each message fails
	// at most once, far below the 5 attempts of the dead-letter policy.
	// Slow delays every upload.
	var smallHit atomic.Bool
	plan := faultproxy.Plan{Match: faultproxy.Uploads}
	if fault == faultproxy.Slow {
		plan.Fault, plan.Every, plan.Delay = faultproxy.Slow, 1, 200*time.Millisecond
	} else {
		hit := map[string]bool{} // Decide calls are serialized
		plan.Decide = func(n int, r *http.Request) faultproxy.Fault {
			name := r.URL.Query().Get("name")
			if hit[name] || (name != smallObject && n%3 != 1) {
				return faultproxy.None
			}
			hit[name] = true
			if name == smallObject {
				smallHit.Store(true)
			}
			return fault
		}
	}
	proxy, err := faultproxy.Start("http://"+fakeGCS.Host, plan)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })

	s := newStack(t, stackOptions{workers: 2, inlineMax: 4 << 10, workerEndpoint: proxy.URL() + "/storage/v1/"})
	req.Destination = "gs://" + s.bucket + "/" + prefix

	// Watch the final names while the transfer runs: whatever is visible
	// under them is recorded, to be compared with the finished objects.
	stop := watchFinals(t, s, finals)
	done, err := s.transfer(req)
	seen := stop()
	if err != nil || done.Status != message.StatusOK {
		t.Fatalf("transfer: %v, done %+v", err, done)
	}

	// The faults really happened, and each was followed by a retry.
	c := proxy.Counts()
	chunks := 0
	for _, f := range files {
		_, _, n := predictWire(t, f.Path, codec.Zstd, chunk)
		chunks += n
	}
	t.Logf("%s: %d chunk uploads; proxy counts %+v; %d observations of final names; %v",
		fault, chunks, c, len(seen), time.Since(start).Round(time.Millisecond))
	switch fault {
	case faultproxy.Reset:
		if c.Reset == 0 || c.ResetMidBody != c.Reset {
			t.Errorf("want connections reset, all of them mid-body: %+v", c)
		}
	case faultproxy.Status503:
		if c.Status503 == 0 {
			t.Errorf("no 503 was injected: %+v", c)
		}
	case faultproxy.Slow:
		if c.Slow < chunks {
			t.Errorf("%d slow uploads, want every one of the %d chunks: %+v", c.Slow, chunks, c)
		}
	}
	if fault != faultproxy.Slow {
		if !smallHit.Load() {
			t.Errorf("the single-chunk final object %s was never hit by a fault", smallObject)
		}
		if c.Matched < chunks+c.Faults() {
			t.Errorf("%d uploads through the proxy, want at least %d chunks + %d retries", c.Matched, chunks, c.Faults())
		}
	}

	// The finished objects are the predicted ones, byte for byte.
	want := map[string]message.DoneObject{}
	for _, o := range done.Objects {
		want[o.Name] = o
	}
	if len(done.Objects) != len(files) {
		t.Fatalf("done objects %+v, want %d", done.Objects, len(files))
	}
	for _, f := range files {
		o, ok := want["gs://"+s.bucket+"/"+f.Object]
		wantCRC, wantSize, _ := predictWire(t, f.Path, codec.Zstd, chunk)
		if !ok || o.Size != wantSize || o.CRC32C != wantCRC {
			t.Fatalf("done object of %s: %+v, want %d bytes with crc32c %08x", f.Path, o, wantSize, wantCRC)
		}
		rep, err := verify.Object(context.Background(), s.store, s.bucket, f.Object, codec.Zstd, f.Path)
		if err != nil {
			t.Fatal(err)
		}
		if rep.CLI != "zstd" {
			t.Errorf("the stock zstd CLI did not check %s (not on PATH?)", f.Object)
		}
	}

	// Nothing partial was ever visible under a final name, and nothing
	// replaced a final object once it was there.
	generation := map[string]int64{}
	for _, a := range seen {
		o := want["gs://"+s.bucket+"/"+a.Name]
		if a.Size != o.Size || a.CRC32C != o.CRC32C {
			t.Errorf("gs://%s/%s was visible with %d bytes, crc32c %08x; the finished object has %d bytes, %08x",
				s.bucket, a.Name, a.Size, a.CRC32C, o.Size, o.CRC32C)
		}
		if g, ok := generation[a.Name]; ok && g != a.Generation {
			t.Errorf("gs://%s/%s was replaced: generation %d, then %d", s.bucket, a.Name, g, a.Generation)
		}
		generation[a.Name] = a.Generation
	}
	if len(generation) != len(files) {
		t.Errorf("the watcher saw %d of the %d final objects", len(generation), len(files))
	}

	s.assertClean()
	if row := s.row(done.TransferID); row.Status != "ok" || row.Files != len(files) || row.Chunks != chunks {
		t.Errorf("benchmark row %+v", row)
	}
	t.Logf("took %v", time.Since(start).Round(time.Millisecond)) // measured, not asserted
}

// TestPersistentGCSFaultFailsTheTransferCleanly: when one upload fails on
// every delivery, the worker gives up on the last attempt the dead-letter
// policy allows, and the transfer ends failed, naming the object, with
// nothing visible under any final name and its staging removed.
func TestPersistentGCSFaultFailsTheTransferCleanly(t *testing.T) {
	start := time.Now()
	dir := filepath.Join(t.TempDir(), "doomed")
	big, small := filepath.Join(dir, "big.csv"), filepath.Join(dir, "small.csv")
	testutil.WriteCSV(t, big, 300_000, 71)
	testutil.WriteCSV(t, small, 40_000, 72)
	req := producer.Request{Sources: []string{dir}, Destination: "gs://bucket-set-below/doomed",
		Codec: codec.Zstd, ChunkSize: 64 << 10, Method: "e2e-gcs-faults"}
	_, files, err := plan.Resolve(req.Sources, req.Destination, req.Codec)
	if err != nil {
		t.Fatal(err)
	}
	finals := map[string]string{}
	for _, f := range files {
		finals[f.Path] = f.Object
	}
	proxy, err := faultproxy.Start("http://"+fakeGCS.Host, faultproxy.Plan{Match: faultproxy.Uploads,
		Decide: func(n int, r *http.Request) faultproxy.Fault {
			if r.URL.Query().Get("name") == finals[small] {
				return faultproxy.Status503
			}
			return faultproxy.None
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	s := newStack(t, stackOptions{workers: 2, inlineMax: 4 << 10, workerEndpoint: proxy.URL() + "/storage/v1/"})
	req.Destination = "gs://" + s.bucket + "/doomed"

	stop := watchFinals(t, s, finals)
	done, err := s.transfer(req)
	seen := stop()
	c := proxy.Counts()
	t.Logf("proxy counts %+v; %v", c, time.Since(start).Round(time.Millisecond))
	if err != nil || done.Status != message.StatusFailed ||
		!strings.Contains(done.Error, "gave up after 5 attempts") || !strings.Contains(done.Error, finals[small]) {
		t.Fatalf("transfer: %v, status %q error %q; want failed after 5 attempts, naming %s", err, done.Status, done.Error, finals[small])
	}
	if c.Status503 != 5 {
		t.Errorf("%d uploads of %s failed, want one per delivery: 5", c.Status503, finals[small])
	}
	for _, a := range seen {
		t.Errorf("gs://%s/%s became visible (%d bytes) in a failed transfer", s.bucket, a.Name, a.Size)
	}
	s.assertClean()
	if row := s.row(done.TransferID); row.Status != "failed" || !strings.Contains(row.Error, "gave up") {
		t.Errorf("benchmark row %+v", row)
	}
}

// watchFinals polls the final object names every 20 ms until the returned
// stop is called, then once more, and returns the attributes of every object
// it saw under them.
func watchFinals(t *testing.T, s *stack, finals map[string]string) (stop func() []gcs.Attrs) {
	t.Helper()
	quit := make(chan struct{})
	result := make(chan []gcs.Attrs, 1)
	go func() {
		var seen []gcs.Attrs
		poll := func() {
			for _, name := range finals {
				a, err := s.store.Attrs(context.Background(), s.bucket, name)
				switch {
				case err == nil:
					seen = append(seen, a)
				case !errors.Is(err, gcs.ErrNotFound):
					t.Errorf("watching %s: %v", name, err)
				}
			}
		}
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				poll()
				result <- seen
				return
			case <-tick.C:
				poll()
			}
		}
	}()
	var once sync.Once
	var seen []gcs.Attrs
	stop = func() []gcs.Attrs {
		once.Do(func() { close(quit); seen = <-result })
		return seen
	}
	t.Cleanup(func() { stop() }) // a test that stops early stops the watcher too
	return stop
}
