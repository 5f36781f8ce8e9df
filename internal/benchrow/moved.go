package benchrow

import (
	"fmt"
	"strings"
)

// Moved is what a transfer moved, as opposed to what it leaves stored:
// a file that grew moves its tail only, a skipped file
// nothing, a converted source the text its parts hold.
type Moved struct {
	// Whole, Appended and Converted count the files sent whole, the
	// files that grew and went as their tail only, and the sources
	// converted to Parquet parts.
	Whole, Appended, Converted int
	// Read are the source bytes read and sent, Sent the bytes uploaded
	// for them.
	Read, Sent int64
}

// String says what moved: "1 file appended (its tail only), 1 sent
// whole: 1.6 MB read, 0.6 MB sent".
func (m Moved) String() string {
	var what []string
	noun := func(n int, words string) {
		if n == 0 {
			return
		}
		if len(what) == 0 {
			what = append(what, Count(n, "file")+" "+words)
		} else {
			what = append(what, fmt.Sprintf("%d %s", n, words))
		}
	}
	tail := "(their tails only)"
	if m.Appended == 1 {
		tail = "(its tail only)"
	}
	noun(m.Appended, "appended "+tail)
	noun(m.Converted, "converted to Parquet")
	noun(m.Whole, "sent whole")
	if len(what) == 0 {
		what = append(what, "no file sent")
	}
	return fmt.Sprintf("%s: %s read, %s sent", strings.Join(what, ", "), BytesOrZero(m.Read), BytesOrZero(m.Sent))
}

// BytesOrZero is FormatBytes, with 0 as "0 B": a count of what moved,
// where nothing is a figure, not a missing one.
func BytesOrZero(n int64) string {
	if n <= 0 {
		return "0 B"
	}
	return FormatBytes(float64(n))
}
