package pool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/manifest"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/plan"
	"github.com/ferry-dev/ferry/internal/producer"
)

// store is what the pool needs of GCS.
type store interface {
	Attrs(ctx context.Context, bucket, name string) (gcs.Attrs, error)
	List(ctx context.Context, bucket, prefix string, fn func(gcs.Attrs) error) error
	ListRange(ctx context.Context, bucket, prefix, start, end string, fn func(gcs.Attrs) error) error
	PutSmall(ctx context.Context, bucket, name string, data []byte, ifAbsent bool, contentType string) (gcs.Attrs, error)
	PutJSON(ctx context.Context, bucket, name string, data []byte, ifAbsent bool, md map[string]string) (gcs.Attrs, error)
	ReadAll(ctx context.Context, bucket, name string) ([]byte, error)
}

// publisher sends one message and returns once it is stored.
type publisher interface {
	Publish(ctx context.Context, data []byte, attrs map[string]string) error
}

// WalkerOptions configure a Walker.
type WalkerOptions struct {
	Store  store
	Shards publisher // the shards topic (FERRY_SHARDS_TOPIC)
	// Files and Bytes bound a shard (FERRY_SHARD_FILES, FERRY_SHARD_BYTES;
	// defaults message.ShardFiles, message.ShardBytes); Poll is how often
	// the shards done are looked for (default 500 ms).
	Files int
	Bytes int64
	Poll  time.Duration
	Log   *slog.Logger
}

// Walker is a producer's side of the pool (producer.Pooler): it cuts a
// pooled transfer's walk into shards, publishes them, and waits for the
// agents to send them.
type Walker struct{ o WalkerOptions }

// NewWalker returns a Walker.
func NewWalker(o WalkerOptions) *Walker {
	if o.Files <= 0 {
		o.Files = message.ShardFiles
	}
	if o.Bytes <= 0 {
		o.Bytes = message.ShardBytes
	}
	if o.Poll <= 0 {
		o.Poll = 500 * time.Millisecond
	}
	o.Log = logging.OrDiscard(o.Log)
	return &Walker{o: o}
}

var _ producer.Pooler = (*Walker)(nil)

// Run cuts the files into shards as they come, publishes them, and waits
// for the agents (producer.Pooler).
func (w *Walker) Run(ctx context.Context, m *message.Manifest, files <-chan producer.PoolFile, progress func(files int, bytes int64)) (*producer.PoolResult, error) {
	header := *m
	header.Files, header.Skipped, header.Pages = nil, nil, nil
	sh, err := w.cutShards(ctx, &header, m.ChunkKey, files)
	if err != nil {
		return nil, err
	}
	w.o.Log.Info("transfer sharded", "transfer_id", m.TransferID, "shards", sh.shards, "pages", len(sh.pages), "split_files", len(sh.big))
	t, err := w.awaitShards(ctx, &header, sh, progress)
	if err != nil {
		return nil, err
	}
	return &producer.PoolResult{Pages: sh.pages, Totals: t.totals, Levels: t.levels(), Agents: t.agents()}, nil
}

func (w *Walker) putPage(ctx context.Context, bucket, name string, v any) error {
	if _, err := w.o.Store.PutSmall(ctx, bucket, name, message.Encode(v), false, "application/json"); err != nil {
		return fmt.Errorf("write manifest page gs://%s/%s: %w", bucket, name, err)
	}
	return nil
}

// sharding is how a pooled transfer was cut: its pages, its shards, and
// the pages of the files split into range shards, whose pages this
// producer writes once every range is done.
type sharding struct {
	pages  []message.Page
	shards int
	big    map[int]*splitFile // by page
	ranges map[int]splitRange // by shard
}

// splitFile is a file larger than a shard, sent in ranges: its entry as
// the ranges fill it, and how many are still out.
type splitFile struct {
	entry   message.File
	pending int
}

// splitRange is one range shard of a split file.
type splitRange struct {
	page int
	span message.ChunkSpan
}

