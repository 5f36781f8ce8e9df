package e2e

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sethvargo/go-envconfig"

	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/doctor"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/localstack"
	"github.com/ferry-dev/ferry/internal/message"
)

// doctorStack is a stack on a GCS of its own behind the local stack's shim
// (as make run has it), whose testIamPermissions a test can take a
// permission from.
func doctorStack(t *testing.T, o stackOptions) *stack {
	t.Helper()
	g, err := localstack.StartGCSWith(localstack.GCSOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Stop)
	o.gcs, o.pubsub = g, true
	s := newStack(t, o)
	s.gcsHost = g.Host
	return s
}

// doctorConfig is the environment a submitter of stack s has.
func doctorConfig(t *testing.T, s *stack) *config.Producer {
	t.Helper()
	env := map[string]string{
		"FERRY_PROJECT": s.ps.Project, "FERRY_TRANSPORT": config.TransportPubSub, "FERRY_BUCKETS": s.bucket,
		"PUBSUB_EMULATOR_HOST": os.Getenv("PUBSUB_EMULATOR_HOST"), "STORAGE_EMULATOR_HOST": s.gcsHost,
		"FERRY_MESSAGE_MAX": "3MiB", "FERRY_BUNDLE_MAX": "1MiB", "FERRY_LOG_LEVEL": "warn",
	}
	for k, v := range map[string]string{
		"FERRY_REQUESTS_TOPIC": s.ps.RequestsTopic, "FERRY_REQUESTS_SUBSCRIPTION": s.ps.RequestsSubscription, "FERRY_REQUESTS_DEAD_LETTER_TOPIC": s.ps.RequestsDeadLetter,
		"FERRY_CHUNKS_TOPIC": s.ps.ChunksTopic, "FERRY_CHUNKS_SUBSCRIPTION": s.ps.ChunksSubscription, "FERRY_CHUNKS_DEAD_LETTER_TOPIC": s.ps.ChunksDeadLetter,
		"FERRY_EVENTS_TOPIC": s.ps.EventsTopic, "FERRY_EVENTS_SUBSCRIPTION": s.ps.EventsSubscription, "FERRY_EVENTS_DEAD_LETTER_TOPIC": s.ps.EventsDeadLetter,
		"FERRY_CONTROL_TOPIC": s.ps.ControlTopic, "FERRY_CONTROL_SUBSCRIPTION": s.ps.ControlSubscription, "FERRY_CONTROL_DEAD_LETTER_TOPIC": s.ps.ControlDeadLetter,
		"FERRY_SHARDS_TOPIC": s.ps.ShardsTopic, "FERRY_SHARDS_SUBSCRIPTION": s.ps.ShardsSubscription, "FERRY_SHARDS_DEAD_LETTER_TOPIC": s.ps.ShardsDeadLetter,
		"FERRY_DONE_TOPIC": s.ps.DoneTopic,
	} {
		env[k] = v
	}
	var cfg config.Producer
	if err := config.Load(context.Background(), &cfg, envconfig.MapLookuper(env)); err != nil {
		t.Fatal(err)
	}
	return &cfg
}

// runDoctor runs every check and the canary against s, as producer doctor
// does, and returns the results by check.
func runDoctor(t *testing.T, s *stack, timeout time.Duration) (map[string]doctor.Result, []doctor.Result) {
	t.Helper()
	ctx := context.Background()
	cfg := doctorConfig(t, s)
	id := "t" + strings.ToLower(strings.ReplaceAll(time.Now().Format("150405.000000"), ".", ""))
	rs := doctor.Run(ctx, doctor.Options{PubSub: cfg.PubSub, Bucket: s.bucket, Emulated: true, Queue: s.q, Store: s.store, ID: id})
	rs = append(rs, doctor.Canary(ctx, doctor.CanaryOptions{Config: cfg, Bucket: s.bucket, Store: s.store, Timeout: timeout, Dir: t.TempDir(), ID: id, Version: "test"})...)
	by := map[string]doctor.Result{}
	for _, r := range rs {
		by[r.Check] = r
	}
	var table bytes.Buffer
	_ = doctor.Write(&table, rs)
	t.Logf("doctor:\n%s", table.String())
	return by, rs
}

