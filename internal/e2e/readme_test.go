package e2e

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/teststack"
	"github.com/ferry-dev/ferry/internal/testutil"
)

// recipe returns the command lines of the README's by-hand recipe: the
// first sh block after the heading "### Running it by hand on one machine".
func recipe(t *testing.T) []string {
	t.Helper()
	return readmeBlock(t, "### Running it by hand on one machine", 1)
}

// readmeBlock returns the command lines of the n-th sh block after heading.
func readmeBlock(t *testing.T, heading string, n int) []string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	i := strings.Index(readme, heading)
	if i < 0 {
		t.Fatalf("README.md has no heading %q", heading)
	}
	block := readme[i:]
	for ; n > 1; n-- {
		j := strings.Index(block, "```sh\n")
		if j < 0 {
			t.Fatalf("README.md has fewer sh blocks after %q", heading)
		}
		block = block[j+6:]
		block = block[strings.Index(block, "```")+3:]
	}
	start := strings.Index(block, "```sh\n")
	end := strings.Index(block[start+6:], "```")
	if start < 0 || end < 0 {
		t.Fatal("the recipe has no sh block")
	}
	var steps []string
	for _, l := range strings.Split(block[start+6:start+6+end], "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			steps = append(steps, l)
		}
	}
	return steps
}

// shell is one bash process that runs steps as a person types them, so
// that variables, `source` and background jobs carry from step to step.
type shell struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	seq   int
}

const stepMarker = "__ferry_step_done__"

func newShell(t *testing.T, dir string, env []string) *shell {
	t.Helper()
	sh := &shell{t: t, lines: make(chan string, 1000)}
	sh.cmd = exec.Command("bash", "--norc", "--noprofile")
	sh.cmd.Dir, sh.cmd.Env = dir, env
	// Its own process group, so that whatever the recipe left running
	// can be stopped at the end.
	sh.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var err error
	if sh.stdin, err = sh.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := sh.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	sh.cmd.Stderr = sh.cmd.Stdout
	if err := sh.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			sh.lines <- sc.Text()
		}
		close(sh.lines)
	}()
	t.Cleanup(func() {
		// SIGTERM first: localstack stops its emulator on it.
		_ = syscall.Kill(-sh.cmd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = sh.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-sh.cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	sh.run("exec 2>&1", time.Minute) // stderr into the same stream, in order
	return sh
}

// run types line, waits up to d for it to finish, and returns its output;
// the test fails unless it exits 0.
func (sh *shell) run(line string, d time.Duration) string {
	sh.t.Helper()
	sh.seq++
	marker := fmt.Sprintf("%s %d", stepMarker, sh.seq)
	if _, err := fmt.Fprintf(sh.stdin, "%s\necho \"%s $?\"\n", line, marker); err != nil {
		sh.t.Fatalf("step %q: %v", line, err)
	}
	var out strings.Builder
	timeout := time.After(d)
	for {
		select {
		case l, ok := <-sh.lines:
			if !ok {
				sh.t.Fatalf("step %q: the shell ended; output:\n%s", line, out.String())
			}
			if code, found := strings.CutPrefix(l, marker+" "); found {
				if code != "0" {
					sh.t.Fatalf("step %q exited %s; output:\n%s", line, code, out.String())
				}
				return out.String()
			}
			out.WriteString(l + "\n")
		case <-timeout:
			sh.t.Fatalf("step %q did not finish within %v; output so far:\n%s", line, d, out.String())
		}
	}
}

// TestREADMERecipe runs the README's by-hand recipe, step by step, in an
// empty directory with the binaries in bin/, and checks what each step
// shows a person: the transfer ends ok, status and verify agree with gcloud
// on the CRC32C, the done event can be pulled from ferry-done-sub, and the
// env file goes away with the stack.
func TestREADMERecipe(t *testing.T) {
	steps := recipe(t)
	dir, env := personIn(t)
	env = append(env, "CLOUDSDK_CORE_DISABLE_PROMPTS=1")
	_, haveGcloud := exec.LookPath("gcloud")
	sh := newShell(t, dir, env)

	var id, crc string
	checked := map[string]bool{}
	check := func(step string, ok bool, out string) {
		t.Helper()
		checked[step] = true
		if !ok {
			t.Fatalf("step %q shows:\n%s", step, out)
		}
	}
	for _, step := range steps {
		switch {
		case step == "make build":
			// Built by binaries(), as the Makefile builds them.
			continue
		case strings.HasPrefix(step, "gcloud ") && haveGcloud != nil:
			t.Logf("skipped without gcloud: %s", step)
			continue
		case strings.HasPrefix(step, "gcloud pubsub") && pstestStack(dir):
			t.Logf("skipped: localstack fell back to pstest, which gcloud cannot reach: %s", step)
			continue
		}
		began := time.Now()
		out := sh.run(step, 3*time.Minute)
		t.Logf("$ %s  (%.1fs)", step, time.Since(began).Seconds())
		switch {
		case strings.HasPrefix(step, "id=$(bin/producer submit"):
			id = strings.TrimSpace(sh.run(`printf '%s\n' "$id"`, time.Minute))
			check("submit", regexp.MustCompile(`^t[0-9t]+-[0-9a-f]{8}$`).MatchString(id) && strings.Contains(out, "transfer "+id+" ok: 1 object"), out+"id "+id)
		case strings.HasPrefix(step, "bin/producer status"):
			m := regexp.MustCompile(`crc32c ([A-Za-z0-9+/=]{8})`).FindStringSubmatch(out)
			if m != nil {
				crc = m[1]
			}
			check("status", strings.Contains(out, "state        ok") && strings.Contains(out, "files        1 of 1 done") && m != nil, out)
		case strings.HasPrefix(step, "bin/verify"):
			check("verify", strings.Contains(out, "verified 1 object under gs://ferry-local/demo: 10.0 MB raw") && strings.Contains(out, "crc32c "+crc), out)
		case strings.HasPrefix(step, "gcloud storage ls"):
			check("gcloud storage ls", strings.Contains(out, "gs://ferry-local/demo/small.csv.zst"), out)
		case strings.HasPrefix(step, "gcloud storage objects describe"):
			check("gcloud describe", strings.TrimSpace(out) == crc, out+"want "+crc)
		case strings.HasPrefix(step, "gcloud pubsub subscriptions pull"):
			check("gcloud pull", strings.Contains(out, `"transfer_id":"`+id+`"`) && strings.Contains(out, `"status":"ok"`), out)
		case strings.HasPrefix(step, "kill "):
			teststack.Until(t, time.Minute, "localstack to remove ferry.env on exit", func() bool {
				_, err := os.Stat(filepath.Join(dir, "ferry.env"))
				return os.IsNotExist(err)
			})
			checked["stop"] = true
		}
	}
	want := []string{"submit", "status", "verify", "stop"}
	if haveGcloud == nil {
		want = append(want, "gcloud storage ls", "gcloud describe")
		if !pstestStack(dir) {
			want = append(want, "gcloud pull")
		}
	}
	for _, w := range want {
		if !checked[w] {
			t.Errorf("the recipe has no %s step any more; update the README or this test", w)
		}
	}
}

// personIn returns an empty directory with the binaries in bin/, and a
// person's environment: nothing of this test's emulators, and a temporary
// directory and state directory of the test's own (end keys, journals).
func personIn(t *testing.T) (dir string, env []string) {
	t.Helper()
	dir = t.TempDir()
	testutil.OK(t, os.Symlink(binaries(t), filepath.Join(dir, "bin")))
	tmp := t.TempDir()
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "FERRY_") || strings.HasSuffix(k, "_EMULATOR_HOST") || strings.HasPrefix(k, "CLOUDSDK_API_ENDPOINT_OVERRIDES_") || k == "TMPDIR" {
			continue
		}
		env = append(env, kv)
	}
	return dir, append(env, "TMPDIR="+tmp, "XDG_STATE_HOME="+tmp)
}

