package doctor

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"google.golang.org/api/option"
)

// bigQueryDouble answers the BigQuery REST calls the doctor makes: the
// dataset, its tables, and each table's schema, read from schema/.
func bigQueryDouble(t *testing.T, location string, tables ...string) string {
	t.Helper()
	schemas := map[string]json.RawMessage{}
	for _, name := range tables {
		b, err := os.ReadFile("../../schema/" + name + ".json")
		if err != nil {
			t.Fatal(err)
		}
		schemas[name] = b
	}
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Method+" "+r.URL.Path)
		w.Header().Set("Content-Type", "application/json")
		p := r.URL.Path
		switch {
		case r.Method != http.MethodGet:
			http.Error(w, `{"error":{"code":405,"message":"the doctor only reads"}}`, http.StatusMethodNotAllowed)
		case strings.HasSuffix(p, "/projects/p/datasets/ferry"):
			_ = json.NewEncoder(w).Encode(map[string]any{"datasetReference": map[string]string{"projectId": "p", "datasetId": "ferry"}, "location": location})
		case strings.HasSuffix(p, "/projects/p/datasets/ferry/tables"):
			var list []map[string]any
			for _, name := range tables {
				list = append(list, map[string]any{"tableReference": map[string]string{"projectId": "p", "datasetId": "ferry", "tableId": name}})
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"tables": list, "totalItems": len(list)})
		case strings.Contains(p, "/projects/p/datasets/ferry/tables/"):
			name := p[strings.LastIndex(p, "/")+1:]
			s, ok := schemas[name]
			if !ok {
				http.Error(w, `{"error":{"code":404,"message":"Not found: Table"}}`, http.StatusNotFound)
				return
			}
			_, _ = w.Write([]byte(`{"tableReference":{"projectId":"p","datasetId":"ferry","tableId":"` + name + `"},"schema":{"fields":` + string(s) + `}}`))
		default:
			http.Error(w, `{"error":{"code":404,"message":"Not found: Dataset p:other"}}`, http.StatusNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		if len(seen) == 0 {
			t.Error("the doctor asked the BigQuery double nothing")
		}
	})
	return srv.URL
}

func datasetResults(t *testing.T, url, name, location string) map[string]Result {
	t.Helper()
	rs := dataset(context.Background(), Options{Datasets: NewBigQuery(option.WithEndpoint(url), option.WithoutAuthentication()),
		BQProject: "p", BQDataset: name, BQLocation: location, WantTables: Tables()})
	by := map[string]Result{}
	for _, r := range rs {
		by[r.Check] = r
	}
	return by
}

func TestDatasetInTheMergersLocationWithSchemaTables(t *testing.T) {
	by := datasetResults(t, bigQueryDouble(t, "us-central1", "transfers", "chunks"), "ferry", "us-central1")
	for _, c := range []string{"bigquery: dataset ferry", "bigquery: table ferry.transfers", "bigquery: table ferry.chunks"} {
		if by[c].Status != OK {
			t.Errorf("%s: %+v", c, by[c])
		}
	}
}

func TestDatasetInTheWrongLocationFails(t *testing.T) {
	by := datasetResults(t, bigQueryDouble(t, "EU", "transfers", "chunks"), "ferry", "us-central1")
	r := by["bigquery: dataset ferry"]
	if r.Status != Fail || !strings.Contains(r.Detail, "in EU, but FERRY_BQ_LOCATION says us-central1: every load job would fail") || !strings.Contains(r.Do, "FERRY_BQ_LOCATION to EU") {
		t.Fatalf("%+v", r)
	}
}

func TestMissingTableAndMissingDatasetFail(t *testing.T) {
	url := bigQueryDouble(t, "us-central1", "transfers")
	if r := datasetResults(t, url, "ferry", "us-central1")["bigquery: table ferry.chunks"]; r.Status != Fail || r.Detail != "does not exist" {
		t.Errorf("missing table: %+v", r)
	}
	if r := datasetResults(t, url, "other", "us-central1")["bigquery: dataset other"]; r.Status != Fail || !strings.Contains(r.Detail, "bigquery dataset p.other does not exist") {
		t.Errorf("missing dataset: %+v", r)
	}
}

func TestSchemaDifferenceIsNamed(t *testing.T) {
	got := []string{"transfer_id STRING REQUIRED", "method INTEGER REQUIRED"}
	want := []string{"transfer_id STRING REQUIRED", "method STRING REQUIRED"}
	if d := firstDiff(got, want); d != `column 2 is "method INTEGER REQUIRED", want "method STRING REQUIRED"` {
		t.Fatal(d)
	}
}
