package table

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"
)

// Text is how a file's bytes read as text: their encoding, and the values
// that mean NULL besides an empty field (BigQuery's encoding and
// null_markers).
type Text struct {
	// Encoding is UTF8 ("" too) or Latin1, the two BigQuery's CSV loads
	// take.
	Encoding string
	// NullMarkers are values read as NULL in every column, as an empty
	// field is.
	NullMarkers []string
}

// Encodings a file may be in.
const (
	UTF8   = "UTF-8"
	Latin1 = "ISO-8859-1"
)

// MaxNullMarkers bounds Text.NullMarkers, and MaxNullMarker the bytes of one.
const (
	MaxNullMarkers = 16
	MaxNullMarker  = 64
)

// ParseText checks an encoding (UTF-8, ISO-8859-1 or latin1, in any case)
// and null markers, naming what is wrong.
func ParseText(encoding string, nullMarkers []string) (Text, error) {
	t := Text{NullMarkers: nullMarkers}
	switch strings.ToUpper(strings.ReplaceAll(encoding, "_", "-")) {
	case "", "UTF-8", "UTF8":
	case "ISO-8859-1", "ISO8859-1", "LATIN1", "LATIN-1":
		t.Encoding = Latin1
	case "UTF-16", "UTF-16LE", "UTF-16BE", "UTF16":
		return t, fmt.Errorf("encoding %s: BigQuery's loads take UTF-8 and ISO-8859-1; convert the file to UTF-8 first (iconv -f UTF-16 -t UTF-8)", encoding)
	default:
		return t, fmt.Errorf("encoding %.32q: want UTF-8 or ISO-8859-1 (latin1)", encoding)
	}
	if len(nullMarkers) > MaxNullMarkers {
		return t, fmt.Errorf("%d null markers; %d at most", len(nullMarkers), MaxNullMarkers)
	}
	for _, m := range nullMarkers {
		if len(m) > MaxNullMarker || !utf8.ValidString(m) || strings.ContainsAny(m, "\r\n") {
			return t, fmt.Errorf("null marker %.32q: want at most %d bytes of UTF-8 on one line", m, MaxNullMarker)
		}
	}
	return t, nil
}

// null reports whether v is one of t's null markers.
func (t Text) null(v string) bool {
	return len(t.NullMarkers) > 0 && slices.Contains(t.NullMarkers, v)
}

// Equal reports whether t and u read text the same way.
func (t Text) Equal(u Text) bool {
	return t.Encoding == u.Encoding && slices.Equal(t.NullMarkers, u.NullMarkers)
}

// decode appends b, in t's encoding, to dst as UTF-8.
func (t Text) decode(dst, b []byte) []byte {
	if t.Encoding != Latin1 {
		return append(dst, b...)
	}
	for _, c := range b {
		if c < utf8.RuneSelf {
			dst = append(dst, c)
		} else {
			dst = utf8.AppendRune(dst, rune(c))
		}
	}
	return dst
}

// reader reads r, in t's encoding, as UTF-8.
func (t Text) reader(r io.Reader) io.Reader {
	if t.Encoding != Latin1 {
		return r
	}
	return &latin1Reader{r: r}
}

// latin1Reader decodes ISO-8859-1 to UTF-8.
type latin1Reader struct {
	r   io.Reader
	buf [16 << 10]byte
	out []byte
}

func (l *latin1Reader) Read(p []byte) (int, error) {
	for len(l.out) == 0 {
		n, err := l.r.Read(l.buf[:len(l.buf)/2])
		l.out = Text{Encoding: Latin1}.decode(l.out[:0], l.buf[:n])
		if n == 0 && err != nil {
			return 0, err
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
	}
	n := copy(p, l.out)
	l.out = l.out[n:]
	return n, nil
}
