package waiter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
)

// markerReader is what waiting on a done marker needs of GCS.
type markerReader interface {
	ReadAll(ctx context.Context, bucket, name string) ([]byte, error)
}

var _ markerReader = (*gcs.Store)(nil)

// Marker waits for a transfer's done marker in GCS instead of its done
// event: what a submitter does that may read .ferry-done/ but not create
// subscriptions (FERRY_SUBMIT_WAIT=marker, as terraform's submitter is set
// up). The merger writes the marker right after it publishes the done
// event, so both say the same.
type Marker struct {
	store  markerReader
	bucket string
	tid    string
	// Poll is the longest wait between two looks; default 2s.
	Poll time.Duration
}

// NewMarker returns a Marker for transfer tid in bucket.
func NewMarker(store markerReader, bucket, tid string) *Marker {
	return &Marker{store: store, bucket: bucket, tid: tid, Poll: 2 * time.Second}
}

// Wait polls for the done marker, from 100 ms up to Poll between looks,
// until it is there or ctx ends. A failed look is tried again: a network
// error must not end a wait that the transfer has not ended.
func (m *Marker) Wait(ctx context.Context) (message.Done, error) {
	name := message.DoneMarker(m.tid)
	var last error
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, m.Poll) {
		b, err := m.store.ReadAll(ctx, m.bucket, name)
		if err == nil {
			var d message.Done
			if err := message.Decode(b, &d); err != nil {
				return d, fmt.Errorf("done marker gs://%s/%s: %w", m.bucket, name, err)
			}
			return d, nil
		}
		if !errors.Is(err, gcs.ErrNotFound) {
			last = err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			if last != nil {
				return message.Done{}, fmt.Errorf("waiting for done marker gs://%s/%s: %w (last look: %v)", m.bucket, name, ctx.Err(), last)
			}
			return message.Done{}, fmt.Errorf("waiting for done marker gs://%s/%s: %w", m.bucket, name, ctx.Err())
		case <-t.C:
		}
	}
}
