package progress

import (
	"fmt"
	"strings"
	"time"
)

// Restore is what is known of a restore.
type Restore struct {
	Objects int64 // objects done: restored, skipped or failed
	Listed  int64 // objects found so far
	Listing bool  // more may be found
	Raw     int64 // bytes written
	// RawTotal is the bytes to write when known in advance (one object);
	// 0 draws the bar by objects.
	RawTotal int64
	Elapsed  time.Duration
}

// RestoreLine renders s as one line, without a newline.
func RestoreLine(s Restore) string {
	frac, count := 0.0, ""
	switch {
	case s.RawTotal > 0:
		frac = float64(s.Raw) / float64(s.RawTotal)
		count = fmt.Sprintf("%s / %s", mb(s.Raw), mb(s.RawTotal))
	default:
		if s.Listed > 0 {
			frac = float64(s.Objects) / float64(s.Listed)
		}
		more := ""
		if s.Listing {
			more = "+ (listing…)"
		}
		count = fmt.Sprintf("%d / %d%s objects  %s", s.Objects, s.Listed, more, mb(s.Raw))
	}
	frac = min(1, frac)
	filled := int(frac * wideBar)
	rate := 0.0
	if s.Elapsed > 0 {
		rate = float64(s.Raw) / 1e6 / s.Elapsed.Seconds()
	}
	return fmt.Sprintf("%s%s %3.0f%%  restored %s  %.1f MB/s",
		strings.Repeat("█", filled), strings.Repeat("░", wideBar-filled), frac*100, count, rate)
}
