// Package lease keeps two transfers off the same final objects: a
// transfer writes its lease under .ferry-leases/ before anything else,
// lists the others, and is refused when a live one that came first
// overlaps its scope. See message.Lease.
package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/osfile"
)

// A lease keeps two transfers off the same final objects:
// the same command run twice at once, or a nightly job that overran into
// the next night's. Without it, each wins some objects and both fail on
// the other's. With it, the transfer that wrote its lease first goes on,
// and the other is refused, naming it, before it sends anything. See
// message.Lease.
//
// Both write their lease, then list the others: whichever lists second
// sees the first's, so of two overlapping transfers at least one sees the
// other, and both order them alike (lease created, then transfer id).

// Scope is the longest prefix the object names of a walk share: what its
// lease claims. Add each object name; Any says whether there was one.
type Scope struct {
	Prefix string
	Any    bool
}

func (s *Scope) Add(object string) {
	if !s.Any {
		s.Prefix, s.Any = object, true
		return
	}
	n := 0
	for n < len(s.Prefix) && n < len(object) && s.Prefix[n] == object[n] {
		n++
	}
	s.Prefix = s.Prefix[:n]
}

// store is what leases need of GCS.
type store interface {
	Attrs(ctx context.Context, bucket, name string) (gcs.Attrs, error)
	List(ctx context.Context, bucket, prefix string, fn func(gcs.Attrs) error) error
	PutSmall(ctx context.Context, bucket, name string, data []byte, ifAbsent bool, contentType string) (gcs.Attrs, error)
	ReadAll(ctx context.Context, bucket, name string) ([]byte, error)
	Delete(ctx context.Context, bucket, name string) error
	Touch(ctx context.Context, bucket, name, key, value string) error
}

// Leases takes, renews and releases transfers' leases.
type Leases struct {
	Store store
	// Holder, when set, names the one process that runs each transfer to
	// its end (message.Lease.Holder): ferry cp's.
	Holder string
	// Now is the clock leases are judged stale by; Timeout is
	// FERRY_TRANSFER_TIMEOUT, after which a transfer with no progress no
	// longer holds its lease.
	Now     func() time.Time
	Timeout time.Duration
	Log     *slog.Logger
}

// ConflictError refuses a transfer whose objects a live one writes.
type ConflictError struct{ Err error }

func (e *ConflictError) Error() string { return e.Err.Error() }
func (e *ConflictError) Unwrap() error { return e.Err }

// errLeaseSeen stops a listing once it found what it looked for.
var errLeaseSeen = errors.New("seen")

// Take claims scope in bucket for transfer tid, or refuses it with a
// ConflictError naming the live transfer whose lease came first. Nothing
// else of the transfer is written before it. The lease of an earlier run
// of tid is its own, and taken over.
func (l *Leases) Take(ctx context.Context, bucket, tid, dest, scope string) error {
	name := message.LeaseObject(tid)
	body := message.Encode(message.Lease{V: message.Version, TransferID: tid, Destination: dest, Scope: scope, Holder: l.Holder, Renews: true})
	mine, err := l.Store.PutSmall(ctx, bucket, name, body, true, "application/json")
	if errors.Is(err, gcs.ErrPrecondition) {
		mine, err = l.Store.PutSmall(ctx, bucket, name, body, false, "application/json")
	}
	if err != nil {
		return fmt.Errorf("transfer %s: writing its lease gs://%s/%s: %w", tid, bucket, name, err)
	}
	var others []gcs.Attrs
	err = l.Store.List(ctx, bucket, message.LeaseRoot, func(a gcs.Attrs) error {
		if a.Name != name {
			others = append(others, a)
		} else if a.Generation == mine.Generation && !a.Created.IsZero() {
			// Mine as the listing shows it: the others' creation times
			// come from the same listing, so both transfers order the
			// two leases from the same figures, whatever precision an
			// upload's answer gives.
			mine.Created = a.Created
		}
		return nil
	})
	if err == nil {
		err = l.firstLease(ctx, bucket, scope, name, mine.Created, others)
	}
	if err != nil {
		l.Release(ctx, bucket, tid)
		var conflict *ConflictError
		if !errors.As(err, &conflict) {
			err = fmt.Errorf("transfer %s: checking the leases under gs://%s/%s: %w", tid, bucket, message.LeaseRoot, err)
		}
		return err
	}
	return nil
}

