package e2e

import (
	"context"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/faultproxy"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/plan"
	"github.com/ferry-dev/ferry/internal/producer"
	"github.com/ferry-dev/ferry/internal/queue"
	"github.com/ferry-dev/ferry/internal/testutil"
)

// Issue 32 §2 and issue 41: GCS answers 429 (rateLimitExceeded) to writes
// beyond a bucket's rate, whoever sends them. A proxy in front of the
// storage emulator does the same above writeLimit writes a second (uploads,
// composes, deletes: every request but a read), and every process of the
// stack goes through it: the producer (its run and key objects, manifest
// pages), four workers and the merger (composes, listing, done marker,
// deletes). The source is a real tree of over a thousand files, Go's own
// crypto sources, at the measured limit of 150 writes a second.
// The transfer ends ok with every file identical, nothing is
// dead-lettered, and the processes, pacing themselves, meet far fewer
// refusals than they make writes (an unpaced fleet retrying at once would
// be refused more often than served).
func TestAFleetThatMeetsGCSsRateLimitSlowsDownAndEndsOK(t *testing.T) {
	const writeLimit = 150.0
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	src := filepath.Join(strings.TrimSpace(string(goroot)), "src", "crypto")
	proxy, err := faultproxy.Start("http://"+fakeGCS.Host, faultproxy.Plan{
		Match: func(r *http.Request) bool { return r.Method != http.MethodGet }, WriteLimit: writeLimit})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	s := newStack(t, stackOptions{workers: 4, endpoint: proxy.URL() + "/storage/v1/"})

	// Whatever Pub/Sub dead-letters would wait here.
	ctx := context.Background()
	dead := s.ps.ChunksDeadLetter + "-watch"
	testutil.OK(t, s.q.EnsureTopic(ctx, s.ps.ChunksDeadLetter))
	testutil.OK(t, s.q.EnsureSubscription(ctx, queue.Subscription{ID: dead, Topic: s.ps.ChunksDeadLetter, AckDeadline: 10 * time.Second}))

	req := producer.Request{Sources: []string{src}, Destination: "gs://" + s.bucket + "/paced", Codec: codec.Zstd, ChunkSize: 8 << 20, Method: "e2e-paced"}
	_, planned, err := plan.Resolve(req.Sources, req.Destination, req.Codec)
	if err != nil {
		t.Fatal(err)
	}
	files := len(planned)
	if files < 1000 {
		t.Fatalf("%s holds %d files; the test wants a real tree of over a thousand", src, files)
	}
	start := time.Now()
	done, err := s.transfer(req)
	if err != nil || done.Status != message.StatusOK || done.Files != files {
		t.Fatalf("transfer: %v, done %+v; want ok with %d files", err, done, files)
	}
	c := proxy.Counts()
	perSecond := proxy.PassedPerSecond()
	t.Logf("%d files in %v (%v at the limit); the proxy let %d writes through and refused %d with 429; writes per second %v",
		files, time.Since(start).Round(time.Millisecond), time.Duration(float64(files)/writeLimit*float64(time.Second)).Round(time.Millisecond),
		c.Matched-c.Status429, c.Status429, perSecond) // measured, not asserted
	if c.Status429 == 0 {
		t.Fatalf("the proxy refused no upload: the fleet never met the rate limit (%+v)", c)
	}
	if passed := c.Matched - c.Status429; c.Status429*2 > passed {
		t.Errorf("%d writes refused with 429 against %d let through: the processes did not pace themselves", c.Status429, passed)
	}
	s.verifyAll(req)

	rctx, stop := context.WithTimeout(ctx, 3*time.Second)
	defer stop()
	var deadLettered int
	_ = s.q.Receive(rctx, dead, queue.ReceiveSettings{MaxMessages: 10, MaxBytes: 1 << 20}, func(context.Context, queue.Message) error {
		deadLettered++
		return nil
	})
	if deadLettered > 0 {
		t.Errorf("%d chunk messages dead-lettered", deadLettered)
	}
	s.assertClean()
	if r := s.row(done.TransferID); r.Status != "ok" || r.Files != files {
		t.Errorf("row %+v", r)
	}
}
