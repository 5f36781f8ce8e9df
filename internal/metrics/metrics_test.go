package metrics

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestHealthReadinessAndMetrics(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := &Health{}
	addr, err := Serve(ctx, "127.0.0.1:0", h, nil)
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + addr
	if code, _ := get(t, base+"/healthz"); code != 200 {
		t.Fatalf("/healthz %d", code)
	}
	if code, _ := get(t, base+"/readyz"); code != 503 {
		t.Fatalf("/readyz %d before ready, want 503", code)
	}
	h.SetReady(true)
	if code, _ := get(t, base+"/readyz"); code != 200 {
		t.Fatalf("/readyz %d when ready", code)
	}
	if !h.Backend("pubsub", errors.New("PUBSUB_EMULATOR_HOST=127.0.0.1:1: unreachable")) {
		t.Fatal("a backend going down is a change")
	}
	if code, body := get(t, base+"/readyz"); code != 503 || !strings.Contains(body, "pubsub unreachable: PUBSUB_EMULATOR_HOST=127.0.0.1:1") {
		t.Fatalf("/readyz %d %q with Pub/Sub unreachable, want 503 naming it", code, body)
	}
	if !h.Backend("pubsub", nil) || h.Backend("pubsub", nil) {
		t.Fatal("a backend coming back is one change")
	}
	if code, _ := get(t, base+"/readyz"); code != 200 {
		t.Fatalf("/readyz %d with Pub/Sub back", code)
	}
	Uploads.WithLabelValues("ok").Inc()
	code, body := get(t, base+"/metrics")
	if code != 200 || !strings.Contains(body, `ferry_uploads_total{result="ok"} 1`) || !strings.Contains(body, "ferry_upload_seconds_bucket") {
		t.Fatalf("/metrics %d:\n%.2000s", code, body)
	}
	h.SetStopping()
	if code, _ := get(t, base+"/readyz"); code != 503 {
		t.Fatalf("/readyz %d while stopping, want 503", code)
	}
	if code, _ := get(t, base+"/healthz"); code != 200 {
		t.Fatalf("/healthz %d while stopping, want 200 (finishing work is healthy)", code)
	}
}

// A problem other than an unreachable backend (requests that stopped
// making progress) turns /readyz to 503 with its own words, and its end
// turns it back.
func TestProblemTurnsReadyzTo503(t *testing.T) {
	var h Health
	h.SetReady(true)
	get := func() (int, string) {
		rec := httptest.NewRecorder()
		h.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
		return rec.Code, rec.Body.String()
	}
	if !h.Problem("requests", errors.New("1 requests in flight walked, read and compressed nothing for 12m0s")) {
		t.Fatal("Problem did not report a change")
	}
	if code, body := get(); code != 503 || body != "requests: 1 requests in flight walked, read and compressed nothing for 12m0s\n" {
		t.Fatalf("/readyz with a problem: %d %q", code, body)
	}
	h.Problem("requests", nil)
	if code, _ := get(); code != 200 {
		t.Fatalf("/readyz after the problem ended: %d", code)
	}
}