// firstLease refuses mine when a live lease of others came first and
// overlaps scope. Only leases created no later than mine are read: one
// written after mine is the other's to yield to.
func (l *Leases) firstLease(ctx context.Context, bucket, scope, mine string, created time.Time, others []gcs.Attrs) error {
	for _, a := range others {
		if a.Created.After(created) || (a.Created.Equal(created) && a.Name > mine) {
			continue
		}
		b, err := l.Store.ReadAll(ctx, bucket, a.Name)
		if errors.Is(err, gcs.ErrNotFound) {
			continue // its transfer ended in between
		}
		if err != nil {
			return fmt.Errorf("reading gs://%s/%s: %w", bucket, a.Name, err)
		}
		var ls message.Lease
		if err := message.Decode(b, &ls); err != nil || ls.Check(a.Name) != nil {
			l.Log.Warn("an object under the lease prefix is no lease ferry wrote; ignored", "object", "gs://"+bucket+"/"+a.Name)
			continue
		}
		if !ls.Overlaps(scope) {
			continue
		}
		if HolderGone(ls.Holder) {
			// A ferry cp killed on this host: nothing will end its
			// transfer but a run of the same command, or the sweep.
			l.Log.Warn("a lease of a ferry cp that no longer runs; ignored", "lease", "gs://"+bucket+"/"+a.Name, "holder", ls.Holder)
			continue
		}
		if ls.Stale(a.Updated, l.Now()) {
			// Its producer and mergers stopped renewing it: nothing
			// runs its transfer, which the sweep or its own rerun ends.
			l.Log.Warn("a lease no process has renewed for "+message.LeaseStaleAfter.String()+"; ignored", "lease", "gs://"+bucket+"/"+a.Name,
				"renewed", a.Updated.UTC().Format(time.RFC3339))
			continue
		}
		live, err := l.Live(ctx, bucket, ls.TransferID, a.Created)
		if err != nil {
			return err
		}
		if live {
			return &ConflictError{fmt.Errorf("destination %s: transfer %s is writing there (to %s, since %s; its lease is gs://%s/%s), and two transfers never write the same objects at once: this one was refused before it sent anything; run it again once %s has ended",
				destOf(bucket, scope), ls.TransferID, ls.Destination, a.Created.UTC().Format(time.RFC3339), bucket, a.Name, ls.TransferID)}
		}
	}
	return nil
}

// Renew touches transfer tid's lease every every (a transfer's:
// message.LeaseRenewEvery) until the function it returns is called (or
// ctx ends). A renewal that
// fails is logged; the next one tries again, and the lease goes stale
// only after five missed in a row.
func (l *Leases) Renew(ctx context.Context, bucket, tid string, every time.Duration) func() {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				err := l.Store.Touch(ctx, bucket, message.LeaseObject(tid), message.MetaRenewed, l.Now().UTC().Format(time.RFC3339))
				if err != nil && ctx.Err() == nil {
					l.Log.Warn("could not renew the transfer's lease; the next renewal tries again", "transfer_id", tid, "err", err)
				}
			}
		}
	}()
	return func() { cancel(); <-done }
}

// ProcessHolder is the Lease.Holder of this process: "HOST PID".
func ProcessHolder() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s %d", host, os.Getpid())
}

// HolderGone reports whether holder (Lease.Holder) names a process of this
// host that no longer runs. A holder of another host, or one that cannot be
// checked, may still run.
func HolderGone(holder string) bool {
	host, pid, ok := strings.Cut(holder, " ")
	if !ok {
		return false
	}
	me, err := os.Hostname()
	n, perr := strconv.Atoi(pid)
	if err != nil || host != me || perr != nil || n <= 0 || n == os.Getpid() {
		return false
	}
	return !osfile.ProcessRuns(n)
}

// destOf names what a scope covers.
func destOf(bucket, scope string) string { return "gs://" + bucket + "/" + scope }

// Live reports whether transfer tid, whose lease was created at created,
// still runs: it has no done marker, and its lease or an object under its
// staging prefix is younger than the transfer timeout, after which a
// merger's sweep ends it anyway. A lease that a killed ferry cp left
// behind holds nothing up for longer.
func (l *Leases) Live(ctx context.Context, bucket, tid string, created time.Time) (bool, error) {
	switch _, err := l.Store.Attrs(ctx, bucket, message.DoneMarker(tid)); {
	case err == nil:
		return false, nil
	case !errors.Is(err, gcs.ErrNotFound):
		return false, fmt.Errorf("done marker gs://%s/%s: %w", bucket, message.DoneMarker(tid), err)
	}
	horizon := time.Now().Add(-l.Timeout)
	if created.After(horizon) {
		return true, nil
	}
	err := l.Store.List(ctx, bucket, message.StagingPrefix(tid), func(a gcs.Attrs) error {
		if a.Created.After(horizon) {
			return errLeaseSeen
		}
		return nil
	})
	if errors.Is(err, errLeaseSeen) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("listing gs://%s/%s: %w", bucket, message.StagingPrefix(tid), err)
	}
	return false, nil
}

// Release removes transfer tid's lease, for a transfer that ends before
// it started (the merger removes the lease of one that started). A lease
// left behind by a failure here is stale once the transfer timeout passed.
func (l *Leases) Release(ctx context.Context, bucket, tid string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := l.Store.Delete(ctx, bucket, message.LeaseObject(tid)); err != nil && !errors.Is(err, gcs.ErrNotFound) {
		l.Log.Warn("could not remove the transfer's lease; it is stale once FERRY_TRANSFER_TIMEOUT has passed", "transfer_id", tid, "err", err)
	}
}
