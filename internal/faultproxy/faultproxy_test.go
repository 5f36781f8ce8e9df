package faultproxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// arrival is a request as the backend saw it.
type arrival struct {
	method, uri string
	body        []byte
	at          time.Time
}

type backend struct {
	*httptest.Server
	mu   sync.Mutex
	seen []arrival
}

func newBackend(t *testing.T) *backend {
	t.Helper()
	b := &backend{}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		b.mu.Lock()
		b.seen = append(b.seen, arrival{r.Method, r.URL.RequestURI(), body, at})
		b.mu.Unlock()
		w.Header().Set("X-Backend", "yes")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(append([]byte("echo:"), body...))
	}))
	t.Cleanup(b.Close)
	return b
}

func (b *backend) arrivals() []arrival {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]arrival(nil), b.seen...)
}

func start(t *testing.T, target string, plan Plan) *Proxy {
	t.Helper()
	p, err := Start(target, plan)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func payload(n int) []byte {
	return bytes.Repeat([]byte("0123456789abcdef"), n/16)
}

// onlyReader hides bytes.Reader's other methods, so the client cannot learn
// the length and sends the body chunked.
type onlyReader struct{ io.Reader }

func TestUnmatchedRequestsPassUntouched(t *testing.T) {
	b := newBackend(t)
	p := start(t, b.URL, Plan{Match: Uploads, Fault: Reset, Every: 1})
	body := payload(64 << 10)
	resp, err := http.Post(p.URL()+"/storage/v1/b/bkt/o?name=x&alt=json", "application/octet-stream", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("X-Backend") != "yes" || !bytes.Equal(got, append([]byte("echo:"), body...)) {
		t.Fatalf("response %d %v, %d bytes: not the backend's", resp.StatusCode, resp.Header, len(got))
	}
	a := b.arrivals()
	if len(a) != 1 || a[0].method != http.MethodPost || a[0].uri != "/storage/v1/b/bkt/o?name=x&alt=json" || !bytes.Equal(a[0].body, body) {
		t.Fatalf("backend saw %d requests, first %s %s", len(a), a[0].method, a[0].uri)
	}
	c := p.Counts()
	if c.Up.Bytes != int64(len(body)) || c.Down.Bytes != int64(len(got)) {
		t.Errorf("counted %d bytes up and %d down, want %d and %d", c.Up.Bytes, c.Down.Bytes, len(body), len(got))
	}
	c.Up, c.Down = Flow{}, Flow{}
	if c != (Counts{Requests: 1}) {
		t.Fatalf("counts %+v", c)
	}
}

// A Rate holds over all connections together, in both directions, and the
// counts show it. Only lower bounds on time are checked: a busy machine can
// make the link slower, never faster.
func TestRateLimitsTheLink(t *testing.T) {
	b := newBackend(t)
	const rateBps = 4 << 20
	p := start(t, b.URL, Plan{Rate: rateBps})
	body := payload(1 << 20)
	t0 := time.Now()
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Post(p.URL()+"/upload/storage/v1/b/bkt/o", "application/octet-stream", bytes.NewReader(body))
			if err != nil {
				t.Error(err)
				return
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !bytes.Equal(got, append([]byte("echo:"), body...)) {
				t.Errorf("response of %d bytes is not the echo", len(got))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(t0)
	c := p.Counts()
	if c.Up.Bytes != 2<<20 || c.Down.Bytes != 2<<20+10 {
		t.Fatalf("forwarded %d bytes up and %d down, want %d and %d", c.Up.Bytes, c.Down.Bytes, 2<<20, 2<<20+10)
	}
	// 2 MiB each way at 4 MiB/s: at least ~0.5 s up, then ~0.5 s down,
	// less the first burst of each.
	minUp := time.Duration(float64(c.Up.Bytes-rateBurst) / rateBps * float64(time.Second))
	if up := c.Up.Last.Sub(c.Up.First); up < minUp*9/10 {
		t.Errorf("2 MiB went up in %v, faster than the %d B/s limit allows (%v)", up, rateBps, minUp)
	}
	if elapsed < 2*minUp*9/10 {
		t.Errorf("both requests took %v, faster than the limit allows in each direction", elapsed)
	}
	if got := c.Up.MBps(); got > 1.1*rateBps/1e6 {
		t.Errorf("achieved %.2f MB/s up, above the limit of %.2f", got, float64(rateBps)/1e6)
	}
}

// Behind the proxy the server sees the client's host and scheme, so the
// URLs it hands out lead back through the proxy.
func TestHostAndSchemeReachTheServer(t *testing.T) {
	var host, proto string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, proto = r.Host, r.Header.Get("X-Forwarded-Proto")
	}))
	t.Cleanup(srv.Close)
	p := start(t, srv.URL, Plan{})
	resp, err := http.Get(p.URL() + "/x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if "http://"+host != p.URL() || proto != "http" {
		t.Errorf("server saw host %q, proto %q; want the proxy's %q over http", host, proto, p.URL())
	}
}

func TestResetClosesTheConnectionMidBody(t *testing.T) {
	b := newBackend(t)
	p := start(t, b.URL, Plan{Match: Uploads, Fault: Reset, First: 2})
	body := payload(1 << 20)
	for i, r := range []io.Reader{bytes.NewReader(body), onlyReader{bytes.NewReader(body)}} {
		resp, err := http.Post(p.URL()+"/upload/storage/v1/b/bkt/o?uploadType=multipart", "application/octet-stream", r)
		if err == nil {
			resp.Body.Close()
			t.Fatalf("request %d: got %s, want a connection error", i, resp.Status)
		}
		t.Logf("request %d: %v", i, err)
	}
	if n := len(b.arrivals()); n != 0 {
		t.Fatalf("backend saw %d requests; a reset request must not be forwarded", n)
	}
	if c := p.Counts(); c.Reset != 2 || c.ResetMidBody != 2 || c.Matched != 2 || c.Faults() != 2 {
		t.Fatalf("counts %+v", c)
	}
	// The plan is spent: the next upload goes through.
	resp, err := http.Post(p.URL()+"/upload/storage/v1/b/bkt/o", "application/octet-stream", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || len(b.arrivals()) != 1 {
		t.Fatalf("third upload: %s, backend saw %d", resp.Status, len(b.arrivals()))
	}
}

// TestResetIsATCPReset checks, on a raw connection, that the client gets a
// TCP RST (ECONNRESET), not an orderly close, once half the body is sent.
func TestResetIsATCPReset(t *testing.T) {
	b := newBackend(t)
	p := start(t, b.URL, Plan{Fault: Reset, Every: 1})
	c, err := net.Dial("tcp", strings.TrimPrefix(p.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	const size = 64 << 10
	if _, err := fmt.Fprintf(c, "POST /upload/x HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", size); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(payload(size / 2)); err != nil {
		t.Fatal(err)
	}
	n, err := c.Read(make([]byte, 1))
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read after half the body: %d bytes, %v; want ECONNRESET", n, err)
	}
	if c := p.Counts(); c.Reset != 1 || c.ResetMidBody != 1 {
		t.Fatalf("counts %+v", c)
	}
}

func TestStatus503AnswersLikeGCS(t *testing.T) {
	b := newBackend(t)
	p := start(t, b.URL, Plan{Match: Uploads, Fault: Status503, First: 1})
	resp, err := http.Post(p.URL()+"/upload/storage/v1/b/bkt/o", "application/octet-stream", bytes.NewReader(payload(256<<10)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e struct {
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || e.Error.Code != 503 || !strings.Contains(resp.Header.Get("Content-Type"), "json") {
		t.Fatalf("got %s %+v", resp.Status, e)
	}
	if n := len(b.arrivals()); n != 0 {
		t.Fatalf("backend saw %d requests", n)
	}
	if c := p.Counts(); c.Status503 != 1 || c.Faults() != 1 {
		t.Fatalf("counts %+v", c)
	}
}

func TestSlowRequestsArriveLate(t *testing.T) {
	b := newBackend(t)
	const delay = 150 * time.Millisecond
	p := start(t, b.URL, Plan{Match: Uploads, Fault: Slow, Every: 1, Delay: delay})
	sent := time.Now()
	resp, err := http.Post(p.URL()+"/upload/storage/v1/b/bkt/o", "text/plain", strings.NewReader("late"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	a := b.arrivals()
	if resp.StatusCode != http.StatusCreated || len(a) != 1 || string(a[0].body) != "late" {
		t.Fatalf("got %s, backend saw %d", resp.Status, len(a))
	}
	if late := a[0].at.Sub(sent); late < delay {
		t.Fatalf("arrived after %v, want at least %v", late, delay)
	}
	if c := p.Counts(); c.Slow != 1 {
		t.Fatalf("counts %+v", c)
	}
}

func TestPlanFirstEveryMax(t *testing.T) {
	b := newBackend(t)
	p := start(t, b.URL, Plan{Fault: Status503, First: 2, Every: 3, Max: 4})
	var faulted []int
	for n := 1; n <= 14; n++ {
		resp, err := http.Get(p.URL() + "/x")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable {
			faulted = append(faulted, n)
		}
	}
	if want := []int{1, 2, 5, 8}; !slices.Equal(faulted, want) {
		t.Fatalf("faulted requests %v, want %v (first 2, every 3rd after, at most 4)", faulted, want)
	}
	if c := p.Counts(); c.Requests != 14 || c.Matched != 14 || c.Status503 != 4 {
		t.Fatalf("counts %+v", c)
	}
}

func TestPlanDecide(t *testing.T) {
	b := newBackend(t)
	p := start(t, b.URL, Plan{Match: Uploads, Decide: func(n int, r *http.Request) Fault {
		if r.URL.Query().Get("name") == "final" && n%2 == 1 {
			return Status503
		}
		return None
	}})
	var codes []int
	for _, name := range []string{"final", "final", "chunk", "final"} {
		resp, err := http.Post(p.URL()+"/upload/storage/v1/b/bkt/o?name="+name, "text/plain", strings.NewReader(name))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		codes = append(codes, resp.StatusCode)
	}
	if want := []int{503, 201, 201, 201}; !slices.Equal(codes, want) {
		t.Fatalf("statuses %v, want %v", codes, want)
	}
}

func TestStartRejectsABadTarget(t *testing.T) {
	if _, err := Start("127.0.0.1:80", Plan{}); err == nil {
		t.Fatal("a target without a scheme was accepted")
	}
}

// WriteLimit answers 429 rateLimitExceeded, as GCS does, to the matching
// requests beyond its rate, and forwards the rest; PassedPerSecond counts
// what the backend saw.
func TestWriteLimitAnswers429AboveItsRate(t *testing.T) {
	b := newBackend(t)
	p := start(t, b.URL, Plan{Match: Uploads, WriteLimit: 1}) // a burst of 1
	var refused, passed int
	for range 20 {
		resp, err := http.Post(p.URL()+"/upload/storage/v1/b/x/o", "text/plain", bytes.NewReader(payload(64)))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusTooManyRequests:
			refused++
			if !strings.Contains(string(body), `"reason":"rateLimitExceeded"`) {
				t.Fatalf("429 body %s, want GCS's rateLimitExceeded", body)
			}
		case http.StatusCreated:
			passed++
		default:
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	c := p.Counts()
	if refused == 0 || c.Status429 != refused || len(b.arrivals()) != passed {
		t.Fatalf("%d refused, %d passed, counts %+v, backend saw %d", refused, passed, c, len(b.arrivals()))
	}
	total := 0
	for _, n := range p.PassedPerSecond() {
		total += n
	}
	if total != passed {
		t.Errorf("PassedPerSecond sums to %d, want the %d passed", total, passed)
	}
}
