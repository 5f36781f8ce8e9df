package doctor

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/gcs"
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
