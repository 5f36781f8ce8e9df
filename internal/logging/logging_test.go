package logging

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestJSONUsesCloudLoggingKeys(t *testing.T) {
	var buf bytes.Buffer
	log := New(&buf, "debug", "json")
	log.Warn("disk low", "level", 3, "transfer_id", "t1")
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, buf.String())
	}
	if got["severity"] != "WARNING" || got["message"] != "disk low" || got["transfer_id"] != "t1" {
		t.Fatalf("log line %s", buf.String())
	}
	// A caller's own "level" attribute survives (it once crashed the handler).
	if got["level"] != float64(3) {
		t.Fatalf("caller's level attribute lost: %s", buf.String())
	}
}

func TestLevelFilters(t *testing.T) {
	var buf bytes.Buffer
	New(&buf, "warn", "text").Info("hidden")
	if buf.Len() != 0 {
		t.Fatalf("info logged at warn level: %s", buf.String())
	}
}
