package pacer

import (
	"math"
	"testing"
	"time"
)

// clock is a test's clock.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }
func near(a, b float64) bool             { return math.Abs(a-b) < 1e-6*max(1, math.Abs(b)) }

// The first push-back cuts the measured rate; push-backs within Hold are
// one; a second of success adds Increase; the rate never falls below Min.
func TestAIMD(t *testing.T) {
	c := &clock{t: time.Unix(1_000_000, 0)}
	p := New(Options{Now: c.now})
	if p.Limit() != 0 {
		t.Fatalf("limit %v before any push-back, want 0 (unpaced)", p.Limit())
	}
	// 100 writes a second for 3 seconds.
	for range 300 {
		c.advance(10 * time.Millisecond)
		p.Done()
	}
	if !p.PushedBack() {
		t.Fatal("the first push-back did not cut")
	}
	got := p.Limit()
	if got < 0.7*90 || got > 0.7*110 {
		t.Fatalf("limit %v after the first push-back at 100 writes/s, want about %v", got, 0.7*100)
	}
	// The other requests in flight come back 429 too: one cut.
	for range 20 {
		c.advance(10 * time.Millisecond)
		if p.PushedBack() {
			t.Fatal("a push-back within Hold of a cut cut again")
		}
	}
	if !near(p.Limit(), got) {
		t.Fatalf("limit %v after push-backs within Hold, want %v", p.Limit(), got)
	}
	// Ten seconds of success: +2 writes/s each second.
	before := p.Limit()
	for range 100 {
		c.advance(100 * time.Millisecond)
		p.Done()
	}
	if want := before + 2*(10+0.2); !near(p.Limit(), want) {
		t.Fatalf("limit %v after 10 s of success, want %v", p.Limit(), want)
	}
	c.advance(2 * time.Second)
	p.PushedBack()
	if want := 0.7 * (before + 2*10.2); !near(p.Limit(), want) {
		t.Fatalf("limit %v after the second cut, want %v", p.Limit(), want)
	}
	for range 30 {
		c.advance(2 * time.Second)
		p.PushedBack()
	}
	if p.Limit() != DefaultMin || p.Cuts() != 32 {
		t.Fatalf("limit %v after many cuts (%d), want the floor %v", p.Limit(), p.Cuts(), DefaultMin)
	}
}

// A nil Pacer paces nothing.
func TestNilPacer(t *testing.T) {
	var p *Pacer
	if p.Wait(t.Context()) != nil || p.PushedBack() || p.Limit() != 0 {
		t.Fatal("a nil Pacer paced")
	}
	p.Done()
}
