// Package progress draws the one-line progress bar `producer submit` shows on
// a terminal: bytes compressed, uploaded and composed, and MB/s. It only
// formats; the caller decides when (a terminal) and how often.
package progress

import (
	"fmt"
	"io"
	"strings"
	"time"
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

const width = 24

// Line renders s as one line, without a newline.
func Line(s State) string {
	if s.Total < 0 {
		return unknownTotal(s)
	}
	done := s.Uploaded
	if s.Composed {
		done = s.Total
	}
	frac := 1.0
	if s.Total > 0 {
		frac = min(1, float64(done)/float64(s.Total))
	}
	filled := int(frac * width)
	bar := strings.Repeat("█", filled) + strings.Repeat("░", width-filled)
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
	return fmt.Sprintf("%s %3.0f%%  %scompressed %s  uploaded %s / %s  %s  %.1f MB/s",
		bar, frac*100, files(s), mb(s.Compressed), mb(s.Uploaded), mb(s.Total), composed, rate) + eta(s) + paced(s)
}

// files says how many files were read, when the total is known.
func files(s State) string {
	if s.FilesTotal <= 0 {
		return ""
	}
	return fmt.Sprintf("files %d/%d  ", min(s.Files, s.FilesTotal), s.FilesTotal)
}

// eta is the time left at the upload rate so far, once there is one.
func eta(s State) string {
	if s.Composed || s.Uploaded <= 0 || s.Uploaded >= s.Total || s.Elapsed < time.Second {
		return ""
	}
	left := time.Duration(float64(s.Elapsed) * float64(s.Total-s.Uploaded) / float64(s.Uploaded))
	return "  ETA " + left.Round(time.Second).String()
}

// paced says that GCS is pacing the uploads, when it is.
func paced(s State) string {
	if s.Paced == 0 {
		return ""
	}
	return fmt.Sprintf("  GCS pacing (%d slow-downs)", s.Paced)
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
	return fmt.Sprintf("compressed %s  uploaded %s  %s  %.1f MB/s", mb(s.Compressed), mb(s.Uploaded), composed, rate) + paced(s)
}

// Draw overwrites the current terminal line with s.
func Draw(w io.Writer, s State) {
	fmt.Fprintf(w, "\r\033[K%s", Line(s))
}

func mb(b int64) string { return fmt.Sprintf("%.1f MB", float64(b)/1e6) }
