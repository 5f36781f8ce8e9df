package tfcheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/ferry-dev/ferry/internal/metrics"
)

// promMetric is a metric of ferry's as the Ops Agent's Prometheus receiver
// names it in Cloud Monitoring: prometheus.googleapis.com/NAME/KIND.
var promMetric = regexp.MustCompile(`/(ferry_[a-z0-9_]+)/(counter|gauge|histogram|summary)\b`)

// Every ferry metric a dashboard tile or an alert of terraform/ names is
// one the services register, of the kind it says: a tile on a metric that
// no process writes stays empty for ever.
func TestDashboardAndAlertsNameRegisteredMetrics(t *testing.T) {
	kinds := map[string]string{}
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		kinds[f.GetName()] = map[dto.MetricType]string{dto.MetricType_COUNTER: "counter", dto.MetricType_GAUGE: "gauge",
			dto.MetricType_HISTOGRAM: "histogram", dto.MetricType_SUMMARY: "summary"}[f.GetType()]
	}
	files, _ := filepath.Glob("../../terraform/*.tf")
	named := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range promMetric.FindAllStringSubmatch(string(b), -1) {
			named++
			name, kind := m[1], m[2]
			if kind == "counter" {
				name = strings.TrimSuffix(name, "_total") + "_total"
			}
			if got, ok := kinds[name]; !ok || got != kind {
				t.Errorf("%s names %s/%s; the services register %q as %q", filepath.Base(f), m[1], kind, name, got)
			}
		}
	}
	if named == 0 {
		t.Fatal("no ferry metric named in terraform/: the pattern no longer matches the dashboard")
	}
}
