package producer

import (
	"context"
	"errors"
	"time"

	"github.com/ferry-dev/ferry/internal/lease"
)

// The destination lease (package lease), taken before anything else of a
// transfer is written.

// leases are this producer's (package lease).
func (p *Producer) leases() *lease.Leases {
	return &lease.Leases{Store: p.o.Store, Holder: p.o.LeaseHolder, Now: p.o.Now, Timeout: p.o.TransferTimeout, Log: p.o.Log}
}

// lease claims scope in bucket for transfer tid, or refuses it with an
// InputError naming the live transfer whose lease came first.
func (p *Producer) lease(ctx context.Context, bucket, tid, dest, scope string) error {
	err := p.leases().Take(ctx, bucket, tid, dest, scope)
	var conflict *lease.ConflictError
	if errors.As(err, &conflict) {
		return &InputError{conflict.Err}
	}
	return err
}

// renewLease renews transfer tid's lease every every until the function
// it returns is called.
func (p *Producer) renewLease(ctx context.Context, bucket, tid string, every time.Duration) func() {
	return p.leases().Renew(ctx, bucket, tid, every)
}

// release removes transfer tid's lease, for a transfer that ends before
// it started.
func (p *Producer) release(ctx context.Context, bucket, tid string) {
	p.leases().Release(ctx, bucket, tid)
}

// LeaseHolder is the Lease.Holder of this process: "HOST PID".
func LeaseHolder() string { return lease.ProcessHolder() }
