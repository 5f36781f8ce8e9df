package pool

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/manifest"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/plan"
	"github.com/ferry-dev/ferry/internal/producer"
)

// AgentOptions configure an Agent.
type AgentOptions struct {
	Store store
	// Producer reads, compresses and hands on a shard's files
	// (producer.Send): one with the in-process transport.
	Producer *producer.Producer
	// Buckets, when set, are the only buckets a shard may name
	// (FERRY_BUCKETS).
	Buckets []string
	// MaxChunks is FERRY_MAX_CHUNKS, the walk's; MessageMax bounds the
	// agent's chunk messages, which every chunk must fit.
	MaxChunks  int
	MessageMax int64
}

// Agent is one host's side of the pool: it sends the shards it claims.
type Agent struct{ o AgentOptions }

// NewAgent returns an Agent.
func NewAgent(o AgentOptions) *Agent {
	if o.MessageMax <= 0 {
		o.MessageMax = 9 << 20
	}
	return &Agent{o: o}
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
func (g *Agent) Shard(ctx context.Context, s message.Shard, o ShardOptions) (*message.ShardDone, error) {
	if err := s.Check(); err != nil {
		return nil, err
	}
	if len(g.o.Buckets) > 0 && !slices.Contains(g.o.Buckets, s.Bucket) {
		return nil, fmt.Errorf("%w: shard %d of transfer %s: bucket %s is not one ferry may write to (FERRY_BUCKETS=%s)",
			message.ErrMalformed, s.Index, s.TransferID, s.Bucket, strings.Join(g.o.Buckets, ","))
	}
	if err := g.wanted(ctx, s); err != nil {
		return nil, err
	}
	name := message.ShardObject(s.TransferID, s.Run, s.Index)
	b, err := g.o.Store.ReadAll(ctx, s.Bucket, name)
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
	pl, files, err := g.adopt(&sp, o.Roots)
	if err != nil {
		return nil, err
	}
	if sp.Range != nil {
		files[0].Span = sp.Range
	}
	// What status shows: this agent sends the shard, since now.
	// It is written beside the send, not before it: it proves nothing,
	// and a stuck write must not hold the shard up.
	claim := message.ShardClaimObject(s.TransferID, s.Run, s.Index)
	claimed := make(chan error, 1)
	go func() {
		_, err := g.o.Store.PutJSON(ctx, s.Bucket, claim, []byte("{}"), false, map[string]string{message.MetaAgent: o.Agent})
		claimed <- err
	}()
	t0 := time.Now()
	pg := manifest.NewShardWriter(&m, sp.PageIndex, sp.Page.First, func(ctx context.Context, name string, v any) error {
		_, err := g.o.Store.PutSmall(ctx, m.Bucket, name, message.Encode(v), true, "application/json")
		if errors.Is(err, gcs.ErrPrecondition) {
			return nil // another agent sent the shard first: its page stands
		}
		if err != nil {
			return fmt.Errorf("shard %d: write manifest page gs://%s/%s: %w", sp.Index, m.Bucket, name, err)
		}
		return nil
	})
	// The shard's one page is written by Finish, once its chunks are
	// stored: an agent killed before leaves no page, and the shard is
	// sent again.
	err = g.o.Producer.Send(ctx, pl, &m, files, pg, o.Chunks)
	if err == nil {
		err = o.Chunks.Wait(ctx)
	}
	if err != nil {
		// The claim still says who held the shard last (status reads it).
		// A write that hangs is bounded by the agent's
		// FERRY_AGENT_SHARD_TIMEOUT.
		if cerr := <-claimed; cerr != nil {
			err = fmt.Errorf("%w (nor was its claim written: %v)", err, cerr)
		}
		var se *producer.SourceError
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
	if err := <-claimed; err != nil {
		return nil, fmt.Errorf("shard %d of transfer %s: writing its claim gs://%s/%s: %w", s.Index, s.TransferID, s.Bucket, claim, err)
	}
	return d, g.writeDone(ctx, s, d)
}

// levelsOf is u, or nil when empty.
func levelsOf(u []message.LevelUse) []message.LevelUse {
	if len(u) == 0 {
		return nil
	}
	return u
}

// NoteRefusal records that agent could not read a file of shard s
// (ShardRefusalObject), so that the shard is published again for the
// agents that have not tried it (Untried).
func (g *Agent) NoteRefusal(ctx context.Context, s message.Shard, agent string, cause error) error {
	if len(g.o.Buckets) > 0 && !slices.Contains(g.o.Buckets, s.Bucket) {
		return nil // nothing is written where ferry may not write
	}
	name := message.ShardRefusalObject(s.TransferID, s.Run, s.Index, agent)
	md := map[string]string{message.MetaAgent: agent, message.MetaError: message.Truncate(cause.Error(), 512)}
	if _, err := g.o.Store.PutJSON(ctx, s.Bucket, name, []byte("{}"), false, md); err != nil {
		return fmt.Errorf("shard %d of transfer %s: writing its refusal gs://%s/%s: %w", s.Index, s.TransferID, s.Bucket, name, err)
	}
	return nil
}

// Untried returns the agents other than self that answer (their heartbeat
// in s's bucket is younger than message.HeartbeatStale) and have not
// refused shard s: those that might read what self cannot.
func (g *Agent) Untried(ctx context.Context, s message.Shard, self string, now time.Time) ([]string, error) {
	refused := map[string]bool{self: true}
	err := g.o.Store.List(ctx, s.Bucket, message.ShardRefusalPrefix(s.TransferID, s.Run, s.Index), func(a gcs.Attrs) error {
		refused[a.Metadata[message.MetaAgent]] = true
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("shard %d of transfer %s: listing its refusals: %w", s.Index, s.TransferID, err)
	}
	var out []string
	err = g.o.Store.List(ctx, s.Bucket, message.AgentRoot, func(a gcs.Attrs) error {
		agent := strings.TrimPrefix(a.Name, message.AgentRoot)
		if !refused[agent] && message.AgentID.MatchString(agent) && now.Sub(a.Updated) <= message.HeartbeatStale {
			out = append(out, agent)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("shard %d of transfer %s: listing the agents: %w", s.Index, s.TransferID, err)
	}
	return out, nil
}

// RefuseShard records that no agent can send shard s, naming the file and
// the agent: the transfer's producer fails the transfer with it.
func (g *Agent) RefuseShard(ctx context.Context, s message.Shard, agent string, cause error) error {
	if len(g.o.Buckets) > 0 && !slices.Contains(g.o.Buckets, s.Bucket) {
		return nil // nothing is written where ferry may not write
	}
	path := ""
	var pe interface{ Path() string }
	if errors.As(cause, &pe) {
		path = pe.Path()
	}
	d := &message.ShardDone{V: message.Version, Index: s.Index, Agent: agent, Error: message.Truncate(cause.Error(), 2048), Path: path}
	return g.writeDone(ctx, s, d)
}

func (g *Agent) writeDone(ctx context.Context, s message.Shard, d *message.ShardDone) error {
	name := message.ShardDoneObject(s.TransferID, s.Run, s.Index)
	md := map[string]string{message.MetaAgent: d.Agent, message.MetaRawSize: strconv.FormatInt(d.Totals.Bytes, 10)}
	_, err := g.o.Store.PutJSON(ctx, s.Bucket, name, message.Encode(d), true, md)
	if err != nil && !errors.Is(err, gcs.ErrPrecondition) {
		return fmt.Errorf("shard %d of transfer %s: writing gs://%s/%s: %w", s.Index, s.TransferID, s.Bucket, name, err)
	}
	return nil
}

// wanted returns nil for a shard still to send, an ErrShardGone (wrapped)
// for one whose transfer ended, whose run is no longer the transfer's, or
// that is done, and any other error when GCS could not say.
func (g *Agent) wanted(ctx context.Context, s message.Shard) error {
	if _, err := g.o.Store.Attrs(ctx, s.Bucket, message.DoneMarker(s.TransferID)); err == nil {
		return fmt.Errorf("%w: transfer %s ended", ErrShardGone, s.TransferID)
	} else if !errors.Is(err, gcs.ErrNotFound) {
		return err
	}
	run, err := g.o.Store.ReadAll(ctx, s.Bucket, message.RunObject(s.TransferID))
	switch {
	case errors.Is(err, gcs.ErrNotFound):
		return fmt.Errorf("%w: transfer %s has no run", ErrShardGone, s.TransferID)
	case err != nil:
		return err
	case string(run) != s.Run:
		return fmt.Errorf("%w: run %s of transfer %s was superseded by run %s", ErrShardGone, s.Run, s.TransferID, run)
	}
	if _, err := g.o.Store.Attrs(ctx, s.Bucket, message.ShardDoneObject(s.TransferID, s.Run, s.Index)); err == nil {
		return fmt.Errorf("%w: shard %d of transfer %s is done", ErrShardGone, s.Index, s.TransferID)
	} else if !errors.Is(err, gcs.ErrNotFound) {
		return err
	}
	return nil
}

// adopt plans sp's files on this host: the transfer's plan with this
// host's roots, and each file checked against it (plan.Adopt).
func (g *Agent) adopt(sp *message.ShardPlan, roots []string) (*plan.Plan, []plan.File, error) {
	h := &sp.Header
	dest := "gs://" + h.Bucket
	if h.Prefix != "" {
		dest += "/" + h.Prefix
	}
	// The walk's limits (pool.go's prepare): no chunk is cut to fit a
	// Pub/Sub message; each must fit this agent's own.
	pl, err := plan.Open(plan.Spec{Sources: h.Sources, Destination: dest, Codec: codec.Codec(h.Codec), Level: h.Level, ChunkSize: h.ChunkSize, Roots: roots},
		plan.Limits{MaxChunks: g.o.MaxChunks})
	if err != nil {
		return nil, nil, fmt.Errorf("%w: shard %d of transfer %s: %v", message.ErrMalformed, sp.Index, h.TransferID, err)
	}
	files := make([]plan.File, len(sp.Files))
	for i, sf := range sp.Files {
		f, err := pl.Adopt(plan.SourceFile{Path: sf.Path, Rel: sf.Rel, Size: sf.Size, Mod: sf.Mod, Ino: sf.Ino, Ctime: sf.Ctime, Perm: sf.Perm,
			UID: sf.UID, GID: sf.GID, Owned: sf.Owned}, sf.Object, sf.ChunkSize, sf.Chunks, sf.Append)
		if err != nil {
			return nil, nil, &producer.SourceError{Err: &pathError{path: sf.Path, err: err}}
		}
		if most := plan.MessageChunkCap(pl.Codec, g.o.MessageMax); f.ChunkSize > most {
			return nil, nil, &producer.SourceError{Err: &pathError{path: sf.Path, err: fmt.Errorf("source %s: its chunks of %d bytes are more than this agent's messages hold (%d): raise FERRY_AGENT_MEMORY to %d bytes or more, or submit with a smaller --chunk-size",
				sf.Path, f.ChunkSize, most, 9*(f.ChunkSize+f.ChunkSize/8))}}
		}
		f.Staged, f.Replaces = sf.Staged, sf.Replaces
		files[i] = f
	}
	return pl, files, nil
}

// pathError is an error of the source file at path.
type pathError struct {
	path string
	err  error
}

func (e *pathError) Error() string { return e.err.Error() }
func (e *pathError) Unwrap() error { return e.err }
func (e *pathError) Path() string  { return e.path }
