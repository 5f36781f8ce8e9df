package waiter

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
)

// markerReader is what waiting on a done marker needs of GCS.
type markerReader interface {
	ReadAll(ctx context.Context, bucket, name string) ([]byte, error)
	Attrs(ctx context.Context, bucket, name string) (gcs.Attrs, error)
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
			if err := m.check(ctx, d); err != nil {
				return message.Done{}, fmt.Errorf("done marker gs://%s/%s: %w", m.bucket, name, err)
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

// ErrUnconfirmed: a done marker says ok over objects GCS does not hold as
// it says (a marker the submitter's role could have written itself).
var ErrUnconfirmed = errors.New("says ok over objects GCS does not hold as it says; not believed")

// check holds an ok marker to GCS: a marker is a claim, GCS the proof. It
// is of this transfer, names its objects (every one, or the first
// message.MaxDoneInline), and each is in the bucket at the generation,
// size and CRC32C the marker gives.
func (m *Marker) check(ctx context.Context, d message.Done) error {
	if d.TransferID != m.tid {
		return fmt.Errorf("it is transfer %.64q's, not %s: %w", d.TransferID, m.tid, ErrUnconfirmed)
	}
	if d.Status != message.StatusOK {
		return nil
	}
	if len(d.Objects) < min(d.Files, message.MaxDoneInline) {
		return fmt.Errorf("%d objects named of %d: %w", len(d.Objects), d.Files, ErrUnconfirmed)
	}
	for _, o := range d.Objects {
		bucket, name, _ := strings.Cut(strings.TrimPrefix(o.Name, "gs://"), "/")
		if bucket != m.bucket || name == "" {
			return fmt.Errorf("object %.200q is not in gs://%s: %w", o.Name, m.bucket, ErrUnconfirmed)
		}
		a, err := m.store.Attrs(ctx, bucket, name)
		switch {
		case errors.Is(err, gcs.ErrNotFound):
			return fmt.Errorf("%s is not there: %w", o.Name, ErrUnconfirmed)
		case err != nil:
			return fmt.Errorf("checking %s: %w", o.Name, err)
		case a.Size != o.Size || a.CRC32C != o.CRC32C || (o.Generation != 0 && a.Generation != o.Generation):
			return fmt.Errorf("%s is %d bytes, crc32c %08x, generation %d; the marker says %d, %08x, %d: %w", o.Name,
				a.Size, a.CRC32C, a.Generation, o.Size, o.CRC32C, o.Generation, ErrUnconfirmed)
		}
	}
	return nil
}
