package e2e

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/queue"
	"github.com/ferry-dev/ferry/internal/teststack"
	"github.com/ferry-dev/ferry/internal/testutil"
)

// runBinary runs a built binary to its end (at most two minutes) and returns
// its exit status, stdout and stderr.
func runBinary(t *testing.T, env []string, name string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binaries(t), name), args...)
	cmd.Env = env
	var stdout, stderr teststack.SyncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s %q did not end within 2 minutes; stderr:\n%s", name, args, stderr.String())
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, stdout.String(), stderr.String()
}

// TestEveryBinaryHelpVersionAndExitStatus: --help on stdout with exit 0,
// listing the binary's variables; --version as the build set it; exit 2 for
// an unknown flag and for an invalid FERRY_* variable alike.
func TestEveryBinaryHelpVersionAndExitStatus(t *testing.T) {
	env := append(os.Environ(), "FERRY_ENV_FILE=")
	for _, b := range []struct {
		name    string
		vars    []string
		badEnv  string // an invalid variable, for binaries that read any
		runArgs []string
	}{
		{"producer", []string{"FERRY_CHUNK_SIZE", "PUBSUB_EMULATOR_HOST"}, "FERRY_CHUNK_SIZE=64KiB", []string{"submit", "a.csv", "gs://b/x"}},
		{"worker", []string{"FERRY_WORKER_CONCURRENCY", "STORAGE_EMULATOR_HOST"}, "FERRY_WORKER_CONCURRENCY=0", nil},
		{"merger", []string{"FERRY_RESULTS_FILE", "FERRY_DONE_RETENTION"}, "FERRY_LOG_LEVEL=loud", nil},
		{"verify", []string{"STORAGE_EMULATOR_HOST"}, "STORAGE_EMULATOR_HOST=http://x/", []string{"a.csv", "gs://b/x"}},
		{"restore", []string{"FERRY_RESTORE_MEMORY", "STORAGE_EMULATOR_HOST"}, "FERRY_RESTORE_CONCURRENCY=0", []string{"gs://b-1/x", "dest"}},
		{"localstack", []string{"FERRY_DONE_TOPIC"}, "FERRY_DONE_TOPIC=a b", nil},
		{"datagen", nil, "", nil},
		{"report", nil, "", nil},
		{"bench", []string{"BENCH_QUICK", "BENCH_REPEATS"}, "", nil},
	} {
		t.Run(b.name, func(t *testing.T) {
			code, stdout, stderr := runBinary(t, env, b.name, "--help")
			if code != 0 || stderr != "" || !strings.Contains(stdout, "Usage:") {
				t.Fatalf("--help: exit %d, stderr %q, stdout:\n%s", code, stderr, stdout)
			}
			for _, v := range b.vars {
				if !strings.Contains(stdout, v) {
					t.Errorf("--help does not list %s", v)
				}
			}
			code, stdout, _ = runBinary(t, env, b.name, "--version")
			if code != 0 || stdout != b.name+" "+testVersion+"\n" {
				t.Errorf("--version: exit %d, %q", code, stdout)
			}
			code, _, stderr = runBinary(t, env, b.name, "--no-such-flag")
			if code != 2 || !strings.Contains(stderr, "--no-such-flag") {
				t.Errorf("unknown flag: exit %d, stderr %q", code, stderr)
			}
			if b.badEnv == "" {
				return
			}
			name := b.badEnv[:strings.Index(b.badEnv, "=")]
			code, _, stderr = runBinary(t, append(env, b.badEnv), b.name, b.runArgs...)
			if code != 2 || !strings.Contains(stderr, name) {
				t.Errorf("%s: exit %d, stderr %q; want exit 2 naming the variable", b.badEnv, code, stderr)
			}
		})
	}
}

