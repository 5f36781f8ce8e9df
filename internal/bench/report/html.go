package report

import (
	"fmt"
	"html/template"
	"io"
	"strings"
	"time"

	"github.com/ferry-dev/ferry/internal/benchrow"
)

// page is what the HTML template shows.
type page struct {
	Title              string
	Generated          string
	Rows, OK, Failed   int
	Span               string
	Methods, Tiers     int
	ShowFailed         bool
	Throughput         template.HTML
	Stages, Scatter    template.HTML
	MethodTiers        []tierGroups
	StageTiers         []stageTier
	Codecs             []codecRow
	Failures           []failureRow
	TitleMethods       string
	TitleStages        string
	TitleCodecs        string
	TitleFailed        string
	NotPlotted         string
	HasUnplottedCodecs bool
}

type tierGroups struct {
	Tier string
	Rows []methodRow
}

type methodRow struct {
	Method, Size, Wire, Ratio, Time, MBps string
	Runs, Failed                          int
}

type stageTier struct {
	Tier string
	Rows []stageRow
}

type stageRow struct {
	Method                                   string
	Compress, Upload, Compose, Verify, Total string
}

type codecRow struct {
	Codec, Ratio, MBps string
	Level, Runs        int
}

type failureRow struct {
	Method, LastError string
	Count             int
}

// HTML writes one self-contained page of rows: a title and the generated
// time, the tables of Tables, and three inline SVG charts (throughput by
// method and tier, stage times, compression speed against ratio). It uses
// no JavaScript and references nothing outside itself. With no rows the
// page says so.
func HTML(w io.Writer, rows []benchrow.Row, generated time.Time) error {
	return HTMLTitled(w, rows, generated, DefaultTitle)
}

// DefaultTitle is the page's title unless HTMLTitled is given another.
const DefaultTitle = "ferry benchmark report"

// HTMLTitled is HTML with the page's title (and heading) set to title, for
// example to say that the rows are a made-up sample.
func HTMLTitled(w io.Writer, rows []benchrow.Row, generated time.Time, title string) error {
	s := summarize(rows)
	p := page{
		Title:     title,
		Generated: generated.Format("2006-01-02 15:04:05 MST"),
		Rows:      s.Rows, OK: s.OK, Failed: s.Failed,
		Span:    span(rows),
		Methods: s.methodCount(), Tiers: len(s.Tiers),
		ShowFailed:   s.Failed > 0,
		TitleMethods: titleMethods, TitleStages: titleStages, TitleCodecs: titleCodecs, TitleFailed: titleFailed,
	}
	if s.Rows > 0 {
		p.Throughput, p.Stages, p.Scatter = throughputChart(s), stageChart(s), scatterChart(s)
	}
	for _, t := range s.Tiers {
		tg := tierGroups{Tier: t}
		for _, g := range s.groupsOfTier(t) {
			size, wire, ratio, total, mbps := g.cells()
			tg.Rows = append(tg.Rows, methodRow{Method: g.Method, Runs: g.Runs, Failed: g.Failed,
				Size: size, Wire: wire, Ratio: ratio, Time: total, MBps: mbps})
		}
		p.MethodTiers = append(p.MethodTiers, tg)
	}
	for _, t := range s.Tiers {
		st := stageTier{Tier: t}
		for _, g := range s.groupsOfTier(t) {
			if g.Runs == 0 {
				continue
			}
			r := stageRow{Method: g.Method, Compress: fmtStage(g.CompressMS), Upload: fmtStage(g.UploadMS),
				Compose: fmtStage(g.ComposeMS), Verify: fmtStage(g.VerifyMS), Total: fmtMS(g.TotalMS)}
			st.Rows = append(st.Rows, r)
		}
		if len(st.Rows) > 0 {
			p.StageTiers = append(p.StageTiers, st)
		}
	}
	var unplotted []string
	for _, c := range s.Codecs {
		p.Codecs = append(p.Codecs, codecRow{Codec: c.Codec, Level: c.Level, Runs: c.Runs, Ratio: fmtRatio(c.Ratio), MBps: fmtMBps(c.CompressMBps)})
		if c.CompressMBps <= 0 || c.Ratio <= 0 {
			unplotted = append(unplotted, c.Label())
		}
	}
	if len(unplotted) > 0 {
		p.HasUnplottedCodecs = true
		p.NotPlotted = strings.Join(unplotted, ", ")
	}
	for _, f := range s.Failures {
		p.Failures = append(p.Failures, failureRow{Method: f.Method, Count: f.Count, LastError: oneLine(f.LastError, 300)})
	}
	if err := pageTemplate.Execute(w, p); err != nil {
		return fmt.Errorf("report page: %w", err)
	}
	return nil
}

