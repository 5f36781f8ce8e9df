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
	type cut struct {
		limit float64
		first bool
	}
	var told []cut
	p := New(Options{Now: c.now, OnCut: func(limit float64, first bool) { told = append(told, cut{limit, first}) }})
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
	// Ten seconds of success at the pace: +10 % each second (compounded
	// at each tenth of a second), the first writes 0.3 s after the cut.
	before := p.Limit()
	for range 100 {
		c.advance(100 * time.Millisecond)
		for range int(p.Limit()/10) + 1 {
			p.Done()
		}
	}
	grown := before * 1.03 * math.Pow(1.01, 99)
	if !near(p.Limit(), grown) {
		t.Fatalf("limit %v after 10 s of success, want %v", p.Limit(), grown)
	}
	c.advance(2 * time.Second)
	p.PushedBack()
	if want := 0.7 * grown; !near(p.Limit(), want) {
		t.Fatalf("limit %v after the second cut, want %v", p.Limit(), want)
	}
	for range 30 {
		c.advance(2 * time.Second)
		p.PushedBack()
	}
	if p.Limit() != DefaultMin || p.Cuts() != 32 {
		t.Fatalf("limit %v after many cuts (%d), want the floor %v", p.Limit(), p.Cuts(), DefaultMin)
	}
	// Every push-back is counted; OnCut hears of every cut, the first
	// one as such.
	if p.PushBacks() != 1+20+1+30 {
		t.Fatalf("%d push-backs counted, want %d", p.PushBacks(), 1+20+1+30)
	}
	if len(told) != 32 || !told[0].first || !near(told[0].limit, got) || told[1].first || told[31].limit != DefaultMin {
		t.Fatalf("OnCut heard %d cuts (first %+v, last %+v), want 32, the first marked and cutting to %v", len(told), told[0], told[len(told)-1], got)
	}
}

// At a low rate the growth is Increase writes a second, not a share of
// next to nothing: a process cut to the floor is back at 17 writes/s in
// 8 s, not at 2.1.
func TestGrowthHasAFloor(t *testing.T) {
	c := &clock{t: time.Unix(1_000_000, 0)}
	p := New(Options{Now: c.now})
	for range 50 {
		c.advance(100 * time.Millisecond)
		p.Done()
	}
	for range 40 {
		c.advance(2 * time.Second)
		p.PushedBack()
	}
	if p.Limit() != DefaultMin {
		t.Fatalf("limit %v after many cuts, want the floor", p.Limit())
	}
	for range 80 {
		c.advance(100 * time.Millisecond)
		p.Done()
	}
	if !near(p.Limit(), DefaultMin+2*8) {
		t.Fatalf("limit %v 8 s after the floor, want %v", p.Limit(), DefaultMin+2*8)
	}
}

// A process that writes well below its pace (its own work holds it back)
// does not raise it: the pace stays what GCS last took, instead of
// growing into a burst that meets the limit again.
func TestAnIdleProcessKeepsItsPace(t *testing.T) {
	c := &clock{t: time.Unix(1_000_000, 0)}
	p := New(Options{Now: c.now})
	for range 300 {
		c.advance(10 * time.Millisecond)
		p.Done()
	}
	p.PushedBack()
	paced := p.Limit()
	var at4s float64
	for i := range 100 { // 10 writes a second against a pace of about 70
		c.advance(100 * time.Millisecond)
		p.Done()
		if i == 39 {
			at4s = p.Limit() // once the busy seconds have left the window
		}
	}
	if p.Limit() != at4s || at4s > paced*1.3 {
		t.Fatalf("limit %v after 10 s of writing at 10/s (%v after 4 s), want it held near the pace of %v", p.Limit(), at4s, paced)
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
