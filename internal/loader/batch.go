package loader

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/message"
)

// Batched loads. BigQuery runs at most 1,500 load jobs a table a day,
// failed ones included: a table fed by more than about one transfer a
// minute runs out. So appends of Parquet parts into one table share a job:
// the first transfer to end opens a batch for its table, the others that
// end within Batcher.Window join it (up to Batcher.Max, and a job's
// 10,000 URIs), and one job loads them
// all. Each transfer's done event names the shared job and its own rows;
// the job must load the batch's rows exactly.
//
// Exactly once, across crashes: before the job runs, each member's staging
// gets a claim naming the whole job (message.LoadClaimObject); the job runs
// only once every member has one. A transfer whose end is repeated and
// finds its claim, and those of all the job's members (or, for a member
// that ended, its done marker naming the job), runs that job again, with
// the same id, instead of joining a new batch: BigQuery then finds the
// job, and nothing loads twice. A claim some member lacks belongs to a
// job that never ran: it is void, removed, and the transfer joins a new
// batch. A batch whose job fails falls back to one job
// per member (its own id), so one transfer's bad parts fail only itself.
// Only appends batch: empty and truncate are each transfer's own, and
// objects loaded as sent (Load.Objects) have no row counts to share out.

// Claim is a member's claim: the shared job, and its members.
type Claim struct {
	Job     TableJob               `json:"job"`
	Members map[string]ClaimMember `json:"members"` // by transfer id
}

// ClaimMember is one transfer of a shared job: where its claim is, and
// the rows its parts hold.
type ClaimMember struct {
	Bucket string `json:"bucket"`
	Rows   int64  `json:"rows"`
}

// claimStore is what a shared job needs of GCS: its members' claims and
// done markers.
type claimStore interface {
	ReadAll(ctx context.Context, bucket, name string) ([]byte, error)
	Upload(ctx context.Context, bucket, name string, r io.Reader, opt gcs.UploadOptions) (gcs.Attrs, error)
	Delete(ctx context.Context, bucket, name string) error
}

// jobRunner runs one load job: Tables, or LocalTables.
type jobRunner interface {
	Load(ctx context.Context, job TableJob) (rows int64, location string, err error)
}

// Batcher shares the load jobs of transfers that append to one table. Set
// its fields before the first Load; it is safe for concurrent use.
type Batcher struct {
	Store  claimStore
	Tables jobRunner
	// Allows reports whether a claim in bucket may be this merger's:
	// a claim naming a member elsewhere is not.
	Allows func(bucket string) bool
	KMSKey string        // for the claims (FERRY_KMS_KEY)
	Window time.Duration // how long a batch waits for more members
	Max    int           // the most members of one job
	Log    *slog.Logger

	mu   sync.Mutex
	open map[string]*loadBatch // by table
}

// RowsError is a shared job that loaded other rows than its members'
// parts hold: the end of the transfer, not something to retry.
type RowsError struct {
	JobID, Table string
	Transfers    int
	Loaded, Want int64
}

func (e *RowsError) Error() string {
	return fmt.Sprintf("bigquery load job %s loaded %d rows into %s; the parts of its %d transfers hold %d",
		e.JobID, e.Loaded, e.Table, e.Transfers, e.Want)
}

// loadBatch is one shared job in the making.
type loadBatch struct {
	table   string
	members []batchMember
	uris    int
	full    chan struct{} // closed when it takes no more
	done    chan struct{} // closed once claim and err are set
	claim   Claim
	rows    int64
	loc     string
	err     error
}

type batchMember struct {
	tid, bucket string
	job         TableJob
}