// plural is "1 row", "2 rows".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// span is the time the rows cover, from the first start to the last finish.
func span(rows []benchrow.Row) string {
	var first, last time.Time
	for _, r := range rows {
		if !r.StartedAt.IsZero() && (first.IsZero() || r.StartedAt.Before(first)) {
			first = r.StartedAt
		}
		if r.FinishedAt.After(last) {
			last = r.FinishedAt
		}
	}
	if first.IsZero() {
		first = last
	}
	if last.IsZero() {
		return ""
	}
	const layout = "2006-01-02 15:04 UTC"
	a, b := first.UTC().Format(layout), last.UTC().Format(layout)
	if a == b {
		return a
	}
	return a + " to " + b
}

// The page is well-formed XML as well as HTML (void elements are closed,
// no named entities, no "<" or "&" in the style sheet), so tests can parse
// it with encoding/xml.
var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{"plural": plural}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8"/>
<meta name="viewport" content="width=device-width, initial-scale=1"/>
<title>{{.Title}}</title>
<style>
:root { color-scheme: light; }
body { margin: 0; background: #f4f5f7; color: #222; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
main { max-width: 1160px; margin: 0 auto; padding: 24px 28px 40px; }
header { border-bottom: 3px solid #4E79A7; margin-bottom: 20px; padding-bottom: 10px; }
h1 { font-size: 26px; margin: 0 0 4px; }
h2 { font-size: 19px; margin: 0 0 4px; }
h3 { font-size: 15px; margin: 18px 0 6px; }
.meta, .note { color: #555; margin: 2px 0; }
.note { font-size: 13px; margin-bottom: 10px; }
section { background: #fff; border: 1px solid #dfe1e5; border-radius: 8px; padding: 16px 20px; margin-bottom: 16px; }
svg { display: block; max-width: 100%; height: auto; margin: 6px 0 4px; font-family: inherit; }
table { border-collapse: collapse; font-size: 13px; font-variant-numeric: tabular-nums; margin-top: 8px; }
th, td { padding: 3px 7px; text-align: right; white-space: nowrap; border-bottom: 1px solid #eceef1; }
th { font-weight: 600; color: #444; background: #f7f8fa; border-bottom: 1px solid #d5d8dd; }
th:first-child, td:first-child { text-align: left; }
td.text, th.text { text-align: left; white-space: normal; }
tr.tier th { background: #eef1f6; color: #222; text-align: left; font-size: 13px; }
td.bad { color: #b3261e; font-weight: 600; }
.grid { display: flex; flex-wrap: wrap; gap: 0 28px; align-items: flex-start; }
.side { display: flex; gap: 24px; align-items: flex-start; }
.side svg { flex: 0 1 auto; }
section.alert { border-left: 5px solid #b3261e; }
.empty { font-size: 16px; padding: 30px 0; color: #555; }
footer { color: #777; font-size: 12px; margin-top: 8px; }
</style>
</head>
<body>
<main>
<header>
<h1>{{.Title}}</h1>
<p class="meta">Generated {{.Generated}}{{if .Rows}} · {{plural .Rows "row"}} ({{.OK}} ok{{if .Failed}}, <strong>{{.Failed}} failed</strong>{{end}}) · {{plural .Methods "method"}} · {{plural .Tiers "tier"}}{{if .Span}} · transfers {{.Span}}{{end}}{{end}}</p>
</header>
{{if not .Rows}}
<section><p class="empty">There are no benchmark rows to report: the results files hold no rows yet. Run a transfer (make run) and report its results file.</p></section>
{{else}}
{{if .Failures}}<section class="alert">
<h2>{{.TitleFailed}}</h2>
<p class="note">Rows whose status is not ok; they count in no median.</p>
<table>
<thead><tr><th>method</th><th>failed</th><th class="text">last error</th></tr></thead>
<tbody>
{{range .Failures}}<tr><td>{{.Method}}</td><td class="bad">{{.Count}}</td><td class="text">{{.LastError}}</td></tr>
{{end}}</tbody>
</table>
</section>{{end}}
<section>
<h2>Throughput by method and tier</h2>
<p class="note">Median MB/s (10<sup>6</sup> bytes of source data per second of total time) over the ok runs of each method and tier; methods fastest first. Hover a bar for its run count.</p>
{{.Throughput}}
</section>
<section>
<h2>{{.TitleStages}}</h2>
<p class="note">Median time of each stage per method and tier, one panel per tier with its own time axis. The black mark is the median total: ferry compresses, uploads and composes in a pipeline, so the stages overlap and their stack can pass the total; a gap before the mark is time outside the four stages (start-up, queueing).</p>
{{.Stages}}
</section>
<section>
<h2>Compression speed against ratio</h2>
<p class="note">One point per codec and level: median compression ratio against median compress throughput (source bytes ÷ compress time). Up and to the right is better.{{if .HasUnplottedCodecs}} Not plotted, having no compress time or ratio: {{.NotPlotted}}.{{end}}</p>
<div class="side">
{{.Scatter}}
<div>
<h3>{{.TitleCodecs}}</h3>
<table>
<thead><tr><th>codec</th><th>level</th><th>runs</th><th>ratio</th><th>compress MB/s</th></tr></thead>
<tbody>
{{range .Codecs}}<tr><td>{{.Codec}}</td><td>{{.Level}}</td><td>{{.Runs}}</td><td>{{.Ratio}}</td><td>{{.MBps}}</td></tr>
{{else}}<tr><td colspan="5">No ok rows.</td></tr>
{{end}}</tbody>
</table>
</div>
</div>
</section>
<section>
<h2>Tables</h2>
<div class="grid">
<div>
<h3>{{.TitleMethods}}</h3>
<p class="note">Medians of ok runs; within a tier, fastest first.</p>
<table>
<thead><tr><th>method</th><th>runs</th><th>size</th><th>wire</th><th>ratio</th><th>time</th><th>MB/s</th>{{if .ShowFailed}}<th>failed</th>{{end}}</tr></thead>
{{range .MethodTiers}}<tbody>
<tr class="tier"><th colspan="{{if $.ShowFailed}}8{{else}}7{{end}}">{{.Tier}}</th></tr>
{{range .Rows}}<tr><td>{{.Method}}</td><td>{{.Runs}}</td><td>{{.Size}}</td><td>{{.Wire}}</td><td>{{.Ratio}}</td><td>{{.Time}}</td><td>{{.MBps}}</td>{{if $.ShowFailed}}<td{{if .Failed}} class="bad"{{end}}>{{if .Failed}}{{.Failed}}{{end}}</td>{{end}}</tr>
{{end}}</tbody>
{{end}}</table>
</div>
<div>
<h3>{{.TitleStages}}</h3>
<p class="note">Median time per stage of ok runs.</p>
<table>
<thead><tr><th>method</th><th>compress</th><th>upload</th><th>compose</th><th>verify</th><th>total</th></tr></thead>
{{range .StageTiers}}<tbody>
<tr class="tier"><th colspan="6">{{.Tier}}</th></tr>
{{range .Rows}}<tr><td>{{.Method}}</td><td>{{.Compress}}</td><td>{{.Upload}}</td><td>{{.Compose}}</td><td>{{.Verify}}</td><td>{{.Total}}</td></tr>
{{end}}</tbody>
{{else}}<tbody><tr><td colspan="6">No ok rows.</td></tr></tbody>
{{end}}</table>
</div>
</div>
</section>
{{end}}
<footer>Made by ferry's report command from its benchmark rows (NDJSON). Medians count only rows with status ok. Sizes and rates in decimal (SI) units: MB = 10<sup>6</sup> bytes, MB/s = 10<sup>6</sup> bytes per second.</footer>
</main>
</body>
</html>
`))
