package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/ferry-dev/ferry/internal/config"
)

// cpLike is a command shaped like producer submit: positionals and flags,
// long and short.
func cpLike(got *[]string, wait *bool, runErr error) *cobra.Command {
	root := &cobra.Command{Use: "tool", Version: "v9.8.7"}
	cp := &cobra.Command{
		Use: "cp SOURCE... DEST",
		RunE: func(_ *cobra.Command, args []string) error {
			*got = args
			return runErr
		},
	}
	cp.Flags().BoolVar(wait, "wait", false, "wait")
	cp.Flags().BoolP("no-clobber", "n", false, "skip existing")
	Env(cp, &config.Worker{})
	Env(root, &config.Worker{})
	root.AddCommand(cp)
	return root
}

func run(t *testing.T, root *cobra.Command, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = Run(context.Background(), root, args, &o, &e)
	return code, o.String(), e.String()
}

func TestFlagsBeforeOrAfterArguments(t *testing.T) {
	for _, args := range [][]string{
		{"cp", "--wait", "-n", "a.csv", "gs://b/x"},
		{"cp", "a.csv", "gs://b/x", "--wait", "-n"},
		{"cp", "a.csv", "--wait", "gs://b/x", "-n"},
	} {
		var got []string
		var wait bool
		code, _, stderr := run(t, cpLike(&got, &wait, nil), args...)
		if code != ExitOK || !wait || strings.Join(got, " ") != "a.csv gs://b/x" {
			t.Errorf("%q: exit %d, wait %v, args %q, stderr %q", args, code, wait, got, stderr)
		}
	}
}

func TestHelpGoesToStdoutWithTheVariables(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"cp", "--help"}, {"cp", "-h"}, {"help", "cp"}} {
		var got []string
		var wait bool
		code, stdout, stderr := run(t, cpLike(&got, &wait, nil), args...)
		if code != ExitOK || stderr != "" || !strings.Contains(stdout, "FERRY_WORKER_CONCURRENCY") || !strings.Contains(stdout, "FERRY_ENV_FILE") {
			t.Errorf("%q: exit %d, stderr %q, stdout:\n%s", args, code, stderr, stdout)
		}
		if strings.Contains(stdout, "[=true|false]") {
			t.Errorf("%q: boolean flags listed as --flag[=true|false]:\n%s", args, stdout)
		}
	}
}

func TestVersion(t *testing.T) {
	var got []string
	var wait bool
	code, stdout, _ := run(t, cpLike(&got, &wait, nil), "--version")
	if code != ExitOK || stdout != "tool v9.8.7\n" {
		t.Errorf("exit %d, stdout %q", code, stdout)
	}
}

func TestExitStatuses(t *testing.T) {
	cfgErr := config.Load(context.Background(), &config.Worker{}, mapLookuper{"FERRY_WORKER_CONCURRENCY": "0"})
	if cfgErr == nil {
		t.Fatal("no configuration error")
	}
	for _, tc := range []struct {
		name   string
		args   []string
		runErr error
		code   int
		want   string
	}{
		{"ok", []string{"cp", "a", "b"}, nil, ExitOK, ""},
		{"unknown flag", []string{"cp", "--bogus", "a", "b"}, nil, ExitUsage, "unknown flag: --bogus\nRun 'tool cp --help' for usage."},
		{"unknown command", []string{"mv", "a"}, nil, ExitUsage, `unknown command "mv"`},
		{"usage error from the command", []string{"cp", "a"}, Usagef("cp needs a DEST"), ExitUsage, "tool: cp needs a DEST\nRun 'tool cp --help'"},
		{"configuration error", []string{"cp", "a", "b"}, cfgErr, ExitUsage, "FERRY_WORKER_CONCURRENCY=0"},
		{"failed run", []string{"cp", "a", "b"}, errors.New("transfer t1 failed: boom"), ExitFailed, "tool: transfer t1 failed: boom\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			var wait bool
			code, _, stderr := run(t, cpLike(&got, &wait, tc.runErr), tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, stderr, tc.code, tc.want)
			}
		})
	}
}

type mapLookuper map[string]string

func (m mapLookuper) Lookup(k string) (string, bool) { v, ok := m[k]; return v, ok }

// jsonCommand prints doc on stdout (if any) and fails with runErr.
func jsonCommand(doc string, runErr error) *cobra.Command {
	root := &cobra.Command{Use: "tool"}
	cp := &cobra.Command{
		Use: "cp",
		RunE: func(c *cobra.Command, _ []string) error {
			if doc != "" {
				fmt.Fprintln(c.OutOrStdout(), doc)
			}
			return runErr
		},
	}
	cp.Flags().Bool("json", false, "print JSON")
	root.AddCommand(cp)
	return root
}

// With --json stdout holds exactly one JSON document, for a failure too:
// the error and the exit status where the command printed nothing, the
// command's own document where it did (a transfer that ended failed).
func TestJSONPrintsOneDocumentOnFailure(t *testing.T) {
	for _, c := range []struct {
		name, doc string
		args      []string
		err       error
		code      int
		want      Failure
	}{
		{"a failure", "", []string{"cp", "--json"}, errors.New("source x.csv: no such file"), ExitFailed,
			Failure{V: 1, Status: StatusError, Error: "source x.csv: no such file", ExitCode: ExitFailed}},
		{"a usage error", "", []string{"cp", "--json"}, Usagef("want a destination"), ExitUsage,
			Failure{V: 1, Status: StatusError, Error: "want a destination", ExitCode: ExitUsage}},
		{"an unknown flag", "", []string{"cp", "--json", "--nope"}, nil, ExitUsage,
			Failure{V: 1, Status: StatusError, Error: "unknown flag: --nope", ExitCode: ExitUsage}},
		{"its own document", `{"status": "failed", "error": "upload: 503"}`, []string{"cp", "--json"}, errors.New("transfer t1 ended failed"), ExitFailed,
			Failure{Status: "failed", Error: "upload: 503"}},
	} {
		code, stdout, stderr := run(t, jsonCommand(c.doc, c.err), c.args...)
		var got Failure
		dec := json.NewDecoder(strings.NewReader(stdout))
		if err := dec.Decode(&got); err != nil || dec.More() {
			t.Errorf("%s: stdout is not one JSON document (%v):\n%s", c.name, err, stdout)
			continue
		}
		if code != c.code || got != c.want || stderr == "" {
			t.Errorf("%s: exit %d, document %+v, stderr %q; want exit %d and %+v, and the error on stderr too", c.name, code, got, stderr, c.code, c.want)
		}
	}
	// Without --json, stdout stays empty on failure.
	if _, stdout, _ := run(t, jsonCommand("", errors.New("boom")), "cp"); stdout != "" {
		t.Errorf("without --json a failure printed %q on stdout", stdout)
	}
}
