// Package level chooses the compression level of each chunk, as zstd
// --adapt does: a step up while what the producer has sent piles up ahead
// of the link (the sender waits on the network), a step down while the link
// keeps up (the network waits on the compressor, or on the reader, which a
// lower level never slows). A fixed level never moves. Either way it counts
// the chunks and bytes compressed at each level, for the transfer's row.
package level

import (
	"slices"
	"sync"
)

// Steps are zstd's levels that adaptation moves between: each is a
// different encoder of github.com/klauspost/compress/zstd (which maps
// levels 1-2, 3-5, 6-9 and 10-22 to one encoder each). Measured on 28 MB
// of Go source, one core of this project's machine (docs/performance.md):
//
//	level  1: ratio 3.94, 147 MB/s, encoder 4.7 MiB
//	level  3: ratio 4.28, 105 MB/s, encoder 5.8 MiB
//	level  6: ratio 4.53,  63 MB/s, encoder 8.5 MiB
//	level 11: ratio 4.88,  17 MB/s, encoder 38.5 MiB
//
// codec.Stored (frames of raw blocks, a copy's cost) is not a step yet:
// with it below 1, ferry cp on the 2-core machine took 1.3 to 1.6 s for a
// 200 MB CSV and 5.0 to 7.4 s for 1 GB where level 1 took 1.0 to 1.15 s
// and 4.0 to 4.3 s (2026-12-07): the stand-in server there takes about
// 245 MB/s, so sending three times the bytes cost more than compressing,
// and the votes of the backlog moved the level between stored, 1 and 3
// instead of settling.
//
// Level 11 is left out: at 17 MB/s a core it binds every link faster than
// a few MB/s, and an encoder per core of 38 MiB is more than the rest of
// the producer holds. FERRY_LEVEL=11 still fixes it.
var Steps = []int{1, 3, 6}

// Start is where an adaptive transfer starts: the fastest step. A file of
// a few chunks leaves little room to adapt, and on a link that waits for
// nobody (loopback, a fast VPC) level 1 was the fastest way through, ahead
// of level 3 and of no codec at all (docs/performance.md). The seeds'
// level 3, and 6, come as soon as the link falls behind.
const Start = 1

// Votes in a row that move the level one step: a single slow or fast
// chunk does not.
const moveAfter = 2

// window is how many observations the backlog's trend is taken over.
const window = 4

// Observation is what one compressed job (a chunk, or a bundle of small
// files) met on its way out.
type Observation struct {
	// Level is the level it was compressed at.
	Level int
	// Chunks is how many chunks it held (a bundle holds several).
	Chunks int
	// Raw and Wire are its bytes before and after compression.
	Raw, Wire int64
	// Backlog is what the producer has handed on and the link has not
	// yet taken (spool files the workers have not removed, messages not
	// yet published), in wire bytes, after this job was handed on.
	Backlog int64
	// Blocked: handing the job on waited (a full spool, a full queue).
	Blocked bool
	// Small: a bundle of small files or a small file. It is counted but
	// does not vote: many small objects are bound by the requests they
	// take, which no level shortens, and a level raised for them would
	// only take CPU from workers that share the machine.
	Small bool
}

// Use is how much was compressed at one level.
type Use struct {
	Level  int
	Chunks int
	Bytes  int64
}

// Adapter picks levels and counts their use. Safe for concurrent use.
type Adapter struct {
	steps []int
	floor int64 // a backlog below this is no sign of a slow link

	mu    sync.Mutex
	i     int // current step
	votes int // > 0: up votes in a row; < 0: down votes
	seen  []sample
	uses  []Use
}

type sample struct{ backlog, wire int64 }

// Fixed returns an adapter that always answers level.
func Fixed(level int) *Adapter { return &Adapter{steps: []int{level}} }

// New returns an adapter moving between steps (ascending), starting at
// start (or the step below it); a backlog of less than floor wire bytes
// never counts as the link falling behind (a few chunks in flight are
// normal).
func New(steps []int, start int, floor int64) *Adapter {
	a := &Adapter{steps: steps, floor: floor}
	for a.i+1 < len(steps) && steps[a.i+1] <= start {
		a.i++
	}
	return a
}

// Levels are the levels the adapter may answer, lowest first.
func (a *Adapter) Levels() []int { return slices.Clone(a.steps) }

// Level is the level for the next job.
func (a *Adapter) Level() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.steps[a.i]
}

// Observe counts a compressed job and moves the level if the last jobs
// agree that the link or the compressor is the bound.
func (a *Adapter) Observe(o Observation) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.count(o)
	if len(a.steps) == 1 || o.Small {
		return
	}
	// The link is behind when handing on waited, or when the backlog is
	// past the floor and growing; else it keeps up.
	behind := o.Blocked || o.Backlog >= a.floor && a.growing(o)
	a.seen = append(a.seen, sample{o.Backlog, o.Wire})
	if len(a.seen) > window {
		a.seen = a.seen[1:]
	}
	if behind {
		a.votes = max(a.votes, 0) + 1
	} else {
		a.votes = min(a.votes, 0) - 1
	}
	switch {
	case a.votes >= moveAfter && a.i+1 < len(a.steps):
		a.i++
		a.votes = 0
	case a.votes <= -moveAfter && a.i > 0:
		a.i--
		a.votes = 0
	}
}

// growing reports whether the backlog kept more than half of what the
// last jobs produced: the link takes less than the compressor gives.
func (a *Adapter) growing(o Observation) bool {
	var before, produced int64
	if len(a.seen) > 0 {
		before = a.seen[0].backlog
	}
	for _, s := range a.seen[min(1, len(a.seen)):] {
		produced += s.wire
	}
	produced += o.Wire
	return o.Backlog-before > produced/2
}

func (a *Adapter) count(o Observation) {
	for i := range a.uses {
		if a.uses[i].Level == o.Level {
			a.uses[i].Chunks += o.Chunks
			a.uses[i].Bytes += o.Raw
			return
		}
	}
	a.uses = append(a.uses, Use{Level: o.Level, Chunks: o.Chunks, Bytes: o.Raw})
}

// Uses are the levels used so far, lowest first.
func (a *Adapter) Uses() []Use {
	a.mu.Lock()
	defer a.mu.Unlock()
	u := slices.Clone(a.uses)
	slices.SortFunc(u, func(x, y Use) int { return x.Level - y.Level })
	return u
}
