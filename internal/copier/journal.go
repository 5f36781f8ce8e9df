package copier

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/osfile"
	"github.com/ferry-dev/ferry/internal/plan"
	"github.com/ferry-dev/ferry/internal/producer"
)

// journal names the transfer a cp command started until that transfer has
// ended: a file in the state directory, named by the command's sources and
// destination. The same command run after a crash finds it and takes the
// transfer up again, so that what the first run staged is finished or
// removed by the second, never left behind.
//
// A running cp holds a lock on it (flock, which the kernel drops when the
// process dies, kill -9 included): a second cp of the same command while
// the first runs keeps no journal and takes nothing up; it starts a
// transfer of its own, which the first one's destination lease refuses,
// naming it.
type journal struct {
	path string   // "": no journal (standard input, an idempotency key, another cp running it)
	lock *os.File // held while this process runs the command
}

// openJournal returns the journal of req's command.
func openJournal(state string, req producer.Request) (*journal, error) {
	if plan.IsStdin(req.Sources) || req.IdempotencyKey != "" {
		// Standard input cannot be read again; a key names its transfer.
		return &journal{}, nil
	}
	h := sha256.New()
	for _, s := range req.Sources {
		abs, err := filepath.Abs(s)
		if err != nil {
			return nil, fmt.Errorf("source %s: %w", s, err)
		}
		fmt.Fprintf(h, "%s\x00", abs)
	}
	fmt.Fprintf(h, "%s\x00", req.Destination)
	dir := filepath.Join(state, "cp")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("ferry cp's journal directory: %w", err)
	}
	path := filepath.Join(dir, hex.EncodeToString(h.Sum(nil))[:32])
	lock, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("ferry cp's journal: %w", err)
	}
	if err := osfile.TryLock(lock); err != nil {
		lock.Close()
		if errors.Is(err, osfile.ErrLocked) {
			return &journal{}, nil // the same command runs in another process
		}
		return nil, fmt.Errorf("ferry cp's journal: locking %s: %w", path+".lock", err)
	}
	return &journal{path: path, lock: lock}, nil
}

// earlier is what the journal says of the transfer an earlier run of the
// same command started and did not see end.
type earlier struct {
	tid string
	// done is its done event, when its done marker says it ended (the
	// earlier run died after the marker, before it heard of the end).
	done *message.Done
	// other: it was started by another request (the same sources and
	// destination with other options), so it is not taken up.
	other bool
}

// resume reads the journal: the transfer it names, checked against what its
// bucket holds. A journal that names nothing valid, or a transfer whose key
// object is not of this command's transfers, gives nothing (tid ""): it is
// never acted on.
func (j *journal) resume(ctx context.Context, store *gcs.Store, bucket string, req producer.Request) earlier {
	if j.path == "" {
		return earlier{}
	}
	b, err := os.ReadFile(j.path)
	if err != nil {
		return earlier{}
	}
	tid := strings.TrimSpace(string(b))
	if !message.ValidTransferID(tid) {
		return earlier{}
	}
	kb, err := store.ReadAll(ctx, bucket, message.KeyObject(tid))
	var k message.Keys
	if err != nil || message.Decode(kb, &k) != nil || k.Check(tid) != nil {
		return earlier{} // nothing of it was started, or not by ferry cp as far as GCS shows
	}
	e := earlier{tid: tid, other: k.Request != "" && k.Request != producer.RequestDigest(req)}
	db, err := store.ReadAll(ctx, bucket, message.DoneMarker(tid))
	var d message.Done
	switch {
	case err == nil && message.Decode(db, &d) == nil && d.TransferID == tid:
		e.done = &d
	case !errors.Is(err, gcs.ErrNotFound):
		return earlier{} // GCS cannot say: a new transfer
	}
	return e
}

// finishEnded completes what an earlier run left of transfer tid, which
// ended (its done marker exists): the staging objects the merger had not
// yet removed when the run died.
func finishEnded(ctx context.Context, store *gcs.Store, bucket, tid string) error {
	var names []string
	if err := store.List(ctx, bucket, message.StagingPrefix(tid), func(a gcs.Attrs) error {
		names = append(names, a.Name)
		return nil
	}); err != nil {
		return fmt.Errorf("transfer %s: its staging objects: %w", tid, err)
	}
	for _, n := range names {
		if err := store.Delete(ctx, bucket, n); err != nil {
			return fmt.Errorf("transfer %s: %w", tid, err)
		}
	}
	return nil
}

// write records tid as the command's transfer.
func (j *journal) write(tid string) error {
	if j.path == "" {
		return nil
	}
	if err := osfile.WriteFile(j.path, []byte(tid+"\n"), 0o600); err != nil {
		return fmt.Errorf("ferry cp's journal: %w", err)
	}
	return nil
}

// remove forgets the command's transfer: it has ended.
func (j *journal) remove() {
	if j.path != "" {
		_ = os.Remove(j.path)
		_ = os.Remove(j.path + ".lock") // held still: a cp that opens it now finds it locked
	}
}

// unlock lets the next cp of the command take it up.
func (j *journal) unlock() {
	if j.lock != nil {
		_ = j.lock.Close()
	}
}
