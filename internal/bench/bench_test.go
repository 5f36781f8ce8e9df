package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/internal/bench/verdict"
)

func TestDecodeDone(t *testing.T) {
	out := "{\n  \"v\": 1,\n  \"transfer_id\": \"t123\",\n  \"status\": \"failed\",\n  \"error\": \"upload: 503\"\n}\n"
	id, status, msg := decodeDone([]byte(out))
	if id != "t123" || status != "failed" || msg != "upload: 503" {
		t.Errorf("decodeDone = %q %q %q", id, status, msg)
	}
	// The document of a command that failed before it had a transfer.
	id, status, msg = decodeDone([]byte(`{"v":1,"status":"error","error":"source x: no such file","exit_code":2}`))
	if id != "" || status != "error" || msg != "source x: no such file" {
		t.Errorf("an error's document: %q %q %q", id, status, msg)
	}
	// Two documents, or a bare id before one, are not what --json prints.
	if _, status, msg := decodeDone([]byte("t9\n" + out)); status != "" || !strings.Contains(msg, "not one JSON document") {
		t.Errorf("an id line before the document: %q %q", status, msg)
	}
}

func TestParseExportsAndSafeName(t *testing.T) {
	env := parseExports([]byte("export STORAGE_EMULATOR_HOST=127.0.0.1:1\nexport FERRY_PROJECT=p\n\n"))
	if env["STORAGE_EMULATOR_HOST"] != "127.0.0.1:1" || env["FERRY_PROJECT"] != "p" || len(env) != 2 {
		t.Errorf("parseExports = %v", env)
	}
	if got := safeName("b-gcloud_storage_Z-1"); got != "b-gcloud-storage-z-1" {
		t.Errorf("safeName = %q", got)
	}
}

// The namespace's processes reach the stack at the host end of the link:
// every loopback address in their environment is rewritten, their own
// listen address is not, and a tier names its rate.
func TestKernelLinkRewritesTheStacksAddresses(t *testing.T) {
	n := &shapedNet{ns: "ferry-bench-1", hostIP: "10.213.4.1"}
	got := n.rewrite([]string{"STORAGE_EMULATOR_HOST=127.0.0.1:4443", "CLOUDSDK_API_ENDPOINT_OVERRIDES_STORAGE=http://127.0.0.1:4443/",
		"FERRY_HTTP_ADDR=127.0.0.1:0", "FERRY_SPOOL_DIR=/spool"})
	want := []string{"STORAGE_EMULATOR_HOST=10.213.4.1:4443", "CLOUDSDK_API_ENDPOINT_OVERRIDES_STORAGE=http://10.213.4.1:4443/",
		"FERRY_HTTP_ADDR=127.0.0.1:0", "FERRY_SPOOL_DIR=/spool"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("rewrite = %q, want %q", got, want)
	}
	if argv := n.wrap([]string{"bin/producer", "submit"}); strings.Join(argv, " ") != "ip netns exec ferry-bench-1 bin/producer submit" {
		t.Errorf("wrap = %q", argv)
	}
	if r := verdict.KernelRate("kernel-7MBps"); r != 7 {
		t.Errorf("KernelRate(kernel-7MBps) = %v", r)
	}
}

func TestTheRequestsInFlightFerryCpSettledAtAreReadFromItsLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cp.log")
	log := `{"severity":"INFO","message":"worker receiving","concurrency":512}
{"severity":"INFO","message":"worker stopped","worker":"cp-1","requests_in_flight":160,"requests_in_flight_peak":256,"window_cuts":0}
`
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := settledInFlight(path); got != 160 {
		t.Errorf("settledInFlight = %d, want 160", got)
	}
	if got := settledInFlight(filepath.Join(t.TempDir(), "none.log")); got != 0 {
		t.Errorf("settledInFlight of no log = %d, want 0", got)
	}
}
