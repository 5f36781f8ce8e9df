package producer

import (
	"context"
	"io"
	"sync"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"

	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/plan"
)

// run reads, compresses, spools and publishes every chunk of pl, recording
// each in m. All of its goroutines run in one errgroup: when run returns,
// every stage has stopped.
func (p *Producer) run(ctx context.Context, pl *plan.Plan, m *message.Manifest, stdin io.Reader) error {
	// Buffer budget: raw buffers circulate between the reader and the
	// compress goroutines, which also hold their job's compressed frames
	// (about a third of the raw size for CSV, at worst as much). The CPU
	// work is spread over one frame encoder per core, so compress
	// goroutines need only be enough to keep those encoders fed: one per
	// core plus one, and one buffer being read. Fresh buffers cost a page
	// fault and a clear per page, so hold no more than that.
	// With FERRY_TRANSPORT=pubsub, messages waiting for the publishers hold
	// whole payloads: a quarter of the budget (at least two messages)
	// bounds them.
	bufSize := pl.MaxChunk()
	if p.o.BundleMax > 0 {
		bufSize = max(bufSize, p.o.BundleMax)
	}
	msgBudget := p.msgBudget()
	slots := max(2, int((p.o.MemoryLimit-msgBudget)/(bufSize+bufSize/2)))
	workers := max(1, min(slots-1, p.o.Concurrency+1))
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
	encs, err := newFrameEncoders(p.o.Concurrency, pl.Codec, pl.Level)
	if err != nil {
		return err
	}
	mem := semaphore.NewWeighted(msgBudget)

	rec := &recorder{m: m}
	g, ctx := errgroup.WithContext(ctx)
	jobs := make(chan job)
	frames := make(chan frameJob)
	out := make(chan outMsg, p.o.Publishers)

	rd := &reader{pl: pl, pool: pool, bufSize: bufSize, bundler: newBundler(p, pl, m.TransferID, m.Overwrite), read: &p.readBytes,
		made: &p.bufsMade, stdin: stdin, limits: p.limits()}
	g.Go(func() error { return rd.run(ctx, jobs) })

	for _, enc := range encs {
		g.Go(func() error { runFrameEncoder(enc, pl.Codec, frames); return nil })
	}
	var compressors sync.WaitGroup
	for range workers {
		compressors.Add(1)
		g.Go(func() error {
			defer compressors.Done()
			return p.compressStage(ctx, pl, rec, jobs, frames, pool, out, mem, msgBudget)
		})
	}
	g.Go(func() error {
		// Once no compressor is left, nothing sends frames or messages.
		compressors.Wait()
		close(frames)
		close(out)
		return nil
	})
	for range p.o.Publishers {
		g.Go(func() error { return p.publishStage(ctx, out, mem) })
	}
	return g.Wait()
}

// compressStage is one compress goroutine: it turns jobs into chunk messages
// for the publishers until jobs is closed.
func (p *Producer) compressStage(ctx context.Context, pl *plan.Plan, rec *recorder, jobs <-chan job,
	frames chan<- frameJob, pool chan<- []byte, out chan<- outMsg, mem *semaphore.Weighted, memMax int64) error {
	m := rec.m
	c := &compressor{enc: newChunkEncoder(ctx, frames), pl: pl, tid: m.TransferID}
	k := &packer{p: p, tid: m.TransferID, run: m.Run, bucket: m.Bucket, codec: m.Codec, overwrite: m.Overwrite}
	for j := range jobs {
		parts, err := c.compress(j)
		pool <- j.buf[:0] // the parts do not refer to the raw bytes
		if err != nil {
			return err
		}
		for _, pc := range j.pieces {
			p.doneBytes.Add(int64(len(pc.raw)))
		}
		msg, err := k.pack(ctx, parts)
		if err != nil {
			return err
		}
		for i := range parts {
			rec.record(&parts[i])
		}
		msg.weight = min(int64(len(msg.data)), memMax)
		if err := mem.Acquire(ctx, msg.weight); err != nil {
			return err
		}
		select {
		case out <- msg:
		case <-ctx.Done():
			mem.Release(msg.weight)
			return ctx.Err()
		}
	}
	return nil
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
