package restore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ferry-dev/ferry/internal/benchrow"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/plan"
)

// ErrUsage marks a source or destination that cannot be restored as given.
var ErrUsage = errors.New("usage")

// usageError is an error that is ErrUsage without saying so in its text.
type usageError struct{ error }

func (usageError) Is(target error) bool { return target == ErrUsage }
func (e usageError) Unwrap() error      { return e.error }

// Summary is the outcome of Run; `restore --json` prints it.
type Summary struct {
	Source      string `json:"source"`
	Destination string `json:"destination"`
	Objects     int64  `json:"objects"`  // found
	Restored    int64  `json:"restored"` // written this run
	Skipped     int64  `json:"skipped"`  // the output existed with the same bytes
	Failed      int64  `json:"failed"`
	// WireBytes were downloaded; RawBytes are the restored outputs' sizes
	// (skipped ones not counted), ResumedBytes the part of them an
	// interrupted run had written.
	WireBytes    int64   `json:"wire_bytes"`
	RawBytes     int64   `json:"raw_bytes"`
	ResumedBytes int64   `json:"resumed_bytes"`
	Seconds      float64 `json:"seconds"`
	RawMBps      float64 `json:"raw_mb_per_s"`
	WireMBps     float64 `json:"wire_mb_per_s"`
	FilesPerS    float64 `json:"files_per_s"`
	// Errors are the failures, the first maxErrors of them.
	Errors []string `json:"errors,omitempty"`
	// Note is the first thing restore could not do and did not fail for
	// (owners and groups it may not set), said once.
	Note string `json:"note,omitempty"`
}

const maxErrors = 100

// Line is the summary a person reads, in the words of a transfer's (issue
// 41 §4): what was written, what was downloaded for it, and what was only
// compared, so that an identical file skipped or the part an interrupted
// run wrote is not counted as moved.
func (s Summary) Line() string {
	written := fmt.Sprintf("%s written", benchrow.BytesOrZero(s.RawBytes-s.ResumedBytes))
	if s.ResumedBytes > 0 {
		written += fmt.Sprintf(" (%s more an interrupted run had written)", benchrow.BytesOrZero(s.ResumedBytes))
	}
	return fmt.Sprintf("restored %d of %d objects to %s in %.1fs: %s, %s downloaded; %d skipped as identical (only compared), %d failed",
		s.Restored, s.Objects, s.Destination, s.Seconds, written, benchrow.BytesOrZero(s.WireBytes), s.Skipped, s.Failed)
}

// Run restores src, gs://BUCKET/OBJECT or gs://BUCKET/PREFIX, into dest. An
// object is written to dest, or into dest when dest is a directory or ends
// with a slash; a prefix's objects are written under dest with their paths
// relative to the prefix. ferry's own .ferry/ and .ferry-done/ objects are
// skipped. Objects that fail do not stop the others; the error counts them.
func (r *Restorer) Run(ctx context.Context, src, dest string) (sum Summary, err error) {
	start := time.Now()
	sum = Summary{Source: src, Destination: dest}
	d, err := parse(src, dest)
	if err != nil {
		return sum, err
	}
	var s sink
	defer func() { s.fill(&sum, r, start) }()

	if d.Prefix != "" && !strings.HasSuffix(src, "/") {
		actx, cancel := context.WithTimeout(ctx, r.o.Timeout)
		a, err := r.store.Attrs(actx, d.Bucket, d.Prefix)
		cancel()
		switch {
		case err == nil:
			return sum, r.single(ctx, d.Bucket, a, dest, &s)
		case !errors.Is(err, gcs.ErrNotFound):
			return sum, err
		}
	}
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return sum, err
	}
	root, err := os.OpenRoot(dest)
	if err != nil {
		return sum, err
	}
	defer root.Close()
	return sum, r.prefix(ctx, d.Bucket, d.Prefix, root, &s)
}

// CheckArgs reports whether Run can start on src and dest, before any
// request; the error wraps ErrUsage.
func CheckArgs(src, dest string) error {
	_, err := parse(src, dest)
	return err
}

