package gctune

import (
	"os"
	"runtime/debug"
	"testing"
)

// gcPercent reads GOGC's current value.
func gcPercent() int {
	v := debug.SetGCPercent(100)
	debug.SetGCPercent(v)
	return v
}

// GOGC is lowered while any converting transfer runs, back when the last
// ends, and left alone when the user set it.
func TestConvertingTransfersLowerGOGCTogether(t *testing.T) {
	if _, set := os.LookupEnv("GOGC"); set {
		t.Skip("GOGC is set: the tuner leaves it alone")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	var g Tuner
	a := g.Start()
	b := g.Start()
	if got := gcPercent(); got != ConvertGC {
		t.Fatalf("GOGC %d while two convert, want %d", got, ConvertGC)
	}
	a()
	if got := gcPercent(); got != ConvertGC {
		t.Fatalf("GOGC %d while one still converts, want %d", got, ConvertGC)
	}
	b()
	if got := gcPercent(); got != 100 {
		t.Fatalf("GOGC %d after the last, want it back at 100", got)
	}
	t.Setenv("GOGC", "80")
	g.Start()()
	if got := gcPercent(); got != 100 {
		t.Fatalf("GOGC %d with GOGC set by the user, want it untouched", got)
	}
}
