// Package faultproxy is a small HTTP reverse proxy for tests and benchmarks
// that injects faults between a client and a server on loopback: connections
// reset in the middle of a request body, 503 responses, slow forwarding, and
// a link of limited bandwidth (Plan.Rate). A Plan chooses which requests are
// hit; every fault injected and every body byte forwarded is counted, so a
// test can assert that the faults it asked for really happened, and a
// benchmark can show the rate the link really had.
//
// It is meant to sit between ferry's workers and fake-gcs-server, pointed at
// with option.WithEndpoint(p.URL() + "/storage/v1/"), but knows nothing of
// GCS beyond the shape of its error bodies.
package faultproxy

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Fault is what happens to one request.
type Fault int

const (
	// None forwards the request untouched.
	None Fault = iota
	// Reset reads part of the request body, then closes the client's
	// connection abruptly (a TCP RST), without answering or forwarding.
	Reset
	// Status503 drains the request body and answers 503 with a GCS-style
	// JSON error, without forwarding.
	Status503
	// Slow waits Plan.Delay, then forwards the request.
	Slow
	// Status429 drains the request body and answers 429
	// rateLimitExceeded, as GCS does to writes above a bucket's rate,
	// without forwarding.
	Status429
	// ResetAfterForward forwards the request and lets the server carry it
	// out, then closes the client's connection abruptly instead of
	// answering: the call took effect, and the client cannot know it.
	ResetAfterForward
	// Status503AfterForward forwards the request and lets the server carry
	// it out, then answers 503 instead of the server's answer, as GCS
	// sometimes does: a retry meets the effect (a 412, or a 404 of sources
	// a compose deleted).
	Status503AfterForward
	// Status500 drains the request body and answers 500 backendError,
	// without forwarding: an error that is neither a push-back nor a
	// dropped connection, which the caller's retries must bound.
	Status500
)

func (f Fault) String() string {
	switch f {
	case None:
		return "none"
	case Reset:
		return "reset"
	case Status503:
		return "503"
	case Slow:
		return "slow"
	case Status429:
		return "429"
	case ResetAfterForward:
		return "reset after forwarding"
	case Status503AfterForward:
		return "503 after forwarding"
	case Status500:
		return "500"
	}
	return fmt.Sprintf("Fault(%d)", int(f))
}

// Plan decides which requests get which fault.
type Plan struct {
	// Match selects the requests faults may hit; nil matches every
	// request. Unmatched requests are forwarded untouched.
	Match func(*http.Request) bool
	// Fault hits the first First matching requests, then every Every-th
	// matching request after those (Every 0: no more).
	Fault        Fault
	First, Every int
	// Decide, when set, replaces Fault, First and Every: it returns the
	// fault of the n-th matching request, n counting from 1. Calls are
	// serialized, so it may keep state without locking.
	Decide func(n int, r *http.Request) Fault
	// Max caps the faults injected in all; 0 means no cap.
	Max int
	// Delay is how long Slow waits; default 200ms.
	Delay time.Duration
	// WriteLimit, when positive, answers 429 to the matching requests
	// beyond WriteLimit a second (a token bucket holding a quarter second
	// of them), as GCS does to writes beyond a bucket's rate. It applies
	// before Fault and Decide.
	WriteLimit float64
	// ResetAfter is how many body bytes Reset reads before it closes the
	// connection; default half the Content-Length, or 4 KiB when the
	// length is unknown (a chunked body).
	ResetAfter int64
	// Rate, when positive, limits the link to Rate bytes per second in
	// each direction: request bodies (client to server) share one limit
	// over all connections, response bodies another, as on one full-duplex
	// link.
	Rate int64
}

// Uploads matches GCS JSON API media uploads (paths under /upload/), and
// not the metadata calls around them.
func Uploads(r *http.Request) bool { return strings.Contains(r.URL.Path, "/upload/") }

// Counts are what the proxy has seen and done so far.
type Counts struct {
	Requests int // every request received
	Matched  int // requests Plan.Match selected
	Reset    int // connections reset
	// ResetMidBody counts the resets that left part of the body unread:
	// the client was still sending.
	ResetMidBody int
	Status503    int
	Slow         int
	Status429    int
	Status500    int
	// Forwarded counts the requests carried out whose answer was then
	// lost (ResetAfterForward) or replaced (Status503AfterForward).
	Forwarded int
	// Up and Down are the request and response body bytes forwarded.
	Up, Down Flow
}

// Flow is what crossed the link in one direction.
type Flow struct {
	Bytes int64
	// First and Last are when the first and the last byte were forwarded.
	First, Last time.Time
}

// MBps is the rate the flow had from its first byte to its last, in MB/s
// (10^6 bytes); 0 before two reads.
func (f Flow) MBps() float64 {
	d := f.Last.Sub(f.First).Seconds()
	if d <= 0 {
		return 0
	}
	return float64(f.Bytes) / 1e6 / d
}

