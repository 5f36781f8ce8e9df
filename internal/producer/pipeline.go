package producer

import (
	"context"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/gctune"
	"github.com/ferry-dev/ferry/internal/level"
	"github.com/ferry-dev/ferry/internal/manifest"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/plan"
	"github.com/ferry-dev/ferry/internal/table"
)

// planned is a file the walk planned, with its index in the manifest.
type planned struct {
	i int
	f *plan.File
}

// run walks pl's sources (again: prepare walked them once to check them)
// and reads, compresses, spools and publishes every chunk of the files it
// finds, recording each in the manifest's pages as it goes: the walk, the
// skip check and the pipeline run together, so the first chunks leave
// before the walk ends and nothing holds the whole list of files. All of
// its goroutines run in one errgroup: when run returns, every stage has
// stopped.
func (p *Producer) run(ctx context.Context, pl *plan.Plan, m *message.Manifest, req Request, c census, pg *manifest.Writer) error {
	return p.pipeline(ctx, pl, m, req, c, pg, source{
		feed:   func(ctx context.Context, files chan<- planned) error { return p.walk(ctx, pl, req, m, pg, files) },
		chunks: p.o.Chunks,
	})
}

// source is where a pipeline's files come from (feed, which closes files
// when it returns) and where its chunk messages go.
type source struct {
	feed   func(ctx context.Context, files chan<- planned) error
	chunks publisher
}

// pipeline reads, compresses and publishes the files src feeds it,
// recording each chunk in pg.
func (p *Producer) pipeline(ctx context.Context, pl *plan.Plan, m *message.Manifest, req Request, c census, pg *manifest.Writer, src source) error {
	// Buffer budget: raw buffers circulate between the reader and the
	// compress goroutines, which also hold their job's compressed frames
	// (about a third of the raw size for CSV, at worst as much). The CPU
	// work is spread over one frame encoder per core, so compress
	// goroutines need only be enough to keep those encoders fed: one per
	// core plus one, and one buffer being read. Fresh buffers cost a page
	// fault and a clear per page, so hold no more than that.
	// With FERRY_TRANSPORT=pubsub, messages waiting for the publishers hold
	// whole payloads: a quarter of the budget (at least two messages)
	// bounds them. A conversion to Parquet needs a whole buffer more per
	// goroutine instead of half.
	bufSize := c.maxChunk
	if p.o.BundleMax > 0 {
		bufSize = max(bufSize, p.o.BundleMax)
	}
	msgBudget := p.msgBudget()
	perSlot := bufSize + bufSize/2
	if pl.Converts() {
		defer gctune.Converting.Start()()
		// Converting a part holds its Parquet file, its row group's
		// pages and a batch of column builders: about a buffer more
		// (with half, peak RSS went well past the budget).
		perSlot = 2 * bufSize
	}
	slots := max(2, int((p.o.MemoryLimit-msgBudget)/perSlot))
	workers := max(1, min(slots-1, p.o.Concurrency+1))
	if c.columns > 0 {
		// Each compressor keeps a converter, whose column writers
		// grow with the table's width: as many as fit in the budget
		// beside two buffers (checkConverters refused a table whose
		// one converter does not).
		workers = max(1, min(workers, int((p.o.MemoryLimit-2*bufSize)/table.ConverterMemory(c.columns))))
	}
	pool := make(chan []byte, workers+1)
	for range cap(pool) {
		pool <- p.bufs.get(bufSize) // nil: made when first needed
	}
	// What the transfer leaves in the pool serves the next one: fresh
	// memory costs a page fault and a clear per page, a tenth of the
	// producer's time on a 100 MB file.
	defer func() {
		for range cap(pool) {
			select {
			case b := <-pool:
				p.bufs.put(b)
			default:
				return
			}
		}
	}()
	ad := p.adapter(pl, bufSize)
	encs := make([]frameEncoders, p.o.Concurrency)
	for i := range encs {
		var err error
		if encs[i], err = newFrameEncoders(pl.Codec, ad.Levels()); err != nil {
			return err
		}
	}
	ob := &outbox{mem: semaphore.NewWeighted(msgBudget), max: msgBudget}

	g, ctx := errgroup.WithContext(ctx)
	files := make(chan planned, walkAhead)
	jobs := make(chan job)
	frames := make(chan frameJob)
	out := make(chan outMsg, p.o.Publishers)

	g.Go(func() error { return src.feed(ctx, files) })
	rd := &reader{pool: pool, bufSize: bufSize, bundler: newBundler(p, pl, m.TransferID, m.Overwrite), read: &p.readBytes,
		files: &p.filesRead, made: &p.bufsMade, stdin: req.Stdin, limits: p.limits()}
	g.Go(func() error { return rd.run(ctx, files, jobs) })

	for _, encs := range encs {
		g.Go(func() error { runFrameEncoder(pl.Codec, encs, frames); return nil })
	}
	var compressors sync.WaitGroup
	// rejected counts the records the transfer's conversions left out
	// (--bad-rows is the transfer's, not a part's).
	var rejected atomic.Int64
	for range workers {
		compressors.Add(1)
		g.Go(func() error {
			defer compressors.Done()
			return p.compressStage(ctx, pl, m, pg, &rejected, jobs, frames, pool, out, ob, ad)
		})
	}
	g.Go(func() error {
		// Once no compressor is left, nothing sends frames, messages or
		// pages.
		compressors.Wait()
		close(frames)
		close(out)
		pg.Close()
		return nil
	})
	g.Go(func() error { return pg.Run(ctx) })
	for range p.o.Publishers {
		g.Go(func() error { return p.publishStage(ctx, src.chunks, out, ob) })
	}
	err := g.Wait()
	m.Levels = levelUses(ad)
	return err
}

