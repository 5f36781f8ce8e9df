// Package reach is the one error ferry gives for a service that did not
// answer, whichever transport asked: GCS over HTTP (internal/gcs) and
// Pub/Sub over gRPC (internal/queue) each tell an unanswered call from an
// answered one their own way, then wrap it here, so that callers test one
// sentinel and every such error names the call, the endpoint and the
// deadline that passed.
package reach

import (
	"context"
	"errors"
	"fmt"
)

// ErrUnreachable marks an error of a call that got no answer: refused,
// reset, or nothing before its deadline.
var ErrUnreachable = errors.New("unreachable")

// Wrap returns err of call op to endpoint as unanswered: "op: endpoint:
// unreachable: cause (err)", where cause is ctx's (the call's own context,
// whose cause says which deadline passed) unless err already holds it.
func Wrap(ctx context.Context, op, endpoint string, err error) error {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(err, cause) {
		err = fmt.Errorf("%w (%w)", cause, err)
	}
	return fmt.Errorf("%s: %s: %w: %w", op, endpoint, ErrUnreachable, err)
}
