package gcs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/ferry-dev/ferry/internal/metrics"
	"github.com/ferry-dev/ferry/internal/pacer"
	"google.golang.org/api/googleapi"
)

// Pacing: a bucket takes about 1,000 object writes a second at first and
// answers 429 (rateLimitExceeded) or 503 beyond what it takes; the limit is
// the bucket's, shared by every process that writes to it. So every call a
// Store makes to a bucket waits for its turn on one pacer per bucket, shared
// by every Store of the same client (WithKMSKey's too): a 429 or 503 cuts
// the pace (pacer: additive increase, multiplicative decrease), and the
// call is sent again, when that is safe, once its turn comes, for as long
// as its context lasts. A 429 is always safe to send again: GCS did not
// carry the request out. After a 503 only a call that cannot do harm twice
// goes again: a read, a delete, a write under a precondition.

// Pacer is the pacer of this process's calls to bucket. A caller that paces
// a call itself (UploadOptions.CallerPaces) waits on it.
func (s *Store) Pacer(bucket string) *pacer.Pacer {
	if p, ok := s.pacers.Load(bucket); ok {
		return p.(*pacer.Pacer)
	}
	c := s.conn
	p, _ := s.pacers.LoadOrStore(bucket, pacer.New(pacer.Options{OnCut: func(limit float64, first bool) {
		metrics.WriteRateLimit.Set(limit)
		log := c.log.Load()
		if log == nil {
			return
		}
		msg, level := "GCS pushed back again; this process paces its calls to the bucket", slog.LevelDebug
		if first {
			// Once per bucket: the operator's cue (docs/operations.md,
			// "GCS answers 429").
			msg, level = "GCS asks for fewer writes (429/503); this process now paces its calls to the bucket, and the transfer goes on", slog.LevelWarn
		}
		log.Log(context.Background(), level, msg, "bucket", bucket, "writes_per_s", fmt.Sprintf("%.1f", limit))
	}}))
	return p.(*pacer.Pacer)
}

// SetLog makes the Stores of this client log GCS's push-back: a warning
// when a bucket first pushes back, and a summary per bucket on Close.
func (s *Store) SetLog(log *slog.Logger) { s.log.Store(log) }

// Pushback is what GCS's push-back did to this process's calls to one
// bucket.
type Pushback struct {
	Bucket string
	// PushBacks is the 429s and 503s answered, Cuts how many times they
	// cut the pace, and Limit the writes a second it is at now (its
	// settled rate at the end of a transfer).
	PushBacks, Cuts int64
	Limit           float64
}

// Pushbacks lists the buckets that pushed back on this client's calls.
func (s *Store) Pushbacks() []Pushback {
	var out []Pushback
	s.pacers.Range(func(k, v any) bool {
		if p := v.(*pacer.Pacer); p.PushBacks() > 0 {
			out = append(out, Pushback{Bucket: k.(string), PushBacks: p.PushBacks(), Cuts: p.Cuts(), Limit: p.Limit()})
		}
		return true
	})
	slices.SortFunc(out, func(a, b Pushback) int { return strings.Compare(a.Bucket, b.Bucket) })
	return out
}

// PushbackSummary is the message of the line Close logs per bucket that
// pushed back (the bench reads its fields: pushbacks, settled_writes_per_s).
const PushbackSummary = "GCS pushed back on this process's calls; it waited them out"

// logPushbacks logs PushbackSummary for each bucket that pushed back.
func (s *Store) logPushbacks() {
	log := s.log.Load()
	if log == nil {
		return
	}
	for _, p := range s.Pushbacks() {
		log.Warn(PushbackSummary, "bucket", p.Bucket, "pushbacks", p.PushBacks, "cuts", p.Cuts,
			"settled_writes_per_s", fmt.Sprintf("%.1f", p.Limit))
	}
}

// Paced counts the slow-downs a context's calls waited out: a caller that
// reports them (a worker's chunk event) passes a counter with CountPaced.
type pacedKey struct{}

// CountPaced returns ctx whose calls add the 429s and 503s they waited out
// to n.
func CountPaced(ctx context.Context, n *int) context.Context {
	return context.WithValue(ctx, pacedKey{}, n)
}

// pacedBackoff bounds the wait between two tries of a call GCS pushed back,
// on top of the pacer's own (which lets a burst through after a cut).
const (
	pacedBackoffMin = 100 * time.Millisecond
	pacedBackoffMax = 5 * time.Second
)

// A call that is safe to send again and got no answer (a connection reset
// or closed mid-answer, a refused connection) is sent again up to
// maxDropRetries times, dropBackoffMin apart and doubling, as the client
// library's retry policy does for idempotent calls: one dropped connection
// fails nothing. A try that ran out its own deadline goes once more only,
// so that a GCS that stays silent is named within two deadlines.
const (
	maxDropRetries = 3
	dropBackoffMin = 200 * time.Millisecond
)

// paced runs call, one request to bucket, at the pace GCS allows. safe503
// says whether the request may go again after a 503 (see above) or after
// it got no answer: a read, a listing, a delete, or a write under a
// precondition or whose repeat stores the same bytes. body, when not nil,
// is rewound before every try after the first; a body that cannot be
// rewound makes the call's push-back the caller's to wait out.
func (s *Store) paced(ctx context.Context, bucket string, safe503 bool, body io.Reader, call func() error) error {
	pc := s.Pacer(bucket)
	var start int64
	seeker, _ := body.(io.Seeker)
	if seeker != nil {
		var err error
		if start, err = seeker.Seek(0, io.SeekCurrent); err != nil {
			seeker = nil
		}
	}
	rewind := func() bool {
		if seeker == nil {
			return body == nil
		}
		_, err := seeker.Seek(start, io.SeekStart)
		return err == nil
	}
	wait, dropWait, drops, timeouts := pacedBackoffMin, dropBackoffMin, 0, 0
	for {
		if err := pc.Wait(ctx); err != nil {
			if pc.Limit() == 0 {
				return err // the caller gave up; nothing was paced
			}
			return fmt.Errorf("gs://%s: waiting for a turn (GCS asked for fewer writes): %w", bucket, err)
		}
		err := call()
		if errors.Is(err, ErrUnreachable) && !gotAnswer(err) && safe503 && drops < maxDropRetries && ctx.Err() == nil && (!timedOut(err) || timeouts == 0) {
			// No answer: the call may or may not have been carried
			// out, and sending it again is safe.
			drops++
			if timedOut(err) {
				timeouts++
			}
			metrics.Dropped.Inc()
			if !rewind() || !sleep(ctx, dropWait) {
				return err
			}
			dropWait *= 2
			continue
		}
		if !errors.Is(err, ErrThrottled) {
			if err == nil {
				pc.Done()
				metrics.WriteRateLimit.Set(pc.Limit())
			}
			return err
		}
		metrics.Throttled.Inc()
		pc.PushedBack() // OnCut logs and sets the metric
		again := errors.Is(err, ErrRateLimited) || safe503
		if !again || ctx.Err() != nil || !rewind() {
			return err
		}
		if n, ok := ctx.Value(pacedKey{}).(*int); ok {
			*n++
		}
		if !sleep(ctx, wait) {
			return err
		}
		wait = min(2*wait, pacedBackoffMax)
	}
}

// gotAnswer reports whether err, though its call ran out its time, holds
// an answer of GCS's (the client library's retries of an error it kept
// getting): sending it again would get the same answer.
func gotAnswer(err error) bool {
	var ge *googleapi.Error
	return errors.As(err, &ge)
}

// sleep waits d, or less if ctx ends first; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
