package merger

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/loader"
	"github.com/ferry-dev/ferry/internal/message"
)

// Batched loads. BigQuery runs at most 1,500 load jobs a table a day,
// failed ones included: a table fed by more than about one transfer a
// minute runs out. So appends of Parquet parts into one table share a job:
// the first transfer to end opens a batch for its table, the others that
// end within Options.TableBatchWindow join it (up to
// Options.TableBatchMax, and a job's 10,000 URIs), and one job loads them
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

// loadClaim is a member's claim: the shared job, and its members.
type loadClaim struct {
	Job     loader.TableJob        `json:"job"`
	Members map[string]claimMember `json:"members"` // by transfer id
}

type claimMember struct {
	Bucket string `json:"bucket"`
	Rows   int64  `json:"rows"`
}

// batcher holds the open batch of each table.
type batcher struct {
	mu   sync.Mutex
	open map[string]*loadBatch
}

// loadBatch is one shared job in the making.
type loadBatch struct {
	table   string
	members []batchMember
	uris    int
	full    chan struct{} // closed when it takes no more
	done    chan struct{} // closed once claim and err are set
	claim   loadClaim
	rows    int64
	loc     string
	err     error
}

type batchMember struct {
	tid, bucket string
	job         loader.TableJob
}

// batches reports whether job (of a transfer whose manifest asks for
// load) is one to share.
func (m *Merger) batches(load *message.Load) bool {
	return m.o.TableBatchWindow > 0 && load.Write == message.LoadAppend && !load.Objects
}

