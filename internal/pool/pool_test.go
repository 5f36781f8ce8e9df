package pool

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/benchrow"
	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/producer"
	"github.com/ferry-dev/ferry/internal/teststack"
	"github.com/ferry-dev/ferry/internal/testutil"
	"github.com/ferry-dev/ferry/internal/transfers"
)

func TestMain(m *testing.M) { os.Exit(teststack.MainWithGCS(m)) }

// chunkParts decodes the chunk messages rec holds into their parts.
func chunkParts(t *testing.T, rec *teststack.Recorder) []message.Part {
	t.Helper()
	var out []message.Part
	for _, m := range rec.Messages() {
		c, _, err := message.DecodeChunk(m.Data)
		testutil.OK(t, err)
		out = append(out, c.Parts...)
	}
	return out
}

// shardQueue is the shards topic of a test: the walker publishes, the
// test's agents take.
type shardQueue chan message.Shard

func (q shardQueue) Publish(_ context.Context, data []byte, _ map[string]string) error {
	var s message.Shard
	if err := message.Decode(data, &s); err != nil {
		return err
	}
	q <- s
	return nil
}

// storedChunks stands for an agent's own uploaders: every chunk message
// is taken as stored at once, and kept for the test.
type storedChunks struct{ teststack.Recorder }

func (*storedChunks) Wait(context.Context) error { return nil }

// poolPair is, on a real fake-gcs-server, a producer that walks pooled
// transfers into bucket and cuts them into shards of shardFiles files and
// shardBytes bytes (0: the default) onto q, and an agent to send them.
func poolPair(t *testing.T, bucket string, q shardQueue, shardFiles int, shardBytes int64) (*gcs.Store, *producer.Producer, *Agent) {
	t.Helper()
	store := teststack.Bucket(t, bucket)
	walker := producer.New(producer.Options{Store: store, Chunks: &teststack.Recorder{}, Events: &teststack.Recorder{}, SpoolDir: t.TempDir(),
		Pool: NewWalker(WalkerOptions{Store: store, Shards: q, Files: shardFiles, Bytes: shardBytes, Poll: 10 * time.Millisecond})})
	agent := NewAgent(AgentOptions{Store: store, Producer: producer.New(producer.Options{Store: store, Events: &teststack.Recorder{},
		Transport: config.TransportPubSub, Concurrency: 2, MemoryLimit: 64 << 20})})
	return store, walker, agent
}

// poolRun submits a pooled transfer of dir with shards of shardFiles files
// and shardBytes bytes, sent by two agents taking turns; it returns the
// sealed manifest, every shard plan the agents read, and the chunk
// messages they made.
func poolRun(t *testing.T, bucket, dir string, shardFiles int, shardBytes int64) (*message.Manifest, []message.ShardPlan, []message.Part) {
	t.Helper()
	q := make(shardQueue, 1024)
	store, walker, agent := poolPair(t, bucket, q, shardFiles, shardBytes)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	type result struct {
		m   *message.Manifest
		err error
	}
	done := make(chan result, 1)
	go func() {
		m, err := walker.Submit(ctx, producer.Request{Sources: []string{dir}, Destination: "gs://" + bucket + "/p", Codec: codec.Zstd, ChunkSize: 1 << 20, Pool: true})
		done <- result{m, err}
	}()
	chunks := &storedChunks{}
	var plans []message.ShardPlan
	for k := 0; ; k++ {
		select {
		case r := <-done:
			testutil.OK(t, r.err)
			return r.m, plans, chunkParts(t, &chunks.Recorder)
		case s := <-q:
			d, err := agent.Shard(ctx, s, ShardOptions{Agent: fmt.Sprintf("agent-%d", k%2), Roots: []string{dir}, Chunks: chunks})
			testutil.OK(t, err)
			if d.Index != s.Index {
				t.Fatalf("shard %d reported as %d", s.Index, d.Index)
			}
			b, err := store.ReadAll(ctx, bucket, message.ShardObject(s.TransferID, s.Run, s.Index))
			testutil.OK(t, err)
			var sp message.ShardPlan
			testutil.OK(t, message.Decode(b, &sp))
			plans = append(plans, sp)
		}
	}
}

