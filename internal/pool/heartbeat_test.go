package pool_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/doctor"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/pool"
	"github.com/ferry-dev/ferry/internal/teststack"
	"github.com/ferry-dev/ferry/internal/testutil"
)

// TestDoctorSeesWhichAgentsAnswerAndWhatTheyCannotRead: three agents
// beat against a real fake-gcs-server. One reads its root; one has an
// empty root (a share not mounted) and a missing one; one has a root that
// never answers (a FIFO no one writes: a hung share). producer doctor
// --pool's check names each agent and each root it cannot read, and once
// the agents stop (their heartbeats removed) says that none answers.
func TestDoctorSeesWhichAgentsAnswerAndWhatTheyCannotRead(t *testing.T) {
	const bucket = "pool-heartbeat"
	store := teststack.Bucket(t, bucket)
	dir := t.TempDir()
	good, empty, missing, hung := filepath.Join(dir, "share"), filepath.Join(dir, "mnt"), filepath.Join(dir, "gone"), filepath.Join(dir, "hung")
	testutil.OK(t, os.MkdirAll(good, 0o755))
	testutil.OK(t, os.WriteFile(filepath.Join(good, "a.csv"), []byte("a\n"), 0o644))
	testutil.OK(t, os.MkdirAll(empty, 0o755))
	testutil.OK(t, syscall.Mkfifo(hung, 0o600))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	heart := func(agent string, probe time.Duration, roots ...string) *pool.Heart {
		return pool.NewHeart(pool.HeartOptions{Store: store, Buckets: func() []string { return []string{bucket} }, Agent: agent, Version: "v-test", Roots: roots, ProbeTimeout: probe,
			Shards: func() int { return 2 }})
	}
	a := heart("host-a", 0, good)
	b := heart("host-b", 0, good, empty, missing)
	// Opening the FIFO blocks until a writer opens it: the probe never
	// returns within its timeout, however long that is.
	c := heart("host-c", 50*time.Millisecond, hung)
	for _, h := range []*pool.Heart{a, b, c} {
		testutil.OK(t, h.Beat(ctx))
	}
	by := map[string]doctor.Result{}
	for _, r := range doctor.Pool(ctx, doctor.Options{Store: store, Bucket: bucket, Pool: true}) {
		by[r.Check] = r
	}
	want := map[string]struct {
		status doctor.Status
		has    []string
	}{
		"pool: agents":       {doctor.OK, []string{"3 answered in the last 2m0s"}},
		"pool: agent host-a": {doctor.OK, []string{"version v-test, sending 2 shards; reads " + good}},
		"pool: agent host-b": {doctor.Fail, []string{"cannot read ", empty + " is empty: is the share mounted there?", missing + ": open " + missing + ": no such file or directory"}},
		"pool: agent host-c": {doctor.Fail, []string{hung + ": no answer within 50ms (a hung share?)"}},
	}
	for check, w := range want {
		r, ok := by[check]
		if !ok || r.Status != w.status {
			t.Errorf("%s: %+v, want %s", check, r, w.status)
			continue
		}
		for _, s := range w.has {
			if !strings.Contains(r.Detail, s) {
				t.Errorf("%s: %q lacks %q", check, r.Detail, s)
			}
		}
		if r.Status == doctor.Fail && !strings.Contains(r.Do, "source_share") {
			t.Errorf("%s: do %q does not say how to mount the share", check, r.Do)
		}
	}
	if strings.Contains(by["pool: agent host-b"].Detail, good) {
		t.Errorf("host-b: %q names the root it reads among those it cannot", by["pool: agent host-b"].Detail)
	}

	// Still hung: the next beat does not probe it again, and says since when.
	testutil.OK(t, c.Beat(ctx))
	data, err := store.ReadAll(ctx, bucket, message.AgentObject("host-c"))
	testutil.OK(t, err)
	var hb message.Heartbeat
	testutil.OK(t, message.Decode(data, &hb))
	if len(hb.Roots) != 1 || !strings.HasPrefix(hb.Roots[0].Error, "no answer since ") {
		t.Errorf("host-c's second heartbeat: %+v, want its root hung since the first probe", hb.Roots)
	}

	// The share answers again: the FIFO gets its writer, the probe returns.
	w, err := os.OpenFile(hung, os.O_WRONLY, 0)
	testutil.OK(t, err)
	testutil.OK(t, w.Close())
	c.Wait()

	for _, h := range []*pool.Heart{a, b, c} {
		testutil.OK(t, h.Remove(ctx))
	}
	if _, err := store.Attrs(ctx, bucket, message.AgentObject("host-a")); !errors.Is(err, gcs.ErrNotFound) {
		t.Fatalf("host-a's heartbeat after Remove: %v, want gone", err)
	}
	rs := doctor.Pool(ctx, doctor.Options{Store: store, Bucket: bucket, Pool: true})
	if len(rs) != 1 || rs[0].Status != doctor.Fail || !strings.Contains(rs[0].Detail, "no agent answered in the last 2m0s") || !strings.Contains(rs[0].Do, "ferry agent") {
		t.Errorf("--pool with no agent: %+v, want one failure saying no agent answers and how to start one", rs)
	}
	rs = doctor.Pool(ctx, doctor.Options{Store: store, Bucket: bucket})
	if len(rs) != 1 || rs[0].Status != doctor.Skip {
		t.Errorf("no agent, no --pool: %+v, want skipped (a deployment may have no pool)", rs)
	}
}