// voteMin is the smallest job that moves an adaptive level (level.Observation.Small).
const voteMin = 1 << 20

// outbox bounds, and counts, the bytes of the chunk messages waiting for
// the publishers.
type outbox struct {
	mem  *semaphore.Weighted
	max  int64
	held atomic.Int64
}

// adapter chooses the level of each job of pl: zstd with no level set
// adapts (package level), starting at level.Start; any other is fixed. A
// backlog of less than two chunk buffers is taken for chunks in flight.
// (Half a buffer let two workers on the producer's own 2 cores, whose
// backlog grows when they are short of CPU, raise the level on loopback:
// make run went from 2.1 s to 3.3 s. A 200 MB file through a slow link
// then stays at level 1; a 1 GB one adapts: docs/performance.md.)
func (p *Producer) adapter(pl *plan.Plan, bufSize int64) *level.Adapter {
	if pl.Codec == codec.Zstd && pl.Level == 0 {
		return level.New(level.Steps, level.Start, 2*bufSize)
	}
	return level.Fixed(pl.Level)
}

// backlog is what this producer has handed on and the link has not taken
// yet, in wire bytes: messages waiting for the publishers and, with the
// spool transport, spool files the workers have not removed.
func (p *Producer) backlog(ob *outbox) int64 {
	b := ob.held.Load()
	if !p.pubsub() {
		b += p.spool.Backlog()
	}
	return b
}

// levelUses are ad's levels as the manifest records them.
func levelUses(ad *level.Adapter) []message.LevelUse {
	var u []message.LevelUse
	for _, x := range ad.Uses() {
		u = append(u, message.LevelUse{Level: x.Level, Chunks: x.Chunks, Bytes: x.Bytes})
	}
	return u
}

// walkAhead is how many planned files the walk may be ahead of the reader.
const walkAhead = 256

// walk plans the files of pl in object order, leaves out what the skip
// check skips, adds the rest to the manifest and hands them to the reader;
// it closes files when it returns.
func (p *Producer) walk(ctx context.Context, pl *plan.Plan, req Request, m *message.Manifest, pg pageAdder, files chan<- planned) error {
	defer close(files)
	tid, staged := m.TransferID, m.Staged
	sk := p.newSkipper(ctx, pl, req, tid)
	defer sk.close()
	var skipErr, cbErr error // what the callbacks met: not the walk's own
	walkSkips := 0
	var g partGroup
	err := pl.Walk(func(f plan.File) error {
		f.Staged = staged
		if sk == nil {
			cbErr = p.planFile(ctx, pg, f, "", files)
			return cbErr
		}
		reason, err := sk.check(ctx, &f)
		if err != nil {
			cbErr = err
			return err
		}
		fs, reasons := g.add(f, reason)
		for k, f := range fs {
			if cbErr = p.planFile(ctx, pg, f, reasons[k], files); cbErr != nil {
				return cbErr
			}
		}
		return nil
	}, func(k plan.Skipped) {
		if walkSkips++; walkSkips == 1 {
			p.o.Log.Warn("skipped files the walk cannot send (a link, an unreadable or an empty export: the reason says); the transfer's listing names each", "transfer_id", tid,
				"first", message.Truncate(k.Path, 256), "reason", k.Reason)
		}
		if skipErr == nil {
			skipErr = pg.Skip(ctx, message.Skipped{Path: k.Rel, Object: k.Object, Reason: k.Reason})
		}
	})
	switch {
	case cbErr != nil:
		return cbErr
	case err != nil:
		// What the walk refuses (a name, a file it cannot read) is the
		// source's fault, not the transport's.
		return &SourceError{err}
	}
	return skipErr
}

// pageAdder is what the walk adds the files it plans to, and notes the
// files it skips in: the manifest's writer, or a pool's shards.
type pageAdder interface {
	Add(ctx context.Context, f message.File) (int, error)
	Skip(ctx context.Context, s message.Skipped) error
}