func (f *Flow) add(n int, at time.Time) {
	if f.Bytes == 0 && f.First.IsZero() {
		f.First = at
	}
	f.Bytes += int64(n)
	f.Last = at
}

// Faults is the number of faults injected.
func (c Counts) Faults() int {
	return c.Reset + c.Status503 + c.Slow + c.Status429 + c.Status500 + c.Forwarded
}

// Proxy is a running fault-injecting proxy.
type Proxy struct {
	plan      Plan
	ln        net.Listener
	srv       *http.Server
	rp        *httputil.ReverseProxy
	tr        *http.Transport
	up, down  *rate.Limiter // nil: no Rate
	writes    *rate.Limiter // nil: no WriteLimit
	tlsSrv    *http.Server
	closed    chan struct{} // closed by Close: ends pending delays
	closeOnce sync.Once

	mu     sync.Mutex
	counts Counts
	// passed counts the matching requests let through, by Unix second.
	passed map[int64]int
}

// PassedPerSecond is how many matching requests the proxy let through in
// each second from the first to the last one that saw any: the rate the
// server behind it saw.
func (p *Proxy) PassedPerSecond() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	var lo, hi int64
	for s := range p.passed {
		if lo == 0 || s < lo {
			lo = s
		}
		hi = max(hi, s)
	}
	var out []int
	for s := lo; lo != 0 && s <= hi; s++ {
		out = append(out, p.passed[s])
	}
	return out
}

// Start listens on a free loopback port and forwards to target, a base URL
// such as "http://127.0.0.1:4443".
func Start(target string, plan Plan) (*Proxy, error) {
	u, err := url.Parse(target)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("faultproxy: target %q: want a base URL such as http://127.0.0.1:4443", target)
	}
	if plan.Delay <= 0 {
		plan.Delay = 200 * time.Millisecond
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: %w", err)
	}
	p := &Proxy{plan: plan, ln: ln, tr: &http.Transport{MaxIdleConnsPerHost: 64}, closed: make(chan struct{}), passed: map[int64]int{}}
	if plan.WriteLimit > 0 {
		p.writes = rate.NewLimiter(rate.Limit(plan.WriteLimit), max(1, int(plan.WriteLimit/4)))
	}
	if plan.Rate > 0 {
		p.up = rate.NewLimiter(rate.Limit(plan.Rate), rateBurst)
		p.down = rate.NewLimiter(rate.Limit(plan.Rate), rateBurst)
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			// The server sees the host and scheme the client used, so
			// the URLs it hands out (a resumable upload's Location)
			// lead back through the proxy.
			pr.Out.Host = pr.In.Host
			pr.SetXForwarded()
		},
		Transport: p.tr,
		ModifyResponse: func(resp *http.Response) error {
			resp.Body = &flowReader{r: resp.Body, c: resp.Body, lim: p.down, ctx: resp.Request.Context(), count: p.countDown, left: -1}
			return nil
		},
	}
	p.srv = &http.Server{Handler: http.HandlerFunc(p.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// URL is the proxy's base URL, "http://127.0.0.1:PORT".
func (p *Proxy) URL() string { return "http://" + p.ln.Addr().String() }

// ServeTLS also serves the proxy over HTTPS, on a free loopback port, with
// cfg's certificate, and returns that listener's host:port. Call it once.
func (p *Proxy) ServeTLS(cfg *tls.Config) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("faultproxy: %w", err)
	}
	p.tlsSrv = &http.Server{Handler: http.HandlerFunc(p.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.tlsSrv.Serve(tls.NewListener(ln, cfg)) }()
	return ln.Addr().String(), nil
}

// rateBurst is the most bytes one read may forward at once under a Rate:
// small enough that the rate holds over a few milliseconds.
const rateBurst = 32 << 10

func (p *Proxy) countUp(n int) {
	p.mu.Lock()
	p.counts.Up.add(n, time.Now())
	p.mu.Unlock()
}

func (p *Proxy) countDown(n int) {
	p.mu.Lock()
	p.counts.Down.add(n, time.Now())
	p.mu.Unlock()
}

// flowReader forwards a body at most lim allows (nil: at once) and counts
// what it forwarded.
type flowReader struct {
	r     io.Reader
	c     io.Closer
	lim   *rate.Limiter
	ctx   context.Context
	count func(int)
	// left is what remains of a body of known length (-1: unknown). Once
	// it is 0, Read answers EOF without touching the body: the server
	// closes a request's body as the handler starts its response, and the
	// transport's check for bytes beyond the length would then fail, and
	// close the connection the response is still arriving on.
	left int64
}

func (f *flowReader) Read(b []byte) (int, error) {
	if f.left == 0 {
		return 0, io.EOF
	}
	if f.lim != nil && len(b) > rateBurst {
		b = b[:rateBurst]
	}
	if f.left > 0 && int64(len(b)) > f.left {
		b = b[:f.left]
	}
	n, err := f.r.Read(b)
	if f.left > 0 {
		f.left -= int64(n)
	}
	if n > 0 {
		if f.lim != nil {
			if werr := f.lim.WaitN(f.ctx, n); werr != nil {
				return 0, werr
			}
		}
		f.count(n)
	}
	return n, err
}

func (f *flowReader) Close() error { return f.c.Close() }

// Counts returns a snapshot of the counters.
func (p *Proxy) Counts() Counts {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counts
}

// Close stops the proxy and drops its connections.
func (p *Proxy) Close() error {
	p.closeOnce.Do(func() { close(p.closed) })
	err := p.srv.Close()
	if p.tlsSrv != nil {
		_ = p.tlsSrv.Close()
	}
	p.tr.CloseIdleConnections()
	return err
}

// decide counts r and picks its fault.
func (p *Proxy) decide(r *http.Request) Fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.counts.Requests++
	if p.plan.Match != nil && !p.plan.Match(r) {
		return None
	}
	p.counts.Matched++
	n := p.counts.Matched
	if p.writes != nil && !p.writes.Allow() {
		p.counts.Status429++
		return Status429
	}
	if p.plan.Max > 0 && p.counts.Faults() >= p.plan.Max {
		return None
	}
	var f Fault
	switch {
	case p.plan.Decide != nil:
		f = p.plan.Decide(n, r)
	case n <= p.plan.First || p.plan.Every > 0 && (n-p.plan.First)%p.plan.Every == 0:
		f = p.plan.Fault
	}
	// Counted when decided, so that Max holds under concurrency.
	switch f {
	case Reset:
		p.counts.Reset++
	case Status503:
		p.counts.Status503++
	case Slow:
		p.counts.Slow++
	case Status429:
		p.counts.Status429++
	case ResetAfterForward, Status503AfterForward:
		p.counts.Forwarded++
	case Status500:
		p.counts.Status500++
	}
	if f == None || f == Slow || f == ResetAfterForward || f == Status503AfterForward {
		p.passed[time.Now().Unix()]++
	}
	return f
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	switch f := p.decide(r); f {
	case ResetAfterForward, Status503AfterForward:
		p.forwardThenFail(w, r, f)
		return
	case Reset:
		p.reset(w, r)
		return
	case Status503:
		answer(w, r, http.StatusServiceUnavailable, "global", "backendError", "Service Unavailable (injected by faultproxy)")
		return
	case Status500:
		answer(w, r, http.StatusInternalServerError, "global", "backendError", "Internal Error (injected by faultproxy)")
		return
	case Status429:
		answer(w, r, http.StatusTooManyRequests, "usageLimits", "rateLimitExceeded",
			"The rate of change requests to the bucket is too high (injected by faultproxy)")
		return
	case Slow:
		t := time.NewTimer(p.plan.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return
		case <-p.closed:
			return
		}
	}
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = &flowReader{r: r.Body, c: r.Body, lim: p.up, ctx: r.Context(), count: p.countUp, left: r.ContentLength}
	}
	p.rp.ServeHTTP(w, r)
}

