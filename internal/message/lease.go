package message

import (
	"fmt"
	"strings"
	"time"
)

// LeaseRoot is the prefix of destination leases, one per running transfer.
// "_leases" is no transfer id (ValidTransferID), so nothing that walks the
// staging root takes it for a transfer, and the staging lifecycle rule is
// the backstop for a lease a crash left behind.
const LeaseRoot = StagingRoot + "_leases/"

// LeaseObject is the lease of a transfer.
func LeaseObject(transferID string) string { return LeaseRoot + transferID }

// Lease is a running transfer's claim on the final objects it writes: every
// one of them starts with Scope (the longest prefix their names share). A
// producer writes its lease before the transfer's key object, then lists
// the others: of two live leases whose scopes overlap, the one written
// first goes on, the other is refused and sends nothing. The merger
// removes a transfer's lease when the transfer ends, before its done event.
type Lease struct {
	V           int    `json:"v"`
	TransferID  string `json:"transfer_id"`
	Destination string `json:"destination"` // gs://bucket/prefix as requested, for the refusal's text
	Scope       string `json:"scope"`
	// Holder, when set, is the one process that runs the transfer from
	// start to end (ferry cp): "HOST PID". Once no such process runs on
	// HOST, the lease holds nobody off, however recent it is.
	Holder string `json:"holder,omitempty"`
	// Renews: the transfer's producer, then its merger, touch the lease
	// (MetaRenewed) every LeaseRenewEvery while the transfer runs, so a
	// lease not touched for LeaseStaleAfter holds nobody off: its
	// transfer's processes are gone. A lease without it (an earlier
	// version's) holds others off until the transfer timeout.
	Renews bool `json:"renews,omitempty"`
}

// Lease renewal: a running transfer's lease is touched every
// LeaseRenewEvery, and one not touched for LeaseStaleAfter (five missed
// renewals) is stale. A transfer whose processes all stopped for longer
// (its producer gone, no merger up) can then be overtaken by another
// transfer to the same objects; the compose preconditions still keep
// either from replacing what the other wrote.
const (
	LeaseRenewEvery = time.Minute
	LeaseStaleAfter = 5 * LeaseRenewEvery
	// MetaRenewed is the metadata key a renewal sets (to the time).
	MetaRenewed = "ferry-renewed"
)

// Stale reports whether a lease ferry renews (Renews), last changed at
// updated (its object's Updated time, its Created time if never touched),
// is no longer renewed at now.
func (l *Lease) Stale(updated, now time.Time) bool {
	return l.Renews && now.Sub(updated) > LeaseStaleAfter
}

func (l *Lease) version() int { return l.V }

// Check rejects a lease ferry could not have written under name.
func (l *Lease) Check(name string) error {
	if !ValidTransferID(l.TransferID) || LeaseObject(l.TransferID) != name {
		return fmt.Errorf("lease %.80q names transfer %.64q", name, l.TransferID)
	}
	if len(l.Scope) > 1024 || len(l.Destination) > 2048 || len(l.Holder) > 300 {
		return fmt.Errorf("lease of transfer %s: scope or destination too long", l.TransferID)
	}
	return nil
}

// Overlaps reports whether an object name could start with both scopes:
// one is a prefix of the other. Scopes are plain string prefixes, so
// "data/a.csv" and "data/b.csv" never overlap, "data/" and "data/x" do.
func (l *Lease) Overlaps(scope string) bool {
	return strings.HasPrefix(l.Scope, scope) || strings.HasPrefix(scope, l.Scope)
}
