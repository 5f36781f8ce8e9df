package producer

import (
	"context"
	"errors"
	"fmt"
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

// scopeOf is the longest prefix the object names of a walk share.
type scopeOf struct {
	prefix string
	any    bool
}

func (s *scopeOf) add(object string) {
	if !s.any {
		s.prefix, s.any = object, true
		return
	}
	n := 0
	for n < len(s.prefix) && n < len(object) && s.prefix[n] == object[n] {
		n++
	}
	s.prefix = s.prefix[:n]
}

// errLeaseSeen stops a listing once it found what it looked for.
var errLeaseSeen = errors.New("seen")

// lease claims scope in bucket for transfer tid, or refuses it with an
// InputError naming the live transfer whose lease came first. Nothing
// else of the transfer is written before it. The lease of an earlier run
// of tid is its own, and taken over.
func (p *Producer) lease(ctx context.Context, bucket, tid, dest, scope string) error {
	name := message.LeaseObject(tid)
	body := message.Encode(message.Lease{V: message.Version, TransferID: tid, Destination: dest, Scope: scope, Holder: p.o.LeaseHolder, Renews: true})
	mine, err := p.o.Store.PutSmall(ctx, bucket, name, body, true, "application/json")
	if errors.Is(err, gcs.ErrPrecondition) {
		mine, err = p.o.Store.PutSmall(ctx, bucket, name, body, false, "application/json")
	}
	if err != nil {
		return fmt.Errorf("transfer %s: writing its lease gs://%s/%s: %w", tid, bucket, name, err)
	}
	var others []gcs.Attrs
	err = p.o.Store.List(ctx, bucket, message.LeaseRoot, func(a gcs.Attrs) error {
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
		err = p.firstLease(ctx, bucket, scope, name, mine.Created, others)
	}
	if err != nil {
		p.release(ctx, bucket, tid)
		var input *InputError
		if !errors.As(err, &input) {
			err = fmt.Errorf("transfer %s: checking the leases under gs://%s/%s: %w", tid, bucket, message.LeaseRoot, err)
		}
		return err
	}
	return nil
}

// firstLease refuses mine when a live lease of others came first and
// overlaps scope. Only leases created no later than mine are read: one
// written after mine is the other's to yield to.
func (p *Producer) firstLease(ctx context.Context, bucket, scope, mine string, created time.Time, others []gcs.Attrs) error {
	for _, a := range others {
		if a.Created.After(created) || (a.Created.Equal(created) && a.Name > mine) {
			continue
		}
		b, err := p.o.Store.ReadAll(ctx, bucket, a.Name)
		if errors.Is(err, gcs.ErrNotFound) {
			continue // its transfer ended in between
		}
		if err != nil {
			return fmt.Errorf("reading gs://%s/%s: %w", bucket, a.Name, err)
		}
		var l message.Lease
		if err := message.Decode(b, &l); err != nil || l.Check(a.Name) != nil {
			p.o.Log.Warn("an object under the lease prefix is no lease ferry wrote; ignored", "object", "gs://"+bucket+"/"+a.Name)
			continue
		}
		if !l.Overlaps(scope) {
			continue
		}
		if holderGone(l.Holder) {
			// A ferry cp killed on this host: nothing will end its
			// transfer but a run of the same command, or the sweep.
			p.o.Log.Warn("a lease of a ferry cp that no longer runs; ignored", "lease", "gs://"+bucket+"/"+a.Name, "holder", l.Holder)
			continue
		}
		if l.Stale(a.Updated, p.o.Now()) {
			// Its producer and mergers stopped renewing it: nothing
			// runs its transfer, which the sweep or its own rerun ends.
			p.o.Log.Warn("a lease no process has renewed for "+message.LeaseStaleAfter.String()+"; ignored", "lease", "gs://"+bucket+"/"+a.Name,
				"renewed", a.Updated.UTC().Format(time.RFC3339))
			continue
		}
		live, err := p.live(ctx, bucket, l.TransferID, a.Created)
		if err != nil {
			return err
		}
		if live {
			return &InputError{fmt.Errorf("destination %s: transfer %s is writing there (to %s, since %s; its lease is gs://%s/%s), and two transfers never write the same objects at once: this one was refused before it sent anything; run it again once %s has ended",
				destOf(bucket, scope), l.TransferID, l.Destination, a.Created.UTC().Format(time.RFC3339), bucket, a.Name, l.TransferID)}
		}
	}
	return nil
}

// renewLease touches transfer tid's lease every every (a transfer's:
// message.LeaseRenewEvery) until the function it returns is called (or
// ctx ends). A renewal that
// fails is logged; the next one tries again, and the lease goes stale
// only after five missed in a row.
func (p *Producer) renewLease(ctx context.Context, bucket, tid string, every time.Duration) func() {
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
				err := p.o.Store.Touch(ctx, bucket, message.LeaseObject(tid), message.MetaRenewed, p.o.Now().UTC().Format(time.RFC3339))
				if err != nil && ctx.Err() == nil {
					p.o.Log.Warn("could not renew the transfer's lease; the next renewal tries again", "transfer_id", tid, "err", err)
				}
			}
		}
	}()
	return func() { cancel(); <-done }
}

// LeaseHolder is the Lease.Holder of this process: "HOST PID".
func LeaseHolder() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s %d", host, os.Getpid())
}

// holderGone reports whether holder (Lease.Holder) names a process of this
// host that no longer runs. A holder of another host, or one that cannot be
// checked, may still run.
func holderGone(holder string) bool {
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

// live reports whether transfer tid, whose lease was created at created,
// still runs: it has no done marker, and its lease or an object under its
// staging prefix is younger than the transfer timeout, after which a
// merger's sweep ends it anyway. A lease that a killed ferry cp left
// behind holds nothing up for longer.
func (p *Producer) live(ctx context.Context, bucket, tid string, created time.Time) (bool, error) {
	switch _, err := p.o.Store.Attrs(ctx, bucket, message.DoneMarker(tid)); {
	case err == nil:
		return false, nil
	case !errors.Is(err, gcs.ErrNotFound):
		return false, fmt.Errorf("done marker gs://%s/%s: %w", bucket, message.DoneMarker(tid), err)
	}
	horizon := time.Now().Add(-p.o.TransferTimeout)
	if created.After(horizon) {
		return true, nil
	}
	err := p.o.Store.List(ctx, bucket, message.StagingPrefix(tid), func(a gcs.Attrs) error {
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

// release removes transfer tid's lease, for a transfer that ends before
// it started (the merger removes the lease of one that started). A lease
// left behind by a failure here is stale once the transfer timeout passed.
func (p *Producer) release(ctx context.Context, bucket, tid string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := p.o.Store.Delete(ctx, bucket, message.LeaseObject(tid)); err != nil && !errors.Is(err, gcs.ErrNotFound) {
		p.o.Log.Warn("could not remove the transfer's lease; it is stale once FERRY_TRANSFER_TIMEOUT has passed", "transfer_id", tid, "err", err)
	}
}