// forwardThenFail sends r to the server and reads its whole answer, so the
// call is carried out, then resets the client's connection or answers 503
// in its place.
func (p *Proxy) forwardThenFail(w http.ResponseWriter, r *http.Request, f Fault) {
	rec := &discard{header: http.Header{}}
	p.rp.ServeHTTP(rec, r)
	if f == Status503AfterForward {
		answer(w, r, http.StatusServiceUnavailable, "global", "backendError", "Service Unavailable (injected by faultproxy after the call was carried out)")
		return
	}
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// discard is a ResponseWriter that keeps nothing: the server's answer to a
// call whose answer the client never gets.
type discard struct {
	header http.Header
}

func (d *discard) Header() http.Header         { return d.header }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(int)             {}

// answer drains r's body and answers with a GCS-style JSON error.
func answer(w http.ResponseWriter, r *http.Request, code int, domain, reason, msg string) {
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": code, "message": msg,
		"errors": []map[string]string{{"message": msg, "domain": domain, "reason": reason}}}})
}

// reset reads part of r's body, then closes the connection with a TCP RST.
func (p *Proxy) reset(w http.ResponseWriter, r *http.Request) {
	n := p.plan.ResetAfter
	if n <= 0 {
		n = 4 << 10
		if r.ContentLength > 0 {
			n = r.ContentLength / 2
		}
	}
	read, _ := io.CopyN(io.Discard, r.Body, n)
	rc := http.NewResponseController(w)
	// A chunked body of unknown length counts as cut when the proxy
	// stopped reading before it ended.
	midBody := r.ContentLength > read || r.ContentLength < 0 && read == n
	conn, _, err := rc.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // cannot happen on HTTP/1; still drops the connection
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // Close sends RST, not FIN
	}
	// Count before closing: a client that sees the reset may ask at once.
	if midBody {
		p.mu.Lock()
		p.counts.ResetMidBody++
		p.mu.Unlock()
	}
	_ = conn.Close()
}