// cutShards takes the files the walk plans, cuts them into shards of at
// most ShardFiles files, ShardBytes bytes and a page's chunks, each its
// own page, and a file of more than ShardBytes into range shards of about
// ShardBytes, alone on its page; it writes and publishes each shard. Only
// the shards being written are held, and the entries of split files.
func (w *Walker) cutShards(ctx context.Context, header *message.Manifest, key string, files <-chan producer.PoolFile) (*sharding, error) {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(shardWriters)
	sh := &sharding{big: map[int]*splitFile{}, ranges: map[int]splitRange{}}
	var cur []message.ShardFile
	var chunks int
	var bytes int64
	next := func() int { // the first file of the next page
		if n := len(sh.pages); n > 0 {
			return sh.pages[n-1].First + sh.pages[n-1].Files
		}
		return 0
	}
	publish := func(sp message.ShardPlan) {
		sp.V, sp.Index, sp.Header, sp.ChunkKey = message.Version, sh.shards, *header, key
		sh.shards++
		g.Go(func() error { return w.publishShard(ctx, &sp) })
	}
	cut := func() {
		if len(cur) == 0 {
			return
		}
		pg := message.Page{First: next(), Files: len(cur), Chunks: chunks}
		publish(message.ShardPlan{PageIndex: len(sh.pages), Page: pg, Files: cur})
		sh.pages = append(sh.pages, pg)
		cur, chunks, bytes = nil, 0, 0
	}
	for pf := range files {
		f := pf.File
		if f.Chunks > 1 && f.Size > w.o.Bytes {
			cut()
			w.split(f, pf.Entry, next(), sh, publish)
			continue
		}
		if manifest.Full(len(cur), chunks, f.Chunks, w.o.Files) || (len(cur) > 0 && bytes+f.Size > w.o.Bytes) {
			cut()
		}
		cur = append(cur, shardFile(f))
		chunks += f.Chunks
		bytes += f.Size
	}
	cut()
	return sh, g.Wait()
}

// split makes f, a file larger than a shard, a page of its own, sent as
// range shards of at most ShardBytes each (at least one chunk), and small
// enough that the file makes at least splitWays of them when it has the
// chunks: a 200 MB file of 32 MiB chunks in ranges of two chunks left two
// of four agents idle.
func (w *Walker) split(f *plan.File, entry message.File, first int, sh *sharding, publish func(message.ShardPlan)) {
	k := len(sh.pages)
	pg := message.Page{First: first, Files: 1, Chunks: f.Chunks}
	sh.pages = append(sh.pages, pg)
	per := min(int(max(1, w.o.Bytes/f.ChunkSize)), max(1, (f.Chunks+splitWays-1)/splitWays))
	lo := 0
	if f.Append != nil {
		lo = 1 // the object there is the first chunk
	}
	sf := &splitFile{entry: entry}
	sh.big[k] = sf
	for ; lo < f.Chunks; lo += per {
		span := message.ChunkSpan{Lo: lo, Hi: min(lo+per, f.Chunks)}
		sh.ranges[sh.shards] = splitRange{page: k, span: span}
		sf.pending++
		publish(message.ShardPlan{PageIndex: k, Page: pg, Range: &span, Files: []message.ShardFile{shardFile(f)}})
	}
}

// splitWays is how many range shards a split file makes at least, chunks
// allowing: as many agents as can share it.
const splitWays = 16

// shardWriters is how many shards are written and published at once.
const shardWriters = 16

// publishShard writes sp's plan and publishes its message.
func (w *Walker) publishShard(ctx context.Context, sp *message.ShardPlan) error {
	h := &sp.Header
	name := message.ShardObject(h.TransferID, h.Run, sp.Index)
	if _, err := w.o.Store.PutSmall(ctx, h.Bucket, name, message.Encode(sp), false, "application/json"); err != nil {
		return fmt.Errorf("shard %d: writing its plan to gs://%s/%s: %w", sp.Index, h.Bucket, name, err)
	}
	s := message.Shard{V: message.Version, TransferID: h.TransferID, Bucket: h.Bucket, Run: h.Run, Index: sp.Index}
	if err := w.o.Shards.Publish(ctx, message.Encode(s), map[string]string{"transfer_id": h.TransferID}); err != nil {
		return fmt.Errorf("shard %d of transfer %s: publishing it to the pool: %w", sp.Index, h.TransferID, err)
	}
	return nil
}

