package report

import (
	"fmt"
	"html/template"
	"math"
)

// Chart widths in SVG units; the page scales them down to fit.
const (
	chartWidth   = 1100
	scatterWidth = 720
)

// noData is a chart with nothing to draw: it says so.
func noData(width float64, label, why string) template.HTML {
	s := &svg{w: width, h: 60}
	s.text(width/2, 36, "middle", mutedText, 14, why, "")
	return template.HTML(s.html(label)) // #nosec: every text is escaped by s.text
}

// throughputChart is the seeds' grouped bar chart: one group per method,
// fastest first, one bar per tier, median MB/s of the source data.
func throughputChart(s summary) template.HTML {
	const label = "Throughput by method and tier (median MB/s)"
	if len(s.Methods) == 0 {
		return noData(chartWidth, label, "No ok rows: nothing to chart.")
	}
	val := map[[2]string]float64{}
	runs := map[[2]string]int{}
	var tiers []string
	seen := map[string]bool{}
	top := 0.0
	for _, g := range s.Groups {
		if g.Runs == 0 {
			continue
		}
		val[[2]string{g.Method, g.Tier}] = g.MBps
		runs[[2]string{g.Method, g.Tier}] = g.Runs
		top = max(top, g.MBps)
		if !seen[g.Tier] {
			seen[g.Tier] = true
			tiers = append(tiers, g.Tier)
		}
	}
	colors := make([]string, len(tiers))
	for i, t := range tiers {
		colors[i] = colorOf(tierColors, t, i)
	}

	const right, top0 = 20.0, 44.0
	left := 70.0
	longest := 0.0
	for _, m := range s.Methods {
		longest = max(longest, textWidth(m, fontSize))
	}
	groupW := (chartWidth - left - right) / float64(len(s.Methods))
	rotate := longest > groupW-8
	bottom := 56.0
	if rotate {
		// Labels slant down to the left from their group's centre: make
		// room below and, for the first group's, on the left.
		rad := 35 * math.Pi / 180
		bottom = 44 + 0.9*longest*math.Sin(rad)
		left = max(left, longest*math.Cos(rad)-groupW/2+12)
		groupW = (chartWidth - left - right) / float64(len(s.Methods))
		left = max(70, longest*math.Cos(rad)-groupW/2+12)
	}
	plotW := chartWidth - left - right
	groupW = plotW / float64(len(s.Methods))
	const plotH = 270.0
	c := &svg{w: chartWidth, h: top0 + plotH + bottom}
	y0 := top0 + plotH

	ticks := linearTicks(0, top*1.08, 6)
	ymax := ticks[len(ticks)-1]
	y := func(v float64) float64 { return y0 - v/ymax*plotH }
	for _, t := range ticks {
		c.line(left, y(t), left+plotW, y(t), gridColor, 1)
		c.text(left-8, y(t)+4, "end", mutedText, fontSize, num(t), "")
	}
	c.text(18, top0+plotH/2, "middle", textColor, fontSize, "MB/s (median, source bytes ÷ total time)",
		fmt.Sprintf(` transform="rotate(-90 18 %.1f)"`, top0+plotH/2))
	c.legend(chartWidth-right, 20, "Tier", tiers, colors)

	barW := min(groupW*0.8/float64(len(tiers)), 64)
	for i, m := range s.Methods {
		gx := left + float64(i)*groupW
		x := gx + (groupW-barW*float64(len(tiers)))/2
		for j, t := range tiers {
			v, ok := val[[2]string{m, t}]
			bx := x + float64(j)*barW
			if !ok {
				continue
			}
			title := fmt.Sprintf("%s · %s: %.1f MB/s (median of %d)", m, t, v, runs[[2]string{m, t}])
			c.rect(bx+1, y(v), barW-2, y0-y(v), colors[j], title)
			lbl := fmt.Sprintf("%.1f", v)
			if textWidth(lbl, 11) <= barW+4 {
				c.text(bx+barW/2, y(v)-5, "middle", textColor, 11, lbl, "")
			} else {
				c.text(bx+barW/2+4, y(v)-5, "start", textColor, 11, lbl,
					fmt.Sprintf(` transform="rotate(-90 %.1f %.1f)"`, bx+barW/2+4, y(v)-5))
			}
		}
		cx := gx + groupW/2
		if rotate {
			c.text(cx, y0+18, "end", textColor, fontSize, m, fmt.Sprintf(` transform="rotate(-35 %.1f %.1f)"`, cx, y0+18))
		} else {
			c.text(cx, y0+20, "middle", textColor, fontSize, m, "")
		}
	}
	c.line(left, y0, left+plotW, y0, axisColor, 1)
	c.line(left, top0, left, y0, axisColor, 1)
	c.text(left+plotW/2, c.h-10, "middle", textColor, fontSize, "method (fastest first, by mean over tiers)", "")
	return template.HTML(c.html(label)) // #nosec: every text is escaped
}

