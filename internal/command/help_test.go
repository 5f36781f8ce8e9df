package command

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/internal/cli"
)

// help runs ferry with args, as a pipe (not a terminal) sees it.
func help(t *testing.T, args ...string) string {
	t.Helper()
	var out, errs bytes.Buffer
	if code := cli.Run(context.Background(), Ferry("test"), args, &out, &errs); code != cli.ExitOK || errs.Len() > 0 {
		t.Fatalf("ferry %s: exit %d, stderr %q", strings.Join(args, " "), code, errs.String())
	}
	return out.String()
}

// ferry cp --help fits one screen: at most 60 lines, none wider than 100
// columns, its flags in groups, the defaults cp has; --help-all adds every
// other flag and the environment variables.
func TestCpHelpFitsOneScreen(t *testing.T) {
	short := help(t, "cp", "--help")
	lines := strings.Split(strings.TrimRight(short, "\n"), "\n")
	if len(lines) > 60 {
		t.Errorf("ferry cp --help is %d lines, want at most 60:\n%s", len(lines), short)
	}
	for _, l := range lines {
		if len(l) > 100 {
			t.Errorf("a line of %d columns, want at most 100: %q", len(l), l)
		}
	}
	for _, want := range []string{"Copying:", "Filters and links:", "Speed:", "Tables:", "--no-clobber", "--exclude", "--uploads",
		"FERRY_CHUNK_SIZE, 8MiB", "--help-all"} {
		if !strings.Contains(short, want) {
			t.Errorf("ferry cp --help does not show %q:\n%s", want, short)
		}
	}
	for _, not := range []string{"--idempotency-key", "--method", "Environment variables", "FERRY_CP_MEMORY  ", "producer submit"} {
		if strings.Contains(short, not) {
			t.Errorf("ferry cp --help shows %q, which is --help-all's:\n%s", not, short)
		}
	}
	all := help(t, "cp", "--help-all")
	for _, want := range []string{"More flags:", "--idempotency-key", "--schema", "Environment variables", "FERRY_CP_MEMORY", "--no-clobber"} {
		if !strings.Contains(all, want) {
			t.Errorf("ferry cp --help-all does not show %q", want)
		}
	}
	// A command that is not brief keeps its whole help.
	if sub := help(t, "status", "--help"); !strings.Contains(sub, "Flags:") || strings.Contains(sub, "--help-all") {
		t.Errorf("ferry status --help lost its flags:\n%s", sub)
	}
}
