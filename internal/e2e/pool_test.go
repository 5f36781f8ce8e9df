package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/doctor"
	"github.com/ferry-dev/ferry/internal/faultproxy"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/pool"
	"github.com/ferry-dev/ferry/internal/producer"
	"github.com/ferry-dev/ferry/internal/queue"
	"github.com/ferry-dev/ferry/internal/teststack"
	"github.com/ferry-dev/ferry/internal/testutil"
	"github.com/ferry-dev/ferry/internal/transfers"
)

// poolTree writes files small files and one of big bytes under a new
// directory of the test's, the share the pool's agents read.
func poolTree(t *testing.T, files int, big int64) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "share")
	for i := range files {
		p := filepath.Join(dir, fmt.Sprintf("d%d", i%4), fmt.Sprintf("f%03d.csv", i))
		testutil.OK(t, os.MkdirAll(filepath.Dir(p), 0o755))
		testutil.WriteCSV(t, p, int64(2_000+i*97), int64(i))
	}
	testutil.WriteCSV(t, filepath.Join(dir, "big.csv"), big, 99)
	return dir
}

// poolProducer is a producer that walks pooled transfers on s, with
// shards of at most shardFiles files and 1 MiB: a larger file is split
// into range shards of one 1 MiB chunk each.
func (s *stack) poolProducer(shardFiles int) *producer.Producer {
	return producer.New(producer.Options{Store: s.store, Chunks: s.q.Publisher(s.ps.ChunksTopic), Events: s.q.Publisher(s.ps.ControlTopic),
		Pool: pool.NewWalker(pool.WalkerOptions{Store: s.store, Shards: s.q.Publisher(s.ps.ShardsTopic), Files: shardFiles, Bytes: 1 << 20,
			Poll: 100 * time.Millisecond}),
		Concurrency: 2, MemoryLimit: 64 << 20})
}

// agentEnv is the environment of agent id reading the share at root.
func (s *stack) agentEnv(id, root string, extra ...string) []string {
	return s.env(append([]string{"FERRY_AGENT_ID=" + id, "FERRY_SOURCE_ROOTS=" + root, "FERRY_AGENT_MEMORY=256MiB"}, extra...)...)
}

// A pooled transfer is sent by the agents, each reading the share itself,
// its 3 MB file split by chunk ranges over them too: three agents, one killed with SIGKILL while it holds a shard (its
// uploads held up by a proxy), and the transfer still ends ok, every
// object identical, nothing left in staging, and the row names at least
// two agents. The producer read no file: no chunk message crossed
// Pub/Sub.
func TestAPooledTransferSurvivesAnAgentKilledMidShard(t *testing.T) {
	s := newStack(t, stackOptions{})
	share := poolTree(t, 60, 3_000_000)
	proxy := slowProxy(t, faultproxy.Uploads, time.Minute)
	a := s.start("agent-a", "ferry", s.agentEnv("a", share, "STORAGE_EMULATOR_HOST="+hostOf(proxy)), "agent")

	req := producer.Request{Sources: []string{share}, Destination: "gs://" + s.bucket + "/pool", Codec: codec.Zstd, ChunkSize: 1 << 20, Pool: true}
	wait := s.transferWith(s.poolProducer(10), req)
	teststack.Until(t, time.Minute, "agent a to hold a shard, its uploads in flight", func() bool { return proxy.Counts().Matched >= 1 })
	a.kill9()
	killed := time.Now()
	s.start("agent-b", "ferry", s.agentEnv("b", share), "agent")
	s.start("agent-c", "ferry", s.agentEnv("c", share), "agent")

	done, err := wait()
	if err != nil || done.Status != message.StatusOK {
		t.Fatalf("transfer: %v, done %+v", err, done)
	}
	t.Logf("the transfer ended %s after agent a was killed", time.Since(killed).Round(time.Millisecond))
	if done.Files != 61 {
		t.Fatalf("done event counts %d files, want 61", done.Files)
	}
	s.verifyAll(req)
	s.assertClean()
	row := s.row(done.TransferID)
	if row.Status != "ok" || row.Workers < 2 || !row.Pool {
		t.Fatalf("row %+v: want ok and pooled, its chunks stored by agents b and c", row)
	}
	// The row and status name the agents that sent the files, and their
	// bytes add up to the transfer's: a, killed before any upload of its
	// went through, sent nothing.
	var sum int64
	names := map[string]bool{}
	for _, g := range row.Agents {
		sum += g.Bytes
		names[g.Agent] = g.Bytes > 0
	}
	if len(row.Agents) < 2 || sum != row.SizeBytes || names["a"] {
		t.Fatalf("row's agents %+v: want b and c at least, together the transfer's %d bytes, and not a", row.Agents, row.SizeBytes)
	}
	st, err := transfers.Status(context.Background(), s.store, s.bucket, done.TransferID)
	testutil.OK(t, err)
	var out strings.Builder
	transfers.WriteStatus(&out, st)
	for _, g := range row.Agents {
		if !strings.Contains(out.String(), "agent "+g.Agent) {
			t.Fatalf("producer status prints\n%s\nwithout agent %s", out.String(), g.Agent)
		}
	}
	if s.chunksPublished.Load() != 0 {
		t.Fatalf("%d chunk messages crossed Pub/Sub", s.chunksPublished.Load())
	}
	// producer doctor --pool: the running agents answer and read the
	// share (a, killed, may still count for HeartbeatStale).
	by := map[string]doctor.Result{}
	for _, r := range doctor.Pool(context.Background(), doctor.Options{Store: s.store, Bucket: s.bucket, Pool: true}) {
		by[r.Check] = r
	}
	for _, agent := range []string{"b", "c"} {
		if r := by["pool: agent "+agent]; r.Status != doctor.OK || !strings.Contains(r.Detail, "reads "+share) {
			t.Errorf("doctor's pool check of agent %s: %+v, want ok, reading %s (all: %+v)", agent, r, share, by)
		}
	}
}

