package merger

import (
	"fmt"
	"slices"
	"testing"
)

// The compose tree of n sources takes the fewest levels GCS's 32 sources a
// call allow, and each level composes exactly the objects the level below
// made, in order: the final object's bytes are the chunks', in order,
// whatever the count.
func TestComposeTreeLevelsAndCalls(t *testing.T) {
	for _, tc := range []struct {
		sources, levels, calls int
	}{
		{1, 1, 1},
		{2, 1, 1},
		{32, 1, 1},
		{33, 2, 2 + 1},
		{64, 2, 2 + 1},
		{65, 2, 3 + 1},
		{1024, 2, 32 + 1},
		{1025, 3, 33 + 2 + 1},
		{32 * 32 * 32, 3, 1024 + 32 + 1},
		{32*32*32 + 1, 4, 1025 + 33 + 2 + 1},
	} {
		srcs := make([]string, tc.sources)
		for i := range srcs {
			srcs[i] = fmt.Sprintf("chunk-%d", i)
		}
		made := map[string]bool{}
		levels := composeTree(srcs, MaxComposeSources, func(level, k int) string {
			name := fmt.Sprintf("level-%d-%d", level, k)
			if made[name] {
				t.Errorf("%d sources: %s named twice", tc.sources, name)
			}
			made[name] = true
			return name
		})
		calls := 0
		for _, l := range levels {
			calls += len(l)
		}
		if len(levels) != tc.levels || calls != tc.calls {
			t.Errorf("%d sources: %d levels, %d calls; want %d levels, %d calls", tc.sources, len(levels), calls, tc.levels, tc.calls)
		}
		// Expand the final call back to the chunks it holds.
		parts := map[string][]string{}
		for i, l := range levels {
			for _, c := range l {
				if len(c.srcs) == 0 || len(c.srcs) > MaxComposeSources {
					t.Errorf("%d sources: a call of level %d composes %d sources", tc.sources, i, len(c.srcs))
				}
				if (c.dst == "") != (i == len(levels)-1) {
					t.Errorf("%d sources: level %d of %d has a call into %q", tc.sources, i, len(levels), c.dst)
				}
				var leaves []string
				for _, s := range c.srcs {
					if p, ok := parts[s]; ok {
						leaves = append(leaves, p...)
						delete(parts, s) // each intermediate read once
					} else {
						leaves = append(leaves, s)
					}
				}
				parts[c.dst] = leaves
			}
		}
		if got := parts[""]; !slices.Equal(got, srcs) {
			t.Errorf("%d sources: the final object holds %d sources, not the chunks in order", tc.sources, len(got))
		}
		if len(parts) != 1 {
			t.Errorf("%d sources: %d intermediate objects no call reads", tc.sources, len(parts)-1)
		}
	}
}
