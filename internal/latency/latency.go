// Package latency is a TCP relay that makes a loopback server far: every
// byte it forwards, either way, arrives Delay after it was sent, and a new
// connection's first byte waits one round trip more (TCP's handshake,
// which the client's connect to the relay does not pay). Bandwidth is not
// limited (faultproxy.Plan.Rate does that): only latency, so a client that
// keeps few requests in flight is as slow here as it is against GCS from
// far away, and one that keeps many is not.
//
// The relay counts the connections it accepts: a client that opens one per
// request pays the handshake every time, and the count shows it.
//
// Bytes are held in the order they came and released when due, so a
// stream keeps its order and a window of bytes can be in flight at once,
// as on a real link; the bytes held per connection and direction are
// bounded (a window of holdMax), which a client feels as the link's
// bandwidth-delay product.
package latency

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// holdMax bounds the chunks held per connection and direction (each at
// most chunkSize bytes): 4 MiB, a window no request of ferry's exceeds.
const (
	holdMax   = 64
	chunkSize = 64 << 10
)

// Relay forwards connections to a target with a delay each way.
type Relay struct {
	ln     net.Listener
	target string
	delay  time.Duration

	accepted atomic.Int64
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	closed   bool
}

// Start listens on a loopback port and relays every connection to target
// (host:port), delaying each direction by oneWay: the round trip is twice
// that.
func Start(target string, oneWay time.Duration) (*Relay, error) {
	if oneWay < 0 {
		return nil, fmt.Errorf("latency relay to %s: a delay of %v is negative", target, oneWay)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("latency relay to %s: %w", target, err)
	}
	r := &Relay{ln: ln, target: target, delay: oneWay, conns: map[net.Conn]struct{}{}}
	r.wg.Add(1)
	go r.serve()
	return r, nil
}

// Addr is the relay's host:port.
func (r *Relay) Addr() string { return r.ln.Addr().String() }

// Accepted is how many connections clients have opened so far.
func (r *Relay) Accepted() int64 { return r.accepted.Load() }

// Close stops listening and ends every connection.
func (r *Relay) Close() error {
	err := r.ln.Close()
	r.mu.Lock()
	r.closed = true
	for c := range r.conns {
		_ = c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
	return err
}

func (r *Relay) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.conns[c] = struct{}{}
	return true
}

func (r *Relay) untrack(c net.Conn) {
	r.mu.Lock()
	delete(r.conns, c)
	r.mu.Unlock()
}

func (r *Relay) serve() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.accepted.Add(1)
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.relay(c, time.Now())
		}()
	}
}

// relay carries one connection. The handshake's round trip is charged to
// the client's first bytes: they reach the server no sooner than three
// delays after the connect (SYN, SYN-ACK, then the bytes themselves).
func (r *Relay) relay(c net.Conn, opened time.Time) {
	defer func() { _ = c.Close() }()
	up, err := net.DialTimeout("tcp", r.target, 10*time.Second)
	if err != nil {
		return
	}
	defer func() { _ = up.Close() }()
	if !r.track(c) || !r.track(up) {
		return
	}
	defer r.untrack(c)
	defer r.untrack(up)
	done := make(chan struct{}, 2)
	go func() { r.pipe(up, c, opened.Add(3*r.delay)); done <- struct{}{} }()
	go func() { r.pipe(c, up, time.Time{}); done <- struct{}{} }()
	<-done
	<-done
}

// held is a chunk of bytes and when it may go on.
type held struct {
	b   []byte
	due time.Time
	eof bool
	err error
}

// pipe copies src to dst, each chunk Delay after it was read (and not
// before notBefore). On EOF it half-closes dst once the bytes before it
// are delivered; on an error it closes both.
func (r *Relay) pipe(dst, src net.Conn, notBefore time.Time) {
	q := make(chan held, holdMax)
	go func() {
		defer close(q)
		buf := make([]byte, chunkSize)
		for {
			n, err := src.Read(buf)
			due := time.Now().Add(r.delay)
			if due.Before(notBefore) {
				due = notBefore
			}
			if n > 0 {
				q <- held{b: append([]byte(nil), buf[:n]...), due: due}
			}
			if err != nil {
				q <- held{due: due, eof: errors.Is(err, io.EOF), err: err}
				return
			}
		}
	}()
	for h := range q {
		time.Sleep(time.Until(h.due))
		if h.err != nil {
			if h.eof {
				if tc, ok := dst.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
					continue
				}
			}
			_ = dst.Close()
			_ = src.Close()
			continue
		}
		if _, err := dst.Write(h.b); err != nil {
			_ = src.Close()
			_ = dst.Close()
		}
	}
}
