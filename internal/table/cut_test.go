package table

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// sameCut checks that the jumping scan cuts data exactly as the
// line-by-line one does: the same header, parts, lines and errors.
func sameCut(t *testing.T, data []byte, target int64) {
	t.Helper()
	fast, ferr := cut(bytes.NewReader(data), "f.csv", target, ',', true, true)
	slow, serr := cut(bytes.NewReader(data), "f.csv", target, ',', false, true)
	if fmt.Sprint(ferr) != fmt.Sprint(serr) {
		t.Fatalf("target %d: jumping: %v; line by line: %v", target, ferr, serr)
	}
	if ferr != nil {
		return
	}
	if !bytes.Equal(fast.Header, slow.Header) || fmt.Sprint(fast.Parts) != fmt.Sprint(slow.Parts) {
		t.Fatalf("target %d: jumping cuts %q %v, line by line %q %v", target, fast.Header, fast.Parts, slow.Header, slow.Parts)
	}
	// Without quotes (a TSV's default), both cut at every newline.
	fast, ferr = cut(bytes.NewReader(data), "f.tsv", target, ',', true, false)
	slow, serr = cut(bytes.NewReader(data), "f.tsv", target, ',', false, false)
	if ferr != nil || serr != nil || !bytes.Equal(fast.Header, slow.Header) || fmt.Sprint(fast.Parts) != fmt.Sprint(slow.Parts) {
		t.Fatalf("target %d, no quotes: jumping cuts %q %v (%v), line by line %q %v (%v)", target, fast.Header, fast.Parts, ferr, slow.Header, slow.Parts, serr)
	}
}

// Over blocks of several MiB, with and without quotes in some blocks, at
// part sizes below, at and above the block's.
func TestJumpingCutEqualsLineByLine(t *testing.T) {
	var b strings.Builder
	b.WriteString("a,b,c\n")
	for i := 0; b.Len() < 5<<20; i++ {
		switch {
		case i == 20000:
			b.WriteString("1,\"quoted\nnewline\",3\n") // one block has quotes
		case i%997 == 0:
			b.WriteString("\r\n\n") // empty lines
		default:
			fmt.Fprintf(&b, "%d,%s,%d\n", i, strings.Repeat("x", i%300), i*7)
		}
	}
	data := []byte(b.String())
	for _, target := range []int64{1, 1000, 100 << 10, 1 << 20, (1 << 20) + 17, 3 << 20, 64 << 20} {
		sameCut(t, data, target)
		sameCut(t, data[:len(data)-1], target) // no final newline
	}
}

func FuzzJumpingCut(f *testing.F) {
	for _, s := range []string{"a,b\n1,2\n3,4\n", "h\n\n\n1\n", "", "h", "h\n\r\n\n", "a\n1\n2", "a,b\n1,\"2\n"} {
		f.Add([]byte(s), int64(3))
	}
	f.Fuzz(func(t *testing.T, data []byte, target int64) {
		sameCut(t, data, 1+(target&0xffff)%64)
	})
}