// planFile leaves f out when the skip check gave a reason, or adds it to
// the manifest and hands it to the reader.
func (p *Producer) planFile(ctx context.Context, pg pageAdder, f plan.File, reason string, files chan<- planned) error {
	if reason != "" {
		p.planned.Add(-f.Size) // counted by the first walk
		p.plannedFiles.Add(-1)
		return pg.Skip(ctx, message.Skipped{Path: f.Rel, Object: f.Object, Reason: reason})
	}
	i, err := pg.Add(ctx, fileEntry(&f))
	if err != nil {
		return err
	}
	if f.Stream != nil {
		p.streams.Add(1)
	}
	if p.o.planned != nil {
		p.o.planned(&f)
	}
	select {
	case files <- planned{i, &f}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// compressStage is one compress goroutine: it turns jobs into chunk messages
// for the publishers until jobs is closed.
func (p *Producer) compressStage(ctx context.Context, pl *plan.Plan, m *message.Manifest, pg *manifest.Writer, rejected *atomic.Int64, jobs <-chan job,
	frames chan<- frameJob, pool chan<- []byte, out chan<- outMsg, ob *outbox, ad *level.Adapter) error {
	c := &compressor{enc: newChunkEncoder(ctx, frames), pl: pl, tid: m.TransferID, rejected: rejected}
	k := &packer{p: p, tid: m.TransferID, run: m.Run, bucket: m.Bucket, codec: m.Codec, overwrite: m.Overwrite, key: m.ChunkKey}
	for j := range jobs {
		lvl := ad.Level()
		parts, err := c.compress(j, lvl)
		pool <- j.buf[:0] // the parts do not refer to the raw bytes
		if err != nil {
			return err
		}
		var raw, wire int64
		for _, pc := range j.pieces {
			raw += int64(len(pc.raw))
		}
		p.doneBytes.Add(raw)
		for i := range parts {
			wire += parts[i].part.WireSize
		}
		msg, err := k.pack(ctx, parts)
		if err != nil {
			return err
		}
		for i := range parts {
			if err := record(ctx, pg, &parts[i]); err != nil {
				return err
			}
		}
		blocked, err := handOn(ctx, msg, out, ob)
		if err != nil {
			return err
		}
		if j.pieces[0].f.Part == nil { // a Parquet part has no level
			ad.Observe(level.Observation{Level: lvl, Chunks: len(j.pieces), Raw: raw, Wire: wire, Backlog: p.backlog(ob),
				Blocked: blocked || msg.waited, Small: len(j.pieces) > 1 || raw < voteMin})
		}
	}
	return nil
}

// handOn queues msg for the publishers within the outbox's bound; blocked
// says whether it had to wait for room.
func handOn(ctx context.Context, msg outMsg, out chan<- outMsg, ob *outbox) (blocked bool, err error) {
	msg.weight = min(int64(len(msg.data)), ob.max)
	if !ob.mem.TryAcquire(msg.weight) {
		blocked = true
		if err := ob.mem.Acquire(ctx, msg.weight); err != nil {
			return blocked, err
		}
	}
	ob.held.Add(msg.weight)
	select {
	case out <- msg:
		return blocked, nil
	default:
	}
	select {
	case out <- msg:
		return true, nil
	case <-ctx.Done():
		ob.held.Add(-msg.weight)
		ob.mem.Release(msg.weight)
		return true, ctx.Err()
	}
}

// msgBudget is the part of FERRY_PRODUCER_MEMORY that chunk messages
// waiting for the publishers may hold: with the spool transport they are
// small (headers, and inline payloads up to FERRY_INLINE_MAX); with
// FERRY_TRANSPORT=pubsub they hold whole payloads, and a quarter of the
// budget (at least two messages) bounds them.
func (p *Producer) msgBudget() int64 {
	if p.pubsub() {
		return max(2*p.o.MessageMax, p.o.MemoryLimit/4)
	}
	return 4 * p.o.MessageMax
}

// streamMax is the largest chunk of a stream (standard input) whose buffers
// stay within FERRY_PRODUCER_MEMORY: run gives the reader and the compress
// goroutines at least two buffers of the largest chunk, each with room for
// its compressed frames (half as much again), beside the messages' budget.
// A whole number of MiB, at least 1 MiB.
func (p *Producer) streamMax() int64 {
	const mib = 1 << 20
	return max(mib, (p.o.MemoryLimit-p.msgBudget())/3/mib*mib)
}

// bufCache keeps the raw buffers of finished transfers for the next ones,
// at most max bytes of them. It is safe for concurrent use.
type bufCache struct {
	mu    sync.Mutex
	bufs  [][]byte
	bytes int64
	max   int64
}

// get returns a kept buffer of at least size bytes' capacity, or nil.
func (c *bufCache) get(size int64) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, b := range c.bufs {
		if int64(cap(b)) >= size {
			c.bufs = append(c.bufs[:i], c.bufs[i+1:]...)
			c.bytes -= int64(cap(b))
			return b[:0]
		}
	}
	return nil
}

// put keeps b if there is room for it.
func (c *bufCache) put(b []byte) {
	if b == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bytes+int64(cap(b)) <= c.max {
		c.bufs = append(c.bufs, b)
		c.bytes += int64(cap(b))
	}
}
