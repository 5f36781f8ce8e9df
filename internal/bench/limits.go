package bench

import (
	"context"
	"fmt"

	"github.com/ferry-dev/ferry/internal/bench/verdict"
	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/setup"
	"github.com/ferry-dev/ferry/internal/worker"
	"github.com/sethvargo/go-envconfig"
)

// DefaultLimits are the Limits at the configuration's defaults
// (FERRY_PRODUCER_MEMORY, the worker's flow control and upload buffers,
// FERRY_MERGER_MEMORY), which every bench run uses.
func DefaultLimits() verdict.Limits {
	var p config.Producer
	var w config.Worker
	var m config.Merger
	var a config.Agent
	for _, c := range []interface{ Validate() error }{&p, &w, &m, &a} {
		// An agent needs its roots; the rest are defaults.
		env := envconfig.MapLookuper(map[string]string{"FERRY_SOURCE_ROOTS": "/", "FERRY_AGENT_ID": "bench"})
		if err := config.Load(context.Background(), c, env); err != nil {
			panic(fmt.Sprintf("the configuration's defaults do not load: %v", err))
		}
	}
	return verdict.Limits{
		Producer: int64(p.MemoryLimit) + setup.MemoryOverhead,
		Worker:   worker.Budget(int64(w.MaxOutstanding), w.RequestBytes()) + setup.MemoryOverhead,
		Merger:   int64(m.Memory) + setup.MemoryOverhead,
		Agent:    int64(a.Memory) + setup.MemoryOverhead,
		Overhead: setup.MemoryOverhead,
	}
}