func TestDoctorPassesOnAWorkingStack(t *testing.T) {
	s := doctorStack(t, stackOptions{workers: 2})
	by, rs := runDoctor(t, s, 2*time.Minute)
	if doctor.Failed(rs) {
		t.Fatalf("doctor failed on a working stack")
	}
	for _, check := range []string{"pubsub: topic " + s.ps.ChunksTopic, "pubsub: subscription " + s.ps.ChunksSubscription,
		"gcs: bucket gs://" + s.bucket, "iam: gs://" + s.bucket, "iam: write gs://" + s.bucket + "/" + message.StagingRoot,
		"fleet: workers", "fleet: merger", "canary: transfer", "canary: read back"} {
		if by[check].Status != doctor.OK {
			t.Errorf("%s: %+v, want ok", check, by[check])
		}
	}
	if !strings.Contains(by["canary: read back"].Detail, "bytes and CRC32C identical") {
		t.Errorf("read back: %+v", by["canary: read back"])
	}
	// The canary removes what it wrote.
	left := 0
	if err := s.store.List(context.Background(), s.bucket, doctor.CanaryPrefix, func(gcs.Attrs) error { left++; return nil }); err != nil || left != 0 {
		t.Errorf("the canary left %d objects under %s (%v)", left, doctor.CanaryPrefix, err)
	}
}

func TestDoctorNamesAMissingTopicAndSubscription(t *testing.T) {
	s := doctorStack(t, stackOptions{workers: 1})
	ctx := context.Background()
	if err := s.q.DeleteTopic(ctx, s.ps.EventsDeadLetter); err != nil {
		t.Fatal(err)
	}
	if err := s.q.DeleteSubscription(ctx, s.ps.RequestsSubscription); err != nil {
		t.Fatal(err)
	}
	cfg := doctorConfig(t, s)
	rs := doctor.Run(ctx, doctor.Options{PubSub: cfg.PubSub, Bucket: s.bucket, Emulated: true, Queue: s.q, Store: s.store, ID: "missing"})
	by := map[string]doctor.Result{}
	for _, r := range rs {
		by[r.Check] = r
	}
	if r := by["pubsub: topic "+s.ps.EventsDeadLetter]; r.Status != doctor.Fail || !strings.Contains(r.Detail, "does not exist") || !strings.Contains(r.Do, "terraform apply") {
		t.Errorf("deleted dead-letter topic: %+v", r)
	}
	if r := by["pubsub: subscription "+s.ps.RequestsSubscription]; r.Status != doctor.Fail || !strings.Contains(r.Detail, "producer serve's subscription does not exist") {
		t.Errorf("deleted subscription: %+v", r)
	}
	if !doctor.Failed(rs) {
		t.Error("doctor passed with a topic missing")
	}
}

func TestDoctorNamesAPermissionTakenAway(t *testing.T) {
	s := doctorStack(t, stackOptions{workers: 1})
	deny := func(method string) {
		req, _ := http.NewRequest(method, "http://"+s.gcsHost+localstack.DenyPath+"?bucket="+s.bucket+"&permission=storage.objects.list", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusNoContent {
			t.Fatalf("%s %s: %v %v", method, localstack.DenyPath, resp, err)
		}
		resp.Body.Close()
	}
	deny(http.MethodPost)
	t.Cleanup(func() { deny(http.MethodDelete) })
	cfg := doctorConfig(t, s)
	rs := doctor.Run(context.Background(), doctor.Options{PubSub: cfg.PubSub, Bucket: s.bucket, Emulated: true, Queue: s.q, Store: s.store, ID: "denied"})
	for _, r := range rs {
		if r.Check == "iam: gs://"+s.bucket {
			if r.Status != doctor.Fail || !strings.Contains(r.Detail, "the caller lacks storage.objects.list") || !strings.Contains(r.Do, "ferryObjectsList") {
				t.Fatalf("denied storage.objects.list: %+v", r)
			}
			return
		}
	}
	t.Fatalf("no bucket permission check in %+v", rs)
}

func TestDoctorNamesAStoppedMerger(t *testing.T) {
	s := doctorStack(t, stackOptions{workers: 1, noMerger: true})
	by, rs := runDoctor(t, s, 20*time.Second)
	if !doctor.Failed(rs) {
		t.Fatal("doctor passed without a merger")
	}
	if r := by["fleet: workers"]; r.Status != doctor.OK {
		t.Errorf("workers: %+v, want ok (they uploaded)", r)
	}
	if r := by["fleet: merger"]; r.Status != doctor.Fail || !strings.Contains(r.Detail, "no merger ended it: none receives from "+s.ps.EventsSubscription) {
		t.Errorf("merger: %+v", r)
	}
}

func TestDoctorNamesStoppedWorkers(t *testing.T) {
	s := doctorStack(t, stackOptions{workers: 0})
	by, _ := runDoctor(t, s, 15*time.Second)
	if r := by["fleet: workers"]; r.Status != doctor.Fail || !strings.Contains(r.Detail, "no chunk of the canary reached GCS: no worker receives from "+s.ps.ChunksSubscription) {
		t.Errorf("workers: %+v", r)
	}
}
