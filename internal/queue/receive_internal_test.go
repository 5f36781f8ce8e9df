package queue

import (
	"testing"
	"time"

	"github.com/googleapis/gax-go/v2"
)

// A draw of gax's full jitter can come out at a nanosecond; the queue
// still waits minPause, so an endpoint that is down is not spun on.
func TestPauseNeverSpins(t *testing.T) {
	bo := gax.Backoff{Initial: time.Nanosecond, Max: time.Nanosecond}
	for i := range 100 {
		if d := pause(&bo); d != minPause {
			t.Fatalf("pause %d = %v, want %v", i, d, minPause)
		}
	}
	bo = gax.Backoff{Initial: time.Hour, Max: time.Hour}
	if d := pause(&bo); d < minPause || d > time.Hour {
		t.Fatalf("pause = %v, want within [%v, 1h]", d, minPause)
	}
}
