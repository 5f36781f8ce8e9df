package e2e

import (
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/faultproxy"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/producer"
	"github.com/ferry-dev/ferry/internal/teststack"
	"github.com/ferry-dev/ferry/internal/testutil"
)

// gcsCall names the kind of a JSON API request: what one dropped
// connection on each kind is counted by.
func gcsCall(r *http.Request) string {
	p := r.URL.Path
	switch {
	case strings.Contains(p, "/upload/"):
		if r.URL.Query().Get("ifGenerationMatch") != "" {
			return "upload under a precondition"
		}
		return "upload"
	case strings.HasSuffix(p, "/compose"):
		return "compose"
	case r.Method == http.MethodDelete:
		return "delete"
	case strings.HasSuffix(p, "/o"):
		return "list"
	case r.URL.Query().Get("alt") == "media" || strings.HasPrefix(p, "/download/"):
		return "read"
	case strings.Contains(p, "/o/"):
		return "attrs"
	}
	return "bucket"
}

// dropOnce is a proxy that drops the connection of the first request of
// every kind (gcsCall) with fault; dropped lists the kinds it hit.
func dropOnce(t *testing.T, fault faultproxy.Fault) (*faultproxy.Proxy, func() []string) {
	t.Helper()
	var mu sync.Mutex
	seen := map[string]bool{}
	proxy, err := faultproxy.Start("http://"+fakeGCS.Host, faultproxy.Plan{Decide: func(_ int, r *http.Request) faultproxy.Fault {
		k := gcsCall(r)
		mu.Lock()
		defer mu.Unlock()
		if seen[k] {
			return faultproxy.None
		}
		seen[k] = true
		return fault
	}})
	testutil.OK(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	return proxy, func() []string {
		mu.Lock()
		defer mu.Unlock()
		var kinds []string
		for k := range seen {
			kinds = append(kinds, k)
		}
		slices.Sort(kinds)
		return kinds
	}
}

// One dropped connection fails nothing: ferry cp through a proxy that drops
// the first request of every kind (the lease, key and manifest writes under
// a precondition, uploads, composes, listings, reads, deletes), before it
// reaches GCS or after GCS carried it out, ends ok with every file restored
// byte for byte and nothing staged.
func TestFerryCpRidesOutADroppedConnectionOnEveryKindOfCall(t *testing.T) {
	t.Parallel()
	for _, fault := range []faultproxy.Fault{faultproxy.Reset, faultproxy.ResetAfterForward} {
		t.Run(fault.String(), func(t *testing.T) {
			t.Parallel()
			proxy, dropped := dropOnce(t, fault)
			c := newCpRun(t, strings.TrimPrefix(proxy.URL(), "http://"))
			dir := t.TempDir()
			tree := filepath.Join(dir, "tree")
			smallTree(t, tree, 40)
			big := filepath.Join(dir, "big.csv")
			testutil.WriteCSV(t, big, 6<<20, 7)
			done := c.ok("--chunk-size", "1MiB", tree, big, "gs://"+c.bucket+"/dropped")
			if done.Status != message.StatusOK || done.Files != 41 {
				t.Fatalf("done %+v", done)
			}
			n := proxy.Counts()
			kinds := dropped()
			t.Logf("dropped the first %s of: %s (%+v)", fault, strings.Join(kinds, ", "), n)
			for _, k := range []string{"upload under a precondition", "upload", "compose", "list", "read", "attrs", "delete"} {
				if !slices.Contains(kinds, k) {
					t.Errorf("no %s was dropped: the test proves nothing for it (dropped: %v)", k, kinds)
				}
			}
			c.restoreEqual("dropped", tree, big)
			if left := c.staged(); len(left) != 0 {
				t.Errorf("staging objects left: %v", left)
			}
		})
	}
}

// An event that can never be handled ends its transfer: GCS answers every
// compose 500, so the in-process merger's handling of the sealed event
// fails on every delivery; on the last one (the dead-letter threshold) the
// transfer ends failed with that error, instead of cp waiting for
// FERRY_TRANSFER_TIMEOUT.
func TestFerryCpEndsATransferWhoseEventRunsOutOfDeliveries(t *testing.T) {
	t.Parallel()
	proxy, err := faultproxy.Start("http://"+fakeGCS.Host, faultproxy.Plan{
		Match: func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/compose") }, Fault: faultproxy.Status500, First: 1 << 30})
	testutil.OK(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	c := newCpRun(t, strings.TrimPrefix(proxy.URL(), "http://"))
	big := filepath.Join(t.TempDir(), "big.csv")
	testutil.WriteCSV(t, big, 3<<20, 11)
	p := c.start("--chunk-size", "1MiB", big, "gs://"+c.bucket+"/never")
	start := time.Now()
	code := p.wait(5 * time.Minute)
	out := p.out.String()
	if code != 1 || !strings.Contains(out, "gave up after 5 deliveries") || !strings.Contains(out, "500") {
		t.Fatalf("ferry cp exited %d after %v; want 1 naming the deliveries and GCS's 500:\n%s", code, time.Since(start), tail(out, 4000))
	}
	if n := proxy.Counts(); n.Status500 < 5 {
		t.Fatalf("only %d composes were answered 500", n.Status500)
	}
	if left := c.under("never/"); len(left) != 0 {
		t.Errorf("objects left under the destination: %v", left)
	}
	if left := c.staged(); len(left) != 0 {
		t.Errorf("staging objects left: %v", left)
	}
}

// kill -9 in the middle, then the same sources and destination with -n
// added (another request, so the dead transfer is not taken up): the new
// run cancels the dead one, which removes what it had created and frees
// its lease, and ends ok itself, every object restored byte for byte and
// nothing left staged or leased. Before, the dead run's objects and lease
// were orphaned and every later run failed on them.
func TestFerryCpKilledThenRunWithOtherFlagsCleansUpTheDeadRun(t *testing.T) {
	t.Parallel()
	c := newCpRun(t, "")
	big, tree := bigAndTree(t, 40<<20, 17, 40)
	dest := "gs://" + c.bucket + "/k9n"
	p := c.start("--max-rate", "2MB", big, tree, dest)
	teststack.Until(t, 2*time.Minute, "a chunk staged", func() bool { return len(c.under(message.StagingRoot)) > 3 })
	p.kill9()
	if len(c.staged()) == 0 {
		t.Fatal("nothing staged when killed: the test proves nothing")
	}
	p2 := c.start("--json", "-n", big, tree, dest)
	if code := p2.wait(5 * time.Minute); code != 0 {
		t.Fatalf("ferry cp -n run after the kill exited %d:\n%s", code, tail(p2.out.String(), 4000))
	}
	out := p2.out.String()
	if done := doneOf(t, out); done.Status != message.StatusOK || !strings.Contains(out, "is cancelled: what it had staged and created is removed") {
		t.Fatalf("done %+v; want ok after cancelling the dead run:\n%s", done, tail(out, 3000))
	}
	c.restoreEqual("k9n", big, tree)
	if left := c.staged(); len(left) != 0 {
		t.Errorf("staging objects or leases left: %v", left)
	}
}

// The fleet rides out one dropped connection on every kind of call too:
// producer, workers and merger all reach GCS through a proxy that drops
// the first request of each kind, before or after GCS carries it out, and
// the transfer ends ok with every file verified and nothing staged.
func TestTheFleetRidesOutADroppedConnectionOnEveryKindOfCall(t *testing.T) {
	for _, fault := range []faultproxy.Fault{faultproxy.Reset, faultproxy.ResetAfterForward} {
		t.Run(fault.String(), func(t *testing.T) {
			proxy, dropped := dropOnce(t, fault)
			s := newStack(t, stackOptions{workers: 2, endpoint: proxy.URL() + "/storage/v1/"})
			dir := t.TempDir()
			tree := filepath.Join(dir, "tree")
			smallTree(t, tree, 30)
			testutil.WriteCSV(t, filepath.Join(dir, "big.csv"), 3<<20, 5)
			req := producer.Request{Sources: []string{tree, filepath.Join(dir, "big.csv")}, Destination: "gs://" + s.bucket + "/dropped",
				Codec: codec.Zstd, ChunkSize: 1 << 20, Method: "e2e-dropped"}
			done, err := s.transfer(req)
			if err != nil || done.Status != message.StatusOK || done.Files != 31 {
				t.Fatalf("transfer: %v, done %+v", err, done)
			}
			kinds := dropped()
			t.Logf("dropped the first %s of: %s", fault, strings.Join(kinds, ", "))
			for _, k := range []string{"upload under a precondition", "upload", "compose", "list", "read", "attrs", "delete"} {
				if !slices.Contains(kinds, k) {
					t.Errorf("no %s was dropped: the test proves nothing for it (dropped: %v)", k, kinds)
				}
			}
			s.verifyAll(req)
			if left := s.staging(); len(left) != 0 {
				t.Errorf("staging left: %v", left)
			}
		})
	}
}