// join adds mb to the open batch of its table, or opens one; lead is set
// for the member that opened it.
func (b *Batcher) join(mb batchMember, most int) (lb *loadBatch, lead bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open == nil {
		b.open = map[string]*loadBatch{}
	}
	lb = b.open[mb.job.Table]
	if lb != nil && lb.uris+len(mb.job.URIs) > MaxURIs {
		b.seal(lb) // full of URIs: this one opens the next
		lb = nil
	}
	if lb == nil {
		lb = &loadBatch{table: mb.job.Table, full: make(chan struct{}), done: make(chan struct{})}
		b.open[mb.job.Table] = lb
		lead = true
	}
	lb.members = append(lb.members, mb)
	lb.uris += len(mb.job.URIs)
	if len(lb.members) >= most {
		b.seal(lb)
	}
	return lb, lead
}

// seal takes lb out of the open batches. b.mu is held.
func (b *Batcher) seal(lb *loadBatch) {
	if b.open[lb.table] == lb {
		delete(b.open, lb.table)
		close(lb.full)
	}
}

// BatchJobID is the id of the shared job of the transfers tids: derived
// from them, so a claim names it for good.
func BatchJobID(tids []string) string {
	sorted := append([]string(nil), tids...)
	sort.Strings(sorted)
	h := sha256.Sum256([]byte(strings.Join(sorted, "\n")))
	return "ferry_load_batch_" + hex.EncodeToString(h[:16])
}

// Load loads job (the parts of transfer tid, whose staging is in bucket,
// under its own id) through a shared job and returns tid's rows, the job's
// id and location. A failed shared job, or a claim of one, falls back to
// tid's own job. A *RowsError or a *JobError ends the transfer; any other
// error is for the caller to retry.
func (b *Batcher) Load(ctx context.Context, tid, bucket string, job TableJob) (int64, string, string, error) {
	claim, err := b.readClaim(ctx, tid, bucket)
	if err != nil {
		return 0, "", "", err
	}
	var rows int64
	var loc string
	if claim != nil {
		whole, err := b.claimedByAll(ctx, claim)
		if err != nil {
			return 0, "", "", err
		}
		if !whole {
			if err := b.Store.Delete(ctx, bucket, message.LoadClaimObject(tid)); err != nil && !errors.Is(err, gcs.ErrNotFound) {
				return 0, "", "", fmt.Errorf("void load claim of transfer %s: %w", tid, err)
			}
			claim = nil
		}
	}
	if claim != nil {
		// An end repeated after its batch was claimed: that job, again.
		rows, loc, err = b.Tables.Load(ctx, claim.Job)
	} else {
		lb, lead := b.join(batchMember{tid: tid, bucket: bucket, job: job}, b.Max)
		if lead {
			b.run(ctx, lb)
		}
		select {
		case <-lb.done:
		case <-ctx.Done():
			return 0, "", "", ctx.Err()
		}
		c := lb.claim
		claim, rows, loc, err = &c, lb.rows, lb.loc, lb.err
	}
	var je *JobError
	switch {
	case errors.As(err, &je):
		logging.OrDiscard(b.Log).Warn("a shared load job failed; each of its transfers loads on its own", "job", claim.Job.ID, "transfer", tid, "err", err)
		rows, loc, err := b.Tables.Load(ctx, job)
		return rows, job.ID, loc, err
	case err != nil:
		return 0, "", "", err
	case rows != claim.Job.Rows:
		return rows, claim.Job.ID, loc, &RowsError{JobID: claim.Job.ID, Table: claim.Job.Table, Transfers: len(claim.Members), Loaded: rows, Want: claim.Job.Rows}
	}
	return claim.Members[tid].Rows, claim.Job.ID, loc, nil
}

// claimedByAll reports whether every member of c's job has c as its
// claim: only then may the job have run.
func (b *Batcher) claimedByAll(ctx context.Context, c *Claim) (bool, error) {
	for tid, mb := range c.Members {
		if b.Allows != nil && !b.Allows(mb.Bucket) {
			return false, nil // not a claim this merger wrote
		}
		body, err := b.Store.ReadAll(ctx, mb.Bucket, message.LoadClaimObject(tid))
		if errors.Is(err, gcs.ErrNotFound) {
			// Its staging goes when it ends: ended by this job, it had
			// the claim.
			if ok, err := b.endedBy(ctx, mb.Bucket, tid, c.Job.ID); !ok || err != nil {
				return false, err
			}
			continue
		}
		if err != nil {
			return false, fmt.Errorf("load claim of transfer %s: %w", tid, err)
		}
		var other Claim
		if json.Unmarshal(body, &other) != nil || other.Job.ID != c.Job.ID {
			return false, nil
		}
	}
	return true, nil
}

