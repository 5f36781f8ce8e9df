package transfers

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
)

// Shards is where a pooled transfer's shards stand (message.Shard): those
// the walk has written so far, those an agent's done object says are
// sent, those an agent has claimed and not sent yet, and the rest.
type Shards struct {
	Total   int `json:"total"`
	Done    int `json:"done"`
	Claimed int `json:"claimed"`
	Waiting int `json:"waiting"`
	// Agents are the agents that claimed or sent shards, in name order.
	Agents []AgentShards `json:"agents,omitempty"`
}

// AgentShards is what one agent of the pool has of a transfer: the shards
// it sent and their raw bytes, and those it holds, claimed since Since.
type AgentShards struct {
	Agent   string    `json:"agent"`
	Done    int       `json:"done"`
	Bytes   int64     `json:"bytes"`
	Claimed int       `json:"claimed,omitempty"`
	Since   time.Time `json:"claimed_since,omitzero"`
	// Refused counts the shards this agent could not read a file of
	// (ShardRefusalObject), whoever sent them after.
	Refused int `json:"refused,omitempty"`
}

// shardsOf reads where the shards of run stand from one listing of its
// shard prefix: plans, claims and done objects, whose metadata names the
// agent and the bytes. A claim that a done object follows is not counted:
// the shard is done, whoever claimed it last.
func shardsOf(ctx context.Context, s objectStore, bucket, id, run string) (*Shards, error) {
	prefix := message.ShardPrefix(id, run)
	claimP := strings.TrimPrefix(message.ShardClaimPrefix(id, run), prefix)
	doneP := strings.TrimPrefix(message.ShardDonePrefix(id, run), prefix)
	type claim struct {
		agent string
		at    time.Time
	}
	claims := map[int]claim{}
	done := map[int]bool{}
	by := map[string]*AgentShards{}
	agent := func(name string) *AgentShards {
		if by[name] == nil {
			by[name] = &AgentShards{Agent: name}
		}
		return by[name]
	}
	sh := &Shards{}
	err := s.List(ctx, bucket, prefix, func(a gcs.Attrs) error {
		rest := strings.TrimPrefix(a.Name, prefix)
		switch {
		case strings.HasSuffix(rest, ".json") && !strings.Contains(rest, "/"):
			sh.Total++
		case strings.HasPrefix(rest, claimP):
			if k, ok := message.ShardIndex(strings.TrimPrefix(rest, claimP)); ok {
				claims[k] = claim{a.Metadata[message.MetaAgent], a.Updated}
			}
		case strings.HasPrefix(rest, "r/"):
			// r/<k>/<agent>: one object per agent and shard.
			if k, _, ok := strings.Cut(strings.TrimPrefix(rest, "r/"), "/"); ok {
				if _, ok := message.ShardIndex(k); ok {
					agent(a.Metadata[message.MetaAgent]).Refused++
				}
			}
		case strings.HasPrefix(rest, doneP):
			if k, ok := message.ShardIndex(strings.TrimPrefix(rest, doneP)); ok && !done[k] {
				done[k] = true
				g := agent(a.Metadata[message.MetaAgent])
				g.Done++
				if n, err := strconv.ParseInt(a.Metadata[message.MetaRawSize], 10, 64); err == nil && n > 0 {
					g.Bytes += n
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sh.Done = len(done)
	for k, c := range claims {
		if done[k] {
			continue
		}
		sh.Claimed++
		g := agent(c.agent)
		g.Claimed++
		if g.Since.IsZero() || c.at.Before(g.Since) {
			g.Since = c.at
		}
	}
	sh.Waiting = max(0, sh.Total-sh.Done-sh.Claimed)
	for _, g := range by {
		sh.Agents = append(sh.Agents, *g)
	}
	slices.SortFunc(sh.Agents, func(a, b AgentShards) int { return strings.Compare(a.Agent, b.Agent) })
	return sh, nil
}

// runningShards is shardsOf for a transfer whose manifest is not sealed:
// its run is the one its run object names; a transfer that is not pooled
// has no shards (nil).
func runningShards(ctx context.Context, s objectStore, bucket, id string) (*Shards, error) {
	b, err := s.ReadAll(ctx, bucket, message.RunObject(id))
	if errors.Is(err, gcs.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	run := string(b)
	if run == "" || strings.ContainsAny(run, "/\\") || len(run) > 64 {
		return nil, nil // not a run this producer writes
	}
	sh, err := shardsOf(ctx, s, bucket, id, run)
	if err != nil || sh.Total == 0 {
		return nil, err
	}
	return sh, nil
}
