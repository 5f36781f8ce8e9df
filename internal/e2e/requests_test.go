package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/producer"
	"github.com/ferry-dev/ferry/internal/queue"
	"github.com/ferry-dev/ferry/internal/teststack"
	"github.com/ferry-dev/ferry/internal/testutil"
)

// doneFeed collects every done event of a stack from the moment it is made.
type doneFeed chan message.Done

func (s *stack) doneFeed() doneFeed {
	s.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	id := s.ps.DoneTopic + "-feed"
	if err := s.q.EnsureSubscription(ctx, queue.Subscription{ID: id, Topic: s.ps.DoneTopic, AckDeadline: 10 * time.Second}); err != nil {
		s.t.Fatal(err)
	}
	feed := make(doneFeed, 100)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		_ = s.q.Receive(ctx, id, queue.ReceiveSettings{MaxMessages: 10, MaxBytes: 1 << 20}, func(_ context.Context, m queue.Message) error {
			var d message.Done
			if err := message.Decode(m.Data, &d); err == nil {
				feed <- d
			}
			return nil
		})
	}()
	s.t.Cleanup(func() { cancel(); <-stopped })
	return feed
}

// next returns the next done event that match accepts.
func (f doneFeed) next(t *testing.T, match func(message.Done) bool) message.Done {
	t.Helper()
	timeout := time.After(2 * time.Minute)
	for {
		select {
		case d := <-f:
			if match(d) {
				return d
			}
		case <-timeout:
			t.Fatal("no matching done event within 2 minutes")
		}
	}
}

func (s *stack) publishRequest(body string) {
	s.t.Helper()
	if err := s.q.Publisher(s.ps.RequestsTopic).Publish(context.Background(), []byte(body), nil); err != nil {
		s.t.Fatal(err)
	}
}

// TestBatchSystemRequestsOverPubSub publishes requests the way a batch
// system does, to a real `producer serve` process, and waits for their done
// events: a good one, a repeated one, and bad ones.
func TestBatchSystemRequestsOverPubSub(t *testing.T) {
	s := newStack(t, stackOptions{workers: 2, inlineMax: 4 << 10})
	feed := s.doneFeed()
	dir := filepath.Join(t.TempDir(), "export")
	s.start("producer-serve", "producer", s.env("FERRY_SOURCE_ROOTS="+filepath.Dir(dir)), "serve")
	testutil.WriteCSV(t, filepath.Join(dir, "prices.csv"), 700_000, 41)
	testutil.WriteCSV(t, filepath.Join(dir, "small.csv"), 5_000, 42)

	good := fmt.Sprintf(`{"v": 1, "sources": [%q], "destination": "gs://%s/batch", "chunk_size": 131072,
		"method": "nightly", "labels": {"team": "risk"}, "idempotency_key": "export-2026-11-29"}`, dir, s.bucket)
	s.publishRequest(good)
	tid := message.NewTransferID("export-2026-11-29")
	d := feed.next(t, func(d message.Done) bool { return d.TransferID == tid })
	if d.Status != message.StatusOK || len(d.Objects) != 2 {
		t.Fatalf("done %+v", d)
	}
	s.verifyAll(producer.Request{Sources: []string{dir}, Destination: "gs://" + s.bucket + "/batch", Codec: codec.Zstd, ChunkSize: 131072})
	s.assertClean()
	if row := s.row(tid); row.Method != "nightly" || len(row.Labels) != 1 || row.Labels[0].Value != "risk" {
		t.Fatalf("row %+v", row)
	}

	// The same key again: answered again, not run again.
	s.publishRequest(good)
	again := feed.next(t, func(d message.Done) bool { return d.TransferID == tid })
	if again.Status != message.StatusOK || !again.FinishedAt.Equal(d.FinishedAt) {
		t.Fatalf("repeated request: %+v, want the first transfer's done event", again)
	}
	if rows := rowsOf(t, s.results, tid); len(rows) != 1 {
		t.Fatalf("%d rows after a repeated request, want 1", len(rows))
	}

	// Bad requests each get a failed done event naming the cause.
	for _, tc := range []struct{ body, want string }{
		{`{"v": 1, "sources": ["/x"], "destination": "gs://b/p", "colour": "red"}`, `unknown field "colour"`},
		{`not json at all`, "invalid character"},
		{fmt.Sprintf(`{"v": 1, "sources": [%q], "destination": "gs://%s/p", "codec": "lz4", "idempotency_key": "bad-codec"}`, dir, s.bucket), `"lz4"`},
		{fmt.Sprintf(`{"v": 1, "sources": ["/no/such/file.csv"], "destination": "gs://%s/p", "idempotency_key": "bad-source"}`, s.bucket), "/no/such/file.csv"},
		{fmt.Sprintf(`{"v": 1, "sources": [%q], "destination": "gs://%s/p", "idempotency_key": "outside-roots"}`, dir+"/../../..", s.bucket), "outside the source roots (FERRY_SOURCE_ROOTS="},
		{fmt.Sprintf(`{"v": 1, "sources": [%q], "destination": "gs://%s/p", "chunk_size": -1, "idempotency_key": "bad-chunk"}`, dir, s.bucket), "chunk size -1"},
		{fmt.Sprintf(`{"v": 1, "sources": [%q], "destination": "gs://no-such-bucket-ferry/p", "idempotency_key": "bad-bucket"}`, dir), "no-such-bucket-ferry"},
	} {
		s.publishRequest(tc.body)
		d := feed.next(t, func(d message.Done) bool {
			return d.Status == message.StatusFailed && strings.Contains(d.Error, tc.want)
		})
		t.Logf("rejected: %s", d.Error)
	}
	s.assertClean()
}

