// Package progress draws the one-line progress bar `producer submit` shows on
// a terminal: bytes compressed, uploaded and composed, and MB/s. It only
// formats; the caller decides when (a terminal) and how often.
package progress

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// State is what is known of a transfer.
type State struct {
	Total      int64 // raw bytes of the transfer; -1: unknown (standard input)
	Compressed int64 // raw bytes compressed by the producer
	Uploaded   int64 // raw bytes whose chunks workers uploaded
	Composed   bool  // the merger finished: final objects composed and verified
	Elapsed    time.Duration
	// Paced counts the uploads GCS asked to slow down (429) that the
	// workers waited out: the line then says GCS is pacing the transfer.
	Paced int64
	// Files and FilesTotal are the files read and planned; FilesTotal 0:
	// not shown.
	Files, FilesTotal int64
}

// Bar widths: on a terminal of at least wideTerm columns, and on a
// narrower one.
const (
	wideBar   = 24
	narrowBar = 10
	wideTerm  = 120
)

// Line renders s as one line, without a newline, whole.
func Line(s State) string { return LineIn(s, 0) }

// LineIn renders s in at most width columns (0: no limit): when the whole
// line does not fit, the least needed parts go first (what was compressed,
// the compose, GCS's pacing, the files read, the rate, the time left), and
// the bar narrows; what still does not fit is cut.
func LineIn(s State, width int) string {
	if s.Total < 0 {
		return cut(unknownTotal(s), width)
	}
	done := s.Uploaded
	if s.Composed {
		done = s.Total
	}
	frac := 1.0
	if s.Total > 0 {
		frac = min(1, float64(done)/float64(s.Total))
	}
	barWidth := wideBar
	if width > 0 && width < wideTerm {
		barWidth = narrowBar
	}
	filled := int(frac * float64(barWidth))
	bar := strings.Repeat("█", filled) + strings.Repeat("░", barWidth-filled)
	rate := 0.0
	if s.Elapsed > 0 {
		rate = float64(s.Compressed) / 1e6 / s.Elapsed.Seconds()
	}
	composed := "composing…"
	switch {
	case s.Composed:
		composed = "composed ✓"
	case s.Uploaded < s.Total:
		composed = "composed -"
	}
	// The parts in the order shown; drop says which go first (lowest).
	parts := []struct {
		text string
		drop int
	}{
		{fmt.Sprintf("%s %3.0f%%", bar, frac*100), 99},
		{files(s), 4},
		{"compressed " + mb(s.Compressed), 1},
		{fmt.Sprintf("uploaded %s / %s", mb(s.Uploaded), mb(s.Total)), 98},
		{composed, 2},
		{fmt.Sprintf("%.1f MB/s", rate), 5},
		{eta(s), 6},
		{paced(s), 3},
	}
	render := func(min int) string {
		var kept []string
		for _, p := range parts {
			if p.text != "" && p.drop >= min {
				kept = append(kept, p.text)
			}
		}
		return strings.Join(kept, "  ")
	}
	line := render(0)
	for min := 1; width > 0 && utf8.RuneCountInString(line) > width && min <= 99; min++ {
		line = render(min)
	}
	return cut(line, width)
}

// cut shortens line to width runes (0: no limit).
func cut(line string, width int) string {
	if width <= 0 || utf8.RuneCountInString(line) <= width {
		return line
	}
	return string([]rune(line)[:width])
}

// files says how many files were read, when the total is known.
func files(s State) string {
	if s.FilesTotal <= 0 {
		return ""
	}
	return fmt.Sprintf("files %d/%d", min(s.Files, s.FilesTotal), s.FilesTotal)
}

// eta is the time left at the upload rate so far, once there is one.
func eta(s State) string {
	if s.Composed || s.Uploaded <= 0 || s.Uploaded >= s.Total || s.Elapsed < time.Second {
		return ""
	}
	left := time.Duration(float64(s.Elapsed) * float64(s.Total-s.Uploaded) / float64(s.Uploaded))
	return "ETA " + left.Round(time.Second).String()
}

// paced says that GCS is pacing the uploads, when it is.
func paced(s State) string {
	if s.Paced == 0 {
		return ""
	}
	return fmt.Sprintf("GCS pacing (%d slow-downs)", s.Paced)
}

// unknownTotal renders a transfer whose size is known only at its end: no
// bar, only what has moved.
func unknownTotal(s State) string {
	rate := 0.0
	if s.Elapsed > 0 {
		rate = float64(s.Compressed) / 1e6 / s.Elapsed.Seconds()
	}
	composed := "composed -"
	if s.Composed {
		composed = "composed ✓"
	}
	line := fmt.Sprintf("compressed %s  uploaded %s  %s  %.1f MB/s", mb(s.Compressed), mb(s.Uploaded), composed, rate)
	if p := paced(s); p != "" {
		line += "  " + p
	}
	return line
}

func mb(b int64) string { return fmt.Sprintf("%.1f MB", float64(b)/1e6) }
