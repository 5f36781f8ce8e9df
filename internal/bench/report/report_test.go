package report

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/benchrow"
)

var t0 = time.Date(2026, 11, 29, 21, 0, 0, 0, time.UTC)

func row(method, tier, codec string, level int, size, wire, compress, upload, compose, verify, total int64, rawMBps float64) benchrow.Row {
	r := benchrow.Row{
		TransferID: method + "-" + tier, Method: method, Tier: tier, Codec: codec, Level: level,
		SizeBytes: size, WireBytes: wire, CompressMS: compress, UploadMS: upload, ComposeMS: compose,
		VerifyMS: verify, TotalMS: total, RawMBps: benchrow.Float(rawMBps), Status: "ok",
		StartedAt: t0, FinishedAt: t0.Add(time.Duration(total) * time.Millisecond),
	}
	if wire > 0 {
		r.Ratio = float64(size) / float64(wire)
	}
	return r
}

// fixture is a small fixed set of rows whose medians the tests know.
func fixture() []benchrow.Row {
	failed := row("ferry-2w", "medium", "zstd", 3, 200e6, 0, 99999, 99999, 99999, 99999, 1, 999)
	failed.Status, failed.Error = "failed", "boom:\n chunk 3 lost"
	return []benchrow.Row{
		// ferry-2w medium: medians compress 2000, upload 900, compose 120,
		// verify 60, total 4000, 50 MB/s.
		row("ferry-2w", "medium", "zstd", 3, 200e6, 70e6, 1000, 800, 100, 50, 2000, 100),
		row("ferry-2w", "medium", "zstd", 3, 200e6, 70e6, 2000, 900, 120, 60, 4000, 50),
		row("ferry-2w", "medium", "zstd", 3, 200e6, 70e6, 3000, 1000, 140, 70, 5000, 40),
		failed,
		// gcloud medium: no compression.
		row("gcloud", "medium", "none", 0, 200e6, 200e6, 0, 5000, 0, 0, 6000, 33.3),
		// ferry-1w small: an even count, medians are means of the middle two.
		row("ferry-1w", "small", "zstd", 3, 10e6, 4e6, 100, 80, 50, 20, 400, 25),
		row("ferry-1w", "small", "zstd", 3, 10e6, 4e6, 200, 100, 70, 30, 600, 10e6/1e6/0.6),
	}
}

// lineOf returns the fields of the first line of out after the line
// containing after whose first field is first.
func lineOf(t *testing.T, out, after, first string) string {
	t.Helper()
	i := strings.Index(out, after)
	if i < 0 {
		t.Fatalf("no %q in\n%s", after, out)
	}
	for _, l := range strings.Split(out[i:], "\n")[1:] {
		if f := strings.Fields(l); len(f) > 0 && f[0] == first {
			return strings.Join(f, " ")
		}
	}
	t.Fatalf("no line of %q after %q in\n%s", first, after, out)
	return ""
}

func TestTablesMedians(t *testing.T) {
	var b bytes.Buffer
	Tables(&b, fixture())
	out := b.String()
	for _, c := range []struct{ after, first, want string }{
		{"── medium ──", "ferry-2w", "ferry-2w 3 200.0 MB 70.0 MB 2.86x 4.0s 50.0 MB/s 1"},
		{"── medium ──", "gcloud", "gcloud 1 200.0 MB 200.0 MB 1.00x 6.0s 33.3 MB/s"},
		{"── small ──", "ferry-1w", "ferry-1w 2 10.0 MB 4.0 MB 2.50x 500ms 20.8 MB/s"},
		{titleStages, "ferry-2w", "ferry-2w medium 2.0s 900ms 120ms 60ms 4.0s"},
		{titleStages, "gcloud", "gcloud medium - 5.0s - - 6.0s"},
		{titleStages, "ferry-1w", "ferry-1w small 150ms 90ms 60ms 25ms 500ms"},
		// zstd 3: compress MB/s 200, 100, 66.7, 100, 50 → 100.
		{titleCodecs, "zstd", "zstd 3 5 2.86x 100.0 MB/s"},
		{titleCodecs, "none", "none 0 1 1.00x -"},
		{titleFailed, "ferry-2w", "ferry-2w 1 boom: chunk 3 lost"},
	} {
		if got := lineOf(t, out, c.after, c.first); got != c.want {
			t.Errorf("after %q: got %q, want %q", c.after, got, c.want)
		}
	}
	if !strings.Contains(out, "7 rows: 6 ok, 1 failed") {
		t.Errorf("no row count in\n%s", out)
	}
	// Fastest first within a tier; small before medium.
	if strings.Index(out, "  ferry-2w ") > strings.Index(out, "  gcloud ") {
		t.Errorf("ferry-2w (50 MB/s) should come before gcloud (33.3 MB/s):\n%s", out)
	}
	if strings.Index(out, "── small ──") > strings.Index(out, "── medium ──") {
		t.Errorf("small should come before medium:\n%s", out)
	}
	// No failed column entry for a group without failures.
	if got := lineOf(t, out, "── small ──", "ferry-1w"); strings.HasSuffix(got, " 0") {
		t.Errorf("zero failures printed: %q", got)
	}
}