// TestREADMEQuickStart runs the README's try-it-locally block of ferry cp,
// step by step, as a person would: a GCS stand-in and no Pub/Sub at all,
// ferry cp of a file and a directory, a plain copy, ls, the copy back and
// the bytes compared, rm.
func TestREADMEQuickStart(t *testing.T) {
	steps := readmeBlock(t, "## Quick start", 2)
	dir, env := personIn(t)
	sh := newShell(t, dir, env)
	checked := map[string]bool{}
	for _, step := range steps {
		if step == "make build" {
			continue // built by binaries(), as the Makefile builds them
		}
		out := sh.run(step, 3*time.Minute)
		t.Logf("$ %s\n%s", step, out)
		switch {
		case strings.HasPrefix(step, "source "):
			pubsub := strings.TrimSpace(sh.run(`printf '%s\n' "${PUBSUB_EMULATOR_HOST:-none}"`, time.Minute))
			if pubsub != "none" {
				t.Fatalf("the quick start's stand-in set PUBSUB_EMULATOR_HOST=%s: ferry cp must need no Pub/Sub", pubsub)
			}
		case strings.HasPrefix(step, "bin/ferry cp --codec none"):
			checked["plain"] = true
			if !regexp.MustCompile(`transfer t[0-9t]+-[0-9a-f]{8} ok: 1 object`).MatchString(out) {
				t.Fatalf("the plain copy shows:\n%s", out)
			}
		case strings.HasPrefix(step, "bin/ferry cp gs://"):
			checked["download"] = true
			if !strings.Contains(out, "2 objects") {
				t.Fatalf("the copy back shows:\n%s", out)
			}
		case strings.HasPrefix(step, "bin/ferry cp"):
			checked["cp"] = true
			if !regexp.MustCompile(`transfer t[0-9t]+-[0-9a-f]{8} ok: 2 objects`).MatchString(out) {
				t.Fatalf("ferry cp shows:\n%s", out)
			}
		case strings.HasPrefix(step, "bin/ferry ls"):
			checked["ls"] = true
			if !strings.Contains(out, "gs://ferry-local/try/small.csv.zst") || !strings.Contains(out, "2 objects") {
				t.Fatalf("ferry ls shows:\n%s", out)
			}
		case strings.HasPrefix(step, "bin/ferry rm"):
			checked["rm"] = true
			if left := sh.run("bin/ferry ls gs://ferry-local/plain", time.Minute); !strings.Contains(left, "0 objects") {
				t.Fatalf("after ferry rm, ferry ls shows:\n%s", left)
			}
		case strings.HasPrefix(step, "cmp "):
			checked["compare"] = true // sh.run fails the test on a non-zero exit
		case strings.HasPrefix(step, "kill "):
			teststack.Until(t, time.Minute, "localstack to remove gcs.env on exit", func() bool {
				_, err := os.Stat(filepath.Join(dir, "gcs.env"))
				return os.IsNotExist(err)
			})
			checked["stop"] = true
		}
	}
	for _, w := range []string{"cp", "plain", "ls", "download", "compare", "rm", "stop"} {
		if !checked[w] {
			t.Errorf("the quick start has no %s step any more; update the README or this test", w)
		}
	}
}

// pstestStack reports whether the recipe's localstack runs pstest.
func pstestStack(dir string) bool {
	b, _ := os.ReadFile(filepath.Join(dir, "localstack.log"))
	return strings.Contains(string(b), `"pubsub_kind":"pstest"`)
}
