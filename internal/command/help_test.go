package command

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/internal/cli"
)

// runFerry runs ferry with args as a pipe sees it: stdout and stderr
// kept, stdin not a terminal (holding a "y" that no prompt may take).
func runFerry(args ...string) (code int, stdout, stderr string) {
	var out, errs bytes.Buffer
	root := Ferry("test")
	root.SetIn(strings.NewReader("y\n"))
	code = cli.Run(context.Background(), root, args, &out, &errs)
	return code, out.String(), errs.String()
}

// help runs ferry with args, which must succeed quietly, and returns stdout.
func help(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errs := runFerry(args...)
	if code != cli.ExitOK || errs != "" {
		t.Fatalf("ferry %s: exit %d, stderr %q", strings.Join(args, " "), code, errs)
	}
	return out
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

// ferry completes in the four shells cobra writes for; the fleet's
// binaries (run by systemd) offer no completion command.
func TestFerryCompletesInEveryShell(t *testing.T) {
	for shell, want := range map[string]string{"bash": "__start_ferry", "zsh": "#compdef ferry", "fish": "complete -c ferry", "powershell": "Register-ArgumentCompleter"} {
		if got := help(t, "completion", shell); !strings.Contains(got, want) {
			t.Errorf("ferry completion %s does not hold %q:\n%.300s", shell, want, got)
		}
	}
	var out, errs bytes.Buffer
	if code := cli.Run(context.Background(), Producer("test"), []string{"completion", "bash"}, &out, &errs); code == cli.ExitOK {
		t.Errorf("producer completion bash: exit 0, want no such command:\n%.200s", out.String())
	}
}

// A version given at build time stands; without one (go install) the
// build's own module version, else "dev".
func TestBuildVersion(t *testing.T) {
	if v := cli.BuildVersion("v1.2.3"); v != "v1.2.3" {
		t.Errorf("BuildVersion(v1.2.3) = %q", v)
	}
	if v := cli.BuildVersion("dev"); v == "" || v == "(devel)" {
		t.Errorf("BuildVersion(dev) = %q, want dev or a module version", v)
	}
}
