package verdict

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

func itoa(n int) string { return strconv.Itoa(n) }

func ftoa(f float64, prec int) string { return strconv.FormatFloat(f, 'f', prec, 64) }

// Table is a text table: a title, a header and rows of cells. The first
// column is left-aligned, the others right-aligned.
type Table struct {
	Title  string
	Header []string
	Rows   [][]string
	Notes  []string
	// Left aligns every column left, not only the first.
	Left bool
}

// Write prints t.
func (t Table) Write(w io.Writer) {
	widths := make([]int, len(t.Header))
	for i, h := range t.Header {
		widths[i] = utf8.RuneCountInString(h)
	}
	for _, r := range t.Rows {
		for i, c := range r {
			if i < len(widths) {
				widths[i] = max(widths[i], utf8.RuneCountInString(c))
			}
		}
	}
	line := func(cells []string) {
		var b strings.Builder
		b.WriteString(" ")
		for i := range widths {
			c := ""
			if i < len(cells) {
				c = cells[i]
			}
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			b.WriteString(" ")
			if i == 0 || t.Left {
				b.WriteString(c + pad)
			} else {
				b.WriteString(pad + c)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
	fmt.Fprintf(w, "\n== %s\n", t.Title)
	line(t.Header)
	for _, r := range t.Rows {
		line(r)
	}
	for _, n := range t.Notes {
		fmt.Fprintf(w, "  %s\n", n)
	}
}

// spread prints a Summary of seconds as "min / median / max".
func spread(s Summary) string {
	if s.N == 0 {
		return "-"
	}
	return fmt.Sprintf("%s / %s / %s", Secs(s.Min), Secs(s.Median), Secs(s.Max))
}

// Secs is a time in seconds to two, one or no decimals, as its size asks.
func Secs(s float64) string {
	switch {
	case s < 10:
		return ftoa(s, 2)
	case s < 100:
		return ftoa(s, 1)
	}
	return ftoa(s, 0)
}

func fmtRate(v float64) string {
	if v <= 0 {
		return "-"
	}
	if v < 10 {
		return ftoa(v, 2)
	}
	return ftoa(v, 1)
}

func fmtX(v float64) string {
	if v <= 0 {
		return "-"
	}
	return ftoa(v, 2) + "x"
}

func fmtMB(b float64) string {
	if b <= 0 {
		return "-"
	}
	return ftoa(b/1e6, 1)
}