// TestUntriedAreTheAnsweringAgentsThatHaveNotRefusedTheShard: of three
// agents that answer, two refused the shard; to the one asking, the third
// alone has not tried it, and once it refused too, none has.
func TestUntriedAreTheAnsweringAgentsThatHaveNotRefusedTheShard(t *testing.T) {
	const bucket = "pool-untried"
	store := teststack.Bucket(t, bucket)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, a := range []string{"host-a", "host-b", "host-c"} {
		h := pool.NewHeart(pool.HeartOptions{Store: store, Buckets: func() []string { return []string{bucket} }, Agent: a})
		testutil.OK(t, h.Beat(ctx))
	}
	agent := pool.NewAgent(pool.AgentOptions{Store: store})
	s := message.Shard{V: message.Version, TransferID: "t1", Bucket: bucket, Run: "r1", Index: 3}
	cause := errors.New("/share/x.csv: no such file or directory")
	testutil.OK(t, agent.NoteRefusal(ctx, s, "host-a", cause))
	testutil.OK(t, agent.NoteRefusal(ctx, s, "host-b", cause))
	other := s
	other.Index = 4 // another shard's refusal is not this one's
	testutil.OK(t, agent.NoteRefusal(ctx, other, "host-c", cause))
	got, err := agent.Untried(ctx, s, "host-a", time.Now())
	testutil.OK(t, err)
	if len(got) != 1 || got[0] != "host-c" {
		t.Fatalf("untried %v, want [host-c]", got)
	}
	if got, _ := agent.Untried(ctx, s, "host-a", time.Now().Add(message.HeartbeatStale+time.Minute)); len(got) != 0 {
		t.Fatalf("untried %v once no heartbeat is fresh, want none", got)
	}
	testutil.OK(t, agent.NoteRefusal(ctx, s, "host-c", cause))
	if got, _ := agent.Untried(ctx, s, "host-b", time.Now()); len(got) != 0 {
		t.Fatalf("untried %v once every agent refused, want none", got)
	}
	a, err := store.Attrs(ctx, bucket, message.ShardRefusalObject("t1", "r1", 3, "host-b"))
	testutil.OK(t, err)
	if a.Metadata[message.MetaAgent] != "host-b" || a.Metadata[message.MetaError] != cause.Error() {
		t.Fatalf("refusal metadata %v, want the agent and the reason", a.Metadata)
	}
}
