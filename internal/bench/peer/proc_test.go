package peer

import (
	"context"
	"os"
	"strings"
	"testing"
)

// Measure reports what a process used (its peak RSS grows with what it
// holds), and a process that fails is named with the end of its standard
// error.
func TestMeasureReportsUseAndNamesFailures(t *testing.T) {
	ctx := context.Background()
	_, small, err := Measure(ctx, Spec{Name: "small", Argv: []string{"sh", "-c", "exit 0"}})
	if err != nil {
		t.Fatal(err)
	}
	// dd's one 128 MiB buffer, filled, in a child the shell waits for.
	_, big, err := Measure(ctx, Spec{Name: "big", Argv: []string{"sh", "-c", "dd if=/dev/zero of=/dev/null bs=128M count=1 2>/dev/null"}})
	if err != nil {
		t.Fatal(err)
	}
	if small.Name != "small" || big.MaxRSSKB < 128<<10 || big.MaxRSSKB <= small.MaxRSSKB {
		t.Errorf("peak RSS: %+v then %+v; want the second above 128 MiB", small, big)
	}
	_, _, err = Measure(ctx, Spec{Name: "gcloud", Argv: []string{"sh", "-c", "echo 'ERROR: bucket not found' >&2; exit 3"}})
	if err == nil || !strings.Contains(err.Error(), "gcloud: exit status 3") || !strings.Contains(err.Error(), "ERROR: bucket not found") {
		t.Fatalf("failure: %v, want it named with its stderr", err)
	}
	out, err := Output(ctx, nil, "sh", "-c", "echo hello")
	if err != nil || string(out) != "hello\n" {
		t.Fatalf("Output: %q, %v", out, err)
	}
}

// A process whose log is closed while it runs goes on: what the log cannot
// take is dropped, and the child does not die of SIGPIPE at its next line.
func TestAClosedLogDoesNotKillTheProcess(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "log")
	if err != nil {
		t.Fatal(err)
	}
	f.Close() // closed before the child writes a line
	p, err := Start(context.Background(), Spec{Name: "chatty", Argv: []string{"sh", "-c", "for i in 1 2 3; do echo line $i >&2; done; exit 0"}, Log: f})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(); err != nil {
		t.Fatalf("a process logging to a closed file: %v", err)
	}
}
