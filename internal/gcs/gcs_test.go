package gcs_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/gcs/gcstest"
	"github.com/ferry-dev/ferry/internal/latency"
	"github.com/ferry-dev/ferry/internal/localstack"
)

var (
	fake *localstack.GCS
	// cloud is a Store on Google Cloud Storage when FERRY_TEST_PROJECT and
	// FERRY_TEST_BUCKET are set; made before STORAGE_EMULATOR_HOST is.
	cloud    *gcs.Store
	cloudErr error
	// closed is a Store whose STORAGE_EMULATOR_HOST is a closed port.
	closed *gcs.Store
)

const closedHost = "127.0.0.1:1"

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	ctx := context.Background()
	if os.Getenv("FERRY_TEST_PROJECT") != "" && os.Getenv("FERRY_TEST_BUCKET") != "" && os.Getenv("STORAGE_EMULATOR_HOST") == "" {
		cloud, cloudErr = gcs.New(ctx)
	}
	// Each Store reads STORAGE_EMULATOR_HOST when it is made, as the
	// binaries do.
	var err error
	os.Setenv("STORAGE_EMULATOR_HOST", closedHost)
	if closed, err = gcs.New(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if fake, err = localstack.StartGCS(0); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer fake.Stop()
	os.Setenv("STORAGE_EMULATOR_HOST", fake.Host)
	return m.Run()
}

var bucketSeq atomic.Int64

func TestConformanceFakeGCSServer(t *testing.T) {
	t.Parallel()
	s, err := gcs.New(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	runOnFake(t, gcstest.Fake, s, fake)
}

// runOnFake runs the suite on a fake-gcs-server of localstack's, reached
// through s, each case in a fresh bucket.
func runOnFake(t *testing.T, kind string, s *gcs.Store, srv *localstack.GCS) {
	gcstest.Run(t, func(t *testing.T) gcstest.Target {
		return gcstest.Target{Kind: kind, Store: s, KMSKey: "projects/p/locations/l/keyRings/r/cryptoKeys/k",
			Bucket: func(t *testing.T) string {
				b := fmt.Sprintf("gcstest-%d", bucketSeq.Add(1))
				srv.CreateBucket(b)
				return b
			}}
	})
}

// TestConformanceCloud runs the suite against FERRY_TEST_BUCKET in
// FERRY_TEST_PROJECT, with Application Default Credentials; it writes only
// under gcstest/ and removes what it wrote. FERRY_TEST_KMS_KEY, when set,
// is a key the bucket's service agent may encrypt with.
func TestConformanceCloud(t *testing.T) {
	t.Parallel()
	bucket := os.Getenv("FERRY_TEST_BUCKET")
	switch {
	case os.Getenv("FERRY_TEST_PROJECT") == "" || bucket == "":
		t.Skip("FERRY_TEST_PROJECT and FERRY_TEST_BUCKET are not both set: no real bucket to test")
	case cloudErr != nil:
		t.Fatal(cloudErr)
	case cloud == nil:
		t.Fatal("STORAGE_EMULATOR_HOST is set: unset it to test the real service")
	}
	gcstest.Run(t, func(t *testing.T) gcstest.Target {
		return gcstest.Target{Kind: gcstest.Cloud, Store: cloud, KMSKey: os.Getenv("FERRY_TEST_KMS_KEY"),
			Bucket: func(*testing.T) string { return bucket }}
	})
}

// TestUnreachableEndpointIsNamed: every call to a closed port fails, within
// its deadline, with ErrUnreachable and an error naming the variable that
// chose the endpoint.
func TestUnreachableEndpointIsNamed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	want := "STORAGE_EMULATOR_HOST=" + closedHost
	calls := map[string]func() error{
		"Attrs":        func() error { _, err := closed.Attrs(ctx, "b", "o"); return err },
		"BucketExists": func() error { return closed.BucketExists(ctx, "b") },
		"PutSmall":     func() error { _, err := closed.PutSmall(ctx, "b", "o", []byte("x"), true, ""); return err },
		"ReadAll":      func() error { _, err := closed.ReadAll(ctx, "b", "o"); return err },
		"Compose":      func() error { _, err := closed.Compose(ctx, "b", "o", []string{"a"}, gcs.ComposeOptions{}); return err },
		"List":         func() error { return closed.List(ctx, "b", "", func(gcs.Attrs) error { return nil }) },
		"Delete":       func() error { return closed.Delete(ctx, "b", "o") },
		"Probe":        func() error { return closed.Probe(ctx) },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := call()
			if !errors.Is(err, gcs.ErrUnreachable) || !strings.Contains(err.Error(), want) {
				t.Fatalf("%s on a closed port: %v; want ErrUnreachable naming %s", name, err, want)
			}
			t.Log(err)
		})
	}
}

