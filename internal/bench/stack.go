package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ferry-dev/ferry/internal/bench/peer"
	"github.com/ferry-dev/ferry/internal/bench/verdict"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/localstack"
)

// Stack is a running bin/localstack process: fake-gcs-server behind ferry's
// shim, and the Pub/Sub emulator when ferry needs it.
type Stack struct {
	Dir  string
	Env  map[string]string
	proc *peer.Process
	hc   *http.Client // the server's own endpoints: buckets, reset, the shim's stats
	// store reads objects as ferry does (internal/gcs).
	store *gcs.Store
}

// StackOptions choose what bin/localstack runs.
type StackOptions struct {
	Bin     string // directory of ferry's binaries
	Dir     string // for its data, logs and env file (created)
	PubSub  bool   // start the Pub/Sub emulator (ferry needs it; peers do not)
	TLS     bool   // serve HTTPS too (gsutil)
	Compose string // fast or fake
	// GCSRoot, when set, keeps the server's objects there with the
	// filesystem backend (see localstack.GCSOptions.StorageRoot).
	GCSRoot string
	Log     io.Writer
}

// StartStack starts bin/localstack and waits until it has written its
// environment, at most 2 minutes.
func StartStack(ctx context.Context, o StackOptions) (*Stack, error) {
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	envFile := filepath.Join(o.Dir, "env")
	_ = os.Remove(envFile)
	args := []string{filepath.Join(o.Bin, "localstack"), "--dir", o.Dir, "--env-file", envFile, "--buckets", ""}
	if !o.PubSub {
		args = append(args, "--pubsub", "none")
	}
	if o.TLS {
		args = append(args, "--gcs-tls")
	}
	if o.Compose != "" {
		args = append(args, "--compose", o.Compose)
	}
	if o.GCSRoot != "" {
		args = append(args, "--gcs-root", o.GCSRoot)
	}
	p, err := peer.Start(ctx, peer.Spec{Name: "localstack", Argv: args, Log: o.Log, Env: []string{"FERRY_LOG_FORMAT=text"}})
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if b, err := os.ReadFile(envFile); err == nil && len(b) > 0 {
			env := parseExports(b)
			if env["STORAGE_EMULATOR_HOST"] != "" && (!o.PubSub || env["PUBSUB_EMULATOR_HOST"] != "") {
				store, err := gcs.NewEmulator(ctx, env["STORAGE_EMULATOR_HOST"])
				if err != nil {
					_, _ = p.Stop(5 * time.Second)
					return nil, err
				}
				return &Stack{Dir: o.Dir, Env: env, proc: p, hc: &http.Client{Timeout: 10 * time.Minute}, store: store}, nil
			}
		}
		if p.Exited() {
			_, err := p.Wait()
			return nil, fmt.Errorf("localstack exited before it was ready: %v", err)
		}
		if time.Now().After(deadline) {
			_, _ = p.Stop(5 * time.Second)
			return nil, fmt.Errorf("localstack wrote no environment to %s within 2 minutes", envFile)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// parseExports reads "export K=V" lines.
func parseExports(b []byte) map[string]string {
	env := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "export "), "=")
		if ok {
			env[k] = v
		}
	}
	return env
}

// Environ is the stack's environment as KEY=VALUE pairs.
func (s *Stack) Environ() []string {
	var out []string
	for k, v := range s.Env {
		out = append(out, k+"="+v)
	}
	return out
}

// GCS is the base URL of the storage API, "http://127.0.0.1:PORT".
func (s *Stack) GCS() string { return "http://" + s.Env["STORAGE_EMULATOR_HOST"] }

// CPU is what the stack's processes (fake-gcs-server behind the shim,
// and the Pub/Sub emulator it started) have used so far: read before and
// after a run, the servers' share of it.
func (s *Stack) CPU() time.Duration { return peer.TreeCPU(s.proc.Pid()) }

// Stop ends the stack.
func (s *Stack) Stop() error {
	_ = s.store.Close()
	_, err := s.proc.Stop(20 * time.Second)
	return err
}

func (s *Stack) do(ctx context.Context, method, path string, body []byte, out any) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.GCS()+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, s.GCS()+path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, s.GCS()+path, resp.Status, verdict.OneLine(string(b), 200))
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("%s %s: %w", method, s.GCS()+path, err)
		}
	}
	return nil
}

// CreateBucket creates an empty bucket.
func (s *Stack) CreateBucket(ctx context.Context, name string) error {
	b, _ := json.Marshal(map[string]string{"name": name})
	return s.do(ctx, http.MethodPost, "/storage/v1/b?project=ferry-local", b, nil)
}

// Reset deletes every object and bucket of the server, so that memory does
// not grow from one repeat to the next.
func (s *Stack) Reset(ctx context.Context) error {
	return s.do(ctx, http.MethodPost, "/_internal/delete_all", nil, nil)
}

// List lists the objects under prefix.
func (s *Stack) List(ctx context.Context, bucket, prefix string) ([]gcs.Attrs, error) {
	var all []gcs.Attrs
	err := s.Each(ctx, bucket, prefix, func(a gcs.Attrs) error { all = append(all, a); return nil })
	return all, err
}

// Each calls fn with every object under prefix, in name order, holding none.
func (s *Stack) Each(ctx context.Context, bucket, prefix string, fn func(gcs.Attrs) error) error {
	return s.store.List(ctx, bucket, prefix, fn)
}

// Stats reads the shim's counters.
func (s *Stack) Stats(ctx context.Context) (localstack.Stats, error) {
	var st localstack.Stats
	err := s.do(ctx, http.MethodGet, localstack.StatsPath, nil, &st)
	return st, err
}

// Download writes an object to path.
func (s *Stack) Download(ctx context.Context, bucket, name, path string) error {
	r, err := s.store.NewReader(ctx, bucket, name)
	if err != nil {
		return err
	}
	defer r.Close()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return fmt.Errorf("download gs://%s/%s: %w", bucket, name, err)
	}
	return f.Close()
}