func TestTablesEmpty(t *testing.T) {
	var b bytes.Buffer
	Tables(&b, nil)
	if got := b.String(); got != "No benchmark rows.\n" {
		t.Errorf("got %q", got)
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestTicks(t *testing.T) {
	got := linearTicks(0, 150, 6)
	if got[0] != 0 || got[len(got)-1] < 150 || len(got) < 4 || len(got) > 9 {
		t.Errorf("linearTicks(0, 150) = %v", got)
	}
	if got := linearTicks(0, 0, 6); len(got) < 2 {
		t.Errorf("linearTicks(0, 0) = %v", got)
	}
	if got := logTicks(10, 1000); len(got) != 7 || got[0] != 10 || got[6] != 1000 {
		t.Errorf("logTicks(10, 1000) = %v", got)
	}
}

// wellFormed parses the page with encoding/xml, strictly: the page is kept
// well-formed XML as well as HTML.
func wellFormed(t *testing.T, page string) {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(page))
	d.Strict = true
	for {
		_, err := d.Token()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			line := page
			if off := int(d.InputOffset()); off < len(page) {
				line = page[max(0, off-200):min(len(page), off+100)]
			}
			t.Fatalf("page is not well-formed: %v near\n%s", err, line)
		}
	}
}

// selfContained fails when the page references anything outside itself.
func selfContained(t *testing.T, page string) {
	t.Helper()
	for _, bad := range []string{"http://", "https://", "<script", "<img", "<link", "<iframe", "src=", "url(", "@import", "NaN", "Inf"} {
		if strings.Contains(page, bad) {
			t.Errorf("page contains %q", bad)
		}
	}
}

func render(t *testing.T, rows []benchrow.Row) string {
	t.Helper()
	var b bytes.Buffer
	if err := HTML(&b, rows, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	wellFormed(t, page)
	selfContained(t, page)
	return page
}

func TestHTML(t *testing.T) {
	page := render(t, fixture())
	if n := strings.Count(page, "<svg"); n != 3 {
		t.Errorf("%d <svg> elements, want 3", n)
	}
	if n := strings.Count(page, "</svg>"); n != 3 {
		t.Errorf("%d </svg>, want 3", n)
	}
	for _, m := range []string{"ferry-2w", "ferry-1w", "gcloud"} {
		if !strings.Contains(page, m) {
			t.Errorf("page lacks method %q", m)
		}
	}
	for _, want := range []string{
		"ferry benchmark report", "Generated 2026-11-29 22:00:00 UTC", "7 rows (6 ok",
		titleMethods, titleStages, titleCodecs, titleFailed,
		"50.0 MB/s", "2.86x", "100.0 MB/s", "Not plotted, having no compress time or ratio: none.",
		"boom: chunk 3 lost", "zstd 3",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

func TestHTMLEscapes(t *testing.T) {
	rows := fixture()
	rows[0].Method = "<script>alert(1)</script>"
	rows[1].Method = `"quoted" & 'single'`
	rows[5].Codec = "<b>bold</b>"
	rows[3].Error = "<img onerror=x>"
	page := render(t, rows)
	for _, bad := range []string{"<script>", "<b>", "<img", `"quoted"`} {
		if strings.Contains(page, bad) {
			t.Errorf("page contains unescaped %q", bad)
		}
	}
	if !strings.Contains(page, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Error("page lacks the escaped <script> method")
	}
	if n := strings.Count(page, "<svg"); n != 3 {
		t.Errorf("%d <svg> elements, want 3", n)
	}
}

func TestHTMLEmpty(t *testing.T) {
	page := render(t, nil)
	if !strings.Contains(page, "There are no benchmark rows") {
		t.Error("empty page does not say there are no rows")
	}
	if strings.Contains(page, "<svg") {
		t.Error("empty page has a chart")
	}
}

func TestHTMLSingleRow(t *testing.T) {
	page := render(t, fixture()[:1])
	if n := strings.Count(page, "<svg"); n != 3 {
		t.Errorf("%d <svg> elements, want 3", n)
	}
	if !strings.Contains(page, "1 row (1 ok) · 1 method · 1 tier") || !strings.Contains(page, "ferry-2w") {
		t.Error("single-row page lacks its row")
	}
}

func TestHTMLOddRows(t *testing.T) {
	// Only failures; zero sizes and times; no method, tier or codec; a tier
	// that is not one of the seeds'.
	failed := benchrow.Row{Status: "failed", Error: "no manifest"}
	zero := benchrow.Row{Method: "m", Tier: "huge", Status: "ok"}
	for name, rows := range map[string][]benchrow.Row{
		"failed only": {failed},
		"zeros":       {zero, failed},
		"many": func() []benchrow.Row {
			var rs []benchrow.Row
			for i := range 14 {
				r := row(strings.Repeat("long-method-name-", 1+i%3)+string(rune('a'+i)), []string{"small", "medium", "large", "xl"}[i%4],
					[]string{"zstd", "gzip", "none", "lz4"}[i%4], i%10, int64(1+i)*1e7, int64(1+i)*4e6, 100+int64(i), 200, 50, 10, 400, math.Pi*float64(i))
				rs = append(rs, r)
			}
			return rs
		}(),
	} {
		t.Run(name, func(t *testing.T) {
			page := render(t, rows)
			if n := strings.Count(page, "<svg"); n != 3 {
				t.Errorf("%d <svg> elements, want 3", n)
			}
			var b bytes.Buffer
			Tables(&b, rows)
			if b.Len() == 0 {
				t.Error("no tables")
			}
		})
	}
}

func TestHTMLTitled(t *testing.T) {
	var b bytes.Buffer
	if err := HTMLTitled(&b, nil, time.Now(), "SAMPLE: made-up rows"); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if !strings.Contains(page, "<title>SAMPLE: made-up rows</title>") || !strings.Contains(page, "<h1>SAMPLE: made-up rows</h1>") {
		t.Errorf("the page's title and heading do not say it is a sample:\n%.600s", page)
	}
}
