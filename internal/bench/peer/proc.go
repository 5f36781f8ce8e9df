// Package peer runs and measures the programs the bench compares: any
// process, with its wall time, CPU (its waited-for children's included) and
// peak RSS (Start, Measure), and the plain Go clients a user would write
// (GoUpload, PutTree), which ferry is held against.
package peer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Process is a started child process whose resource use is read when it
// ends.
type Process struct {
	Name   string
	cmd    *exec.Cmd
	stderr *tailBuffer
	done   chan struct{}
	err    error
}

// Spec describes a process to start.
type Spec struct {
	Name string   // in tables and labels: producer, worker-1, gcloud, …
	Argv []string // program and arguments
	Env  []string // added to the bench's own environment
	Dir  string
	// Stdout receives the standard output (nil: discarded); the last
	// lines of the standard error are kept for error messages, and all of
	// it goes to Log when set, which should stay open until the process
	// ends (what it cannot take is dropped; the process goes on).
	Stdout io.Writer
	Log    io.Writer
	// Stdin, when set, is the standard input.
	Stdin io.Reader
}

// forgiving is a writer whose errors are dropped.
type forgiving struct{ w io.Writer }

func (f forgiving) Write(p []byte) (int, error) {
	_, _ = f.w.Write(p)
	return len(p), nil
}

// Start starts s. ctx bounds its life: when ctx ends the process is killed.
func Start(ctx context.Context, s Spec) (*Process, error) {
	if len(s.Argv) == 0 {
		return nil, errors.New("peer: empty command")
	}
	cmd := exec.CommandContext(ctx, s.Argv[0], s.Argv[1:]...)
	cmd.Env = append(os.Environ(), s.Env...)
	cmd.Dir = s.Dir
	cmd.Stdout = s.Stdout
	cmd.Stdin = s.Stdin
	tb := &tailBuffer{max: 4 << 10}
	cmd.Stderr = tb
	if s.Log != nil {
		// A log that fails (closed too early, a full disk) must not fail
		// the copy: the child would die of SIGPIPE at its next line.
		cmd.Stderr = io.MultiWriter(tb, forgiving{s.Log})
	}
	// Its own process group, so a stop reaches its children too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s (%s): %w", s.Name, s.Argv[0], err)
	}
	p := &Process{Name: s.Name, cmd: cmd, stderr: tb, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	return p, nil
}

// Wait waits for the process to end and returns what it used; the error
// names the process and quotes the end of its standard error.
func (p *Process) Wait() (Proc, error) {
	<-p.done
	u := p.usage()
	if p.err != nil {
		return u, fmt.Errorf("%s: %w: %s", p.Name, p.err, p.stderr.tail())
	}
	return u, nil
}

// Stop sends SIGTERM to the process group, waits up to grace, then kills
// it, and returns what it used. A process that ends on SIGTERM has no error.
func (p *Process) Stop(grace time.Duration) (Proc, error) {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		return p.usage(), fmt.Errorf("%s did not stop within %v of SIGTERM", p.Name, grace)
	}
	u := p.usage()
	// Ended by the signal (exit code -1) or cleanly: no error.
	var ee *exec.ExitError
	if p.err != nil && (!errors.As(p.err, &ee) || ee.ExitCode() > 0) {
		return u, fmt.Errorf("%s: %w: %s", p.Name, p.err, p.stderr.tail())
	}
	return u, nil
}

// Kill sends SIGKILL to the process group, as kill -9 does: no orderly
// shutdown, nothing the process could still write.
func (p *Process) Kill() { _ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) }

// Pid is the process's id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// usage reads CPU time and peak RSS from the process's rusage: wait4
// reports the process and the descendants it waited for.
func (p *Process) usage() Proc {
	u := Proc{Name: p.Name}
	if st := p.cmd.ProcessState; st != nil {
		u.CPU = st.UserTime() + st.SystemTime()
		if ru, ok := st.SysUsage().(*syscall.Rusage); ok {
			u.MaxRSSKB = ru.Maxrss // kilobytes on Linux
		}
	}
	return u
}

// Measure runs s to its end and returns the wall time from before the
// start to the end, and what it used.
func Measure(ctx context.Context, s Spec) (time.Duration, Proc, error) {
	t0 := time.Now()
	p, err := Start(ctx, s)
	if err != nil {
		return 0, Proc{Name: s.Name}, err
	}
	u, err := p.Wait()
	return time.Since(t0), u, err
}

// Output runs argv and returns its standard output; for helper commands
// outside any timing.
func Output(ctx context.Context, env []string, argv ...string) ([]byte, error) {
	var out bytes.Buffer
	p, err := Start(ctx, Spec{Name: argv[0], Argv: argv, Env: env, Stdout: &out})
	if err != nil {
		return nil, err
	}
	_, err = p.Wait()
	return out.Bytes(), err
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int
	b   []byte
	mu  sync.Mutex
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append([]byte(nil), t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) tail() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimSpace(string(t.b))
	if i := strings.LastIndexByte(s, '\n'); len(s) > 600 && i > 0 {
		s = "…" + s[max(0, len(s)-600):]
	}
	return s
}

// Proc is what one process of a run used: CPU seconds (user + system) and
// peak resident memory. For a process that starts children (gcloud,
// gsutil -m), the CPU includes the children it waited for and the peak is
// the largest of the process tree's peaks.
type Proc struct {
	Name     string
	CPU      time.Duration
	MaxRSSKB int64
}
