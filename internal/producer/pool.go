package producer

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/manifest"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/plan"
)

// A pooled transfer (Request.Pool) is walked here and sent by the pool's
// agents (ferry agent): the walk cuts the files into shards, each one
// manifest page, and publishes each shard (cutShards); an agent that
// claims one reads, compresses and uploads its files on its own host
// (Shard) and writes its page; once every shard's done object is there
// (awaitShards), this producer seals the manifest as it seals its own.
// No chunk byte passes through this producer or Pub/Sub.

// PoolLevel is the zstd level of a pooled transfer that sets none: a
// shard sent again (its agent killed, or late) makes the same bytes, so
// that a late agent's upload replaces a chunk with itself.
const PoolLevel = 3

// checkPool refuses a pooled request the pool cannot send: standard
// input (one host has it), conversions, and relative sources (each agent
// has its own working directory).
func checkPool(req Request) error {
	if !req.Pool {
		return nil
	}
	if req.Convert != nil {
		return errors.New("--pool: conversions to Parquet are sent by one producer; leave out --pool or --convert")
	}
	for _, s := range req.Sources {
		if plan.IsStdin([]string{s}) {
			return errors.New("--pool: standard input is on one host only; leave out --pool")
		}
		if !filepath.IsAbs(s) {
			return fmt.Errorf("--pool: source %s is relative, and each agent reads the share from its own working directory: give its absolute path", s)
		}
	}
	return nil
}

// shardPages counts the files the walk plans; the walk's pages are the
// shards, cut by cutShards, and its skipped files are the writer's.
type shardPages struct {
	w *manifest.Writer
	n int
}

func (s *shardPages) Add(context.Context, message.File) (int, error) {
	i := s.n
	s.n++
	return i, nil
}

func (s *shardPages) Skip(ctx context.Context, k message.Skipped) error { return s.w.Skip(ctx, k) }