// join adds mb to the open batch of its table, or opens one; lead is set
// for the member that opened it.
func (b *batcher) join(mb batchMember, most int) (lb *loadBatch, lead bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open == nil {
		b.open = map[string]*loadBatch{}
	}
	lb = b.open[mb.job.Table]
	if lb != nil && lb.uris+len(mb.job.URIs) > loader.MaxURIs {
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
func (b *batcher) seal(lb *loadBatch) {
	if b.open[lb.table] == lb {
		delete(b.open, lb.table)
		close(lb.full)
	}
}

// batchJobID is the id of the shared job of the transfers tids: derived
// from them, so a claim names it for good.
func batchJobID(tids []string) string {
	sorted := append([]string(nil), tids...)
	sort.Strings(sorted)
	h := sha256.Sum256([]byte(strings.Join(sorted, "\n")))
	return "ferry_load_batch_" + hex.EncodeToString(h[:16])
}

// loadShared loads job (t's parts, its own id) through a shared job and
// returns t's rows, the job's id and location. A failed shared job, or a
// claim of one, falls back to t's own job.
func (m *Merger) loadShared(ctx context.Context, t *transfer, job loader.TableJob) (int64, string, string, error) {
	claim, err := m.readClaim(ctx, t)
	if err != nil {
		return 0, "", "", err
	}
	var rows int64
	var loc string
	if claim != nil {
		whole, err := m.claimedByAll(ctx, claim)
		if err != nil {
			return 0, "", "", err
		}
		if !whole {
			if err := m.o.Store.Delete(ctx, t.bucket, message.LoadClaimObject(t.id)); err != nil && !errors.Is(err, gcs.ErrNotFound) {
				return 0, "", "", fmt.Errorf("void load claim of transfer %s: %w", t.id, err)
			}
			claim = nil
		}
	}
	if claim != nil {
		// An end repeated after its batch was claimed: that job, again.
		rows, loc, err = m.o.Tables.Load(ctx, claim.Job)
	} else {
		lb, lead := m.batcher.join(batchMember{tid: t.id, bucket: t.bucket, job: job}, m.o.TableBatchMax)
		if lead {
			m.runBatch(ctx, lb)
		}
		select {
		case <-lb.done:
		case <-ctx.Done():
			return 0, "", "", ctx.Err()
		}
		c := lb.claim
		claim, rows, loc, err = &c, lb.rows, lb.loc, lb.err
	}
	var je *loader.JobError
	switch {
	case errors.As(err, &je):
		m.log.Warn("a shared load job failed; each of its transfers loads on its own", "job", claim.Job.ID, "transfer", t.id, "err", err)
		rows, loc, err := m.o.Tables.Load(ctx, job)
		return rows, job.ID, loc, err
	case err != nil:
		return 0, "", "", err
	case rows != claim.Job.Rows:
		return rows, claim.Job.ID, loc, &loadFailed{fmt.Errorf("bigquery load job %s loaded %d rows into %s; the parts of its %d transfers hold %d",
			claim.Job.ID, rows, claim.Job.Table, len(claim.Members), claim.Job.Rows)}
	}
	return claim.Members[t.id].Rows, claim.Job.ID, loc, nil
}

// claimedByAll reports whether every member of c's job has c as its
// claim: only then may the job have run.
func (m *Merger) claimedByAll(ctx context.Context, c *loadClaim) (bool, error) {
	for tid, mb := range c.Members {
		if !m.o.Buckets.Allows(mb.Bucket) {
			return false, nil // not a claim this merger wrote
		}
		b, err := m.o.Store.ReadAll(ctx, mb.Bucket, message.LoadClaimObject(tid))
		if errors.Is(err, gcs.ErrNotFound) {
			// Its staging goes when it ends: ended by this job, it had
			// the claim.
			if ok, err := m.endedBy(ctx, mb.Bucket, tid, c.Job.ID); !ok || err != nil {
				return false, err
			}
			continue
		}
		if err != nil {
			return false, fmt.Errorf("load claim of transfer %s: %w", tid, err)
		}
		var other loadClaim
		if json.Unmarshal(b, &other) != nil || other.Job.ID != c.Job.ID {
			return false, nil
		}
	}
	return true, nil
}

// endedBy reports whether transfer tid ended with load job id, as its
// done marker says.
func (m *Merger) endedBy(ctx context.Context, bucket, tid, id string) (bool, error) {
	b, err := m.o.Store.ReadAll(ctx, bucket, message.DoneMarker(tid))
	if errors.Is(err, gcs.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("done marker of transfer %s: %w", tid, err)
	}
	var d message.Done
	if err := message.Decode(b, &d); err != nil {
		return false, nil
	}
	return d.Load != nil && d.Load.JobID == id, nil
}

// runBatch waits for lb to fill or its window to pass, claims it for each
// member and runs its job; lb.done is closed whatever happens.
func (m *Merger) runBatch(ctx context.Context, lb *loadBatch) {
	defer close(lb.done)
	timer := time.NewTimer(m.o.TableBatchWindow)
	defer timer.Stop()
	select {
	case <-lb.full:
	case <-timer.C:
	case <-ctx.Done():
	}
	m.batcher.mu.Lock()
	m.batcher.seal(lb)
	m.batcher.mu.Unlock()
	if lb.err = ctx.Err(); lb.err != nil {
		return // nothing claimed: every member joins another batch
	}
	c := loadClaim{Job: loader.TableJob{Table: lb.table, Write: message.LoadAppend}, Members: map[string]claimMember{}}
	tids := make([]string, len(lb.members))
	for i, mb := range lb.members {
		tids[i] = mb.tid
		c.Job.URIs = append(c.Job.URIs, mb.job.URIs...)
		c.Job.Rows += mb.job.Rows
		c.Members[mb.tid] = claimMember{Bucket: mb.bucket, Rows: mb.job.Rows}
	}
	c.Job.ID = batchJobID(tids)
	lb.claim = c
	body, err := json.Marshal(c)
	if err != nil {
		lb.err = err
		return
	}
	for _, mb := range lb.members {
		_, err := m.o.Store.Upload(ctx, mb.bucket, message.LoadClaimObject(mb.tid), bytes.NewReader(body), gcs.UploadOptions{
			Size: int64(len(body)), CRC32C: crc32c.Checksum(body), ContentType: "application/json", KMSKey: m.o.Buckets.KMSKey})
		if err != nil {
			// Claimed for some only: the job does not run, and their
			// claims are void at their next try (claimedByAll).
			lb.err = fmt.Errorf("claim of load job %s for transfer %s: %w", c.Job.ID, mb.tid, err)
			return
		}
	}
	m.log.Info("shared load job", "job", c.Job.ID, "table", lb.table, "transfers", len(lb.members), "uris", len(c.Job.URIs))
	lb.rows, lb.loc, lb.err = m.o.Tables.Load(ctx, c.Job)
}

// readClaim reads t's claim, nil when it has none.
func (m *Merger) readClaim(ctx context.Context, t *transfer) (*loadClaim, error) {
	b, err := m.o.Store.ReadAll(ctx, t.bucket, message.LoadClaimObject(t.id))
	if errors.Is(err, gcs.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load claim of transfer %s: %w", t.id, err)
	}
	var c loadClaim
	if err := json.Unmarshal(b, &c); err != nil || c.Job.ID == "" {
		return nil, fmt.Errorf("load claim gs://%s/%s: %v", t.bucket, message.LoadClaimObject(t.id), err)
	}
	if _, ok := c.Members[t.id]; !ok {
		return nil, fmt.Errorf("load claim gs://%s/%s does not name transfer %s", t.bucket, message.LoadClaimObject(t.id), t.id)
	}
	return &c, nil
}
