package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/teststack"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// testVersion is the version the test binaries are built with, as the
// Makefile sets it.
const testVersion = "v0.0.0-e2e"

// binaries builds ferry's commands once per test run, for tests that need
// real processes to kill.
func binaries(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "ferry-bin-")
		if buildErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-ldflags", "-X main.version="+testVersion, "-o", binDir+"/", "github.com/ferry-dev/ferry/cmd/...")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v: %s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir
}

// proc is a ferry binary running as a real process.
type proc struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	out  *teststack.SyncBuffer
	done chan struct{}
	err  error
}

// env is the environment a process of this stack runs with; extra entries
// (KEY=VALUE) override.
func (s *stack) env(extra ...string) []string {
	env := append(os.Environ(),
		"FERRY_PROJECT="+s.ps.Project,
		"FERRY_CHUNKS_TOPIC="+s.ps.ChunksTopic, "FERRY_CHUNKS_SUBSCRIPTION="+s.ps.ChunksSubscription,
		"FERRY_EVENTS_TOPIC="+s.ps.EventsTopic, "FERRY_EVENTS_SUBSCRIPTION="+s.ps.EventsSubscription,
		"FERRY_CONTROL_TOPIC="+s.ps.ControlTopic, "FERRY_CONTROL_SUBSCRIPTION="+s.ps.ControlSubscription,
		"FERRY_CONTROL_DEAD_LETTER_TOPIC="+s.ps.ControlDeadLetter,
		"FERRY_DONE_TOPIC="+s.ps.DoneTopic,
		"FERRY_CHUNKS_DEAD_LETTER_TOPIC="+s.ps.ChunksDeadLetter, "FERRY_EVENTS_DEAD_LETTER_TOPIC="+s.ps.EventsDeadLetter,
		"FERRY_REQUESTS_TOPIC="+s.ps.RequestsTopic, "FERRY_REQUESTS_SUBSCRIPTION="+s.ps.RequestsSubscription,
		"FERRY_REQUESTS_DEAD_LETTER_TOPIC="+s.ps.RequestsDeadLetter,
		"FERRY_SHARDS_TOPIC="+s.ps.ShardsTopic, "FERRY_SHARDS_SUBSCRIPTION="+s.ps.ShardsSubscription,
		"FERRY_SHARDS_DEAD_LETTER_TOPIC="+s.ps.ShardsDeadLetter,
		"FERRY_SPOOL_DIR="+s.spool, "FERRY_RESULTS_FILE="+s.results, "FERRY_KEY_DIR="+s.keys,
		"FERRY_LOG_FORMAT=json", "FERRY_LOG_LEVEL=debug", "FERRY_HTTP_ADDR=127.0.0.1:0")
	return append(env, extra...)
}

// start runs binary (worker, merger, producer) with args in the stack's
// environment. The process is killed when the test ends.
func (s *stack) start(name, binary string, env []string, args ...string) *proc {
	s.t.Helper()
	return startProc(s.t, name, binary, env, args...)
}

// startProc runs ferry's binary with args and env. The process is killed
// when the test ends.
func startProc(t *testing.T, name, binary string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, name: name, out: &teststack.SyncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(filepath.Join(binaries(t), binary), args...)
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("output of %s:\n%s", p.name, tail(p.out.String(), 4000))
		}
	})
	return p
}

// kill9 kills the process with SIGKILL and waits for it.
func (p *proc) kill9() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		p.t.Fatal(err)
	}
	<-p.done
}

// wait waits up to d for the process to exit and returns its exit code.
func (p *proc) wait(d time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		p.t.Fatalf("%s did not exit within %v; output:\n%s", p.name, d, tail(p.out.String(), 4000))
	}
	if p.err == nil {
		return 0
	}
	if ee, ok := p.err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	p.t.Fatalf("%s: %v", p.name, p.err)
	return -1
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
