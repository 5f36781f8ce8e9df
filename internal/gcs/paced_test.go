package gcs_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/faultproxy"
	"github.com/ferry-dev/ferry/internal/gcs"
)

// callKind names the kind of a JSON API request, for a proxy that pushes
// back on the first of each kind.
func callKind(r *http.Request) string {
	p := r.URL.Path
	switch {
	case strings.Contains(p, "/upload/"):
		return "upload " + r.URL.Query().Get("name")
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

// pushBackProxy is a proxy in front of the shared fake that answers the
// first request of every kind with fault (and lets everything else
// through); pushed lists the kinds it pushed back.
func pushBackProxy(t *testing.T, bucket string, fault faultproxy.Fault) (*gcs.Store, func() []string) {
	t.Helper()
	var mu sync.Mutex
	seen := map[string]bool{}
	var pushed []string
	proxy, err := faultproxy.Start("http://"+fake.Host, faultproxy.Plan{Decide: func(_ int, r *http.Request) faultproxy.Fault {
		k := callKind(r)
		if seen[k] {
			return faultproxy.None
		}
		seen[k] = true
		mu.Lock()
		pushed = append(pushed, k)
		mu.Unlock()
		return fault
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	fake.CreateBucket(bucket)
	s, err := gcs.NewEmulator(context.Background(), strings.TrimPrefix(proxy.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), pushed...)
	}
}

// Issue 41 §1 and issue 40 §5: a bucket's write limit is every process's.
// Each kind of call a Store makes (a producer's manifest page, a merger's
// compose, delete, done marker and listing object, a restore's read) meets
// a 429 on its first request and still succeeds: the Store waits its turn
// and sends it again. Without the retry (make mutants) the first write
// fails, as a producer's manifest page failed a whole transfer.
func TestEveryCallRidesOutA429(t *testing.T) {
	t.Parallel()
	const bucket = "paced-429"
	s, pushed := pushBackProxy(t, bucket, faultproxy.Status429)
	ctx := context.Background()
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s after a 429: %v", what, err)
		}
	}
	must("bucket check", s.BucketExists(ctx, bucket))
	page := []byte(`{"page":0}`)
	_, err := s.PutSmall(ctx, bucket, "manifest-page", page, false, "application/json")
	must("an unconditional small write (a manifest page, a done marker)", err)
	_, err = s.PutSmall(ctx, bucket, "key", page, true, "application/json")
	must("a small write under DoesNotExist", err)
	big := bytes.Repeat([]byte("ferry "), gcs.PlainMax/6+100)
	_, err = s.Upload(ctx, bucket, "listing", bytes.NewReader(big), gcs.UploadOptions{Size: int64(len(big)), CRC32C: crc32c.Checksum(big)})
	must("a large unconditional upload (a listing object)", err)
	a, err := s.Attrs(ctx, bucket, "manifest-page")
	must("attrs", err)
	got, err := s.ReadAll(ctx, bucket, "listing")
	must("a read (restore's)", err)
	if !bytes.Equal(got, big) {
		t.Fatalf("read %d bytes back, wrote %d", len(got), len(big))
	}
	var names []string
	must("a listing", s.List(ctx, bucket, "", func(a gcs.Attrs) error { names = append(names, a.Name); return nil }))
	if strings.Join(names, ",") != "key,listing,manifest-page" {
		t.Fatalf("listing after a 429 gave %v", names)
	}
	_, err = s.Compose(ctx, bucket, "composed", []string{"manifest-page", "key"}, gcs.ComposeOptions{IfAbsent: true})
	must("a compose", err)
	must("a delete", s.Delete(ctx, bucket, "key"))
	must("a delete of a generation", s.DeleteGeneration(ctx, bucket, "manifest-page", a.Generation))
	want := []string{"bucket", "upload manifest-page", "upload key", "upload listing", "attrs", "read", "list", "compose", "delete"}
	if got := strings.Join(pushed(), ","); got != strings.Join(want, ",") {
		t.Errorf("kinds pushed back: %s, want %s", got, strings.Join(want, ","))
	}
	if p := s.Pacer(bucket); p.Cuts() == 0 || p.Limit() == 0 {
		t.Errorf("the bucket's pacer was never cut (%d cuts, limit %v)", p.Cuts(), p.Limit())
	}
	// What an operator sees: a warning at the first push-back (logged by
	// the Store's SetLog in the test below), and the summary per bucket.
	pb := s.Pushbacks()
	// (The client library waits out some 429s of idempotent calls itself:
	// the pacer hears of the others.)
	if len(pb) != 1 || pb[0].Bucket != bucket || pb[0].PushBacks == 0 || pb[0].Limit <= 0 {
		t.Errorf("Pushbacks() = %+v, want %s with its push-backs and a settled rate", pb, bucket)
	}
}

// The operator's cue: the first push-back of a bucket is a warning naming
// it, and Close logs the summary line per bucket (pushbacks, settled rate)
// that the bench reads.
func TestPushBackIsLoggedOnceAndSummedUpOnClose(t *testing.T) {
	t.Parallel()
	const bucket = "paced-log"
	s, _ := pushBackProxy(t, bucket, faultproxy.Status429)
	var out bytes.Buffer
	s.SetLog(slog.New(slog.NewTextHandler(&out, nil)))
	ctx := context.Background()
	for i := range 3 {
		if _, err := s.PutSmall(ctx, bucket, fmt.Sprintf("o%d", i), []byte("x"), false, ""); err != nil {
			t.Fatal(err)
		}
	}
	_ = s.Close()
	got := out.String()
	if n := strings.Count(got, "level=WARN msg=\"GCS asks for fewer writes"); n != 1 || !strings.Contains(got, "bucket="+bucket) {
		t.Errorf("log:\n%s\nwant one warning naming the bucket at its first push-back", got)
	}
	if !strings.Contains(got, gcs.PushbackSummary) || !strings.Contains(got, "pushbacks=3 ") || !strings.Contains(got, "settled_writes_per_s=") {
		t.Errorf("log:\n%s\nwant the summary line with pushbacks=3 (one per write) and the settled rate", got)
	}
}

// After a 503 GCS may have carried the request out: a compose with no
// precondition is not sent again (its caller decides), one under a
// precondition is.
func TestA503IsSentAgainOnlyWhereThatIsSafe(t *testing.T) {
	t.Parallel()
	const bucket = "paced-503"
	s, _ := pushBackProxy(t, bucket, faultproxy.Status503)
	ctx := context.Background()
	if _, err := s.PutSmall(ctx, bucket, "a", []byte("a"), true, ""); err != nil {
		t.Fatalf("a conditional write after a 503: %v", err)
	}
	if _, err := s.Compose(ctx, bucket, "c", []string{"a"}, gcs.ComposeOptions{IfAbsent: true}); err != nil {
		t.Fatalf("a compose under DoesNotExist after a 503: %v", err)
	}
	s2, _ := pushBackProxy(t, bucket, faultproxy.Status503)
	_, err := s2.Compose(ctx, bucket, "d", []string{"a"}, gcs.ComposeOptions{})
	if !errors.Is(err, gcs.ErrThrottled) {
		t.Fatalf("an unconditional compose after a 503: %v, want ErrThrottled (not sent again)", err)
	}
}

// Every idempotent call survives a dropped connection: reads, listings,
// deletes, and writes under a precondition or that store the same bytes
// again are sent again, whether the connection broke before the call was
// carried out (reset mid-request) or after (the answer lost): a write
// under DoesNotExist whose retry meets its own object is settled by
// reading it back.
func TestEveryCallRidesOutADroppedConnection(t *testing.T) {
	t.Parallel()
	for _, fault := range []faultproxy.Fault{faultproxy.Reset, faultproxy.ResetAfterForward} {
		t.Run(fault.String(), func(t *testing.T) {
			bucket := "dropped-" + strings.ReplaceAll(fault.String(), " ", "-")
			s, pushed := pushBackProxy(t, bucket, fault)
			ctx := context.Background()
			must := func(what string, err error) {
				t.Helper()
				if err != nil {
					t.Fatalf("%s after a dropped connection (%s): %v", what, fault, err)
				}
			}
			must("bucket check", s.BucketExists(ctx, bucket))
			page := []byte(`{"page":0}`)
			_, err := s.PutSmall(ctx, bucket, "manifest-page", page, false, "application/json")
			must("an unconditional small write", err)
			lease := []byte(`{"lease":"t1"}`)
			a, err := s.PutSmall(ctx, bucket, "lease", lease, true, "application/json")
			must("a small write under DoesNotExist (a lease, a key object)", err)
			if a.Size != int64(len(lease)) || a.CRC32C != crc32c.Checksum(lease) {
				t.Fatalf("the lease: %d bytes with crc32c %08x", a.Size, a.CRC32C)
			}
			big := bytes.Repeat([]byte("ferry "), gcs.PlainMax/6+100)
			_, err = s.Upload(ctx, bucket, "listing", bytes.NewReader(big), gcs.UploadOptions{Size: int64(len(big)), CRC32C: crc32c.Checksum(big)})
			must("a large upload", err)
			a, err = s.Attrs(ctx, bucket, "manifest-page")
			must("attrs", err)
			got, err := s.ReadAll(ctx, bucket, "listing")
			must("a read", err)
			if !bytes.Equal(got, big) {
				t.Fatalf("read %d bytes back, wrote %d", len(got), len(big))
			}
			var names []string
			must("a listing", s.List(ctx, bucket, "", func(a gcs.Attrs) error { names = append(names, a.Name); return nil }))
			if strings.Join(names, ",") != "lease,listing,manifest-page" {
				t.Fatalf("listing gave %v", names)
			}
			must("a delete", s.Delete(ctx, bucket, "lease"))
			must("a delete of a generation", s.DeleteGeneration(ctx, bucket, "manifest-page", a.Generation))
			want := []string{"bucket", "upload manifest-page", "upload lease", "upload listing", "attrs", "read", "list", "delete"}
			if fault == faultproxy.ResetAfterForward {
				// The lease's retry met its own object and read it back.
				want = []string{"bucket", "upload manifest-page", "upload lease", "attrs", "upload listing", "read", "list", "delete"}
			}
			if got := strings.Join(pushed(), ","); got != strings.Join(want, ",") {
				t.Errorf("kinds whose connection was dropped: %s, want %s", got, strings.Join(want, ","))
			}
		})
	}
}