// TestStoppedServerReportsHealth: when fake-gcs-server stops, calls fail
// with ErrUnreachable, the health function hears it and Reachable says so;
// when it is back, Reachable probes, succeeds and the health function hears
// that too.
func TestStoppedServerReportsHealth(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, err := localstack.StartGCS(0)
	if err != nil {
		t.Fatal(err)
	}
	srv.CreateBucket("b")
	s, err := gcs.NewEmulator(ctx, srv.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var mu sync.Mutex
	var last error
	reports := 0
	s.SetHealth(func(err error) { mu.Lock(); last, reports = err, reports+1; mu.Unlock() })
	health := func() (int, error) { mu.Lock(); defer mu.Unlock(); return reports, last }

	if _, err := s.PutSmall(ctx, "b", "o", []byte("x"), false, ""); err != nil {
		t.Fatal(err)
	}
	if n, err := health(); err != nil || n == 0 {
		t.Fatalf("after a successful call the health function heard %v (%d reports)", err, n)
	}
	if err := s.Reachable(ctx); err != nil {
		t.Fatal(err)
	}

	srv.Stop()
	_, err = s.Attrs(ctx, "b", "o")
	if !errors.Is(err, gcs.ErrUnreachable) || !strings.Contains(err.Error(), srv.Host) {
		t.Fatalf("Attrs on a stopped server: %v; want ErrUnreachable naming %s", err, srv.Host)
	}
	if _, err := health(); !errors.Is(err, gcs.ErrUnreachable) {
		t.Fatalf("health function heard %v after a call got no answer", err)
	}
	if err := s.Reachable(ctx); !errors.Is(err, gcs.ErrUnreachable) {
		t.Fatalf("Reachable with the server stopped: %v", err)
	}

	p, err := strconv.ParseUint(srv.Host[strings.LastIndex(srv.Host, ":")+1:], 10, 16)
	if err != nil {
		t.Fatal(err)
	}
	again, err := localstack.StartGCS(uint16(p))
	if err != nil {
		t.Fatalf("restart on port %d: %v", p, err)
	}
	defer again.Stop()
	if err := s.Reachable(ctx); err != nil {
		t.Fatalf("Reachable with the server back: %v", err)
	}
	if _, err := health(); err != nil {
		t.Fatalf("health function heard %v with the server back", err)
	}
}

// TestKMSKeyReachesTheServer: fake-gcs-server ignores KMS keys (so the suite
// skips KMSKeyPassedThrough there), but the key a Store is given must still
// be in the requests it sends: an upload's kmsKeyName parameter and a
// compose's destination.
func TestKMSKeyReachesTheServer(t *testing.T) {
	t.Parallel()
	const key = "projects/p/locations/l/keyRings/r/cryptoKeys/k"
	var mu sync.Mutex
	var seen []string // what carried the key
	s := throughRecorder(t, "kms", func(r *http.Request, body []byte) {
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Query().Get("kmsKeyName") == key {
			seen = append(seen, "query of "+r.URL.Path)
		}
		if bytes.Contains(body, []byte(`"kmsKeyName":"`+key+`"`)) {
			seen = append(seen, "body of "+r.URL.Path)
		}
	})
	ctx := context.Background()
	if _, err := s.WithKMSKey(key).PutSmall(ctx, "kms", "a", []byte("x"), true, ""); err != nil {
		t.Fatal(err)
	}
	c, err := s.Compose(ctx, "kms", "c", []string{"a", "a"}, gcs.ComposeOptions{KMSKey: key, IfAbsent: true, Metadata: map[string]string{"m": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := s.ReadAll(ctx, "kms", "c"); err != nil || string(b) != "xx" || c.Size != 2 || c.CRC32C != crc32c.Checksum([]byte("xx")) || c.Metadata["m"] != "1" {
		t.Fatalf("composed with a key: %q, %v, attrs %+v", b, err, c)
	}
	if _, err := s.PutSmall(ctx, "kms", "plain", []byte("x"), true, ""); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 || !strings.Contains(seen[0], "/upload/") || !strings.Contains(seen[1], "/compose") {
		t.Fatalf("the key travelled in %v; want the upload's and the compose's requests only", seen)
	}
}

// conformanceOfLocalstack runs the suite against a fake-gcs-server of
// localstack's own, behind its shim: the stand-in make run (memory backend)
// and make bench (filesystem backend) use.
func conformanceOfLocalstack(t *testing.T, kind string, o localstack.GCSOptions) {
	srv, err := localstack.StartGCSWith(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	s, err := gcs.NewEmulator(context.Background(), srv.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	runOnFake(t, kind, s, srv)
}

// Issue 20 §6: the shim that make run and make bench put in front of
// fake-gcs-server (its own compose) is under the suite too.
func TestConformanceShim(t *testing.T) {
	t.Parallel()
	conformanceOfLocalstack(t, gcstest.Shim, localstack.GCSOptions{})
}

// Issue 19 §1: the filesystem backend make bench measures against.
func TestConformanceFilesystemBackend(t *testing.T) {
	t.Parallel()
	conformanceOfLocalstack(t, gcstest.FakeFS, localstack.GCSOptions{StorageRoot: t.TempDir()})
}

// DeleteSources must reach GCS as deleteSourceObjects in the compose
// request, through the client library and through the JSON API call a KMS
// key takes; fake-gcs-server ignores it, so the request is what is checked.
func TestDeleteSourcesReachesTheServer(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var asked []string
	s := throughRecorder(t, "delsrc", func(r *http.Request, body []byte) {
		if strings.HasSuffix(r.URL.Path, "/compose") {
			mu.Lock()
			asked = append(asked, fmt.Sprintf("%s deleteSourceObjects=%v", path.Base(strings.TrimSuffix(r.URL.Path, "/compose")), bytes.Contains(body, []byte(`"deleteSourceObjects":true`))))
			mu.Unlock()
		}
	})
	ctx := context.Background()
	if _, err := s.PutSmall(ctx, "delsrc", "a", []byte("x"), true, ""); err != nil {
		t.Fatal(err)
	}
	for _, o := range []struct {
		dst string
		opt gcs.ComposeOptions
	}{{"plain", gcs.ComposeOptions{}}, {"deleting", gcs.ComposeOptions{DeleteSources: true}},
		{"keyed", gcs.ComposeOptions{DeleteSources: true, KMSKey: "projects/p/locations/l/keyRings/r/cryptoKeys/k"}}} {
		if _, err := s.Compose(ctx, "delsrc", o.dst, []string{"a"}, o.opt); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(asked, ", "); got != "plain deleteSourceObjects=false, deleting deleteSourceObjects=true, keyed deleteSourceObjects=true" {
		t.Fatalf("compose requests: %s", got)
	}
}

// throughRecorder returns a Store on a new bucket of the shared fake whose
// requests pass a proxy that shows each one, with its body, to see.
func throughRecorder(t *testing.T, bucket string, see func(r *http.Request, body []byte)) *gcs.Store {
	t.Helper()
	target, _ := url.Parse("http://" + fake.Host)
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		see(r, body)
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	fake.CreateBucket(bucket)
	s, err := gcs.NewEmulator(context.Background(), strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// A listing names its page size, so that what one page holds never depends
// on the server's default (fake-gcs-server's is every object at once).
func TestListingNamesItsPageSize(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var sizes []string
	s := throughRecorder(t, "paged", func(r *http.Request, _ []byte) {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/o") {
			mu.Lock()
			sizes = append(sizes, r.URL.Query().Get("maxResults"))
			mu.Unlock()
		}
	})
	ctx := context.Background()
	for _, n := range []string{"a", "b"} {
		if _, err := s.PutSmall(ctx, "paged", n, []byte(n), true, ""); err != nil {
			t.Fatal(err)
		}
	}
	seen := 0
	if err := s.List(ctx, "paged", "", func(gcs.Attrs) error { seen++; return nil }); err != nil || seen != 2 {
		t.Fatalf("listed %d objects, %v", seen, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sizes) == 0 || sizes[0] != strconv.Itoa(gcs.ListPage) {
		t.Fatalf("listing requests asked for pages of %q; want %d", sizes, gcs.ListPage)
	}
}

// GCS refuses to replace an object under a hold or a retention policy
// with a 403; an upload and a compose onto it fail as ErrRetained (which
// callers treat as permanent: sending again changes nothing), by the
// answer's reason or, without one, by its message. Any other 403 is not
// ErrRetained.
func TestAHeldObjectIsErrRetained(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, reason, message string
		want                  bool
	}{
		{"event-based hold", "objectUnderActiveHold", "Object 'held/o' is under active Event-Based hold and cannot be deleted, overwritten or archived until hold is removed.", true},
		{"retention policy", "retentionPolicyNotMet", "Object 'held/o' is subject to bucket's retention policy or object retention and cannot be deleted or overwritten until 2027-01-01T00:00:00Z", true},
		{"temporary hold, no reason", "", "Object 'held/o' is under active Temporary hold and cannot be deleted, overwritten or archived until hold is removed.", true},
		{"a missing permission", "forbidden", "ferry@p.iam.gserviceaccount.com does not have storage.objects.create access to the Google Cloud Storage object.", false},
	} {

		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json; charset=UTF-8")
			w.WriteHeader(http.StatusForbidden)
			_, _ = fmt.Fprintf(w, `{"error":{"code":403,"message":%q,"errors":[{"message":%q,"domain":"global","reason":%q}]}}`, tc.message, tc.message, tc.reason)
		}))
		s, err := gcs.NewEmulator(context.Background(), strings.TrimPrefix(srv.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		_, upErr := s.Upload(ctx, "held", "o", bytes.NewReader([]byte("x")), gcs.UploadOptions{Size: 1, CRC32C: crc32c.Checksum([]byte("x"))})
		_, coErr := s.Compose(ctx, "held", "o", []string{"o", "tail"}, gcs.ComposeOptions{IfGeneration: 7})
		for what, err := range map[string]error{"upload": upErr, "compose": coErr} {
			if errors.Is(err, gcs.ErrRetained) != tc.want || err == nil || !strings.Contains(err.Error(), "held/o") && tc.want {
				t.Errorf("%s: %s: %v; want ErrRetained %v, naming the object", tc.name, what, err, tc.want)
			}
		}
		s.Close()
		srv.Close()
	}
}

// A 400 other than a checksum's is ErrInvalid: sending the same request
// again gets the same answer (here, a compose of sources of different
// storage classes, as an append onto an object a lifecycle rule moved
// would be).
func TestA400IsErrInvalid(t *testing.T) {
	t.Parallel()
	const msg = "The source objects must all have the same storage class as the destination."
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = fmt.Fprintf(w, `{"error":{"code":400,"message":%q,"errors":[{"message":%q,"domain":"global","reason":"invalid"}]}}`, msg, msg)
	}))
	defer srv.Close()
	s, err := gcs.NewEmulator(context.Background(), strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = s.Compose(context.Background(), "b", "o", []string{"o", "tail"}, gcs.ComposeOptions{IfGeneration: 7})
	if !errors.Is(err, gcs.ErrInvalid) || errors.Is(err, gcs.ErrChecksum) || !strings.Contains(err.Error(), "same storage class") {
		t.Fatalf("compose: %v; want ErrInvalid with GCS's words", err)
	}
}

// Without credentials of any kind, the error says how to get them.
func TestNoCredentialsNamesTheLogin(t *testing.T) {
	home := t.TempDir()
	for k, v := range map[string]string{"HOME": home, "CLOUDSDK_CONFIG": home, "GOOGLE_APPLICATION_CREDENTIALS": "", "STORAGE_EMULATOR_HOST": "",
		"APPDATA": home} {
		t.Setenv(k, v)
	}
	if os.Getenv("GCE_METADATA_HOST") != "" {
		t.Skip("a metadata server is named: credentials come from it")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := gcs.New(ctx)
	if err == nil {
		s.Close()
		t.Skip("this machine has credentials (a metadata server): nothing to hint at")
	}
	if !strings.Contains(err.Error(), "gcloud auth application-default login") || !strings.Contains(err.Error(), "GOOGLE_APPLICATION_CREDENTIALS") {
		t.Fatalf("New without credentials: %v; want the login to run named", err)
	}
}

// A connection opened for one request serves the next, whichever of the
// Store's clients sends it: a process keeps about as many connections as
// it has requests in flight, not one per file (each new one costs round
// trips against GCS: TCP's and TLS's).
func TestConnectionsAreKeptForTheRequestsInFlightNotOpenedPerRequest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, err := localstack.StartGCS(0)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	srv.CreateBucket("b")
	relay, err := latency.Start(srv.Host, 0) // counts the connections
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = relay.Close() }()
	s, err := gcs.NewEmulator(ctx, relay.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const inFlight, rounds = 150, 4 // more than the library's own pool keeps (100)
	big := bytes.Repeat([]byte("x"), gcs.PlainMax+1)
	for r := range rounds {
		var wg sync.WaitGroup
		errs := make(chan error, inFlight)
		for i := range inFlight {
			wg.Add(1)
			go func() {
				defer wg.Done()
				name := fmt.Sprintf("o/%d-%d", r, i)
				var err error
				switch i % 3 {
				case 0: // a plain request
					_, err = s.PutSmall(ctx, "b", name, []byte(name), true, "text/plain")
				case 1: // the library's writer
					_, err = s.Upload(ctx, "b", name, bytes.NewReader(big), gcs.UploadOptions{Size: int64(len(big)), CRC32C: crc32c.Checksum(big), IfAbsent: true})
				default: // the library's metadata call
					_, err = s.Attrs(ctx, "b", fmt.Sprintf("o/%d-%d", max(r-1, 0), i-2))
					if errors.Is(err, gcs.ErrNotFound) {
						err = nil
					}
				}
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := relay.Accepted(); n > inFlight+inFlight/10 {
		t.Errorf("%d rounds of %d requests in flight opened %d connections, want at most %d: connections are not kept for the next request",
			rounds, inFlight, n, inFlight+inFlight/10)
	}
}
