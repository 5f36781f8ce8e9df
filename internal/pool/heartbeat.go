package pool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
)

// heartStore is what a heartbeat needs of GCS. *gcs.Store has it.
type heartStore interface {
	PutJSON(ctx context.Context, bucket, name string, data []byte, ifAbsent bool, md map[string]string) (gcs.Attrs, error)
	Delete(ctx context.Context, bucket, name string) error
}

// HeartOptions configure an agent's heartbeat.
type HeartOptions struct {
	Store heartStore
	// Buckets: the heartbeat is written to each (FERRY_BUCKETS), so that
	// producer doctor finds it whichever bucket it checks.
	Buckets        func() []string
	Agent, Version string
	Roots          []string
	// Shards reports how many shards the agent is sending.
	Shards func() int
	Log    *slog.Logger
	// ProbeTimeout bounds each root's readability check (default 10s): a
	// hung share does not answer at all.
	ProbeTimeout time.Duration
	Now          func() time.Time
}

// Heart writes an agent's heartbeat: it answers, and whether it can read
// each of its roots.
type Heart struct {
	o      HeartOptions
	mu     sync.Mutex
	hung   map[string]time.Time // roots whose last probe has not returned, since when
	probes sync.WaitGroup
	kick   chan struct{}
}

// NewHeart returns the heartbeat of o.Agent.
func NewHeart(o HeartOptions) *Heart {
	if o.ProbeTimeout <= 0 {
		o.ProbeTimeout = 10 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Shards == nil {
		o.Shards = func() int { return 0 }
	}
	return &Heart{o: o, hung: map[string]time.Time{}, kick: make(chan struct{}, 1)}
}

// Kick has Run beat now rather than at its next tick (a bucket was added).
func (h *Heart) Kick() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// Run beats now and every message.HeartbeatEvery until ctx ends, then
// removes the heartbeat. A failed write is logged, never fatal: the agent
// still sends shards.
func (h *Heart) Run(ctx context.Context) {
	t := time.NewTicker(message.HeartbeatEvery)
	defer t.Stop()
	for {
		if err := h.Beat(ctx); err != nil && ctx.Err() == nil {
			h.o.Log.Warn("heartbeat not written: producer doctor --pool will not see this agent", "err", err)
		}
		select {
		case <-ctx.Done():
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if err := h.Remove(rctx); err != nil {
				h.o.Log.Warn("heartbeat not removed: it expires with the staging lifecycle rule", "err", err)
			}
			return
		case <-t.C:
		case <-h.kick:
		}
	}
}

// Beat checks the roots and writes the heartbeat to every bucket.
func (h *Heart) Beat(ctx context.Context) error {
	hb := message.Heartbeat{V: message.Version, Agent: h.o.Agent, Version: h.o.Version, Time: h.o.Now().UTC(), Shards: h.o.Shards()}
	for _, r := range h.o.Roots {
		if len(hb.Roots) == message.MaxHeartbeatRoots {
			break
		}
		hb.Roots = append(hb.Roots, message.RootState{Root: r, Error: h.probe(r)})
	}
	data, err := json.Marshal(&hb)
	if err != nil {
		return err
	}
	var errs []error
	for _, b := range h.o.Buckets() {
		if _, err := h.o.Store.PutJSON(ctx, b, message.AgentObject(h.o.Agent), data, false, nil); err != nil {
			errs = append(errs, fmt.Errorf("heartbeat gs://%s/%s: %w", b, message.AgentObject(h.o.Agent), err))
		}
	}
	return errors.Join(errs...)
}

// Remove deletes the heartbeat: a stopped agent is not counted.
func (h *Heart) Remove(ctx context.Context) error {
	var errs []error
	for _, b := range h.o.Buckets() {
		if err := h.o.Store.Delete(ctx, b, message.AgentObject(h.o.Agent)); err != nil && !errors.Is(err, gcs.ErrNotFound) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Wait returns once every probe this heart started has returned (a test's
// clean-up; a probe of a hung share may never return).
func (h *Heart) Wait() { h.probes.Wait() }

// probe says why root cannot be read, or "". A root whose last probe has
// not returned is not probed again: it is reported hung since then.
func (h *Heart) probe(root string) string {
	h.mu.Lock()
	since, hung := h.hung[root]
	h.mu.Unlock()
	if hung {
		return fmt.Sprintf("no answer since %s (a hung share?)", since.Format(time.RFC3339))
	}
	ch := make(chan string, 1)
	returned := false // under h.mu
	h.probes.Add(1)
	go func() {
		defer h.probes.Done()
		msg := readable(root)
		h.mu.Lock()
		returned = true
		delete(h.hung, root)
		h.mu.Unlock()
		ch <- msg
	}()
	t := time.NewTimer(h.o.ProbeTimeout)
	defer t.Stop()
	select {
	case msg := <-ch:
		return msg
	case <-t.C:
		h.mu.Lock()
		if !returned {
			h.hung[root] = h.o.Now().UTC()
		}
		h.mu.Unlock()
		return fmt.Sprintf("no answer within %s (a hung share?)", h.o.ProbeTimeout)
	}
}

// readable lists one entry of root: an empty root is most often a share
// that is not mounted there.
func readable(root string) string {
	f, err := os.Open(root)
	if err != nil {
		return err.Error()
	}
	defer func() { _ = f.Close() }()
	if _, err := f.Readdirnames(1); err != nil {
		if errors.Is(err, io.EOF) {
			return root + " is empty: is the share mounted there?"
		}
		return fmt.Sprintf("list %s: %v", root, err)
	}
	return ""
}