// stageChart stacks each method × tier's median stage times in horizontal
// bars, one panel per tier with its own time axis, and marks the median
// total: pipelined stages overlap, so the stack may pass the total.
func stageChart(s summary) template.HTML {
	const label = "Where the time goes: median stage times per method and tier"
	var tiers []string
	byTier := map[string][]methodTier{}
	for _, g := range s.Groups {
		if g.Runs == 0 {
			continue
		}
		if byTier[g.Tier] == nil {
			tiers = append(tiers, g.Tier)
		}
		byTier[g.Tier] = append(byTier[g.Tier], g)
	}
	if len(tiers) == 0 {
		return noData(chartWidth, label, "No ok rows: nothing to chart.")
	}
	longest := 0.0
	for _, g := range s.Groups {
		longest = max(longest, textWidth(g.Method, fontSize))
	}
	left := max(longest+20, 90)
	const right, rowH, barH, head, axisH = 90.0, 25.0, 17.0, 28.0, 42.0
	plotW := chartWidth - left - right
	h := 34.0
	for _, t := range tiers {
		h += head + float64(len(byTier[t]))*rowH + axisH
	}
	c := &svg{w: chartWidth, h: h}
	names := make([]string, len(stages))
	colors := make([]string, len(stages))
	for i, st := range stages {
		names[i], colors[i] = st.name, st.color
	}
	// Legend: the stages, then the total marker.
	mark := "median total (wall clock)"
	c.legend(chartWidth-right-textWidth(mark, fontSize)-30, 18, "Stage", names, colors)
	mx := chartWidth - right - textWidth(mark, fontSize) - 16
	c.line(mx, 6, mx, 22, textColor, 2.5)
	c.text(mx+8, 18, "start", textColor, fontSize, mark, "")

	y := 34.0
	for _, t := range tiers {
		gs := byTier[t]
		c.text(8, y+18, "start", textColor, 13, "Tier: "+t, ` font-weight="600"`)
		y += head
		top := 0.0
		for _, g := range gs {
			top = max(top, g.CompressMS+g.UploadMS+g.ComposeMS+g.VerifyMS, g.TotalMS)
		}
		unit, per := timeUnit(top)
		ticks := linearTicks(0, top/per, 6)
		xmax := ticks[len(ticks)-1] * per
		if xmax <= 0 {
			xmax = 1
		}
		x := func(ms float64) float64 { return left + ms/xmax*plotW }
		bottom := y + float64(len(gs))*rowH
		for _, tk := range ticks {
			c.line(x(tk*per), y, x(tk*per), bottom, gridColor, 1)
		}
		for i, g := range gs {
			by := y + float64(i)*rowH + (rowH-barH)/2
			c.text(left-10, by+barH/2+4, "end", textColor, fontSize, g.Method, "")
			// Segments, then the total mark, then the segments' labels
			// over the mark.
			vals := []float64{g.CompressMS, g.UploadMS, g.ComposeMS, g.VerifyMS}
			at := 0.0
			for j, v := range vals {
				if v <= 0 {
					continue
				}
				title := fmt.Sprintf("%s · %s · %s: %s (median of %d)", g.Method, t, stages[j].name, fmtMS(v), g.Runs)
				c.rect(x(at), by, x(at+v)-x(at), barH, stages[j].color, title)
				at += v
			}
			tx := x(g.TotalMS)
			c.line(tx, by-4, tx, by+barH+4, textColor, 2.5)
			c.text(max(x(at), tx)+8, by+barH/2+4, "start", textColor, fontSize, fmtMS(g.TotalMS), "")
			at = 0
			for _, v := range vals {
				if v <= 0 {
					continue
				}
				if cx, ok := labelAt(x(at), x(at+v), tx, textWidth(fmtMS(v), 11)+6); ok {
					c.text(cx, by+barH/2+4, "middle", "#fff", 11, fmtMS(v), ` font-weight="600"`)
				}
				at += v
			}
		}
		c.line(left, bottom, left+plotW, bottom, axisColor, 1)
		c.line(left, y, left, bottom, axisColor, 1)
		for _, tk := range ticks {
			c.line(x(tk*per), bottom, x(tk*per), bottom+4, axisColor, 1)
			c.text(x(tk*per), bottom+17, "middle", mutedText, fontSize, num(tk), "")
		}
		c.text(left+plotW/2, bottom+34, "middle", mutedText, fontSize, "time ("+unit+")", "")
		y = bottom + axisH
	}
	return template.HTML(c.html(label)) // #nosec: every text is escaped
}

