package loader

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"

	"github.com/ferry-dev/ferry/internal/loader/bqtest"
	"github.com/ferry-dev/ferry/internal/message"
)

// A transfer's table may be in another project than ferry's: the job runs
// in ferry's project (where the merger is a Job User) and names the table
// in its own; a job BigQuery fails is a JobError, and asking again finds
// the job instead of loading twice.
func TestTableLoadRunsInFerrysProject(t *testing.T) {
	f := bqtest.New("ferry-prod", nil)
	f.Location = "us-central1"
	url := f.Start(t)
	tb, err := NewTables(context.Background(), "ferry-prod", f.Location, option.WithEndpoint(url+"/bigquery/v2/"), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tb.Close() }()
	job := TableJob{ID: "ferry_load_t1", Table: "analytics-prod.landing.prices", Write: "append", URIs: []string{"gs://b/p/part-00000.parquet"}}
	if _, loc, err := tb.Load(context.Background(), job); err != nil || loc != f.Location {
		t.Fatalf("Load: location %q, %v", loc, err)
	}
	if _, _, err := tb.Load(context.Background(), job); err != nil {
		t.Fatalf("Load again: %v", err)
	}
	loads := f.Loads()
	if len(loads) != 1 {
		t.Fatalf("%d jobs inserted, want 1", len(loads))
	}
	dest, _ := bqtest.LoadConfig(loads[0])["destinationTable"].(map[string]any)
	if dest["projectId"] != "analytics-prod" || dest["datasetId"] != "landing" || dest["tableId"] != "prices" {
		t.Fatalf("job into %v, want analytics-prod.landing.prices", dest)
	}
	f.FailLoads(1)
	_, _, err = tb.Load(context.Background(), TableJob{ID: "ferry_load_t2", Table: "analytics-prod.landing.prices", Write: "empty", URIs: job.URIs})
	var je *JobError
	if !errors.As(err, &je) || je.JobID != "ferry_load_t2" {
		t.Fatalf("a failed job: %v, want a JobError", err)
	}
}

// What BigQuery answers a job insert with decides between retrying and
// ending the transfer: its "slow down" (429, or 403 rateLimitExceeded), a
// backend error and a 409 (another merger inserted the job) are retried;
// a request it refuses is not.
func TestRefusedIsForGoodOnly(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&googleapi.Error{Code: 400, Errors: []googleapi.ErrorItem{{Reason: "invalid"}}}, true},
		{&googleapi.Error{Code: 403, Errors: []googleapi.ErrorItem{{Reason: "accessDenied"}}}, true},
		{&googleapi.Error{Code: 403, Errors: []googleapi.ErrorItem{{Reason: "rateLimitExceeded"}}}, false},
		{&googleapi.Error{Code: 429}, false},
		{&googleapi.Error{Code: 409}, false},
		{&googleapi.Error{Code: 503, Errors: []googleapi.ErrorItem{{Reason: "backendError"}}}, false},
		{context.DeadlineExceeded, false},
	} {
		if got := refused(tc.err); got != tc.want {
			t.Errorf("refused(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// A job's source reads each kind as BigQuery loads it: Parquet parts as
// they are, CSV and TSV with the header skipped, their delimiter and
// detected columns, NDJSON with detected columns.
func TestTableJobSourceByKind(t *testing.T) {
	for _, tc := range []struct {
		kind, format, delim string
		skip                int64
		detect              bool
	}{
		{"", "PARQUET", "", 0, false},
		{message.KindCSV, "CSV", "", 1, true},
		{message.KindTSV, "CSV", "\t", 1, true},
		{message.KindJSON, "NEWLINE_DELIMITED_JSON", "", 0, true},
	} {
		ref := TableJob{Kind: tc.kind, URIs: []string{"gs://b/o"}}.source()
		if string(ref.SourceFormat) != tc.format || ref.FieldDelimiter != tc.delim || ref.SkipLeadingRows != tc.skip || ref.AutoDetect != tc.detect {
			t.Errorf("kind %q: %+v", tc.kind, ref.FileConfig)
		}
	}
}
