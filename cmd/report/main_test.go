package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const okRow = `{"transfer_id":"t1","method":"ferry-2w","tier":"medium","size_bytes":200000000,"wire_bytes":70000000,"ratio":2.857,"codec":"zstd","level":3,"compress_ms":1000,"upload_ms":900,"compose_ms":100,"verify_ms":50,"total_ms":2000,"raw_mbps":100,"status":"ok"}`

func runReport(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(args, &o, &e, func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) })
	return code, o.String(), e.String()
}

func write(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRun(t *testing.T) {
	good := write(t, "good.ndjson", okRow+"\n")
	page := filepath.Join(t.TempDir(), "page.html")
	// Flags may follow the files.
	code, out, errOut := runReport(good, "--html", page)
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if !strings.Contains(out, "ferry-2w") || !strings.Contains(out, "100.0 MB/s") {
		t.Errorf("tables lack the row:\n%s", out)
	}
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "Generated 2026-01-02 03:04:05 UTC") || strings.Count(string(b), "<svg") != 3 {
		t.Errorf("page is not the report:\n%s", b)
	}
}

func TestRunErrors(t *testing.T) {
	bad := write(t, "bad.ndjson", okRow+"\nnot json\n")
	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no files", nil, 2, "Run 'report --help' for usage."},
		{"unknown flag", []string{"--bogus", bad}, 2, "Run 'report --help' for usage."},
		{"html without file", []string{bad, "--html"}, 2, "Run 'report --help' for usage."},
		{"missing file", []string{"/nonexistent/r.ndjson"}, 1, "/nonexistent/r.ndjson: no benchmark rows there yet"},
		{"bad line", []string{bad}, 1, bad + ":2:"},
		{"unwritable page", []string{"--html", "/nonexistent/p.html", write(t, "ok.ndjson", okRow)}, 1, "/nonexistent/p.html: "},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, _, errOut := runReport(c.args...)
			if code != c.code || !strings.Contains(errOut, c.want) {
				t.Errorf("exit %d, stderr %q; want exit %d, stderr with %q", code, errOut, c.code, c.want)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	code, out, _ := runReport("--help")
	if code != 0 || !strings.Contains(out, "report [--html FILE] [--title TITLE] RESULTS.ndjson...") ||
		!strings.Contains(out, "--html FILE") || !strings.Contains(out, "--title TITLE") {
		t.Errorf("exit %d, help:\n%s", code, out)
	}
}