// runPool walks pl, publishes its shards and waits for the agents to
// send them; it leaves the manifest to seal.
func (p *Producer) runPool(ctx context.Context, pl *plan.Plan, m *message.Manifest, req Request, pg *manifest.Writer) error {
	header := *m
	header.Files, header.Skipped, header.Pages = nil, nil, nil
	files := make(chan planned, walkAhead)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		defer pg.Close()
		return p.walk(gctx, pl, req, m, &shardPages{w: pg}, files)
	})
	var sh *sharding
	g.Go(func() (err error) {
		sh, err = p.cutShards(gctx, &header, m.ChunkKey, files)
		return err
	})
	g.Go(func() error { return pg.Run(gctx) })
	if err := g.Wait(); err != nil {
		return err
	}
	p.o.Log.Info("transfer sharded", "transfer_id", m.TransferID, "shards", sh.shards, "pages", len(sh.pages), "split_files", len(sh.big))
	t, err := p.awaitShards(ctx, &header, sh)
	if err != nil {
		return err
	}
	pg.Pooled(sh.pages, t.totals)
	m.Levels, m.Agents = t.levels(), t.agents()
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
func (p *Producer) cutShards(ctx context.Context, header *message.Manifest, key string, files <-chan planned) (*sharding, error) {
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
		g.Go(func() error { return p.publishShard(ctx, &sp) })
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
		f := pf.f
		if f.Chunks > 1 && f.Size > p.o.ShardBytes {
			cut()
			p.split(f, next(), sh, publish)
			continue
		}
		if manifest.Full(len(cur), chunks, f.Chunks, p.o.ShardFiles) || (len(cur) > 0 && bytes+f.Size > p.o.ShardBytes) {
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
// range shards of about ShardBytes each (at least one chunk).
func (p *Producer) split(f *plan.File, first int, sh *sharding, publish func(message.ShardPlan)) {
	k := len(sh.pages)
	pg := message.Page{First: first, Files: 1, Chunks: f.Chunks}
	sh.pages = append(sh.pages, pg)
	per := int(max(1, p.o.ShardBytes/f.ChunkSize))
	lo := 0
	if f.Append != nil {
		lo = 1 // the object there is the first chunk
	}
	sf := &splitFile{entry: fileEntry(f)}
	sh.big[k] = sf
	for ; lo < f.Chunks; lo += per {
		span := message.ChunkSpan{Lo: lo, Hi: min(lo+per, f.Chunks)}
		sh.ranges[sh.shards] = splitRange{page: k, span: span}
		sf.pending++
		publish(message.ShardPlan{PageIndex: k, Page: pg, Range: &span, Files: []message.ShardFile{shardFile(f)}})
	}
}

// shardWriters is how many shards are written and published at once.
const shardWriters = 16

// publishShard writes sp's plan and publishes its message.
func (p *Producer) publishShard(ctx context.Context, sp *message.ShardPlan) error {
	h := &sp.Header
	name := message.ShardObject(h.TransferID, h.Run, sp.Index)
	if _, err := p.o.Store.PutSmall(ctx, h.Bucket, name, message.Encode(sp), false, "application/json"); err != nil {
		return fmt.Errorf("shard %d: writing its plan to gs://%s/%s: %w", sp.Index, h.Bucket, name, err)
	}
	s := message.Shard{V: message.Version, TransferID: h.TransferID, Bucket: h.Bucket, Run: h.Run, Index: sp.Index}
	if err := p.o.Shards.Publish(ctx, message.Encode(s), map[string]string{"transfer_id": h.TransferID}); err != nil {
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
	t.byAgent[d.Agent] += d.Totals.Bytes
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
func (p *Producer) awaitShards(ctx context.Context, m *message.Manifest, sh *sharding) (*shardTotals, error) {
	t := &shardTotals{byLevel: map[int]message.LevelUse{}, byAgent: map[string]int64{}}
	n := sh.shards
	seen := make([]bool, n)
	left := n
	prefix := message.ShardPrefix(m.TransferID, m.Run)
	tick := time.NewTicker(p.o.ShardPoll)
	defer tick.Stop()
	for left > 0 {
		var found []int
		err := p.o.Store.List(ctx, m.Bucket, prefix, func(a gcs.Attrs) error {
			if k, ok := message.ShardDoneIndex(strings.TrimPrefix(a.Name, prefix)); ok && k < n && !seen[k] {
				found = append(found, k)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("listing the done shards of transfer %s in gs://%s/%s: %w", m.TransferID, m.Bucket, prefix, err)
		}
		dones, err := p.readDones(ctx, m, found)
		if err != nil {
			return nil, err
		}
		for i, d := range dones {
			k := found[i]
			if d.Error != "" {
				return nil, &SourceError{fmt.Errorf("shard %d: no agent could send %s (agent %s, the last to try): %s", k, d.Path, d.Agent, d.Error)}
			}
			if err := p.doneShard(ctx, m, sh, k, d, t); err != nil {
				return nil, err
			}
			seen[k] = true
			left--
			p.readBytes.Add(d.Totals.Bytes)
			p.doneBytes.Add(d.Totals.Bytes)
			p.filesRead.Add(int64(d.Totals.Files))
		}
		if left == 0 {
			break
		}
		if _, err := p.o.Store.Attrs(ctx, m.Bucket, message.DoneMarker(m.TransferID)); err == nil {
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
func (p *Producer) doneShard(ctx context.Context, m *message.Manifest, sh *sharding, k int, d *message.ShardDone, t *shardTotals) error {
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
	w := manifest.NewShardWriter(&h, r.page, pg.First, func(ctx context.Context, name string, v any) error {
		return p.putPage(ctx, m.Bucket, name, v)
	})
	if _, err := w.Add(ctx, sf.entry); err != nil {
		return err
	}
	w.Close()
	if err := w.Finish(ctx); err != nil {
		return fmt.Errorf("transfer %s: the page of %s: %w", m.TransferID, sf.entry.Path, err)
	}
	t.addTotals(h.Totals)
	delete(sh.big, r.page)
	return nil
}

// readDones reads the done objects of shards ks, some at once.
func (p *Producer) readDones(ctx context.Context, m *message.Manifest, ks []int) ([]*message.ShardDone, error) {
	out := make([]*message.ShardDone, len(ks))
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(shardWriters)
	for i, k := range ks {
		g.Go(func() error {
			name := message.ShardDoneObject(m.TransferID, m.Run, k)
			b, err := p.o.Store.ReadAll(ctx, m.Bucket, name)
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

// ShardOptions are what an agent gives Shard.
type ShardOptions struct {
	// Agent names the agent in what it writes (FERRY_AGENT_ID).
	Agent string
	// Roots are the directories the agent may read (FERRY_SOURCE_ROOTS).
	Roots []string
	// Chunks takes the shard's chunk messages to the agent's own
	// uploaders; Wait returns once every message it took is stored and
	// announced, or the error that stopped one.
	Chunks interface {
		publisher
		Wait(ctx context.Context) error
	}
}

// ErrShardGone: the shard's transfer or run is over, or another agent
// sent it; nothing is left to do.
var ErrShardGone = errors.New("shard no longer wanted")

// Shard sends one shard of a pooled transfer on this host: it reads the
// shard's plan from the transfer's staging prefix, checks every file
// against this host's roots and this producer's configuration, reads,
// compresses and hands the chunks to o.Chunks, waits until they are
// stored, and then writes the shard's manifest page and its done object.
// It returns ErrShardGone (wrapped) when nothing is left to do, a
// *SourceError when this host cannot read a file (another may), and any
// other error when the shard should be tried again.
func (p *Producer) Shard(ctx context.Context, s message.Shard, o ShardOptions) (*message.ShardDone, error) {
	if err := s.Check(); err != nil {
		return nil, err
	}
	if len(p.o.Buckets) > 0 && !slices.Contains(p.o.Buckets, s.Bucket) {
		return nil, fmt.Errorf("%w: shard %d of transfer %s: bucket %s is not one ferry may write to (FERRY_BUCKETS=%s)",
			message.ErrMalformed, s.Index, s.TransferID, s.Bucket, strings.Join(p.o.Buckets, ","))
	}
	if gone, err := p.shardGone(ctx, s); err != nil || gone != nil {
		return nil, firstErr(err, gone)
	}
	name := message.ShardObject(s.TransferID, s.Run, s.Index)
	b, err := p.o.Store.ReadAll(ctx, s.Bucket, name)
	if err != nil {
		return nil, fmt.Errorf("shard %d of transfer %s: reading its plan gs://%s/%s: %w", s.Index, s.TransferID, s.Bucket, name, err)
	}
	var sp message.ShardPlan
	if err := message.Decode(b, &sp); err != nil {
		return nil, fmt.Errorf("shard %d of transfer %s: its plan gs://%s/%s: %w", s.Index, s.TransferID, s.Bucket, name, err)
	}
	if err := sp.Check(s); err != nil {
		return nil, err
	}
	m := sp.Header
	m.ChunkKey = sp.ChunkKey
	pl, files, c, err := p.adopt(&sp, o.Roots)
	if err != nil {
		return nil, err
	}
	if sp.Range != nil {
		files[0].Span = sp.Range
	}
	t0 := time.Now()
	pg := manifest.NewShardWriter(&m, sp.PageIndex, sp.Page.First, func(ctx context.Context, name string, v any) error {
		_, err := p.o.Store.PutSmall(ctx, m.Bucket, name, message.Encode(v), true, "application/json")
		if errors.Is(err, gcs.ErrPrecondition) {
			return nil // another agent sent the shard first: its page stands
		}
		if err != nil {
			return fmt.Errorf("shard %d: write manifest page gs://%s/%s: %w", sp.Index, m.Bucket, name, err)
		}
		return nil
	})
	feed := func(ctx context.Context, out chan<- planned) error {
		defer close(out)
		if sp.Range != nil {
			return p.planSpan(ctx, pg, &files[0], out)
		}
		for i := range files {
			if err := p.planFile(ctx, pg, files[i], "", out); err != nil {
				return err
			}
		}
		return nil
	}
	// The shard's one page is written by Finish, once its chunks are
	// stored: an agent killed before leaves no page, and the shard is
	// sent again.
	err = p.pipeline(ctx, pl, &m, Request{}, c, pg, source{feed: feed, chunks: o.Chunks})
	if err == nil {
		err = o.Chunks.Wait(ctx)
	}
	if err != nil {
		var se *SourceError
		if errors.As(err, &se) {
			return nil, err
		}
		return nil, fmt.Errorf("shard %d of transfer %s: %w", sp.Index, s.TransferID, err)
	}
	d := &message.ShardDone{V: message.Version, Index: sp.Index, Agent: o.Agent, Levels: levelsOf(m.Levels)}
	if sp.Range != nil {
		// The page is the producer's to write, once every range is in.
		f := pg.File(sp.Page.First)
		d.Range, d.Chunks = sp.Range, f.Chunks[sp.Range.Lo:sp.Range.Hi]
		for _, c := range d.Chunks {
			d.Totals.Chunks++
			d.Totals.Bytes += c.RawSize
			d.Totals.WireBytes += c.WireSize
		}
	} else {
		if err := pg.Finish(ctx); err != nil {
			return nil, err
		}
		d.Totals = m.Totals
	}
	d.CompressMS = time.Since(t0).Milliseconds()
	return d, p.writeDone(ctx, s, d)
}

// planSpan adds f, a range shard's file, to pg with the chunks outside its
// span marked as another shard's, and hands it to the reader.
func (p *Producer) planSpan(ctx context.Context, pg *manifest.Writer, f *plan.File, out chan<- planned) error {
	e := fileEntry(f)
	for j := range e.Chunks {
		if j < f.Span.Lo || j >= f.Span.Hi {
			e.Chunks[j].Object = otherShard
		}
	}
	i, err := pg.Add(ctx, e)
	if err != nil {
		return err
	}
	select {
	case out <- planned{i, f}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// otherShard marks, in a range shard's writer, a chunk another shard sends.
const otherShard = "(another shard's)"

// levelsOf is u, or nil when empty.
func levelsOf(u []message.LevelUse) []message.LevelUse {
	if len(u) == 0 {
		return nil
	}
	return u
}

// RefuseShard records that no agent can send shard s, naming the file and
// the agent: the transfer's producer fails the transfer with it.
func (p *Producer) RefuseShard(ctx context.Context, s message.Shard, agent string, cause error) error {
	if len(p.o.Buckets) > 0 && !slices.Contains(p.o.Buckets, s.Bucket) {
		return nil // nothing is written where ferry may not write
	}
	path := ""
	var pe interface{ Path() string }
	if errors.As(cause, &pe) {
		path = pe.Path()
	}
	d := &message.ShardDone{V: message.Version, Index: s.Index, Agent: agent, Error: message.Truncate(cause.Error(), 2048), Path: path}
	return p.writeDone(ctx, s, d)
}

func (p *Producer) writeDone(ctx context.Context, s message.Shard, d *message.ShardDone) error {
	name := message.ShardDoneObject(s.TransferID, s.Run, s.Index)
	_, err := p.o.Store.PutSmall(ctx, s.Bucket, name, message.Encode(d), true, "application/json")
	if err != nil && !errors.Is(err, gcs.ErrPrecondition) {
		return fmt.Errorf("shard %d of transfer %s: writing gs://%s/%s: %w", s.Index, s.TransferID, s.Bucket, name, err)
	}
	return nil
}

// shardGone reports (as an ErrShardGone) a shard whose transfer ended,
// whose run is no longer the transfer's, or that is done.
func (p *Producer) shardGone(ctx context.Context, s message.Shard) (error, error) {
	if _, err := p.o.Store.Attrs(ctx, s.Bucket, message.DoneMarker(s.TransferID)); err == nil {
		return nil, fmt.Errorf("%w: transfer %s ended", ErrShardGone, s.TransferID)
	} else if !errors.Is(err, gcs.ErrNotFound) {
		return err, nil
	}
	run, err := p.o.Store.ReadAll(ctx, s.Bucket, message.RunObject(s.TransferID))
	switch {
	case errors.Is(err, gcs.ErrNotFound):
		return nil, fmt.Errorf("%w: transfer %s has no run", ErrShardGone, s.TransferID)
	case err != nil:
		return err, nil
	case string(run) != s.Run:
		return nil, fmt.Errorf("%w: run %s of transfer %s was superseded by run %s", ErrShardGone, s.Run, s.TransferID, run)
	}
	if _, err := p.o.Store.Attrs(ctx, s.Bucket, message.ShardDoneObject(s.TransferID, s.Run, s.Index)); err == nil {
		return nil, fmt.Errorf("%w: shard %d of transfer %s is done", ErrShardGone, s.Index, s.TransferID)
	} else if !errors.Is(err, gcs.ErrNotFound) {
		return err, nil
	}
	return nil, nil
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// adopt plans sp's files on this host: the transfer's plan with this
// host's roots, and each file checked against it (plan.Adopt).
func (p *Producer) adopt(sp *message.ShardPlan, roots []string) (*plan.Plan, []plan.File, census, error) {
	h := &sp.Header
	dest := "gs://" + h.Bucket
	if h.Prefix != "" {
		dest += "/" + h.Prefix
	}
	// The walk's limits (pool.go's prepare): no chunk is cut to fit a
	// Pub/Sub message; each must fit this agent's own.
	pl, err := plan.Open(plan.Spec{Sources: h.Sources, Destination: dest, Codec: codec.Codec(h.Codec), Level: h.Level, ChunkSize: h.ChunkSize, Roots: roots},
		plan.Limits{MaxChunks: p.o.MaxChunks})
	if err != nil {
		return nil, nil, census{}, fmt.Errorf("%w: shard %d of transfer %s: %v", message.ErrMalformed, sp.Index, h.TransferID, err)
	}
	files := make([]plan.File, len(sp.Files))
	c := census{maxChunk: 1, files: len(files)}
	for i, sf := range sp.Files {
		f, err := pl.Adopt(plan.SourceFile{Path: sf.Path, Rel: sf.Rel, Size: sf.Size, Mod: sf.Mod, Ino: sf.Ino, Ctime: sf.Ctime, Perm: sf.Perm,
			UID: sf.UID, GID: sf.GID, Owned: sf.Owned}, sf.Object, sf.ChunkSize, sf.Chunks, sf.Append)
		if err != nil {
			return nil, nil, c, &SourceError{&pathError{path: sf.Path, err: err}}
		}
		if most := plan.MessageChunkCap(pl.Codec, p.o.MessageMax); f.ChunkSize > most {
			return nil, nil, c, &SourceError{&pathError{path: sf.Path, err: fmt.Errorf("source %s: its chunks of %d bytes are more than this agent's messages hold (%d): raise FERRY_AGENT_MEMORY to %d bytes or more, or submit with a smaller --chunk-size",
				sf.Path, f.ChunkSize, most, 9*(f.ChunkSize+f.ChunkSize/8))}}
		}
		f.Staged, f.Replaces = sf.Staged, sf.Replaces
		files[i] = f
		c.bytes += f.Size
		c.maxChunk = max(c.maxChunk, min(f.ChunkSize, max(f.Size, 1)))
	}
	return pl, files, c, nil
}

// pathError is an error of the source file at path.
type pathError struct {
	path string
	err  error
}

func (e *pathError) Error() string { return e.err.Error() }
func (e *pathError) Unwrap() error { return e.err }
func (e *pathError) Path() string  { return e.path }