// deadEndpoint is a loopback address nothing listens on.
func deadEndpoint(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// TestSubmitTimeoutBoundsTheWholeCommand (issue 8): against a stack that has
// stopped, submit --timeout ends with an error naming what it was doing, the
// endpoint and the variable that set it, and prints no transfer id. With an
// env file, as the issue tried it.
func TestSubmitTimeoutBoundsTheWholeCommand(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "small.csv")
	testutil.WriteCSV(t, src, 10_000, 3)
	pubsub, gcs := deadEndpoint(t), deadEndpoint(t)
	envFile := filepath.Join(dir, "ferry.env")
	testutil.OK(t, os.WriteFile(envFile, []byte("export PUBSUB_EMULATOR_HOST="+pubsub+"\nexport STORAGE_EMULATOR_HOST="+gcs+" # the stack that stopped\n"), 0o644))
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PUBSUB_EMULATOR_HOST=") && !strings.HasPrefix(kv, "STORAGE_EMULATOR_HOST=") {
			env = append(env, kv)
		}
	}
	env = append(env, "FERRY_ENV_FILE="+envFile)
	for _, tc := range []struct {
		args []string
		want []string
	}{
		// A refused GCS is named once the client library's few tries
		// are spent, which may come before the timeout: then the
		// refusal is the cause named.
		{[]string{"submit", "--wait", "--timeout", "3s", src, "gs://ferry-local/x"}, []string{"--timeout 3s|connection refused", pubsub, "PUBSUB_EMULATOR_HOST"}},
		{[]string{"submit", src, "gs://ferry-local/x", "--timeout", "3s"}, []string{"--timeout 3s|connection refused", "gs://ferry-local/x", gcs, "STORAGE_EMULATOR_HOST"}},
	} {
		code, stdout, stderr := runBinary(t, env, "producer", tc.args...)
		if code != 1 || stdout != "" {
			t.Errorf("%q: exit %d, stdout %q (want exit 1 and no transfer id); stderr %q", tc.args, code, stdout, stderr)
		}
		for _, w := range tc.want {
			if !slices.ContainsFunc(strings.Split(w, "|"), func(w string) bool { return strings.Contains(stderr, w) }) {
				t.Errorf("%q: stderr %q does not name %s", tc.args, stderr, w)
			}
		}
	}
}

