// Package ratelimittest is a rate limiter on a clock of its own, for tests
// of what FERRY_MAX_RATE paces: each wait moves the clock instead of
// sleeping, so a test proves the rate from the limiter's own arithmetic,
// never from wall time.
package ratelimittest

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/ferry-dev/ferry/internal/ratelimit"
)

// Virtual is a ratelimit.Limiter whose waits advance a virtual clock. It
// counts the bytes that passed and the largest single wait. Safe for
// concurrent use.
type Virtual struct {
	mu     sync.Mutex
	lim    *rate.Limiter
	start  time.Time
	now    time.Time
	tokens int
	maxN   int
}

var _ ratelimit.Limiter = (*Virtual)(nil)

// New returns a virtual limiter of bytesPerSecond with the burst
// ratelimit.New gives that rate.
func New(bytesPerSecond int64) *Virtual {
	start := time.Unix(1_000_000, 0)
	return &Virtual{lim: ratelimit.New(bytesPerSecond), start: start, now: start}
}

// WaitN takes n bytes, moving the clock by the delay the limiter asks for.
func (v *Virtual) WaitN(_ context.Context, n int) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	r := v.lim.ReserveN(v.now, n)
	if !r.OK() {
		return fmt.Errorf("wait for %d bytes exceeds the burst of %d", n, v.lim.Burst())
	}
	v.now = v.now.Add(r.DelayFrom(v.now))
	v.tokens += n
	v.maxN = max(v.maxN, n)
	return nil
}

// Burst is the limiter's burst.
func (v *Virtual) Burst() int { return v.lim.Burst() }

// Tokens is how many bytes passed.
func (v *Virtual) Tokens() int { v.mu.Lock(); defer v.mu.Unlock(); return v.tokens }

// MaxWait is the largest single wait, in bytes.
func (v *Virtual) MaxWait() int { v.mu.Lock(); defer v.mu.Unlock(); return v.maxN }

// Elapsed is how far the virtual clock moved.
func (v *Virtual) Elapsed() time.Duration {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.now.Sub(v.start)
}