// endedBy reports whether transfer tid ended with load job id, as its
// done marker says.
func (b *Batcher) endedBy(ctx context.Context, bucket, tid, id string) (bool, error) {
	body, err := b.Store.ReadAll(ctx, bucket, message.DoneMarker(tid))
	if errors.Is(err, gcs.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("done marker of transfer %s: %w", tid, err)
	}
	var d message.Done
	if err := message.Decode(body, &d); err != nil {
		return false, nil
	}
	return d.Load != nil && d.Load.JobID == id, nil
}

// run waits for lb to fill or its window to pass, claims it for each
// member and runs its job; lb.done is closed whatever happens.
func (b *Batcher) run(ctx context.Context, lb *loadBatch) {
	defer close(lb.done)
	timer := time.NewTimer(b.Window)
	defer timer.Stop()
	select {
	case <-lb.full:
	case <-timer.C:
	case <-ctx.Done():
	}
	b.mu.Lock()
	b.seal(lb)
	b.mu.Unlock()
	if lb.err = ctx.Err(); lb.err != nil {
		return // nothing claimed: every member joins another batch
	}
	c := Claim{Job: TableJob{Table: lb.table, Write: message.LoadAppend}, Members: map[string]ClaimMember{}}
	tids := make([]string, len(lb.members))
	for i, mb := range lb.members {
		tids[i] = mb.tid
		c.Job.URIs = append(c.Job.URIs, mb.job.URIs...)
		c.Job.Rows += mb.job.Rows
		c.Members[mb.tid] = ClaimMember{Bucket: mb.bucket, Rows: mb.job.Rows}
	}
	c.Job.ID = BatchJobID(tids)
	lb.claim = c
	body, err := json.Marshal(c)
	if err != nil {
		lb.err = err
		return
	}
	for _, mb := range lb.members {
		_, err := b.Store.Upload(ctx, mb.bucket, message.LoadClaimObject(mb.tid), bytes.NewReader(body), gcs.UploadOptions{
			Size: int64(len(body)), CRC32C: crc32c.Checksum(body), ContentType: "application/json", KMSKey: b.KMSKey})
		if err != nil {
			// Claimed for some only: the job does not run, and their
			// claims are void at their next try (claimedByAll).
			lb.err = fmt.Errorf("claim of load job %s for transfer %s: %w", c.Job.ID, mb.tid, err)
			return
		}
	}
	logging.OrDiscard(b.Log).Info("shared load job", "job", c.Job.ID, "table", lb.table, "transfers", len(lb.members), "uris", len(c.Job.URIs))
	lb.rows, lb.loc, lb.err = b.Tables.Load(ctx, c.Job)
}

// readClaim reads the claim of transfer tid, nil when it has none.
func (b *Batcher) readClaim(ctx context.Context, tid, bucket string) (*Claim, error) {
	body, err := b.Store.ReadAll(ctx, bucket, message.LoadClaimObject(tid))
	if errors.Is(err, gcs.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load claim of transfer %s: %w", tid, err)
	}
	var c Claim
	if err := json.Unmarshal(body, &c); err != nil || c.Job.ID == "" {
		return nil, fmt.Errorf("load claim gs://%s/%s: %v", bucket, message.LoadClaimObject(tid), err)
	}
	if _, ok := c.Members[tid]; !ok {
		return nil, fmt.Errorf("load claim gs://%s/%s does not name transfer %s", bucket, message.LoadClaimObject(tid), tid)
	}
	return &c, nil
}
