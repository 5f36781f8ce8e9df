package message

import (
	"fmt"
	"regexp"
	"time"
)

// AgentRoot is the prefix of the pool's heartbeats, one object per agent
// (AgentObject), rewritten every HeartbeatEvery while the agent runs and
// removed when it stops. "_agents" is no transfer id (ValidTransferID), and
// the staging lifecycle rule removes what a killed agent left. producer
// doctor --pool reads them: an agent that answers, and whether it can read
// its roots.
const AgentRoot = StagingRoot + "_agents/"

// AgentObject is the heartbeat object of agent id.
func AgentObject(id string) string { return AgentRoot + id }

// HeartbeatEvery is how often an agent writes its heartbeat; one older
// than HeartbeatStale is an agent that no longer answers.
const (
	HeartbeatEvery = 30 * time.Second
	HeartbeatStale = 4 * HeartbeatEvery
)

// MaxHeartbeatRoots bounds the roots a heartbeat reports on.
const MaxHeartbeatRoots = 64

// Heartbeat is what an agent says of itself.
type Heartbeat struct {
	V       int       `json:"v"`
	Agent   string    `json:"agent"`
	Version string    `json:"version"`
	Time    time.Time `json:"time"`
	// Shards is how many shards the agent is sending now.
	Shards int `json:"shards"`
	// Roots: each of FERRY_SOURCE_ROOTS, and why it cannot be read ("" when
	// it can).
	Roots []RootState `json:"roots"`
}

// RootState is one source root as an agent found it.
type RootState struct {
	Root  string `json:"root"`
	Error string `json:"error,omitempty"`
}

func (h *Heartbeat) version() int { return h.V }

// AgentID is what an agent's id may be (FERRY_AGENT_ID): it names the
// agent in object names and metadata, status, logs and rows.
var AgentID = regexp.MustCompile(`^[A-Za-z0-9._-]{1,63}$`)

// Check refuses a heartbeat that names no agent or no time, or too many
// roots.
func (h *Heartbeat) Check() error {
	switch {
	case !AgentID.MatchString(h.Agent):
		return fmt.Errorf("%w: heartbeat of agent %q: not an agent id", ErrMalformed, h.Agent)
	case h.Time.IsZero():
		return fmt.Errorf("%w: heartbeat of agent %s has no time", ErrMalformed, h.Agent)
	case len(h.Roots) > MaxHeartbeatRoots:
		return fmt.Errorf("%w: heartbeat of agent %s reports %d roots, at most %d", ErrMalformed, h.Agent, len(h.Roots), MaxHeartbeatRoots)
	case h.Shards < 0:
		return fmt.Errorf("%w: heartbeat of agent %s: %d shards", ErrMalformed, h.Agent, h.Shards)
	}
	return nil
}
