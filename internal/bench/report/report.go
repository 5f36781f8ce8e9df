// Package report turns benchmark rows (benchrow.Row, one per transfer) into
// what the seed notebook showed its readers: text tables per method and
// tier, per stage and per codec (Tables), and one self-contained HTML page
// with the same tables and three inline SVG charts — throughput by method
// and tier, where the time goes per stage, and compression speed against
// ratio (HTML). The page needs no JavaScript, fonts, scripts or images from
// anywhere, so it opens offline and can be mailed or archived as it is.
//
// Figures are medians over the rows whose status is "ok"; other rows are
// counted as failed per method and never enter a median.
package report

import (
	"cmp"
	"slices"
	"strconv"

	"github.com/ferry-dev/ferry/internal/benchrow"
)

// StatusOK is the status of a row that counts in the medians.
const StatusOK = "ok"

// tierOrder is the seeds' tier order; other tiers follow alphabetically.
var tierOrder = map[string]int{"small": 0, "medium": 1, "large": 2}

// none names an empty method, tier or codec in tables and charts.
const none = "(none)"

func orNone(s string) string {
	if s == "" {
		return none
	}
	return s
}

func tierLess(a, b string) int {
	ra, oka := tierOrder[a]
	rb, okb := tierOrder[b]
	switch {
	case oka && okb:
		return cmp.Compare(ra, rb)
	case oka:
		return -1
	case okb:
		return 1
	}
	return cmp.Compare(a, b)
}

// methodTier is one method × tier group: its medians over ok rows.
type methodTier struct {
	Method, Tier string
	Runs, Failed int
	Size, Wire   float64 // bytes
	Ratio        float64
	TotalMS      float64
	MBps         float64 // source bytes per second of total time
	CompressMS   float64
	UploadMS     float64
	ComposeMS    float64
	VerifyMS     float64
}

// codecLevel is one codec/level group: its medians over ok rows.
type codecLevel struct {
	Codec        string
	Level        int
	Runs         int
	Ratio        float64
	CompressMBps float64 // source bytes per second of compress time
}

// Label names the group as the scatter chart labels its point.
func (c codecLevel) Label() string {
	switch {
	case c.Codec == "none" || c.Codec == none:
		return c.Codec
	case c.Level == 0:
		return c.Codec + " adaptive" // each chunk's level adapted (row.levels)
	}
	return c.Codec + " " + strconv.Itoa(c.Level)
}

// failure counts one method's rows that were not ok.
type failure struct {
	Method    string
	Count     int
	LastError string
}

// summary is everything the tables and charts show.
type summary struct {
	Rows, OK, Failed int
	Tiers            []string     // tiers with at least one row, in order
	Methods          []string     // methods with an ok row, fastest first
	Groups           []methodTier // by tier, then fastest first
	Codecs           []codecLevel // fastest compression first
	Failures         []failure    // by method
}

func rawMBps(r benchrow.Row) float64 {
	if r.RawMBps != nil && *r.RawMBps > 0 {
		return *r.RawMBps
	}
	return benchrow.MBps(r.SizeBytes, r.TotalMS)
}

func ratio(r benchrow.Row) float64 {
	if r.Ratio > 0 {
		return r.Ratio
	}
	if r.WireBytes > 0 {
		return float64(r.SizeBytes) / float64(r.WireBytes)
	}
	return 0
}

// median of xs; 0 for none.
func median(xs []float64) float64 { return benchrow.Summarize(xs).Median }

// medianOf is the median of f over rows, skipping values f reports as
// missing (ok false).
func medianOf(rows []benchrow.Row, f func(benchrow.Row) (float64, bool)) float64 {
	xs := make([]float64, 0, len(rows))
	for _, r := range rows {
		if v, ok := f(r); ok {
			xs = append(xs, v)
		}
	}
	return median(xs)
}

func always(f func(benchrow.Row) float64) func(benchrow.Row) (float64, bool) {
	return func(r benchrow.Row) (float64, bool) { return f(r), true }
}

func positive(f func(benchrow.Row) float64) func(benchrow.Row) (float64, bool) {
	return func(r benchrow.Row) (float64, bool) { v := f(r); return v, v > 0 }
}

