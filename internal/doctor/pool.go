package doctor

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
)

// maxAgentRows bounds the lines the pool's check prints: one per agent
// that answers, up to this many; the rest are counted.
const maxAgentRows = 20

// heartbeat is one agent's last word, as listed and read.
type heartbeat struct {
	age time.Duration
	hb  message.Heartbeat
	err error
}

// Pool: the agents that answered (their heartbeat under
// message.AgentRoot is recent), and whether each can read its roots.
// Without o.Pool, no agent answering is not a failure: the deployment may
// have no pool.
func Pool(ctx context.Context, o Options) []Result {
	cctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	now := o.now()
	var fresh []heartbeat
	stale := 0
	var last time.Time
	err := o.Store.List(cctx, o.Bucket, message.AgentRoot, func(a gcs.Attrs) error {
		age := now.Sub(a.Updated)
		if age > message.HeartbeatStale {
			stale++
			if a.Updated.After(last) {
				last = a.Updated
			}
			return nil
		}
		fresh = append(fresh, readHeartbeat(cctx, o, a.Name, max(age, 0)))
		return nil
	})
	check := "pool: agents"
	if err != nil {
		return []Result{{check, Fail, fmt.Sprintf("list gs://%s/%s: %v", o.Bucket, message.AgentRoot, err), "check that GCS answers and that you may list the bucket"}}
	}
	gone := ""
	if stale > 0 {
		gone = fmt.Sprintf(" (%d stopped or gone, the last heard %s)", stale, last.UTC().Format(time.RFC3339))
	}
	if len(fresh) == 0 {
		detail := fmt.Sprintf("no agent answered in the last %s%s", message.HeartbeatStale, gone)
		if !o.Pool {
			return []Result{{check, Skip, detail + "; --pool requires one", ""}}
		}
		return []Result{{check, Fail, detail + ": pooled transfers (--pool) wait for one",
			"start ferry agent on the hosts that mount the sources (terraform: pool = true, min_agents >= 1), with this FERRY_BUCKETS"}}
	}
	sort.Slice(fresh, func(i, j int) bool { return fresh[i].hb.Agent < fresh[j].hb.Agent })
	rs := []Result{{check, OK, fmt.Sprintf("%d answered in the last %s%s", len(fresh), message.HeartbeatStale, gone), ""}}
	failed := 0
	for i, h := range fresh {
		r := agentResult(h)
		if r.Status == Fail {
			failed++
		}
		if i < maxAgentRows {
			rs = append(rs, r)
		}
	}
	if n := len(fresh) - maxAgentRows; n > 0 {
		st := OK
		if failed > 0 {
			st = Fail
		}
		rs = append(rs, Result{"pool: other agents", st, fmt.Sprintf("%d more; %d of all %d cannot read a root", n, failed, len(fresh)), ""})
	}
	return rs
}

// readHeartbeat reads and checks the heartbeat object name.
func readHeartbeat(ctx context.Context, o Options, name string, age time.Duration) heartbeat {
	out := heartbeat{age: age}
	data, err := o.Store.ReadAll(ctx, o.Bucket, name)
	if err != nil {
		out.err = err
		return out
	}
	if err := message.Decode(data, &out.hb); err != nil {
		out.err = err
		return out
	}
	if err := out.hb.Check(); err != nil {
		out.err = err
		return out
	}
	if want := message.AgentObject(out.hb.Agent); want != name {
		out.err = fmt.Errorf("%w: it names agent %q, whose heartbeat is %s", message.ErrMalformed, out.hb.Agent, want)
	}
	return out
}

// agentResult is one agent's line: it answered, and each root it cannot
// read.
func agentResult(h heartbeat) Result {
	check := "pool: agent " + h.hb.Agent
	ago := h.age.Round(time.Second).String() + " ago"
	if h.err != nil {
		check = "pool: heartbeat"
		if errors.Is(h.err, message.ErrMalformed) {
			return Result{check, Fail, "unreadable: " + h.err.Error(), "an agent of another version, or a write that is not an agent's"}
		}
		return Result{check, Fail, h.err.Error(), "check that GCS answers"}
	}
	var bad, good []string
	for _, r := range h.hb.Roots {
		if r.Error != "" {
			bad = append(bad, r.Root+": "+r.Error)
		} else {
			good = append(good, r.Root)
		}
	}
	if len(bad) > 0 {
		return Result{check, Fail, fmt.Sprintf("answered %s, version %s; cannot read %s", ago, h.hb.Version, strings.Join(bad, "; ")),
			"mount the share at that path on this host (terraform: source_share), or fix its FERRY_SOURCE_ROOTS; it refuses every shard there"}
	}
	return Result{check, OK, fmt.Sprintf("answered %s, version %s, sending %d shards; reads %s", ago, h.hb.Version, h.hb.Shards, strings.Join(good, ", ")), ""}
}