// TestUsageGcloudPublishExample runs docs/usage.md's example: a request
// published with gcloud pubsub topics publish against the Java emulator.
func TestUsageGcloudPublishExample(t *testing.T) {
	if _, err := exec.LookPath("gcloud"); err != nil {
		t.Skip("gcloud not on PATH")
	}
	if pubsubKind != "java" {
		t.Skipf("gcloud talks to the Java emulator's REST endpoint; the %s emulator that started has none", pubsubKind)
	}
	s := newStack(t, stackOptions{workers: 1})
	feed := s.doneFeed()
	src := filepath.Join(t.TempDir(), "report.csv")
	s.start("producer-serve", "producer", s.env("FERRY_SOURCE_ROOTS="+filepath.Dir(src)), "serve")
	testutil.WriteCSV(t, src, 50_000, 43)
	body := fmt.Sprintf(`{"v":1,"sources":[%q],"destination":"gs://%s/reports","idempotency_key":"report-1"}`, src, s.bucket)
	cmd := exec.Command("gcloud", "pubsub", "topics", "publish", s.ps.RequestsTopic, "--project", s.ps.Project, "--message", body)
	cmd.Env = append(os.Environ(),
		"CLOUDSDK_API_ENDPOINT_OVERRIDES_PUBSUB=http://"+os.Getenv("PUBSUB_EMULATOR_HOST")+"/",
		"CLOUDSDK_AUTH_DISABLE_CREDENTIALS=true", "CLOUDSDK_CORE_DISABLE_PROMPTS=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gcloud pubsub topics publish: %v\n%s", err, out)
	}
	d := feed.next(t, func(d message.Done) bool { return d.TransferID == message.NewTransferID("report-1") })
	if d.Status != message.StatusOK || len(d.Objects) != 1 || !strings.HasSuffix(d.Objects[0].Name, "/reports/report.csv.zst") {
		t.Fatalf("done %+v", d)
	}
}

// TestServicesServeMetricsAndHealth: a worker process serves /metrics with
// the upload counters moved by a real transfer, and /healthz and /readyz.
func TestServicesServeMetricsAndHealth(t *testing.T) {
	s := newStack(t, stackOptions{inlineMax: 4 << 10})
	w := s.start("worker", "worker", s.env())
	var addr string
	teststack.Until(t, 30*time.Second, "the worker to log its metrics address", func() bool {
		for _, line := range strings.Split(w.out.String(), "\n") {
			if strings.Contains(line, "serving /metrics") {
				var l struct{ Addr string }
				if json.Unmarshal([]byte(line), &l) == nil {
					addr = l.Addr
				}
			}
		}
		return addr != ""
	})
	src := filepath.Join(t.TempDir(), "m.csv")
	testutil.WriteCSV(t, src, 400_000, 44)
	if d, err := s.transfer(producer.Request{Sources: []string{src}, Destination: "gs://" + s.bucket + "/m", ChunkSize: 64 << 10}); err != nil || d.Status != message.StatusOK {
		t.Fatalf("transfer: %v %+v", err, d)
	}
	for path, want := range map[string]string{
		"/healthz": "ok",
		"/readyz":  "ready",
		"/metrics": `ferry_uploads_total{result="ok"} 7`,
	} {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), want) {
			t.Fatalf("GET %s: %d, want %q in:\n%.3000s", path, resp.StatusCode, want, b)
		}
		if path == "/metrics" {
			for _, name := range []string{"ferry_bytes_uploaded_total", "ferry_upload_seconds_bucket", `ferry_in_flight{kind="uploads"} 0`} {
				if !strings.Contains(string(b), name) {
					t.Errorf("/metrics lacks %s", name)
				}
			}
		}
	}
}
