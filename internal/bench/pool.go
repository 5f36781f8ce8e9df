package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ferry-dev/ferry/internal/bench/tap"
	"github.com/ferry-dev/ferry/internal/bench/verdict"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
)

// pool is workload 12: one pooled transfer (producer submit --pool) of the
// many-files tree, and one of the largest file there is, sent by 1 to 4
// agents (ferry agent), each capped at verdict.PoolLinkOf bytes a second
// (FERRY_MAX_RATE) as a host's link would cap it, and --codec none, so
// that the two cores are not the bound, and by 3 with one killed; 8 MiB chunks, so that the file
// (200 MB unless BENCH_FULL) has chunks enough for four agents. Every agent reads the same data
// directory, as hosts read one share. A tap subscription on the chunks
// topic counts the chunk bytes that crossed Pub/Sub.
func (b *Bench) pool(ctx context.Context) error {
	t := b.data.Small
	name, f := b.largestFile()
	for _, set := range []struct {
		tier    string
		sources func() []string
		files   int
		bytes   int64
		one     *File
	}{
		{t.Name, func() []string { return []string{t.Dir} }, t.Files, t.Bytes, nil},
		{name, func() []string { return []string{f.Path} }, 1, f.Size, &f},
	} {
		var ms []method
		link := verdict.PoolLinkOf(set.files)
		for _, n := range verdict.PoolAgents {
			ms = append(ms, b.poolMethod(n, link, set.sources, nil))
		}
		ms = append(ms, b.poolMethod(verdict.PoolKillAgents, link, set.sources, &poolKill{at: killAt(set.bytes, link)}))
		if err := b.runPlan(ctx, plan{workload: verdict.Pool, tier: set.tier, methods: ms, verify: verifyUpload(set.files, set.bytes, set.one, "ferry/")}); err != nil {
			return err
		}
	}
	return nil
}

// largestFile is the largest of the data's single files, and its tier.
func (b *Bench) largestFile() (string, File) {
	var best File
	var tier string
	for name, f := range b.data.Tier {
		if f.Size > best.Size {
			tier, best = name, f
		}
	}
	return tier, best
}

// poolKill is the kill variant: agent-1 gets SIGKILL at a run's at.
type poolKill struct{ at time.Duration }

// killAt is a third of the time 3 agents at their links ideally take for
// bytes: mid-transfer, when every agent holds a shard.
func killAt(bytes int64, link int) time.Duration {
	return time.Duration(float64(bytes) / float64(verdict.PoolKillAgents*link) / 3 * float64(time.Second))
}

// poolMethod is a pooled transfer sent by n agents and the merger, all
// started inside the clock; with kill, agent-1 is killed with SIGKILL
// mid-transfer, and the run fails unless staging empties out after it.
func (b *Bench) poolMethod(n, link int, sources func() []string, kill *poolKill) method {
	name := verdict.PoolMethod(n)
	setting := fmt.Sprintf("producer submit --pool --codec none --chunk-size 8MiB, %d ferry agent(s) at FERRY_MAX_RATE=%d each, shard bounds at their defaults", n, link)
	if kill != nil {
		name = verdict.PoolKillMethod
		setting += fmt.Sprintf("; agent-1 killed with SIGKILL %s after the start", kill.at.Round(100*time.Millisecond))
	}
	return method{name: name, role: verdict.Ferry, workers: n, codec: "none", setting: setting,
		run: func(ctx context.Context, e *env) (verdict.Run, error) {
			counted, err := tap.Subscribe(ctx, e.stack.Env)
			if err != nil {
				return verdict.Run{}, err
			}
			defer counted.Close()
			srcs := sources()
			o := ferryOpts{agents: n, codec: "none", sources: srcs, prefix: "ferry", method: name, tier: e.tier,
				args: []string{"--pool", "--chunk-size", "8MiB"}, agentRoot: filepath.Dir(srcs[0]), agentEnv: []string{"FERRY_MAX_RATE=" + strconv.Itoa(link)}}
			var killed time.Duration
			if kill != nil {
				o.settled = func(ctx context.Context) error { return nothingStaged(ctx, e) }
				o.during = func(ctx context.Context, f *fleet, t0 time.Time) {
					t := time.NewTimer(time.Until(t0.Add(kill.at)))
					defer t.Stop()
					select {
					case <-ctx.Done():
					case <-t.C:
						f.agents[0].Kill()
						killed = time.Since(t0)
					}
				}
			}
			r, err := b.runFerry(ctx, e, o)
			r.PubSubBytes = counted.Bytes()
			if kill != nil && err == nil {
				if killed == 0 {
					return r, fmt.Errorf("%s: the transfer ended before agent-1 was to be killed at %s", name, kill.at)
				}
				r.KilledAt = killed
			}
			return r, err
		}}
}

// nothingStaged waits up to 30 s for the bucket's staging to empty out (the
// merger, still running, removes it after the done event), but for the
// running agents' heartbeats, and says what is left.
func nothingStaged(ctx context.Context, e *env) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		var left []string
		err := e.stack.Each(ctx, e.bucket, message.StagingRoot, func(a gcs.Attrs) error {
			if !strings.HasPrefix(a.Name, message.AgentRoot) && len(left) < 5 {
				left = append(left, a.Name)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return verifyf("staging left after the kill: %v", left)
		}
		time.Sleep(500 * time.Millisecond) // a bench's wait for the merger's clean-up, not a test's
	}
}