// A shard that names a file no agent can read (outside every agent's
// FERRY_SOURCE_ROOTS) fails its transfer once its deliveries run out,
// naming the file and the agent; nothing is left in staging.
func TestAPooledTransferFailsNamingAFileNoAgentCanRead(t *testing.T) {
	s := newStack(t, stackOptions{})
	share := poolTree(t, 3, 100_000)
	other := t.TempDir() // the agent's share is elsewhere
	s.start("agent-x", "ferry", s.agentEnv("x", other), "agent")
	req := producer.Request{Sources: []string{share}, Destination: "gs://" + s.bucket + "/nope", Codec: codec.Zstd, ChunkSize: 1 << 20, Pool: true}
	done, err := s.transferWith(s.poolProducer(10), req)()
	if err == nil || done.Status != message.StatusFailed {
		t.Fatalf("transfer: %v, done %+v: want failed", err, done)
	}
	for _, want := range []string{"no agent could send", share, "agent x", "outside the source roots"} {
		if !strings.Contains(done.Error, want) {
			t.Fatalf("done error %q does not say %q", done.Error, want)
		}
	}
	s.assertClean()
	var objects int
	testutil.OK(t, s.store.List(context.Background(), s.bucket, "nope/", func(gcs.Attrs) error { objects++; return nil }))
	if objects != 0 {
		t.Fatalf("%d objects under the destination of a failed transfer", objects)
	}
}

// A stuck agent (its uploads held ten minutes by a proxy) does not hold the
// transfer hostage: each shard it claims is given up after
// FERRY_AGENT_SHARD_TIMEOUT and claimed again, the other agent sends
// them, and the transfer ends ok and identical while the stuck one still
// runs.
func TestAStuckAgentDoesNotHoldAPooledTransferHostage(t *testing.T) {
	s := newStack(t, stackOptions{})
	share := poolTree(t, 30, 1_500_000)
	// Longer than the transfer may take (transferWith's 3 minutes).
	proxy := slowProxy(t, faultproxy.Uploads, 10*time.Minute)
	s.start("agent-stuck", "ferry", s.agentEnv("stuck", share, "STORAGE_EMULATOR_HOST="+hostOf(proxy), "FERRY_AGENT_SHARD_TIMEOUT=2s"), "agent")
	req := producer.Request{Sources: []string{share}, Destination: "gs://" + s.bucket + "/stuck", Codec: codec.Zstd, ChunkSize: 1 << 20, Pool: true}
	wait := s.transferWith(s.poolProducer(10), req)
	teststack.Until(t, time.Minute, "the stuck agent to hold a shard, its uploads in flight", func() bool { return proxy.Counts().Matched >= 1 })
	s.start("agent-ok", "ferry", s.agentEnv("ok", share), "agent")
	done, err := wait()
	if err != nil || done.Status != message.StatusOK {
		t.Fatalf("transfer: %v, done %+v", err, done)
	}
	s.verifyAll(req)
	if row := s.row(done.TransferID); row.Status != "ok" {
		t.Fatalf("row %+v", row)
	}
}

// An agent that cannot read a shard's files may take every delivery of it
// (one that refuses is always free for the next): once they run out, it
// publishes the shard again while an agent that answers has not refused it,
// and that agent sends it. To make that the only way the shard can reach
// the reading agent, the blind agent publishes again to a topic of its own
// (its FERRY_SHARDS_TOPIC), to which alone the reading agent subscribes:
// without the new round the transfer fails at the fifth delivery.
func TestAShardOneAgentCannotReadGoesToOneThatHasNotTriedIt(t *testing.T) {
	s := newStack(t, stackOptions{})
	share := poolTree(t, 3, 100_000)
	ctx := context.Background()
	lateTopic, lateSub := s.ps.ShardsTopic+"-again", s.ps.ShardsSubscription+"-again"
	testutil.OK(t, s.q.EnsureTopic(ctx, lateTopic))
	testutil.OK(t, s.q.EnsureSubscription(ctx, queue.Subscription{ID: lateSub, Topic: lateTopic, DeadLetterTopic: s.ps.ShardsDeadLetter, MaxAttempts: 5}))
	s.start("agent-reads", "ferry", s.agentEnv("reads", share, "FERRY_BUCKETS="+s.bucket, "FERRY_SHARDS_SUBSCRIPTION="+lateSub), "agent")
	teststack.Until(t, time.Minute, "agent reads's heartbeat", func() bool {
		_, err := s.store.Attrs(ctx, s.bucket, message.AgentObject("reads"))
		return err == nil
	})
	s.start("agent-blind", "ferry", s.agentEnv("blind", t.TempDir(), "FERRY_BUCKETS="+s.bucket, "FERRY_SHARDS_TOPIC="+lateTopic), "agent")
	req := producer.Request{Sources: []string{share}, Destination: "gs://" + s.bucket + "/again", Codec: codec.Zstd, ChunkSize: 1 << 20, Pool: true}
	done, err := s.transferWith(s.poolProducer(10), req)()
	if err != nil || done.Status != message.StatusOK {
		t.Fatalf("transfer: %v, done %+v: want ok, sent by agent reads after blind refused", err, done)
	}
	s.verifyAll(req)
	row := s.row(done.TransferID)
	if len(row.Agents) != 1 || row.Agents[0].Agent != "reads" || row.Agents[0].Bytes != row.SizeBytes {
		t.Fatalf("row's agents %+v: want reads alone, with the transfer's %d bytes", row.Agents, row.SizeBytes)
	}
	s.assertClean()
}