// shardFile is f as a shard carries it.
func shardFile(f *plan.File) message.ShardFile {
	return message.ShardFile{Path: f.Path, Rel: f.Rel, Object: f.Object, Size: f.Size, Mod: f.Mod, Ctime: f.Ctime, Ino: f.Ino,
		Perm: f.Perm, UID: f.UID, GID: f.GID, Owned: f.Owned, ChunkSize: f.ChunkSize, Chunks: f.Chunks, Staged: f.Staged,
		Replaces: f.Replaces, Append: f.Append}
}

// shardTotals sums the done objects of a transfer's shards.
type shardTotals struct {
	totals  message.Totals
	byLevel map[int]message.LevelUse
	byAgent map[string]int64
}

// addTotals adds a page's totals.
func (t *shardTotals) addTotals(x message.Totals) {
	t.totals.Files += x.Files
	t.totals.Chunks += x.Chunks
	t.totals.Bytes += x.Bytes
	t.totals.WireBytes += x.WireBytes
}

// add counts d's levels and its agent's bytes.
func (t *shardTotals) add(d *message.ShardDone) {
	for _, u := range d.Levels {
		x := t.byLevel[u.Level]
		x.Level, x.Chunks, x.Bytes = u.Level, x.Chunks+u.Chunks, x.Bytes+u.Bytes
		t.byLevel[u.Level] = x
	}
	id := d.Agent
	if _, ok := t.byAgent[id]; !ok && len(t.byAgent) >= message.MaxAgents-1 {
		id = message.OtherAgents // a bounded manifest and done event
	}
	t.byAgent[id] += d.Totals.Bytes
}

// levels are the levels the agents used, in ascending order.
func (t *shardTotals) levels() []message.LevelUse {
	var u []message.LevelUse
	for _, x := range t.byLevel {
		u = append(u, x)
	}
	slices.SortFunc(u, func(a, b message.LevelUse) int { return a.Level - b.Level })
	return u
}

// agents are the agents that sent the shards and their source bytes, in
// name order.
func (t *shardTotals) agents() []message.AgentBytes {
	var a []message.AgentBytes
	for id, b := range t.byAgent {
		a = append(a, message.AgentBytes{Agent: id, Bytes: b})
	}
	slices.SortFunc(a, func(x, y message.AgentBytes) int { return strings.Compare(x.Agent, y.Agent) })
	return a
}

