package window

import (
	"context"
	"errors"
	"testing"
	"time"
)

// link is a fake far server: a request reaches it half a round trip after
// it starts, waits its turn at a server that does capacity requests a
// second, and its answer comes back half a round trip later. Nothing here
// reads the wall clock: the window runs on the simulation's.
type link struct {
	rtt      time.Duration
	capacity float64 // requests a second the server does; 0: no limit
	free     time.Duration
}

// done is when a request started at t is answered.
func (l *link) done(t time.Duration) time.Duration {
	at := t + l.rtt/2
	if l.capacity > 0 {
		at = max(at, l.free) + time.Duration(float64(time.Second)/l.capacity)
		l.free = at
	}
	return at + l.rtt/2
}

// sim runs w against l for span with a source that offers at most
// offered requests a second (0: always one more), in 1 ms steps, and
// returns the requests answered in the last half of the span per second.
func sim(w *Window, clock *time.Duration, l *link, span time.Duration, offered float64) float64 {
	var pending []time.Duration // answer times, in start order (not sorted)
	answered := 0
	credit := 0.0
	for ; *clock < span; *clock += time.Millisecond {
		kept := pending[:0]
		for _, at := range pending {
			if at <= *clock {
				w.Release(25 << 10)
				if *clock >= span/2 {
					answered++
				}
				continue
			}
			kept = append(kept, at)
		}
		pending = kept
		credit += offered / 1000
		for offered == 0 || credit >= 1 {
			if !w.TryAcquire() {
				break
			}
			credit--
			pending = append(pending, l.done(*clock))
		}
		if offered > 0 {
			credit = min(credit, 1)
		}
	}
	return float64(answered) / (span / 2).Seconds()
}

func newSim(o Options) (*Window, *time.Duration) {
	clock := new(time.Duration)
	t0 := time.Unix(1_700_000_000, 0)
	o.Now = func() time.Time { return t0.Add(*clock) }
	return New(o), clock
}

func TestOnAFarLinkTheWindowGrowsUntilTheServerIsTheBound(t *testing.T) {
	for _, rtt := range []time.Duration{10 * time.Millisecond, 40 * time.Millisecond, 80 * time.Millisecond} {
		w, clock := newSim(Options{Start: 16, Max: 1024})
		l := &link{rtt: rtt, capacity: 1600}
		got := sim(w, clock, l, 6*time.Second, 0) // its last 3 s: the window must get there within 3 s
		// In flight to keep the server busy: its rate times the round
		// trip, plus the one it serves.
		need := 1600*rtt.Seconds() + 1
		if got < 0.9*1600 {
			t.Errorf("%v round trip: %.0f requests/s with the window at %d, want at least 90%% of the server's 1600 (it needs %.0f in flight)", rtt, got, w.Stats().Limit, need)
		}
		if lim := float64(w.Stats().Limit); lim > 2.5*need {
			t.Errorf("%v round trip: the window settled at %.0f, over 2.5 times the %.0f in flight the server can use", rtt, lim, need)
		}
	}
}

func TestAFixedWindowOfSixteenIsWhatTheAdaptiveOneBeats(t *testing.T) {
	// The baseline the test above is measured against: 16 in flight at
	// 40 ms carry 400 requests a second, a quarter of the server.
	w, clock := newSim(Options{Start: 16, Max: 16})
	got := sim(w, clock, &link{rtt: 40 * time.Millisecond, capacity: 1600}, 10*time.Second, 0)
	if got > 0.3*1600 {
		t.Errorf("16 in flight at 40 ms carried %.0f requests/s; the simulation is wrong if that beats 30%% of 1600", got)
	}
}

func TestOnANearLinkItStaysSmall(t *testing.T) {
	w, clock := newSim(Options{Start: 16, Max: 1024})
	got := sim(w, clock, &link{rtt: time.Millisecond, capacity: 1600}, 20*time.Second, 0)
	if got < 0.9*1600 {
		t.Errorf("1 ms round trip: %.0f requests/s, want at least 90%% of 1600", got)
	}
	if w.Stats().Limit > 32 {
		t.Errorf("1 ms round trip: the window settled at %d, where 3 in flight keep the server busy (want at most 32)", w.Stats().Limit)
	}
}

func TestTheCapIsNeverExceeded(t *testing.T) {
	w, clock := newSim(Options{Start: 16, Max: 40})
	sim(w, clock, &link{rtt: 80 * time.Millisecond}, 10*time.Second, 0)
	if w.Stats().Peak > 40 || w.Stats().Limit != 40 {
		t.Errorf("with --uploads 40 and a link that takes anything, the window peaked at %d and is at %d; want 40 and 40", w.Stats().Peak, w.Stats().Limit)
	}
}

func TestWhenTheWorkIsTheBoundTheWindowDoesNotGrow(t *testing.T) {
	// The source offers 200 requests a second; 16 in flight at 40 ms
	// carry 400: no request ever waits for the window.
	w, clock := newSim(Options{Start: 16, Max: 1024})
	got := sim(w, clock, &link{rtt: 40 * time.Millisecond, capacity: 1600}, 10*time.Second, 200)
	if w.Stats().Peak != 16 {
		t.Errorf("a source of 200 requests/s moved the window to %d (peak); it never filled 16", w.Stats().Peak)
	}
	if got < 190 {
		t.Errorf("the source's 200 requests/s came through at %.0f", got)
	}
}

func TestAPushBackCutsOnceAndEndsTheSlowStart(t *testing.T) {
	w, clock := newSim(Options{Start: 100, Max: 1024})
	w.PushedBack()
	w.PushedBack() // the same limit, met by another request in flight
	if got := w.Stats().Limit; got != 70 {
		t.Fatalf("after two push-backs at once the window is %d, want 70 (one cut to 70 %%)", got)
	}
	*clock += time.Second
	w.PushedBack()
	if got := w.Stats().Limit; got != 49 {
		t.Fatalf("after a push-back a second later the window is %d, want 49", got)
	}
	if w.Stats().Cuts != 2 {
		t.Errorf("Stats().Cuts = %d, want 2", w.Stats().Cuts)
	}
	// No more slow start: a link that takes anything grows it by probes
	// of a quarter, not by doubling.
	sim(w, clock, &link{rtt: 40 * time.Millisecond}, *clock+500*time.Millisecond, 0)
	if got := w.Stats().Limit; got > 49+49/4 {
		t.Errorf("half a second after the cut the window is %d: it doubled, as if the limit were not known", got)
	}
}

func TestAcquireWaitsForARelease(t *testing.T) {
	w := New(Options{Start: 1, Max: 1, Min: 1})
	if err := w.Acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { got <- w.Acquire(context.Background()) }()
	w.Release(1)
	if err := <-got; err != nil {
		t.Fatalf("Acquire after a Release: %v", err)
	}
	if w.Stats().InFlight != 1 {
		t.Errorf("Stats().InFlight = %d, want 1", w.Stats().InFlight)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { got <- w.Acquire(ctx) }()
	cancel()
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Errorf("Acquire on a full window, cancelled: %v, want context.Canceled", err)
	}
}
