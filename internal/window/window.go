// Package window finds how many requests a process keeps in flight, as a
// congestion window does. Near GCS a request costs a millisecond and a few
// in flight fill the link; from a laptop 40 ms away it costs forty, and the
// same rate needs forty times as many. No fixed number serves both, so the
// window measures instead: it doubles while the rate it gets keeps growing
// (a slow start), falls back to the last size that paid once doubling stops
// paying, then probes a quarter above it now and then and keeps the probe
// only when the rate grew with it. A push-back of GCS (429, 503) cuts it to
// Decrease of itself, as the pacer cuts its rate.
//
// The rate is judged once per epoch: at least Epoch long and at least one
// window's worth of completions, so that a 1 ms link and an 80 ms one are
// each judged on what they carried. An epoch in which no request had to
// wait for the window says nothing of it (the work, not the window, was
// the bound: a slow reader, a small tree) and changes nothing; nor does
// the epoch in which the size changed, which the window spends filling
// or draining. Slow start ends on the second epoch in a row that did not
// grow, so that one noisy epoch on a busy machine does not end it.
package window

import (
	"context"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"
)

// Defaults of Options.
const (
	DefaultStart    = 16
	DefaultMin      = 2
	DefaultEpoch    = 100 * time.Millisecond
	DefaultGain     = 0.10 // a rate this much higher counts as growth
	DefaultDecrease = 0.7
	probeEvery      = 4 // epochs at a settled size between two probes
)

// Options tune a Window; zero values take the defaults.
type Options struct {
	// Start is the size before anything was measured; Min and Max bound
	// it (Max: the caller's cap, --uploads; default Start).
	Start, Min, Max int
	// Epoch is the shortest span a rate is judged over.
	Epoch time.Duration
	// Gain is the share by which a rate must exceed the last to count as
	// growth.
	Gain float64
	// Decrease is what a push-back keeps of the size.
	Decrease float64
	// Now is the clock (default time.Now); tests pass their own.
	Now func() time.Time
}

// phase is what the window is doing.
type phase int

const (
	slowStart phase = iota // doubling while the rate grows
	settled                // at the size that paid, probing now and then
	probing                // a quarter above it, to see if that pays
)

// Window admits requests. It is safe for concurrent use.
type Window struct {
	o Options

	mu       sync.Mutex
	cond     *sync.Cond
	limit    int
	inFlight int
	peak     int // the largest size it reached

	phase      phase
	base       int     // settled: the size that paid
	baseRate   float64 // its rate
	sinceProbe int     // epochs settled since the last probe

	epochStart time.Time
	epochDone  int
	epochUnits float64
	waited     bool // a request waited for the window this epoch
	ramping    bool // the size changed during this epoch
	strikes    int  // slow start: epochs in a row the rate did not grow

	lastCut time.Time
	cuts    int
}

// New returns a Window of opts.Start requests.
func New(o Options) *Window {
	if o.Start <= 0 {
		o.Start = DefaultStart
	}
	if o.Min <= 0 {
		o.Min = DefaultMin
	}
	if o.Max <= 0 {
		o.Max = o.Start
	}
	o.Min = min(o.Min, o.Max)
	o.Start = min(max(o.Start, o.Min), o.Max)
	if o.Epoch <= 0 {
		o.Epoch = DefaultEpoch
	}
	if o.Gain <= 0 {
		o.Gain = DefaultGain
	}
	if o.Decrease <= 0 || o.Decrease >= 1 {
		o.Decrease = DefaultDecrease
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	w := &Window{o: o, limit: o.Start, peak: o.Start}
	w.cond = sync.NewCond(&w.mu)
	return w
}

// Acquire waits until a request may start, or ctx ends. Every Acquire that
// returns nil is matched by one Release.
func (w *Window) Acquire(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.take() {
		return nil
	}
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, func() {
			w.mu.Lock()
			w.cond.Broadcast()
			w.mu.Unlock()
		})
		defer stop()
	}
	for w.inFlight >= w.limit {
		if err := ctx.Err(); err != nil {
			return err
		}
		w.cond.Wait()
	}
	w.inFlight++
	return nil
}

// TryAcquire starts a request if the window has room, and reports whether
// it did. A refusal counts as a request that waited.
func (w *Window) TryAcquire() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.take()
}

