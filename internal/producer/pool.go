package producer

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"golang.org/x/sync/errgroup"

	"github.com/ferry-dev/ferry/internal/manifest"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/plan"
)

// A pooled transfer (Request.Pool) is walked here and sent by the pool's
// agents (ferry agent): the walk's files go to Options.Pool (package
// pool), which cuts them into shards and waits for the agents; each agent
// sends its shards' files with Send. Once every shard is done this
// producer seals the manifest as it seals its own. No chunk byte passes
// through this producer or Pub/Sub.

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

// Pooler shards pooled transfers (package pool): Run takes the files the
// walk plans, in manifest order, until files is closed, publishes their
// shards, and returns once the pool's agents sent every one, with the
// pages they wrote and what those sum to. progress is told of each shard
// done.
type Pooler interface {
	Run(ctx context.Context, m *message.Manifest, files <-chan PoolFile, progress func(files int, bytes int64)) (*PoolResult, error)
}

// PoolFile is one file a pooled transfer's walk planned: its index in the
// manifest, the file, and its manifest entry.
type PoolFile struct {
	Index int
	File  *plan.File
	Entry message.File
}

// PoolResult is what a pooled transfer's agents sent: the manifest's
// pages, their totals, the levels used and each agent's bytes.
type PoolResult struct {
	Pages  []message.Page
	Totals message.Totals
	Levels []message.LevelUse
	Agents []message.AgentBytes
}

// runPool walks pl and hands its files to the pool; it leaves the manifest
// to seal.
func (p *Producer) runPool(ctx context.Context, pl *plan.Plan, m *message.Manifest, req Request, pg *manifest.Writer) error {
	files := make(chan planned, walkAhead)
	out := make(chan PoolFile, walkAhead)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		defer pg.Close()
		return p.walk(gctx, pl, req, m, &shardPages{w: pg}, files)
	})
	g.Go(func() error {
		defer close(out)
		for pf := range files {
			select {
			case out <- PoolFile{Index: pf.i, File: pf.f, Entry: fileEntry(pf.f)}:
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		return nil
	})
	var res *PoolResult
	g.Go(func() (err error) {
		res, err = p.o.Pool.Run(gctx, m, out, func(files int, bytes int64) {
			p.readBytes.Add(bytes)
			p.doneBytes.Add(bytes)
			p.filesRead.Add(int64(files))
		})
		return err
	})
	g.Go(func() error { return pg.Run(gctx) })
	if err := g.Wait(); err != nil {
		return err
	}
	pg.Pooled(res.Pages, res.Totals)
	m.Levels, m.Agents = res.Levels, res.Agents
	return nil
}

// Send reads, compresses and hands to chunks the files of one shard of a
// pooled transfer (package pool), in the order given, recording each
// chunk in pg, the shard's page, whose first file is first. A file with a
// Span sends only those chunks; pg marks its others as another shard's.
// It returns once every chunk is handed on.
func (p *Producer) Send(ctx context.Context, pl *plan.Plan, m *message.Manifest, files []plan.File, pg *manifest.Writer, chunks publisher) error {
	c := census{maxChunk: 1, files: len(files)}
	for _, f := range files {
		c.bytes += f.Size
		c.maxChunk = max(c.maxChunk, min(f.ChunkSize, max(f.Size, 1)))
	}
	feed := func(ctx context.Context, out chan<- planned) error {
		defer close(out)
		for i := range files {
			if files[i].Span != nil {
				if err := p.planSpan(ctx, pg, &files[i], out); err != nil {
					return err
				}
				continue
			}
			if err := p.planFile(ctx, pg, files[i], "", out); err != nil {
				return err
			}
		}
		return nil
	}
	return p.pipeline(ctx, pl, m, Request{}, c, pg, source{feed: feed, chunks: chunks})
}

// planSpan adds f, a range shard's file, to pg with the chunks outside its
// span marked as another shard's, and hands it to the reader.
func (p *Producer) planSpan(ctx context.Context, pg *manifest.Writer, f *plan.File, out chan<- planned) error {
	e := fileEntry(f)
	for j := range e.Chunks {
		if j < f.Span.Lo || j >= f.Span.Hi {
			e.Chunks[j].Object = OtherShard
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

// OtherShard marks, in a range shard's page writer, a chunk another shard
// sends.
const OtherShard = "(another shard's)"
