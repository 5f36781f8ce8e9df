package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/teststack"
)

// TestServicesRideOutUnreachableBackends: worker, merger and producer serve,
// started while Pub/Sub (or GCS) is unreachable, neither exit nor spin: they
// log each retry with a growing wait, /readyz answers 503 naming the backend
// and the variable that chose it, and SIGTERM still stops them cleanly.
// With GCS unreachable they do not even pull: what they would take, they
// could only fail.
func TestServicesRideOutUnreachableBackends(t *testing.T) {
	type service struct {
		name, binary string
		args         []string
	}
	services := []service{{"worker", "worker", nil}, {"merger", "merger", nil}, {"producer-serve", "producer", []string{"serve"}}}
	outages := []struct {
		backend, variable, retryLog string
	}{
		{"pubsub", "PUBSUB_EMULATOR_HOST", "cannot receive; retrying"},
		{"gcs", "STORAGE_EMULATOR_HOST", "not pulling: the handlers could not do their work; retrying"},
	}
	for _, o := range outages {
		for _, svc := range services {
			t.Run(o.backend+"/"+svc.name, func(t *testing.T) {
				t.Parallel()
				rideOut(t, svc.name, svc.binary, svc.args, o.variable, o.backend, o.retryLog)
			})
		}
	}
}

// rideOut runs binary with variable pointing at a closed port and checks
// that it waits it out as TestServicesRideOutUnreachableBackends says.
func rideOut(t *testing.T, name, binary string, args []string, variable, backend, retryLog string) {
	dir := t.TempDir()
	env := append(os.Environ(), variable+"=127.0.0.1:1",
		"FERRY_HTTP_ADDR=127.0.0.1:0", "FERRY_LOG_FORMAT=json", "FERRY_LOG_LEVEL=info",
		"FERRY_SPOOL_DIR="+filepath.Join(dir, "spool"), "FERRY_RESULTS_FILE="+filepath.Join(dir, "results.ndjson"),
		"FERRY_SOURCE_ROOTS="+dir)
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

	var addr, sub string
	var waits []time.Duration
	teststack.Until(t, 2*time.Minute, name+" to log three retries", func() bool {
		select {
		case <-p.done:
			t.Fatalf("%s exited while the backends were unreachable: %v", name, p.err)
		default:
		}
		waits, sub = waits[:0], ""
		for _, line := range strings.Split(p.out.String(), "\n") {
			var rec struct {
				Message, Addr, Err, Subscription string
				RetryIn                          time.Duration `json:"retry_in"`
			}
			if json.Unmarshal([]byte(line), &rec) != nil {
				continue
			}
			switch rec.Message {
			case "serving /metrics, /healthz and /readyz":
				addr = rec.Addr
			case retryLog:
				if !strings.Contains(rec.Err, variable+"=127.0.0.1:1") {
					t.Fatalf("logged error %q does not name %s", rec.Err, variable)
				}
				// The merger receives from two subscriptions, each
				// backing off on its own: follow the first one seen.
				if sub == "" {
					sub = rec.Subscription
				}
				if rec.Subscription == sub {
					waits = append(waits, rec.RetryIn)
				}
			}
		}
		return addr != "" && len(waits) >= 3
	})
	// gax's backoff: a limit from 0.5 s that doubles, each wait drawn at
	// random below it (full jitter) and never under 50 ms: never a spin,
	// never past the limit, though not longer every time.
	for i, w := range waits[:3] {
		if limit := 500 * time.Millisecond << i; w < 50*time.Millisecond || w > limit {
			t.Errorf("retry %d waited %v, want [50ms, %v] (backoff, not a spin); all: %v", i+1, w, limit, waits[:3])
		}
	}
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), backend+" unreachable") ||
		!strings.Contains(string(body), variable+"=127.0.0.1:1") {
		t.Fatalf("/readyz answered %d %q; want 503 naming %s and %s", resp.StatusCode, body, backend, variable)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(time.Minute); code != 0 {
		t.Fatalf("%s exited %d after SIGTERM, want 0", name, code)
	}
}
