package reach_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/reach"
)

// The error names the call, the endpoint and the deadline that passed, and
// keeps both the sentinel and the transport's own error.
func TestWrapNamesCallEndpointAndDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeoutCause(context.Background(), time.Nanosecond, errors.New("no answer within 1ns"))
	defer cancel()
	<-ctx.Done()
	dial := errors.New("connect: connection refused")
	err := reach.Wrap(ctx, "attrs of gs://b/o", "127.0.0.1:1 (STORAGE_EMULATOR_HOST)", dial)
	want := "attrs of gs://b/o: 127.0.0.1:1 (STORAGE_EMULATOR_HOST): unreachable: no answer within 1ns (connect: connection refused)"
	if err.Error() != want || !errors.Is(err, reach.ErrUnreachable) || !errors.Is(err, dial) {
		t.Fatalf("Wrap = %q, want %q wrapping ErrUnreachable and the dial error", err, want)
	}
	if err := reach.Wrap(context.Background(), "pull", "host:1", dial); err.Error() != "pull: host:1: unreachable: connect: connection refused" {
		t.Fatalf("without a cause: %q", err)
	}
}
