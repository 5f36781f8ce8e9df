package setup

import (
	"runtime/debug"
	"testing"
)

func TestMemoryLimitComesFromTheBudgetUnlessGOMEMLIMITIsSet(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	t.Setenv("GOMEMLIMIT", "")
	if got := MemoryLimit(256 << 20); got != before {
		t.Fatalf("with GOMEMLIMIT set the limit became %d; want it left at %d", got, before)
	}
}

func TestMemoryLimitIsTheBudgetPlusTheOverhead(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	if got, want := MemoryLimit(256<<20), int64(256<<20+MemoryOverhead-binaryPages); got != want || debug.SetMemoryLimit(-1) != want {
		t.Fatalf("limit %d (runtime %d), want %d", got, debug.SetMemoryLimit(-1), want)
	}
}