// awaitShards waits for the done objects of a transfer's shards, polling
// its shard prefix, and sums them; a split file's page is written once its
// last range is in. A shard no agent could send fails the transfer, naming
// the file and the agent; a transfer that ended meanwhile (cancelled,
// expired) stops the wait.
func (w *Walker) awaitShards(ctx context.Context, m *message.Manifest, sh *sharding, progress func(files int, bytes int64)) (*shardTotals, error) {
	t := &shardTotals{byLevel: map[int]message.LevelUse{}, byAgent: map[string]int64{}}
	n := sh.shards
	seen := make([]bool, n)
	left := n
	prefix := message.ShardDonePrefix(m.TransferID, m.Run)
	// Each poll lists from the first shard not yet done: those before it
	// are counted already, so a poll of a transfer of many shards reads
	// the tail, not every done object again (16,000 shards, a terabyte,
	// are 16 pages a poll otherwise). Polls stay every Poll: one list call
	// each, and the last shard's done object is seen within Poll.
	first := 0
	tick := time.NewTicker(w.o.Poll)
	defer tick.Stop()
	for left > 0 {
		for first < n && seen[first] {
			first++
		}
		var found []int
		err := w.o.Store.ListRange(ctx, m.Bucket, prefix, message.ShardDoneObject(m.TransferID, m.Run, first), "", func(a gcs.Attrs) error {
			if k, ok := message.ShardIndex(strings.TrimPrefix(a.Name, prefix)); ok && k < n && !seen[k] {
				found = append(found, k)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("listing the done shards of transfer %s in gs://%s/%s: %w", m.TransferID, m.Bucket, prefix, err)
		}
		dones, err := w.readDones(ctx, m, found)
		if err != nil {
			return nil, err
		}
		for i, d := range dones {
			k := found[i]
			if d.Error != "" {
				return nil, &producer.SourceError{Err: fmt.Errorf("shard %d: no agent could send %s (agent %s, the last to try): %s", k, d.Path, d.Agent, d.Error)}
			}
			if err := w.doneShard(ctx, m, sh, k, d, t); err != nil {
				return nil, err
			}
			seen[k] = true
			left--
			progress(d.Totals.Files, d.Totals.Bytes)
		}
		if left == 0 {
			break
		}
		if _, err := w.o.Store.Attrs(ctx, m.Bucket, message.DoneMarker(m.TransferID)); err == nil {
			return nil, fmt.Errorf("transfer %s ended while %d of its %d shards were still being sent (its done marker gs://%s/%s says how)",
				m.TransferID, left, n, m.Bucket, message.DoneMarker(m.TransferID))
		} else if !errors.Is(err, gcs.ErrNotFound) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
	return t, nil
}

// doneShard adds shard k's done object d to t; a range shard's chunks go
// into its file's entry, whose page is written once the last range is in.
func (w *Walker) doneShard(ctx context.Context, m *message.Manifest, sh *sharding, k int, d *message.ShardDone, t *shardTotals) error {
	t.add(d)
	r, ok := sh.ranges[k]
	if !ok {
		if d.Range != nil {
			return fmt.Errorf("shard %d of transfer %s: its done object reports a range of chunks, and the shard is a page", k, m.TransferID)
		}
		t.addTotals(d.Totals)
		return nil
	}
	if d.Range == nil || *d.Range != r.span || len(d.Chunks) != r.span.Hi-r.span.Lo {
		return fmt.Errorf("shard %d of transfer %s: its done object reports %d chunks of range %v, the shard is chunks %d to %d",
			k, m.TransferID, len(d.Chunks), d.Range, r.span.Lo, r.span.Hi-1)
	}
	sf := sh.big[r.page]
	copy(sf.entry.Chunks[r.span.Lo:r.span.Hi], d.Chunks)
	if sf.pending--; sf.pending > 0 {
		return nil
	}
	// Every range is in: the page, sealed as a shard's is.
	h := *m
	h.Totals = message.Totals{}
	pg := sh.pages[r.page]
	pw := manifest.NewShardWriter(&h, r.page, pg.First, func(ctx context.Context, name string, v any) error {
		return w.putPage(ctx, m.Bucket, name, v)
	})
	if _, err := pw.Add(ctx, sf.entry); err != nil {
		return err
	}
	pw.Close()
	if err := pw.Finish(ctx); err != nil {
		return fmt.Errorf("transfer %s: the page of %s: %w", m.TransferID, sf.entry.Path, err)
	}
	t.addTotals(h.Totals)
	delete(sh.big, r.page)
	return nil
}

// readDones reads the done objects of shards ks, some at once.
func (w *Walker) readDones(ctx context.Context, m *message.Manifest, ks []int) ([]*message.ShardDone, error) {
	out := make([]*message.ShardDone, len(ks))
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(shardWriters)
	for i, k := range ks {
		g.Go(func() error {
			name := message.ShardDoneObject(m.TransferID, m.Run, k)
			b, err := w.o.Store.ReadAll(ctx, m.Bucket, name)
			if err != nil {
				return fmt.Errorf("shard %d: reading gs://%s/%s: %w", k, m.Bucket, name, err)
			}
			var d message.ShardDone
			if err := message.Decode(b, &d); err != nil {
				return fmt.Errorf("shard %d: gs://%s/%s: %w", k, m.Bucket, name, err)
			}
			if d.Index != k {
				return fmt.Errorf("shard %d: gs://%s/%s is shard %d's", k, m.Bucket, name, d.Index)
			}
			out[i] = &d
			return nil
		})
	}
	return out, g.Wait()
}
