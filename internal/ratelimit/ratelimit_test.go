package ratelimit_test

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/ratelimit"
	"github.com/ferry-dev/ferry/internal/ratelimit/ratelimittest"
)

// Wait lets n bytes go in steps of at most the burst, and takes as long on
// the limiter's clock as the rate says.
func TestWaitPacesAnySizeInBurstSteps(t *testing.T) {
	v := ratelimittest.New(100_000)
	if err := ratelimit.Wait(context.Background(), v, 1_000_000); err != nil {
		t.Fatal(err)
	}
	if v.Tokens() != 1_000_000 || v.MaxWait() > v.Burst() {
		t.Fatalf("%d bytes in waits of up to %d, want 1000000 in waits of at most the burst %d", v.Tokens(), v.MaxWait(), v.Burst())
	}
	if floor := time.Duration(float64(1_000_000-v.Burst()) / 100_000 * float64(time.Second)); v.Elapsed() < floor {
		t.Fatalf("1 MB in %v of limiter time at 100 kB/s, want at least %v", v.Elapsed(), floor)
	}
}

func TestReaderPacesEveryByte(t *testing.T) {
	v := ratelimittest.New(50_000)
	data := bytes.Repeat([]byte("x"), 200_000)
	got, err := io.ReadAll(ratelimit.Reader(context.Background(), bytes.NewReader(data), v))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes, %v", len(got), err)
	}
	if v.Tokens() != len(data) || v.MaxWait() > v.Burst() {
		t.Fatalf("%d bytes passed the limiter in waits of up to %d, want %d in waits of at most %d", v.Tokens(), v.MaxWait(), len(data), v.Burst())
	}
}

func TestNewBurst(t *testing.T) {
	for _, c := range []struct {
		rate  int64
		burst int
	}{{7_000_000, 256 << 10}, {100_000, 25_000}, {1, 1}} {
		if l := ratelimit.New(c.rate); l.Burst() != c.burst || float64(l.Limit()) != float64(c.rate) {
			t.Errorf("New(%d): %v B/s, burst %d; want burst %d", c.rate, l.Limit(), l.Burst(), c.burst)
		}
	}
}