// take starts a request if the window has room; a refusal marks the epoch
// as one in which a request waited. w.mu is held.
func (w *Window) take() bool {
	if w.inFlight < w.limit {
		w.inFlight++
		return true
	}
	w.waited = true
	return false
}

// Release ends a request that carried units (bytes, or any measure of
// work that grows with what the link does; 0 for a request that failed).
func (w *Window) Release(units int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.inFlight--
	w.cond.Signal()
	if units <= 0 {
		return
	}
	now := w.o.Now()
	if w.epochStart.IsZero() {
		w.epochStart = now
	}
	w.epochDone++
	w.epochUnits += float64(units)
	span := now.Sub(w.epochStart)
	if span < w.o.Epoch || w.epochDone < w.limit {
		return
	}
	rate := w.epochUnits / span.Seconds()
	judged := w.waited && !w.ramping
	w.epochStart, w.epochDone, w.epochUnits, w.waited, w.ramping = now, 0, 0, false, false
	if judged {
		w.judge(rate)
	}
}

// judge moves the window on one epoch's rate. w.mu is held.
func (w *Window) judge(rate float64) {
	grew := rate >= w.baseRate*(1+w.o.Gain)
	switch w.phase {
	case slowStart:
		if grew || w.baseRate == 0 {
			w.base, w.baseRate, w.strikes = w.limit, rate, 0
			if w.limit == w.o.Max {
				w.phase = settled
				return
			}
			w.set(w.limit * 2)
			return
		}
		// One epoch that did not grow may be noise (a busy machine, a
		// burst of work that ended): the size gets a second.
		if w.strikes++; w.strikes < 2 {
			return
		}
		// Doubling stopped paying: back to the size that did.
		w.phase, w.sinceProbe, w.strikes = settled, 0, 0
		w.set(w.base)
	case settled:
		// The rate of the settled size is measured afresh each epoch:
		// the link changes, and a probe is judged against today's.
		w.baseRate = rate
		w.sinceProbe++
		if w.sinceProbe >= probeEvery && w.limit < w.o.Max {
			w.phase = probing
			w.set(w.limit + max(1, w.limit/4))
		}
	case probing:
		if grew {
			w.base, w.baseRate = w.limit, rate
		}
		w.phase, w.sinceProbe = settled, 0
		w.set(w.base)
	}
}

// set changes the size within its bounds and wakes the requests it admits.
// w.mu is held.
func (w *Window) set(n int) {
	n = min(max(n, w.o.Min), w.o.Max)
	if n > w.limit {
		w.cond.Broadcast()
	}
	// The epoch after a change fills or drains the window: the size is
	// judged on the one after it.
	w.ramping = w.ramping || n != w.limit
	w.limit = n
	w.peak = max(w.peak, n)
}

// PushedBack records a 429 or 503: the size is cut to Decrease of itself,
// and slow start ends (the link's limit is known). Push-backs less than an
// epoch apart are one: the requests in flight when the limit was met all
// meet it.
func (w *Window) PushedBack() {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.o.Now()
	if !w.lastCut.IsZero() && now.Sub(w.lastCut) < w.o.Epoch {
		return
	}
	w.lastCut, w.cuts = now, w.cuts+1
	w.phase, w.sinceProbe = settled, 0
	w.set(int(float64(w.limit) * w.o.Decrease))
	w.base, w.baseRate = w.limit, 0
	w.epochStart, w.epochDone, w.epochUnits, w.waited = now, 0, 0, false
}

// Stats is what a window did: its size now and at its peak, the
// requests holding it now, and how many push-backs cut it.
type Stats struct {
	Limit, Peak, InFlight, Cuts int
}

// Stats reports the window now.
func (w *Window) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return Stats{Limit: w.limit, Peak: w.peak, InFlight: w.inFlight, Cuts: w.cuts}
}

// Admit waits until the window has room for one more request and mem
// has cost for what it will hold (mem first: a request that cannot be
// held takes no place in the window). release ends the request; units
// is what it carried (0: it failed), for the rate the window judges.
func (w *Window) Admit(ctx context.Context, mem *semaphore.Weighted, cost int64) (release func(units int64), err error) {
	if err := mem.Acquire(ctx, cost); err != nil {
		return nil, err
	}
	if err := w.Acquire(ctx); err != nil {
		mem.Release(cost)
		return nil, err
	}
	return func(units int64) {
		w.Release(units)
		mem.Release(cost)
	}, nil
}