func summarize(rows []benchrow.Row) summary {
	s := summary{Rows: len(rows)}
	type key struct{ method, tier string }
	okRows := map[key][]benchrow.Row{}
	failed := map[key]int{}
	fails := map[string]*failure{}
	type ckey struct {
		codec string
		level int
	}
	codecRows := map[ckey][]benchrow.Row{}
	tiers := map[string]bool{}
	for _, r := range rows {
		k := key{orNone(r.Method), orNone(r.Tier)}
		tiers[k.tier] = true
		if r.Status != StatusOK {
			s.Failed++
			failed[k]++
			f := fails[k.method]
			if f == nil {
				f = &failure{Method: k.method}
				fails[k.method] = f
			}
			f.Count++
			if r.Error != "" {
				f.LastError = r.Error
			}
			continue
		}
		s.OK++
		okRows[k] = append(okRows[k], r)
		ck := ckey{orNone(r.Codec), r.Level}
		codecRows[ck] = append(codecRows[ck], r)
	}
	for t := range tiers {
		s.Tiers = append(s.Tiers, t)
	}
	slices.SortFunc(s.Tiers, tierLess)

	keys := map[key]bool{}
	for k := range okRows {
		keys[k] = true
	}
	for k := range failed {
		keys[k] = true
	}
	for k := range keys {
		rs := okRows[k]
		g := methodTier{Method: k.method, Tier: k.tier, Runs: len(rs), Failed: failed[k]}
		if len(rs) > 0 {
			g.Size = medianOf(rs, always(func(r benchrow.Row) float64 { return float64(r.SizeBytes) }))
			g.Wire = medianOf(rs, always(func(r benchrow.Row) float64 { return float64(r.WireBytes) }))
			g.Ratio = medianOf(rs, positive(ratio))
			g.TotalMS = medianOf(rs, always(func(r benchrow.Row) float64 { return float64(r.TotalMS) }))
			g.MBps = medianOf(rs, always(rawMBps))
			g.CompressMS = medianOf(rs, always(func(r benchrow.Row) float64 { return float64(r.CompressMS) }))
			g.UploadMS = medianOf(rs, always(func(r benchrow.Row) float64 { return float64(r.UploadMS) }))
			g.ComposeMS = medianOf(rs, always(func(r benchrow.Row) float64 { return float64(r.ComposeMS) }))
			g.VerifyMS = medianOf(rs, always(func(r benchrow.Row) float64 { return float64(r.VerifyMS) }))
		}
		s.Groups = append(s.Groups, g)
	}
	slices.SortFunc(s.Groups, func(a, b methodTier) int {
		if c := tierLess(a.Tier, b.Tier); c != 0 {
			return c
		}
		if c := cmp.Compare(min(b.Runs, 1), min(a.Runs, 1)); c != 0 {
			return c
		}
		if c := cmp.Compare(b.MBps, a.MBps); c != 0 {
			return c
		}
		return cmp.Compare(a.Method, b.Method)
	})

	// Methods, fastest first by their mean over tiers of the median MB/s,
	// as the seeds' chart orders them.
	sum := map[string]float64{}
	n := map[string]int{}
	for _, g := range s.Groups {
		if g.Runs > 0 {
			sum[g.Method] += g.MBps
			n[g.Method]++
		}
	}
	for m := range n {
		s.Methods = append(s.Methods, m)
	}
	slices.SortFunc(s.Methods, func(a, b string) int {
		if c := cmp.Compare(sum[b]/float64(n[b]), sum[a]/float64(n[a])); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})

	for k, rs := range codecRows {
		s.Codecs = append(s.Codecs, codecLevel{
			Codec: k.codec, Level: k.level, Runs: len(rs),
			Ratio: medianOf(rs, positive(ratio)),
			CompressMBps: medianOf(rs, func(r benchrow.Row) (float64, bool) {
				return benchrow.MBps(r.SizeBytes, r.CompressMS), r.CompressMS > 0
			}),
		})
	}
	slices.SortFunc(s.Codecs, func(a, b codecLevel) int {
		if c := cmp.Compare(b.CompressMBps, a.CompressMBps); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Codec, b.Codec); c != 0 {
			return c
		}
		return cmp.Compare(a.Level, b.Level)
	})

	for _, f := range fails {
		s.Failures = append(s.Failures, *f)
	}
	slices.SortFunc(s.Failures, func(a, b failure) int { return cmp.Compare(a.Method, b.Method) })
	return s
}

// groupsOfTier returns the groups of one tier, in s.Groups' order.
func (s summary) groupsOfTier(tier string) []methodTier {
	var out []methodTier
	for _, g := range s.Groups {
		if g.Tier == tier {
			out = append(out, g)
		}
	}
	return out
}

// methodCount is the number of methods with a row, ok or not.
func (s summary) methodCount() int {
	seen := map[string]bool{}
	for _, g := range s.Groups {
		seen[g.Method] = true
	}
	return len(seen)
}