func parse(src, dest string) (plan.Destination, error) {
	d, err := plan.ParseDestination(src)
	if err != nil {
		return d, usageError{fmt.Errorf("source %s", strings.TrimPrefix(err.Error(), "destination "))}
	}
	if dest == "" {
		return d, usageError{errors.New("empty destination")}
	}
	return d, nil
}

// single restores one object to dest.
func (r *Restorer) single(ctx context.Context, bucket string, a gcs.Attrs, dest string, s *sink) error {
	s.found(1)
	var k kind
	if !r.o.AsStored {
		k, _ = classify("", a) // an error shows when the object is restored
	}
	r.total.Store(a.Size)
	if k.ferry {
		r.total.Store(k.rawSize)
	}
	dir, rel := filepath.Dir(dest), filepath.Base(dest)
	if fi, err := os.Stat(dest); strings.HasSuffix(dest, "/") || err == nil && fi.IsDir() {
		dir, rel = dest, outputRel(path.Base(a.Name), "", k)
	}
	lst := newListings(r.store, bucket)
	lctx, cancel := context.WithTimeout(ctx, r.o.Timeout)
	err := lst.check(lctx, a)
	lst.closeAll()
	cancel()
	if err != nil {
		s.add(Result{Object: "gs://" + bucket + "/" + a.Name}, err) // not restored
		return s.err()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	s.add(r.Object(ctx, root, rel, bucket, a))
	return s.err()
}

// prefix restores every object under prefix, in parallel.
func (r *Restorer) prefix(ctx context.Context, bucket, prefix string, root *os.Root, s *sink) error {
	list := prefix
	if list != "" {
		list += "/"
	}
	// Large objects go to Concurrency workers, which share the slots;
	// small ones to Requests workers, as many as the window may admit.
	jobs, smallJobs := make(chan gcs.Attrs, r.o.Concurrency), make(chan gcs.Attrs, r.o.Concurrency)
	g, gctx := errgroup.WithContext(ctx)
	r.listing.Store(true)
	g.Go(func() error {
		defer close(jobs)
		defer close(smallJobs)
		defer r.listing.Store(false)
		lctx, cancel := context.WithTimeout(gctx, 15*r.o.Timeout)
		defer cancel()
		lst := newListings(r.store, bucket)
		defer lst.closeAll()
		return r.store.List(lctx, bucket, list, func(a gcs.Attrs) error {
			if isFerryInternal(a.Name) || strings.HasSuffix(a.Name, "/") && a.Size == 0 {
				return nil // ferry's own objects; folder placeholders
			}
			r.listed.Add(1)
			s.found(1)
			if err := lst.check(lctx, a); err != nil {
				s.add(Result{Object: "gs://" + bucket + "/" + a.Name}, err) // not restored
				return nil
			}
			to := jobs
			if r.small(a.Size) {
				to = smallJobs
			}
			select {
			case to <- a:
				return nil
			case <-gctx.Done():
				return gctx.Err()
			}
		})
	})
	claims := claims{m: map[string]*claim{}}
	work := func(jobs <-chan gcs.Attrs) error {
		for a := range jobs {
			obj := "gs://" + bucket + "/" + a.Name
			var k kind
			if !r.o.AsStored {
				k, _ = classify(obj, a) // an error shows when the object is restored
			}
			rel := outputRel(a.Name, prefix, k)
			c, first := claims.claim(rel, obj)
			if !first {
				s.add(claims.contest(c, root, rel, obj, s))
				continue
			}
			res, err := r.Object(gctx, root, rel, bucket, a)
			s.add(claims.settle(c, root, rel, obj, res, err))
		}
		return nil
	}
	for range r.o.Concurrency {
		g.Go(func() error { return work(jobs) })
	}
	for range r.o.Requests {
		g.Go(func() error { return work(smallJobs) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if s.objects == 0 {
		return fmt.Errorf("gs://%s/%s: no objects to restore", bucket, list)
	}
	return s.err()
}

// claims remembers which object each output name came from, so two objects
// that map to one name (a.csv.zst from ferry and a plain a.csv, a.gz and
// a.zst) are an error for both instead of one silently replacing the other,
// or one written as if it were the file: whichever comes first, this run
// leaves neither under the name. It grows with the number of objects
// (about 150 bytes each: its name, its object's and the claim).
type claims struct {
	mu sync.Mutex
	m  map[string]*claim
}

// claim is one output name's first object, and what became of it.
type claim struct {
	obj       string
	done      bool  // its restore returned
	wrote     bool  // and wrote the output (not an output there already)
	raw       int64 // and its RawSize and Resumed, for a retraction
	resumed   int64
	contested string // another object that maps to the name too
}

// claim takes rel for obj; first is false when another object has it.
func (c *claims) claim(rel, obj string) (*claim, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl, ok := c.m[rel]; ok {
		return cl, false
	}
	cl := &claim{obj: obj}
	c.m[rel] = cl
	return cl, true
}

// ErrCollision: two objects map to one output name; neither is restored.
var ErrCollision = errors.New("two objects restore to one name")

func collision(first, obj, rel string) error {
	return fmt.Errorf("%w: %s and %s would both restore to %s; neither is restored (restore each with its own prefix, or --as-stored)", ErrCollision, first, obj, rel)
}

// contest is the result of obj, which maps to rel as cl's object does:
// a failure. Where cl's object already wrote rel, that output goes, and
// its success in s becomes a failure too.
func (c *claims) contest(cl *claim, root *os.Root, rel, obj string, s *sink) (Result, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cl.contested = obj
	if cl.done && cl.wrote {
		cl.wrote = false
		_ = root.Remove(rel)
		s.retract(cl.raw, cl.resumed, collision(cl.obj, obj, rel))
	}
	return Result{Object: obj}, collision(cl.obj, obj, rel)
}

// settle records what cl's own restore returned; an output written while
// another object contested its name goes, and the restore fails.
func (c *claims) settle(cl *claim, root *os.Root, rel, obj string, res Result, err error) (Result, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cl.done, cl.raw, cl.resumed = true, res.RawSize, res.Resumed
	cl.wrote = err == nil && !res.Skipped
	if cl.contested != "" && err == nil {
		if cl.wrote {
			_ = root.Remove(rel)
			cl.wrote = false
		}
		return Result{Object: obj}, collision(obj, cl.contested, rel)
	}
	return res, err
}

// sink tallies results as they come.
type sink struct {
	mu                         sync.Mutex
	objects, restored, skipped int64
	failed                     int64
	raw, resumed               int64
	errs                       []string
	first                      error
}

func (s *sink) found(n int64) {
	s.mu.Lock()
	s.objects += n
	s.mu.Unlock()
}

func (s *sink) add(res Result, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case err != nil:
		s.failed++
		if s.first == nil {
			s.first = err
		}
		if len(s.errs) < maxErrors {
			s.errs = append(s.errs, err.Error())
		}
	case res.Skipped:
		s.skipped++
	default:
		s.restored++
		s.raw += res.RawSize
		s.resumed += res.Resumed
	}
}

// retract turns a restore counted restored into a failure with err.
func (s *sink) retract(raw, resumed int64, err error) {
	s.mu.Lock()
	s.restored--
	s.raw -= raw
	s.resumed -= resumed
	s.mu.Unlock()
	s.add(Result{}, err)
}

func (s *sink) err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.failed == 1 && s.objects == 1:
		return s.first
	case s.failed > 0:
		return fmt.Errorf("%d of %d objects failed; the first: %w", s.failed, s.objects, s.first)
	}
	return nil
}

func (s *sink) fill(sum *Summary, r *Restorer, start time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sum.Objects, sum.Restored, sum.Skipped, sum.Failed = s.objects, s.restored, s.skipped, s.failed
	sum.RawBytes, sum.ResumedBytes, sum.Errors = s.raw, s.resumed, s.errs
	sum.WireBytes = r.wire.Load()
	if n := r.noteText.Load(); n != nil {
		sum.Note = *n
	}
	sum.Seconds = time.Since(start).Seconds()
	if sum.Seconds > 0 {
		sum.RawMBps = float64(sum.RawBytes) / 1e6 / sum.Seconds
		sum.WireMBps = float64(sum.WireBytes) / 1e6 / sum.Seconds
		sum.FilesPerS = float64(sum.Restored+sum.Skipped) / sum.Seconds
	}
}