// A file larger than a shard is split by chunk ranges over the pool, and
// the page the producer writes from the ranges is the one a producer
// would: every chunk once, the file's CRC32C its source's. Small files go
// in shards of at most FERRY_SHARD_FILES, each its own page, and the
// manifest names both agents with the bytes each sent.
func TestAPooledTransferSplitsALargeFileByChunkRanges(t *testing.T) {
	dir := t.TempDir()
	for i := range 5 {
		testutil.WriteCSV(t, filepath.Join(dir, fmt.Sprintf("s%d.csv", i)), int64(10_000+i), int64(i))
	}
	testutil.WriteCSV(t, filepath.Join(dir, "big.csv"), 5<<20-64<<10, 7) // 5 chunks of 1 MiB
	m, plans, msgs := poolRun(t, "pool-split", dir, 2, 1<<20)

	ranges := 0
	for _, sp := range plans {
		if sp.Range != nil {
			ranges++
			if sp.Range.Hi-sp.Range.Lo != 1 || !strings.HasSuffix(sp.Files[0].Rel, "/big.csv") {
				t.Fatalf("range shard %d: chunks %v of %s, want one 1 MiB chunk of big.csv", sp.Index, *sp.Range, sp.Files[0].Rel)
			}
		} else if len(sp.Files) > 2 {
			t.Fatalf("shard %d holds %d files, FERRY_SHARD_FILES is 2", sp.Index, len(sp.Files))
		}
	}
	if ranges != 5 || len(plans) != 8 {
		t.Fatalf("%d shards, %d of them ranges: want 3 of small files and 5 ranges of big.csv", len(plans), ranges)
	}
	seen := map[string]int{}
	for _, p := range msgs {
		seen[fmt.Sprintf("%s#%d", p.Path, p.Index)]++
	}
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("chunk %s sent %d times", k, n)
		}
	}
	if !m.Pool || !m.Sealed || len(m.Pages) != 4 || m.Totals.Files != 6 || m.Totals.Chunks != 10 {
		t.Fatalf("manifest: pool %v sealed %v, %d pages, %d files, %d chunks; want a sealed pool transfer of 4 pages, 6 files, 10 chunks",
			m.Pool, m.Sealed, len(m.Pages), m.Totals.Files, m.Totals.Chunks)
	}
	testutil.OK(t, m.CheckPages())
	store := teststack.Bucket(t, "pool-split")
	for k := range m.Pages {
		b, err := store.ReadAll(context.Background(), m.Bucket, message.ManifestPage(m.TransferID, m.Run, k))
		testutil.OK(t, err)
		var pg message.FilePage
		testutil.OK(t, message.Decode(b, &pg))
		for _, f := range pg.Files {
			raw, err := os.ReadFile(filepath.Join(filepath.Dir(dir), f.Path)) // a directory keeps its name
			testutil.OK(t, err)
			if f.RawCRC32C != crc32c.Checksum(raw) || f.Size != int64(len(raw)) {
				t.Fatalf("page %d: %s has CRC32C %08x over %d bytes; its source %08x over %d", k, f.Path, f.RawCRC32C, f.Size, crc32c.Checksum(raw), len(raw))
			}
			for j, c := range f.Chunks {
				if c.Object != message.ChunkObject(m.TransferID, m.Pages[k].First, j) && len(f.Chunks) > 1 {
					t.Fatalf("page %d: chunk %d of %s is %q", k, j, f.Path, c.Object)
				}
			}
		}
	}
	var bytes int64
	for _, a := range m.Agents {
		bytes += a.Bytes
	}
	if len(m.Agents) != 2 || bytes != m.Totals.Bytes {
		t.Fatalf("agents %+v: want both, together the transfer's %d bytes", m.Agents, m.Totals.Bytes)
	}
}