// TestSubmitStatusListCancel drives a transfer through the binaries only:
// submit with flags after the arguments prints the id once it has started
// and nothing for one that cannot start; the manifest and the row carry the
// version; status shows the running transfer, then the ended one with its
// CRC32C as GCS has it; list shows it; cancel refuses an ended transfer and
// publishes the cancel event of a running one.
func TestSubmitStatusListCancel(t *testing.T) {
	s := newStack(t, stackOptions{workers: 1, noMerger: true, inlineMax: 4 << 10})
	ctx := context.Background()
	src := filepath.Join(t.TempDir(), "small.csv")
	testutil.WriteCSV(t, src, 300_000, 5)
	env := s.env("FERRY_BUCKETS=" + s.bucket)

	code, stdout, stderr := runBinary(t, env, "producer", "submit", src, "gs://no-such-bucket-ferry/x")
	if code != 1 || stdout != "" || !strings.Contains(stderr, "no-such-bucket-ferry") {
		t.Fatalf("submit to a missing bucket: exit %d, stdout %q (want no id), stderr %q", code, stdout, stderr)
	}
	// With --json, the failure is stdout's one document.
	code, stdout, _ = runBinary(t, env, "producer", "submit", "--json", src, "gs://no-such-bucket-ferry/x")
	var failure struct {
		Status, Error string
		ExitCode      int `json:"exit_code"`
	}
	if err := json.Unmarshal([]byte(stdout), &failure); err != nil || code != 1 || failure.Status != "error" ||
		failure.ExitCode != 1 || !strings.Contains(failure.Error, "no-such-bucket-ferry") {
		t.Fatalf("submit --json to a missing bucket: exit %d, stdout %q (%v); want one error document naming the bucket", code, stdout, err)
	}

	// No merger yet: the transfer stays sealed.
	code, stdout, stderr = runBinary(t, env, "producer", "submit", src, "gs://"+s.bucket+"/cli", "--chunk-size", "1MiB")
	if code != 0 {
		t.Fatalf("submit: exit %d, stderr %s", code, stderr)
	}
	id := strings.TrimSpace(stdout)
	b, err := s.store.ReadAll(ctx, s.bucket, message.ManifestObject(id))
	testutil.OK(t, err)
	var m message.Manifest
	testutil.OK(t, message.Decode(b, &m))
	if m.FerryVer != testVersion {
		t.Errorf("manifest ferry_version %q, want %s", m.FerryVer, testVersion)
	}
	teststack.Until(t, time.Minute, "the worker to upload the file's one chunk", func() bool {
		_, err := s.store.Attrs(ctx, s.bucket, "cli/small.csv.zst")
		return err == nil
	})
	_, out, _ := runBinary(t, env, "producer", "status", id)
	if !strings.Contains(out, "state        sealed") || !strings.Contains(out, "files        1 of 1 done") {
		t.Errorf("status before the merger:\n%s", out)
	}

	merger := s.start("merger", "merger", env)
	teststack.Until(t, 2*time.Minute, "the transfer to end", func() bool {
		_, err := s.store.Attrs(ctx, s.bucket, message.DoneMarker(id))
		return err == nil
	})
	a, err := s.store.Attrs(ctx, s.bucket, "cli/small.csv.zst")
	testutil.OK(t, err)
	code, out, _ = runBinary(t, env, "producer", "status", "--bucket", "gs://"+s.bucket, id)
	if code != 0 || !strings.Contains(out, "crc32c "+crc32c.Base64(a.CRC32C)) || !strings.Contains(out, "files        1 of 1 done") {
		t.Errorf("status: exit %d\n%s\nwant crc32c %s", code, out, crc32c.Base64(a.CRC32C))
	}
	if r := s.row(id); r.FerryVersion != testVersion {
		t.Errorf("row ferry_version %q, want %s", r.FerryVersion, testVersion)
	}
	code, out, _ = runBinary(t, env, "producer", "list")
	if code != 0 || !strings.Contains(out, id) || !strings.Contains(out, " ok ") {
		t.Errorf("list: exit %d\n%s", code, out)
	}
	code, _, stderr = runBinary(t, env, "producer", "cancel", id)
	if code != 1 || !strings.Contains(stderr, "already ended ok") {
		t.Errorf("cancel of an ended transfer: exit %d, %q", code, stderr)
	}
	merger.kill9()

	// A running transfer: its cancel event reaches the control topic.
	// Submitted with --json and no --wait, stdout is one document that
	// names it.
	code, stdout, stderr = runBinary(t, env, "producer", "submit", "--json", "--chunk-size", "1MiB", src, "gs://"+s.bucket+"/cli2")
	var submitted struct {
		TransferID string `json:"transfer_id"`
		Status     string
	}
	if err := json.Unmarshal([]byte(stdout), &submitted); code != 0 || err != nil || submitted.Status != "submitted" || submitted.TransferID == "" {
		t.Fatalf("second submit: exit %d, stdout %q (%v), stderr %s; want one document of the submitted transfer", code, stdout, err, stderr)
	}
	id2 := submitted.TransferID
	if code, out, stderr := runBinary(t, env, "producer", "cancel", id2); code != 0 || !strings.Contains(out, "cancel requested for transfer "+id2) {
		t.Fatalf("cancel: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	got := s.controlEvent(message.EventCancel, id2)
	if got.TransferID != id2 || got.Bucket != s.bucket {
		t.Fatalf("cancel event %+v, want one for %s in %s", got, id2, s.bucket)
	}
}

// controlEvent waits up to a minute for an event of type typ about transfer
// id on the stack's control subscription (no merger receiving), and
// returns it; the zero Event if none came.
func (s *stack) controlEvent(typ, id string) message.Event {
	rctx, stop := context.WithTimeout(context.Background(), time.Minute)
	defer stop()
	var got message.Event
	_ = s.q.Receive(rctx, s.ps.ControlSubscription, queue.ReceiveSettings{MaxMessages: 10, MaxBytes: 1 << 20}, func(_ context.Context, m queue.Message) error {
		var ev message.Event
		if message.Decode(m.Data, &ev) == nil && ev.Type == typ && ev.TransferID == id {
			got = ev
			stop()
		}
		return nil
	})
	return got
}
