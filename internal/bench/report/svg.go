package report

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The charts are drawn as SVG by hand: a few rectangles, lines and text
// elements, every text escaped. They scale to the page width through their
// viewBox.

const (
	fontSize  = 12
	axisColor = "#555"
	gridColor = "#e3e3e3"
	textColor = "#222"
	mutedText = "#666"
)

// tierColors are the seeds' chart colours per tier.
var tierColors = map[string]string{"small": "#636EFA", "medium": "#EF553B", "large": "#00A67E"}

// palette colours what has no fixed colour, in order.
var palette = []string{"#8E5CC4", "#E7A21B", "#17A2B8", "#D6457F", "#6B8E23", "#8C564B", "#7F7F7F"}

// stageColors colour the stages of the stage chart.
var stages = []struct{ name, color string }{
	{"compress", "#4E79A7"},
	{"upload", "#E07B1A"},
	{"compose", "#4E9A45"},
	{"verify", "#A65E9A"},
}

// codecColors colour the scatter chart's points per codec.
var codecColors = map[string]string{"zstd": "#4E79A7", "gzip": "#E07B1A", "none": "#7F7F7F"}

func colorOf(fixed map[string]string, key string, i int) string {
	if c, ok := fixed[key]; ok {
		return c
	}
	return palette[i%len(palette)]
}

func esc(s string) string { return html.EscapeString(s) }

func textWidth(s string, size float64) float64 {
	return float64(utf8.RuneCountInString(s)) * 0.62 * size
}

// svg accumulates one chart.
type svg struct {
	b    strings.Builder
	w, h float64
}

func (s *svg) f(format string, args ...any) { fmt.Fprintf(&s.b, format, args...) }

func (s *svg) line(x1, y1, x2, y2 float64, color string, width float64) {
	s.f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="%.1f"/>`+"\n", x1, y1, x2, y2, color, width)
}

func (s *svg) rect(x, y, w, h float64, color, title string) {
	s.f(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s">`, x, y, max(w, 0), max(h, 0), color)
	if title != "" {
		s.f(`<title>%s</title>`, esc(title))
	}
	s.f("</rect>\n")
}

// text writes s at x, y; anchor is start, middle or end; extra is more
// attributes, already safe.
func (s *svg) text(x, y float64, anchor, color string, size float64, str, extra string) {
	s.f(`<text x="%.1f" y="%.1f" text-anchor="%s" fill="%s" font-size="%.1f"%s>%s</text>`+"\n",
		x, y, anchor, color, size, extra, esc(str))
}

func (s *svg) html(label string) string {
	return fmt.Sprintf(`<svg viewBox="0 0 %.0f %.0f" width="%.0f" height="%.0f" role="img" aria-label="%s">`+"\n%s</svg>",
		s.w, s.h, s.w, s.h, esc(label), s.b.String())
}

// legend draws swatches right-aligned ending at x, baseline y.
func (s *svg) legend(xRight, y float64, title string, names, colors []string) {
	widths := 0.0
	for _, n := range names {
		widths += 14 + 6 + textWidth(n, fontSize) + 16
	}
	tw := 0.0
	if title != "" {
		tw = textWidth(title, fontSize) + 8
	}
	x := xRight - widths - tw
	if title != "" {
		s.text(x, y, "start", mutedText, fontSize, title, "")
		x += tw
	}
	for i, n := range names {
		s.rect(x, y-10, 14, 12, colors[i], "")
		s.text(x+20, y, "start", textColor, fontSize, n, "")
		x += 14 + 6 + textWidth(n, fontSize) + 16
	}
}

// niceStep is a 1, 2, 2.5 or 5 × 10^k step near span/n.
func niceStep(span float64, n int) float64 {
	if span <= 0 || math.IsNaN(span) || math.IsInf(span, 0) {
		return 1
	}
	raw := span / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			return m * mag
		}
	}
	return 10 * mag
}

// linearTicks covers [lo, hi] with about n nice ticks; it returns the ticks,
// the first of which is the axis' low end and the last its high end.
func linearTicks(lo, hi float64, n int) []float64 {
	if hi <= lo {
		hi = lo + 1
	}
	step := niceStep(hi-lo, n)
	start := math.Floor(lo/step+1e-9) * step
	end := math.Ceil(hi/step-1e-9) * step
	var ticks []float64
	for v := start; v <= end+step/2; v += step {
		ticks = append(ticks, math.Round(v/step)*step)
	}
	return ticks
}

// logTicks covers [lo, hi] (lo > 0) with 1, 2, 5 × 10^k ticks.
func logTicks(lo, hi float64) []float64 {
	var ticks []float64
	start := math.Floor(math.Log10(lo))
	end := math.Ceil(math.Log10(hi))
	for k := start; k <= end; k++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, k)
			if v >= lo/1.0001 && v <= hi*1.0001 {
				ticks = append(ticks, v)
			}
		}
	}
	return ticks
}

// num formats a tick value with no more decimals than it needs.
func num(v float64) string {
	s := strconv.FormatFloat(v, 'f', 2, 64)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if s == "-0" {
		s = "0"
	}
	return s
}

// timeUnit picks the unit of a time axis whose high end is maxMS.
func timeUnit(maxMS float64) (name string, ms float64) {
	switch {
	case maxMS >= 180_000:
		return "min", 60_000
	case maxMS >= 2_000:
		return "s", 1000
	}
	return "ms", 1
}
