package level_test

import (
	"slices"
	"testing"

	"github.com/ferry-dev/ferry/internal/level"
)

const mib = 1 << 20

// feed observes n jobs of 8 MiB raw, 2 MiB wire, at the adapter's level,
// with the backlog changing by grow wire bytes per job, and returns the
// levels they were compressed at.
func feed(a *level.Adapter, n int, backlog *int64, grow int64) []int {
	var got []int
	for range n {
		l := a.Level()
		got = append(got, l)
		*backlog = max(0, *backlog+grow)
		a.Observe(level.Observation{Level: l, Chunks: 1, Raw: 8 * mib, Wire: 2 * mib, Backlog: *backlog})
	}
	return got
}

func TestLevelRisesWhileTheBacklogGrows(t *testing.T) {
	a := level.New(level.Steps, level.Start, 16*mib)
	var backlog int64
	// Every job stays in the backlog: the link takes nothing. Below the
	// floor that is taken for chunks in flight; past it the backlog's
	// growth says the link is the bound, and the level must rise and stay.
	got := feed(a, 16, &backlog, 2*mib)
	if got[0] != 1 {
		t.Fatalf("first job at level %d, want the start, 1", got[0])
	}
	past := got[8:] // the backlog reaches the floor with the 8th job
	if last := got[len(got)-1]; last != 6 || !slices.IsSorted(past) {
		t.Fatalf("levels %v: want them to rise to 6, never falling, once the backlog passes the floor", got)
	}
}

func TestLevelFallsWhileTheLinkKeepsUp(t *testing.T) {
	a := level.New(level.Steps, 6, 16*mib)
	backlog := int64(40 * mib)
	// Past the floor, but the link takes each job as it comes: the
	// compressor (or the reader) is the bound.
	if got := feed(a, 6, &backlog, 0); got[len(got)-1] != 1 {
		t.Fatalf("levels %v: want 1 once the link keeps up", got)
	}
	if got := feed(a, 6, &backlog, -mib); slices.Max(got) != 1 {
		t.Fatalf("levels %v: want them to stay at 1 while the backlog shrinks", got)
	}
}

func TestABacklogBelowTheFloorIsNoSlowLink(t *testing.T) {
	a := level.New(level.Steps, level.Start, 64*mib)
	var backlog int64
	// The backlog grows, but stays below the floor: chunks in flight.
	if got := feed(a, 8, &backlog, 2*mib); slices.Max(got) > 3 {
		t.Fatalf("levels %v: want no step up below the floor", got)
	}
}

func TestBlockedMovesUpEvenWithAFlatBacklog(t *testing.T) {
	a := level.New(level.Steps, 1, 16*mib)
	for range 2 {
		a.Observe(level.Observation{Level: a.Level(), Chunks: 1, Raw: 1, Wire: 1, Backlog: 100 * mib, Blocked: true})
	}
	if got := a.Level(); got != 3 {
		t.Fatalf("level %d after two jobs that waited on a full spool, want 3", got)
	}
}

func TestOneVoteDoesNotMove(t *testing.T) {
	a := level.New(level.Steps, 3, 16*mib)
	for i := range 6 {
		// A job that waited for a full spool, then one that found
		// the link keeping up.
		a.Observe(level.Observation{Level: a.Level(), Chunks: 1, Raw: 1, Wire: 1, Backlog: mib, Blocked: i%2 == 0})
	}
	if got := a.Level(); got != 3 {
		t.Fatalf("level %d after alternating votes, want 3", got)
	}
}

func TestSmallJobsDoNotVote(t *testing.T) {
	a := level.New(level.Steps, level.Start, 16*mib)
	for range 8 {
		a.Observe(level.Observation{Level: a.Level(), Chunks: 40, Raw: 4 * mib, Wire: mib, Backlog: 100 * mib, Blocked: true, Small: true})
	}
	if got := a.Level(); got != 1 {
		t.Fatalf("level %d after bundles of small files waited on a full spool, want 1: they do not vote", got)
	}
	if u := a.Uses(); len(u) != 1 || u[0].Chunks != 320 {
		t.Fatalf("uses %+v: want 320 chunks counted at level 1", u)
	}
}

func TestFixedNeverMovesAndUsesCount(t *testing.T) {
	a := level.Fixed(6)
	var backlog int64
	got := feed(a, 5, &backlog, 4*mib)
	got = append(got, feed(a, 5, &backlog, -4*mib)...)
	for _, l := range got {
		if l != 6 {
			t.Fatalf("levels %v: want 6 throughout", got)
		}
	}
	want := []level.Use{{Level: 6, Chunks: 10, Bytes: 80 * mib}}
	if u := a.Uses(); !slices.Equal(u, want) {
		t.Fatalf("uses %+v, want %+v", u, want)
	}
}

func TestUsesSumWhatWasObservedLowestFirst(t *testing.T) {
	a := level.New(level.Steps, level.Start, 16*mib)
	var backlog int64
	feed(a, 8, &backlog, 2*mib)
	u := a.Uses()
	chunks, bytes := 0, int64(0)
	for i, x := range u {
		chunks += x.Chunks
		bytes += x.Bytes
		if i > 0 && u[i-1].Level >= x.Level {
			t.Fatalf("uses %+v: want ascending levels", u)
		}
	}
	if chunks != 8 || bytes != 64*mib {
		t.Fatalf("uses %+v sum to %d chunks, %d bytes; want 8 and %d", u, chunks, bytes, 64*mib)
	}
}

func TestStartBetweenStepsTakesTheOneBelow(t *testing.T) {
	if got := level.New(level.Steps, 5, 0).Level(); got != 3 {
		t.Fatalf("start 5: level %d, want 3", got)
	}
	if got := level.New(level.Steps, 0, 0).Level(); got != 1 {
		t.Fatalf("start 0: level %d, want 1", got)
	}
}