// labelAt centres a label of width w in the segment x0..x1, clear of the
// total mark at tx when it can; ok is false when the label does not fit.
func labelAt(x0, x1, tx, w float64) (cx float64, ok bool) {
	if x1-x0 < w {
		return 0, false
	}
	cx = (x0 + x1) / 2
	if tx < cx-w/2-2 || tx > cx+w/2+2 {
		return cx, true
	}
	// The mark crosses the label: centre it in the wider part beside the
	// mark if it fits there, else leave it where it was.
	left, right := tx-2-x0, x1-tx-2
	switch {
	case right >= left && right >= w:
		return (tx + x1) / 2, true
	case left >= w:
		return (x0 + tx) / 2, true
	}
	return cx, true
}

// box is a label's or a point's bounding box.
type box struct{ x0, y0, x1, y1 float64 }

func (a box) overlaps(b box) bool {
	return a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1
}

// scatterChart plots compression speed against ratio, one labelled point per
// codec and level, as the seeds' "compression speed vs ratio" chart.
func scatterChart(s summary) template.HTML {
	const label = "Compression speed against ratio, per codec and level"
	var pts []codecLevel
	for _, c := range s.Codecs {
		if c.CompressMBps > 0 && c.Ratio > 0 {
			pts = append(pts, c)
		}
	}
	if len(pts) == 0 {
		return noData(scatterWidth, label, "No ok rows with a compress time and a ratio: nothing to chart.")
	}
	xlo, xhi := math.Inf(1), 0.0
	ylo, yhi := math.Inf(1), 0.0
	for _, p := range pts {
		xlo, xhi = min(xlo, p.CompressMBps), max(xhi, p.CompressMBps)
		ylo, yhi = min(ylo, p.Ratio), max(yhi, p.Ratio)
	}
	logX := xhi/xlo >= 10
	var xt []float64
	if logX {
		lo := math.Pow(10, math.Floor(math.Log10(xlo)))
		hi := math.Pow(10, math.Ceil(math.Log10(xhi)))
		if hi/lo < 10 {
			hi = lo * 10
		}
		xt = logTicks(lo, hi)
		xt = append([]float64{lo}, xt[1:]...)
		if xt[len(xt)-1] < hi {
			xt = append(xt, hi)
		}
	} else {
		pad := max((xhi-xlo)*0.15, xhi*0.1, 1)
		xt = linearTicks(max(0, xlo-pad), xhi+pad, 6)
	}
	ypad := max((yhi-ylo)*0.15, 0.2)
	yt := linearTicks(max(0, ylo-ypad), yhi+ypad, 8)

	const left, right, top0, plotH = 70.0, 30.0, 40.0, 320.0
	plotW := scatterWidth - left - right
	c := &svg{w: scatterWidth, h: top0 + plotH + 56}
	y0 := top0 + plotH
	x := func(v float64) float64 {
		if logX {
			return left + (math.Log10(v)-math.Log10(xt[0]))/(math.Log10(xt[len(xt)-1])-math.Log10(xt[0]))*plotW
		}
		return left + (v-xt[0])/(xt[len(xt)-1]-xt[0])*plotW
	}
	y := func(v float64) float64 { return y0 - (v-yt[0])/(yt[len(yt)-1]-yt[0])*plotH }

	for _, t := range yt {
		c.line(left, y(t), left+plotW, y(t), gridColor, 1)
		c.text(left-8, y(t)+4, "end", mutedText, fontSize, num(t)+"x", "")
	}
	for _, t := range xt {
		c.line(x(t), top0, x(t), y0, gridColor, 1)
		c.line(x(t), y0, x(t), y0+4, axisColor, 1)
		c.text(x(t), y0+18, "middle", mutedText, fontSize, num(t), "")
	}
	c.line(left, y0, left+plotW, y0, axisColor, 1)
	c.line(left, top0, left, y0, axisColor, 1)
	xTitle := "compress throughput (MB/s of source data, median)"
	if logX {
		xTitle += ", log scale"
	}
	c.text(left+plotW/2, c.h-10, "middle", textColor, fontSize, xTitle, "")
	c.text(18, top0+plotH/2, "middle", textColor, fontSize, "compression ratio (x, median)",
		fmt.Sprintf(` transform="rotate(-90 18 %.1f)"`, top0+plotH/2))

	var codecs, colors []string
	color := map[string]string{}
	for _, p := range pts {
		if _, ok := color[p.Codec]; !ok {
			color[p.Codec] = colorOf(codecColors, p.Codec, len(codecs))
			codecs = append(codecs, p.Codec)
			colors = append(colors, color[p.Codec])
		}
	}
	c.legend(scatterWidth-right, 20, "Codec", codecs, colors)
	c.text(left+plotW-6, top0+16, "end", mutedText, fontSize, "better ↗", ` font-style="italic"`)

	// Points first, then labels placed where they collide with nothing.
	taken := []box{{left + plotW - 70, top0, left + plotW, top0 + 22}}
	for _, p := range pts {
		px, py := x(p.CompressMBps), y(p.Ratio)
		taken = append(taken, box{px - 7, py - 7, px + 7, py + 7})
		title := fmt.Sprintf("%s: ratio %.2fx, compress %.1f MB/s (median of %d)", p.Label(), p.Ratio, p.CompressMBps, p.Runs)
		c.f(`<circle cx="%.1f" cy="%.1f" r="6.5" fill="%s" fill-opacity="0.85" stroke="#fff" stroke-width="1.5"><title>%s</title></circle>`+"\n",
			px, py, color[p.Codec], esc(title))
	}
	for _, p := range pts {
		px, py := x(p.CompressMBps), y(p.Ratio)
		lbl := p.Label()
		w, h := textWidth(lbl, fontSize), 14.0
		type spot struct {
			x, y   float64
			anchor string
			b      box
		}
		spots := []spot{
			{px + 10, py + 4, "start", box{px + 10, py - 8, px + 10 + w, py - 8 + h}},
			{px, py - 11, "middle", box{px - w/2, py - 23, px + w/2, py - 23 + h}},
			{px - 10, py + 4, "end", box{px - 10 - w, py - 8, px - 10, py - 8 + h}},
			{px, py + 20, "middle", box{px - w/2, py + 8, px + w/2, py + 8 + h}},
			{px + 10, py - 10, "start", box{px + 10, py - 22, px + 10 + w, py - 22 + h}},
			{px + 10, py + 18, "start", box{px + 10, py + 6, px + 10 + w, py + 6 + h}},
			{px - 10, py - 10, "end", box{px - 10 - w, py - 22, px - 10, py - 22 + h}},
			{px - 10, py + 18, "end", box{px - 10 - w, py + 6, px - 10, py + 6 + h}},
		}
		best := spots[0]
		for _, sp := range spots {
			inside := sp.b.x0 >= left+2 && sp.b.x1 <= left+plotW-2 && sp.b.y0 >= top0 && sp.b.y1 <= y0-2
			free := inside
			for _, t := range taken {
				if free && sp.b.overlaps(t) {
					free = false
				}
			}
			if free {
				best = sp
				break
			}
		}
		taken = append(taken, best.b)
		c.text(best.x, best.y, best.anchor, textColor, fontSize, lbl, "")
	}
	return template.HTML(c.html(label)) // #nosec: every text is escaped
}
