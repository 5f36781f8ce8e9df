package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"

	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/pacer"
	"github.com/ferry-dev/ferry/internal/queue"
	"github.com/ferry-dev/ferry/internal/teststack"
)

// pushBackStore answers the first n uploads with err, then lets them
// through.
type pushBackStore struct {
	objectStore
	mu    sync.Mutex
	n     int
	err   error
	calls int
}

func (s *pushBackStore) Upload(ctx context.Context, bucket, name string, r io.Reader, opt gcs.UploadOptions) (gcs.Attrs, error) {
	s.mu.Lock()
	s.calls++
	refuse := s.calls <= s.n
	s.mu.Unlock()
	if refuse {
		_, _ = io.Copy(io.Discard, r)
		return gcs.Attrs{}, fmt.Errorf("upload gs://%s/%s: %w", bucket, name, s.err)
	}
	return s.objectStore.Upload(ctx, bucket, name, r, opt)
}

// Issue 32 §2: a 429 is GCS asking for patience. The worker cuts its pace
// and uploads again in the same delivery: the message is acked, the file
// lands, its event counts the slow-downs. A 503 cuts the pace too, and
// goes back to Pub/Sub as before (no retry in the handler).
func TestRateLimitedUploadsAreWaitedOut(t *testing.T) {
	rateLimited := fmt.Errorf("%w (%w): googleapi: Error 429: rateLimitExceeded", gcs.ErrRateLimited, gcs.ErrThrottled)
	store := &pushBackStore{objectStore: testBucket(t, "w-paced"), n: 3, err: rateLimited}
	rec := &teststack.Recorder{}
	pc := pacer.New(pacer.Options{Min: 1000}) // a floor high enough that no test waits
	w, err := New(Options{Store: store, Events: rec, ID: "w1", MaxAttempts: 5, Pacer: pc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	c, payload := bundle("w-paced", "tid-paced", []byte("one small file"))
	c.Parts = c.Parts[:1]
	if err := w.Handle(context.Background(), queue.Message{ID: "m", Data: message.EncodeChunk(c, payload[:1])}); err != nil {
		t.Fatalf("a rate-limited upload: %v, want it waited out", err)
	}
	ev := events(t, rec)
	if len(ev) != 1 || len(ev[0].Parts) != 1 || ev[0].Parts[0].Paced != 3 {
		t.Fatalf("events %+v, want one chunk event whose part waited out 3 slow-downs", ev)
	}
	if pc.Cuts() != 1 || pc.Limit() == 0 {
		t.Errorf("pacer: %d cuts, limit %v; want the pace cut once (the others within its hold)", pc.Cuts(), pc.Limit())
	}

	store503 := &pushBackStore{objectStore: testBucket(t, "w-paced-503"), n: 1, err: fmt.Errorf("%w: googleapi: Error 503", gcs.ErrThrottled)}
	w503, err := New(Options{Store: store503, Events: &teststack.Recorder{}, ID: "w1", MaxAttempts: 5, Pacer: pacer.New(pacer.Options{Min: 1000})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w503.Close() })
	c, payload = bundle("w-paced-503", "tid-paced-503", []byte("one small file"))
	c.Parts = c.Parts[:1]
	m := queue.Message{ID: "m", Data: message.EncodeChunk(c, payload[:1]), DeliveryAttempt: 1}
	if err := w503.Handle(context.Background(), m); !errors.Is(err, gcs.ErrThrottled) || errors.Is(err, queue.ErrPermanent) || store503.calls != 1 {
		t.Fatalf("a 503: %v after %d uploads, want a transient error after one (Pub/Sub redelivers)", err, store503.calls)
	}
}
