package doctor

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
)

// settingsOnly is a bucketStore that answers Bucket only.
type settingsOnly struct {
	bucketStore
	b gcs.BucketInfo
}

func (s settingsOnly) Bucket(context.Context, string) (gcs.BucketInfo, error) { return s.b, nil }

func bucketResults(o Options, b gcs.BucketInfo) map[string]Result {
	o.Bucket, o.Store = "b", settingsOnly{b: b}
	by := map[string]Result{}
	for _, r := range bucket(context.Background(), o) {
		by[r.Check] = r
	}
	return by
}

const key = "projects/p/locations/us-central1/keyRings/ferry/cryptoKeys/ferry-objects"

func TestBucketAsTerraformMakesIt(t *testing.T) {
	by := bucketResults(Options{KMSKey: key}, gcs.BucketInfo{Location: "US-CENTRAL1", UniformAccess: true, DefaultKMSKey: key,
		SoftDelete: 7 * 24 * time.Hour, Expiry: map[string]int64{".ferry/": 3, ".ferry-done/": 30}})
	for c, want := range map[string]string{"gcs: bucket gs://b": "exists in US-CENTRAL1", "gcs: bucket key": "CMEK " + key,
		"gcs: uniform access": "on", "gcs: soft delete": "7 days", "gcs: staging lifecycle": ".ferry/ deleted after 3 days"} {
		if r := by[c]; r.Status != OK || r.Detail != want {
			t.Errorf("%s: %+v, want ok %q", c, r, want)
		}
	}
}

func TestBucketFaultsAreNamed(t *testing.T) {
	by := bucketResults(Options{KMSKey: key}, gcs.BucketInfo{Expiry: map[string]int64{"": 30}})
	for c, want := range map[string]string{
		"gcs: bucket key":        `default key "", FERRY_KMS_KEY "` + key + `"`,
		"gcs: uniform access":    "off: object ACLs could grant what IAM does not",
		"gcs: staging lifecycle": "a lifecycle rule deletes every object after 30 days, final objects included",
	} {
		if r := by[c]; r.Status != Fail || r.Detail != want {
			t.Errorf("%s: %+v, want FAIL %q", c, r, want)
		}
	}
	if r := bucketResults(Options{}, gcs.BucketInfo{UniformAccess: true})["gcs: staging lifecycle"]; r.Status != Fail || !strings.Contains(r.Detail, "no lifecycle rule deletes .ferry/") {
		t.Errorf("no staging rule: %+v", r)
	}
	if r := bucketResults(Options{Emulated: true}, gcs.BucketInfo{})["gcs: bucket settings"]; r.Status != Skip || !strings.Contains(r.Detail, "fake-gcs-server keeps no") {
		t.Errorf("emulated: %+v", r)
	}
}

func TestTableAndJSONSayWhatFailed(t *testing.T) {
	rs := []Result{{"a", OK, "fine", ""}, {"b", Fail, "broken", "mend it"}, {"c", Skip, "not here", ""}}
	var table, js bytes.Buffer
	if err := Write(&table, rs); err != nil || !strings.Contains(table.String(), "b      FAIL    broken    mend it") || !strings.HasSuffix(table.String(), "1 ok, 1 failed, 1 skipped\n") {
		t.Fatalf("table %v:\n%s", err, table.String())
	}
	if err := WriteJSON(&js, rs); err != nil {
		t.Fatal(err)
	}
	var got struct {
		OK     bool
		Checks []Result
	}
	if err := json.Unmarshal(js.Bytes(), &got); err != nil || got.OK || len(got.Checks) != 3 || got.Checks[1].Do != "mend it" {
		t.Fatalf("json %v: %s", err, js.String())
	}
}

func TestBucketLocationAgainstTheDataset(t *testing.T) {
	for _, c := range []struct {
		bq, bucket string
		ok         bool
	}{{"us-central1", "US-CENTRAL1", true}, {"US", "US-EAST4", true}, {"EU", "EUROPE-WEST1", true}, {"asia-northeast1", "US-CENTRAL1", false}, {"EU", "US-CENTRAL1", false}} {
		r := bucketResults(Options{BQLocation: c.bq, Emulated: true}, gcs.BucketInfo{Location: c.bucket})["gcs: bucket location"]
		if (r.Status == OK) != c.ok || (!c.ok && !strings.Contains(r.Detail, "cannot read it")) {
			t.Errorf("dataset in %s, bucket in %s: %+v", c.bq, c.bucket, r)
		}
	}
}

// heartbeats is a bucketStore that lists and reads heartbeat objects.
type heartbeats struct {
	bucketStore
	objects map[string]gcs.Attrs
	data    map[string][]byte
}

func (h heartbeats) List(_ context.Context, _, prefix string, fn func(gcs.Attrs) error) error {
	for name, a := range h.objects {
		if strings.HasPrefix(name, prefix) {
			a.Name = name
			if err := fn(a); err != nil {
				return err
			}
		}
	}
	return nil
}

func (h heartbeats) ReadAll(_ context.Context, _, name string) ([]byte, error) {
	return h.data[name], nil
}

// TestPoolCountsAgentsThatStoppedAnsweringAndRefusesAForgedHeartbeat: a
// heartbeat older than message.HeartbeatStale is an agent gone (counted,
// never read); one that names another agent than its object is refused.
func TestPoolCountsAgentsThatStoppedAnsweringAndRefusesAForgedHeartbeat(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	beat := func(agent string) []byte {
		b, _ := json.Marshal(message.Heartbeat{V: message.Version, Agent: agent, Version: "v1", Time: now, Roots: []message.RootState{{Root: "/srv"}}})
		return b
	}
	st := heartbeats{objects: map[string]gcs.Attrs{
		message.AgentObject("old-1"):  {Updated: now.Add(-time.Hour)},
		message.AgentObject("old-2"):  {Updated: now.Add(-3 * time.Minute)},
		message.AgentObject("forged"): {Updated: now.Add(-time.Second)},
	}, data: map[string][]byte{message.AgentObject("forged"): beat("host-a")}}
	rs := Pool(context.Background(), Options{Store: st, Bucket: "b", Pool: true, Now: func() time.Time { return now }})
	if len(rs) != 2 || rs[0].Status != OK || rs[0].Detail != "1 answered in the last 2m0s (2 stopped or gone, the last heard 2026-12-07T11:57:00Z)" {
		t.Fatalf("results %+v", rs)
	}
	if rs[1].Status != Fail || !strings.Contains(rs[1].Detail, `it names agent "host-a", whose heartbeat is .ferry/_agents/host-a`) {
		t.Errorf("forged heartbeat: %+v, want refused naming both", rs[1])
	}
	delete(st.objects, message.AgentObject("forged"))
	rs = Pool(context.Background(), Options{Store: st, Bucket: "b", Pool: true, Now: func() time.Time { return now }})
	if len(rs) != 1 || rs[0].Status != Fail || !strings.Contains(rs[0].Detail, "no agent answered in the last 2m0s (2 stopped or gone") {
		t.Errorf("only stale heartbeats: %+v", rs)
	}
}