// An agent reads only under its own FERRY_SOURCE_ROOTS, whatever the shard
// says, and says which file it refused: the shard is another agent's.
func TestAnAgentRefusesAShardOutsideItsRoots(t *testing.T) {
	dir := t.TempDir()
	testutil.WriteCSV(t, filepath.Join(dir, "a.csv"), 1000, 1)
	store := teststack.Bucket(t, "pool-roots")
	q := make(shardQueue, 16)
	walker := producer.New(producer.Options{Store: store, Chunks: &teststack.Recorder{}, Events: &teststack.Recorder{}, SpoolDir: t.TempDir(),
		Pool: NewWalker(WalkerOptions{Store: store, Shards: q, Poll: time.Hour})})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		_, _ = walker.Submit(ctx, producer.Request{Sources: []string{dir}, Destination: "gs://pool-roots/p", ChunkSize: 1 << 20, Pool: true})
	}()
	s := <-q
	agent := NewAgent(AgentOptions{Store: store, Producer: producer.New(producer.Options{Store: store, Transport: config.TransportPubSub})})
	_, err := agent.Shard(ctx, s, ShardOptions{Agent: "x", Roots: []string{t.TempDir()}, Chunks: &storedChunks{}})
	var se *producer.SourceError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), filepath.Join(dir, "a.csv")) || !strings.Contains(err.Error(), "outside the source roots") {
		t.Fatalf("agent with other roots: %v; want a source error naming the file outside its roots", err)
	}
}

// failedChunks stands for uploaders that never store: an agent killed
// before its chunks were in.
type failedChunks struct{ teststack.Recorder }

func (*failedChunks) Wait(context.Context) error { return errors.New("uploaders gone") }

// producer status tells a pooled transfer's shards as an operator asks of
// a pool: how many are done, claimed (by which agent, since when) and
// waiting, and what each agent sent. An agent that claimed a shard and
// died holds it until another sends it; then the shard counts as done.
func TestStatusTellsShardsDoneClaimedAndWaitingByAgent(t *testing.T) {
	dir := t.TempDir()
	for i := range 4 {
		testutil.WriteCSV(t, filepath.Join(dir, fmt.Sprintf("s%d.csv", i)), int64(20_000+i), int64(i))
	}
	const bucket = "pool-status"
	q := make(shardQueue, 16)
	store, walker, agent := poolPair(t, bucket, q, 1, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	submitted := make(chan error, 1)
	var m *message.Manifest
	go func() {
		var err error
		m, err = walker.Submit(ctx, producer.Request{Sources: []string{dir}, Destination: "gs://" + bucket + "/p", Codec: codec.Zstd, ChunkSize: 1 << 20, Pool: true})
		submitted <- err
	}()
	shards := []message.Shard{<-q, <-q, <-q, <-q}
	send := func(s message.Shard, id string, c interface {
		publisher
		Wait(context.Context) error
	}) error {
		_, err := agent.Shard(ctx, s, ShardOptions{Agent: id, Roots: []string{dir}, Chunks: c})
		return err
	}
	testutil.OK(t, send(shards[0], "host-a", &storedChunks{}))
	if err := send(shards[1], "host-dead", &failedChunks{}); err == nil {
		t.Fatal("a shard whose chunks were never stored was reported sent")
	}

	// host-blind could not read a file of shard 2 (twice: one refusal).
	for range 2 {
		testutil.OK(t, agent.NoteRefusal(ctx, shards[2], "host-blind", errors.New("x.csv: outside the source roots")))
	}

	st, err := transfers.Status(ctx, store, bucket, shards[0].TransferID)
	testutil.OK(t, err)
	sh := st.Shards
	if st.State != transfers.StateRunning || sh == nil || sh.Total != 4 || sh.Done != 1 || sh.Claimed != 1 || sh.Waiting != 2 || len(sh.Agents) != 3 {
		t.Fatalf("status %s, shards %+v: want running, 4 shards: 1 done (host-a), 1 claimed (host-dead), 2 waiting", st.State, sh)
	}
	b, err := store.ReadAll(ctx, bucket, message.ShardObject(shards[0].TransferID, shards[0].Run, shards[0].Index))
	testutil.OK(t, err)
	var sp message.ShardPlan
	testutil.OK(t, message.Decode(b, &sp))
	size := sp.Files[0].Size
	a, blind, dead := sh.Agents[0], sh.Agents[1], sh.Agents[2]
	if a.Agent != "host-a" || a.Done != 1 || a.Bytes != size || a.Claimed != 0 ||
		dead.Agent != "host-dead" || dead.Done != 0 || dead.Claimed != 1 || dead.Since.IsZero() ||
		blind.Agent != "host-blind" || blind.Refused != 1 || blind.Done != 0 {
		t.Fatalf("agents %+v: want host-a with its shard's %d bytes, host-blind that could not read one, host-dead holding one shard", sh.Agents, size)
	}
	var out strings.Builder
	transfers.WriteStatus(&out, st)
	for _, want := range []string{"1 done, 1 claimed, 2 waiting", "agent host-a", benchrow.FormatBytes(float64(size)) + " sent, 1 shard", "agent host-dead", "holds 1, claimed since",
		"agent host-blind", "could not read 1 shard"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("status prints\n%s\nwithout %q", out.String(), want)
		}
	}

	for _, s := range shards[1:] {
		testutil.OK(t, send(s, "host-b", &storedChunks{}))
	}
	testutil.OK(t, <-submitted)
	st, err = transfers.Status(ctx, store, bucket, m.TransferID)
	testutil.OK(t, err)
	if sh := st.Shards; st.State != transfers.StateSealed || sh == nil || sh.Done != 4 || sh.Claimed != 0 || sh.Waiting != 0 {
		t.Fatalf("status %s, shards %+v: want sealed, all 4 done, none claimed (host-dead's shard went to host-b)", st.State, st.Shards)
	}
	if len(st.Agents) != 2 || st.Agents[0].Agent != "host-a" || st.Agents[1].Agent != "host-b" || st.Agents[0].Bytes+st.Agents[1].Bytes != m.Totals.Bytes {
		t.Fatalf("agents %+v: want host-a and host-b, together the transfer's %d bytes", st.Agents, m.Totals.Bytes)
	}
}

