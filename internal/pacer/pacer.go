// Package pacer paces one process's writes to GCS when GCS asks it to slow
// down. GCS starts a bucket at about 1,000 object writes a second and
// raises that no faster than doubling every 20 minutes; above it, it
// answers 429 (rateLimitExceeded) or 503. A Pacer lets writes through
// unpaced until GCS first pushes back, then paces them: each push-back
// cuts the rate to Decrease of what it was (at most once per Hold, so that
// the requests already in flight when the limit was met count once), and
// every second without one raises it by Growth of itself, or by Increase
// writes a second if that is more, while the process writes at half its
// pace or more (a process its own work holds back keeps the pace GCS last
// took). Every process of a fleet does the same, so the fleet slows down
// and speeds up together, and its rate settles near what the bucket allows
// instead of failing files.
package pacer

import (
	"context"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Defaults of Options.
const (
	DefaultDecrease = 0.7             // a cut keeps 70 % of the rate
	DefaultIncrease = 2.0             // writes a second added per second, at least
	DefaultGrowth   = 0.1             // the share of the rate added per second
	DefaultHold     = time.Second     // push-backs closer than this are one
	DefaultMin      = 1.0             // writes a second, the floor
	window          = 2 * time.Second // the span the unpaced rate is measured over
	idle            = 0.5             // below this share of its pace a process is not held back by it
)

// Options tune a Pacer; zero values take the defaults.
type Options struct {
	Decrease, Increase, Growth, Min float64
	Hold                            time.Duration
	// Now is the clock (default time.Now); tests pass their own.
	Now func() time.Time
	// OnCut, when set, is told of every cut: the rate it cut to, and
	// whether it was the first (the pacer was unpaced until then). It is
	// called without the pacer's lock held.
	OnCut func(limit float64, first bool)
}

// Pacer paces writes. It is safe for concurrent use.
type Pacer struct {
	o   Options
	lim *rate.Limiter

	mu      sync.Mutex
	limit   float64 // writes a second; 0 before the first push-back
	lastCut time.Time
	lastInc time.Time
	// recent counts the writes done in the current and the previous
	// window, to know the rate a first push-back cuts.
	cur, prev  int
	curStarted time.Time // zero until the first write
	turned     bool      // a whole window has passed since the first write
	cuts       int64
	pushBacks  int64
}

// New returns a Pacer that lets everything through until GCS pushes back.
func New(o Options) *Pacer {
	if o.Decrease <= 0 || o.Decrease >= 1 {
		o.Decrease = DefaultDecrease
	}
	if o.Increase <= 0 {
		o.Increase = DefaultIncrease
	}
	if o.Growth <= 0 {
		o.Growth = DefaultGrowth
	}
	if o.Min <= 0 {
		o.Min = DefaultMin
	}
	if o.Hold <= 0 {
		o.Hold = DefaultHold
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Pacer{o: o, lim: rate.NewLimiter(rate.Inf, 1)}
}

// Wait blocks until one write may start, or ctx ends.
func (p *Pacer) Wait(ctx context.Context) error {
	if p == nil {
		return nil
	}
	return p.lim.Wait(ctx)
}

// Done records a write GCS accepted: the rate grows, for each second since
// the last growth (or cut), by Growth of itself or Increase, whichever is
// more. Growing by a share of itself, every process of a fleet together
// grows by that share whatever their number, so that the fleet's sum is
// back at the bucket's limit a few seconds after a cut (3.7 s from 70 %)
// and no faster; adding a fixed rate alone would take 20 s at 150 writes/s
// and would grow N times as fast with N processes.
func (p *Pacer) Done() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.o.Now()
	p.count(now)
	if p.limit == 0 {
		return
	}
	if dt := now.Sub(p.lastInc); dt >= 100*time.Millisecond {
		p.lastInc = now
		if p.rate(now) < idle*p.limit {
			// The process writes well below its pace (its work, not
			// GCS, holds it back): growing would only let a later
			// burst meet the limit, and the pace would no longer say
			// what the bucket took.
			return
		}
		p.limit += max(p.o.Increase, p.o.Growth*p.limit) * dt.Seconds()
		p.lim.SetLimitAt(now, rate.Limit(p.limit))
	}
}

// PushedBack records a 429 or 503: the rate is cut to Decrease of itself
// (of the measured rate, the first time), unless a cut happened within
// Hold. It reports whether this push-back cut the rate.
func (p *Pacer) PushedBack() bool {
	if p == nil {
		return false
	}
	p.mu.Lock()
	now := p.o.Now()
	p.pushBacks++
	if !p.lastCut.IsZero() && now.Sub(p.lastCut) < p.o.Hold {
		p.mu.Unlock()
		return false
	}
	base := p.limit
	first := base == 0
	if first {
		base = p.measured(now)
	}
	p.limit = max(p.o.Min, base*p.o.Decrease)
	p.lastCut, p.lastInc = now, now
	p.cuts++
	p.lim.SetLimitAt(now, rate.Limit(p.limit))
	p.lim.SetBurstAt(now, max(1, int(p.limit/4)))
	limit := p.limit
	p.mu.Unlock()
	if p.o.OnCut != nil {
		p.o.OnCut(limit, first)
	}
	return true
}

// Limit is the writes a second allowed now; 0 while unpaced.
func (p *Pacer) Limit() float64 {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.limit
}

// Cuts is how many times GCS's push-back cut the rate.
func (p *Pacer) Cuts() int64 {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cuts
}

// PushBacks is how many 429s and 503s the pacer was told of.
func (p *Pacer) PushBacks() int64 {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pushBacks
}

// count adds one write to the current window, turning windows as time
// passes. p.mu is held.
func (p *Pacer) count(now time.Time) {
	if p.curStarted.IsZero() {
		p.curStarted = now
	}
	for now.Sub(p.curStarted) >= window {
		p.prev, p.cur, p.turned = p.cur, 0, true
		p.curStarted = p.curStarted.Add(window)
		if now.Sub(p.curStarted) >= window { // idle for long: start afresh
			p.prev, p.curStarted = 0, now
		}
	}
	p.cur++
}

// measured is the writes a second of the last full window and the current
// one. p.mu is held.
func (p *Pacer) measured(now time.Time) float64 {
	p.count(now)
	p.cur-- // count turned the windows; this push-back is not a write
	return p.rate(now)
}

// rate is the writes a second of the last full window and the current one,
// counted up to now. p.mu is held.
func (p *Pacer) rate(now time.Time) float64 {
	span := now.Sub(p.curStarted)
	if p.turned {
		span += window
	}
	// The writes since the first, at the start, over at least a tenth of
	// a second: a burst that met the limit at once is a high rate.
	return float64(p.prev+p.cur) / max(span, 100*time.Millisecond).Seconds()
}
