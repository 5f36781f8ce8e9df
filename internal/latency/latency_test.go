package latency

import (
	"bytes"
	"crypto/rand"
	"io"
	"net"
	"testing"
	"time"
)

// echo starts a server that sends back whatever it reads.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

func start(t *testing.T, target string, d time.Duration) *Relay {
	t.Helper()
	r, err := Start(target, d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// roundTrip writes b and reads as many bytes back.
func roundTrip(t *testing.T, c net.Conn, b []byte) []byte {
	t.Helper()
	got := make([]byte, len(b))
	errc := make(chan error, 1)
	go func() { _, err := c.Write(b); errc <- err }()
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	return got
}

// The delays are lower bounds: a busy machine only adds to them, so
// these checks cannot fail on a slow run.
func TestEveryRoundTripTakesAtLeastTwiceTheDelayAndTheFirstOneMore(t *testing.T) {
	const d = 25 * time.Millisecond
	r := start(t, echo(t), d)
	// The relay delays from when it accepts the connection, which can be
	// before Dial returns here: the clock starts before Dial.
	begin := time.Now()
	c, err := net.Dial("tcp", r.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	roundTrip(t, c, []byte("ping"))
	if first := time.Since(begin); first < 4*d {
		t.Errorf("the first round trip took %v, want at least %v (the handshake's round trip and its own)", first, 4*d)
	}
	begin = time.Now()
	roundTrip(t, c, []byte("pong"))
	if next := time.Since(begin); next < 2*d {
		t.Errorf("a round trip on an open connection took %v, want at least %v", next, 2*d)
	}
}

func TestBytesArriveWholeAndInOrderBothWays(t *testing.T) {
	r := start(t, echo(t), time.Millisecond)
	c, err := net.Dial("tcp", r.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	b := make([]byte, 9<<20) // more than the relay holds at once
	_, _ = rand.Read(b)
	if got := roundTrip(t, c, b); !bytes.Equal(got, b) {
		t.Fatal("the bytes that came back differ from those sent")
	}
}

func TestItCountsTheConnectionsItAccepts(t *testing.T) {
	r := start(t, echo(t), 0)
	for i := range 3 {
		c, err := net.Dial("tcp", r.Addr())
		if err != nil {
			t.Fatal(err)
		}
		roundTrip(t, c, []byte{byte(i)})
		_ = c.Close()
	}
	if got := r.Accepted(); got != 3 {
		t.Errorf("Accepted() = %d after 3 connections, want 3", got)
	}
}

func TestACloseOfTheClientEndsTheServersSide(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	r := start(t, ln.Addr().String(), time.Millisecond)
	c, err := net.Dial("tcp", r.Addr())
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	_, _ = c.Write([]byte("last words"))
	_ = c.Close()
	got, err := io.ReadAll(s) // ends with the client's close, after its bytes
	if err != nil || string(got) != "last words" {
		t.Errorf("the server read %q, %v; want the client's bytes, then EOF", got, err)
	}
}