// gatedChunks are a late agent's uploaders: stored once released.
type gatedChunks struct {
	teststack.Recorder
	release chan struct{}
}

func (g *gatedChunks) Wait(ctx context.Context) error {
	select {
	case <-g.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// A late agent (it found the shard wanted, then its uploads stalled while
// another agent sent the shard) changes nothing the first one wrote: the
// page and the done object are written only where none is, so both keep
// the first agent's generation, and the late one's send still ends without
// an error (its chunks are the same bytes).
func TestALateAgentChangesNothingTheFirstWrote(t *testing.T) {
	dir := t.TempDir()
	testutil.WriteCSV(t, filepath.Join(dir, "s.csv"), 30_000, 1)
	const bucket = "pool-late"
	q := make(shardQueue, 4)
	store, walker, agent := poolPair(t, bucket, q, 1, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	submitted := make(chan error, 1)
	go func() {
		_, err := walker.Submit(ctx, producer.Request{Sources: []string{dir}, Destination: "gs://" + bucket + "/p", Codec: codec.Zstd, ChunkSize: 1 << 20, Pool: true})
		submitted <- err
	}()
	var s message.Shard
	select {
	case s = <-q:
	case err := <-submitted:
		t.Fatalf("the walk ended before it published a shard: %v", err)
	}
	late := &gatedChunks{release: make(chan struct{})}
	lateDone := make(chan error, 1)
	go func() {
		_, err := agent.Shard(ctx, s, ShardOptions{Agent: "host-late", Roots: []string{dir}, Chunks: late})
		lateDone <- err
	}()
	// host-late holds the shard (its claim is written) before host-a sends it.
	teststack.Until(t, time.Minute, "host-late's claim", func() bool {
		a, err := store.Attrs(ctx, bucket, message.ShardClaimObject(s.TransferID, s.Run, s.Index))
		return err == nil && a.Metadata[message.MetaAgent] == "host-late"
	})
	_, err := agent.Shard(ctx, s, ShardOptions{Agent: "host-a", Roots: []string{dir}, Chunks: &storedChunks{}})
	testutil.OK(t, err)
	page, err := store.Attrs(ctx, bucket, message.ManifestPage(s.TransferID, s.Run, 0))
	testutil.OK(t, err)
	done, err := store.Attrs(ctx, bucket, message.ShardDoneObject(s.TransferID, s.Run, s.Index))
	testutil.OK(t, err)
	close(late.release)
	testutil.OK(t, <-lateDone)
	for name, before := range map[string]gcs.Attrs{"page": page, "done object": done} {
		after, err := store.Attrs(ctx, bucket, before.Name)
		testutil.OK(t, err)
		if after.Generation != before.Generation {
			t.Errorf("the %s was written again by the late agent: generation %d, was %d", name, after.Generation, before.Generation)
		}
	}
	if a, _ := store.Attrs(ctx, bucket, done.Name); a.Metadata[message.MetaAgent] != "host-a" {
		t.Errorf("done object names %q, want host-a, which sent the shard first", a.Metadata[message.MetaAgent])
	}
	testutil.OK(t, <-submitted)
}
