package table

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"
)

// Text is how a file's bytes read as text: their encoding, the values
// that mean NULL besides an empty field (BigQuery's encoding and
// null_markers), and whether quotes quote.
type Text struct {
	// Encoding is UTF8 ("" too), Latin1 (the two BigQuery's CSV loads
	// take), or UTF-16 (what spreadsheets write as "Unicode text"),
	// converted to UTF-8 on the way: UTF16 reads the order a file's byte
	// order mark says; Scan settles each file's as UTF16LE or UTF16BE.
	// A file that starts with a UTF-16 byte order mark is read as UTF-16
	// unless the encoding said is ISO-8859-1 (no UTF-8 starts so).
	Encoding string
	// NullMarkers are values read as NULL in every column, as an empty
	// field is.
	NullMarkers []string
	// Quote is QuoteNone (a quote is a character like any other, as
	// most TSV writers mean it) or QuoteDouble (a field may be quoted,
	// as RFC 4180 and BigQuery's loads read it); "" is by the file:
	// QuoteNone for a .tsv, QuoteDouble else. Scan settles each file's.
	Quote string
}

// Encodings a file may be in.
const (
	UTF8    = "UTF-8"
	Latin1  = "ISO-8859-1"
	UTF16   = "UTF-16"
	UTF16LE = "UTF-16LE"
	UTF16BE = "UTF-16BE"
)

// Quote settings (Text.Quote).
const (
	QuoteNone   = "none"
	QuoteDouble = `"`
)

// MaxNullMarkers bounds Text.NullMarkers, and MaxNullMarker the bytes of one.
const (
	MaxNullMarkers = 16
	MaxNullMarker  = 64
)

// ParseText checks an encoding (UTF-8, ISO-8859-1 or latin1, UTF-16,
// UTF-16LE or UTF-16BE, in any case), null markers and a quote setting
// ("", none, or a double quote), naming what is wrong.
func ParseText(encoding string, nullMarkers []string, quote string) (Text, error) {
	t := Text{NullMarkers: nullMarkers}
	switch strings.ToUpper(strings.ReplaceAll(encoding, "_", "-")) {
	case "", "UTF-8", "UTF8":
	case "ISO-8859-1", "ISO8859-1", "LATIN1", "LATIN-1":
		t.Encoding = Latin1
	case "UTF-16", "UTF16":
		t.Encoding = UTF16
	case "UTF-16LE", "UTF16LE":
		t.Encoding = UTF16LE
	case "UTF-16BE", "UTF16BE":
		t.Encoding = UTF16BE
	default:
		return t, fmt.Errorf("encoding %.32q: want UTF-8, ISO-8859-1 (latin1), UTF-16, UTF-16LE or UTF-16BE", encoding)
	}
	switch strings.ToLower(quote) {
	case "":
	case QuoteNone:
		t.Quote = QuoteNone
	case QuoteDouble:
		t.Quote = QuoteDouble
	default:
		return t, fmt.Errorf("quote %.16q: want none or a double quote (\")", quote)
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
	return t.Encoding == u.Encoding && t.Quote == u.Quote && slices.Equal(t.NullMarkers, u.NullMarkers)
}

// quotes reports whether a quote may quote a field.
func (t Text) quotes() bool { return t.Quote != QuoteNone }

// utf16 reports whether t reads UTF-16, and in which order.
func (t Text) utf16() (ok, bigEndian bool) {
	return t.Encoding == UTF16LE || t.Encoding == UTF16BE, t.Encoding == UTF16BE
}

// decode appends b, in t's encoding, to dst as UTF-8.
func (t Text) decode(dst, b []byte) []byte {
	if ok, be := t.utf16(); ok {
		dst, rest := decode16(dst, b, be)
		if len(rest) > 0 {
			dst = append(dst, invalid16) // a lone byte or surrogate at the end
		}
		return dst
	}
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
	if ok, _ := t.utf16(); ok || t.Encoding == Latin1 {
		return &decodeReader{r: r, t: t}
	}
	return r
}

// decodeReader decodes ISO-8859-1 or UTF-16 to UTF-8.
type decodeReader struct {
	r    io.Reader
	t    Text
	buf  [16 << 10]byte
	rest int // undecoded bytes at buf's start: half a UTF-16 unit or pair
	out  []byte
	err  error
}

func (d *decodeReader) Read(p []byte) (int, error) {
	for len(d.out) == 0 {
		if d.err != nil {
			return 0, d.err
		}
		n, err := d.r.Read(d.buf[d.rest : len(d.buf)/2])
		n += d.rest
		d.rest = 0
		b := d.buf[:n]
		if ok, be := d.t.utf16(); ok && err == nil {
			var rest []byte
			d.out, rest = decode16(d.out[:0], b, be)
			d.rest = copy(d.buf[:], rest)
		} else {
			d.out = d.t.decode(d.out[:0], b)
		}
		if err != nil {
			d.err = err
		}
	}
	n := copy(p, d.out)
	d.out = d.out[n:]
	return n, nil
}

// invalid16 stands for UTF-16 that is not (an unpaired surrogate, a last
// lone byte): no UTF-8 holds it, so the conversion refuses its line.
const invalid16 = 0xff

// decode16 appends the UTF-16 of b (big-endian or little) to dst as
// UTF-8, and returns the bytes at b's end that may start a unit or a
// pair whose rest has not come yet.
func decode16(dst, b []byte, be bool) (out, rest []byte) {
	rest = walk16(b, be, func(r rune, _ int) {
		if r == invalid16 {
			dst = append(dst, invalid16)
		} else {
			dst = utf8.AppendRune(dst, r)
		}
	})
	return dst, rest
}

// walk16 calls fn with each character of the UTF-16 in b (big-endian or
// little) and the bytes it took: invalid16 for a unit that is not one.
// It returns the bytes at b's end that may start a unit or a pair whose
// rest has not come yet.
func walk16(b []byte, be bool, fn func(r rune, n int)) []byte {
	unit := func(i int) rune {
		if be {
			return rune(b[i])<<8 | rune(b[i+1])
		}
		return rune(b[i+1])<<8 | rune(b[i])
	}
	i := 0
	for ; i+1 < len(b); i += 2 {
		u := unit(i)
		switch {
		case u < 0xd800 || u > 0xdfff:
			fn(u, 2)
		case u < 0xdc00: // a high surrogate: the low one follows
			if i+3 >= len(b) {
				return b[i:]
			}
			if v := unit(i + 2); v >= 0xdc00 && v <= 0xdfff {
				fn(0x10000+(u-0xd800)<<10+(v-0xdc00), 4)
				i += 2
				continue
			}
			fn(invalid16, 2)
		default:
			fn(invalid16, 2)
		}
	}
	return b[i:]
}

// offsets16 maps offs, ascending offsets into the UTF-8 that r's UTF-16
// decodes to (each at a character's start, or the end), to offsets into r.
func offsets16(r io.Reader, be bool, offs []int64) ([]int64, error) {
	at := make([]int64, len(offs))
	var u8, src int64
	k := 0
	mark := func() {
		for k < len(offs) && offs[k] == u8 {
			at[k] = src
			k++
		}
	}
	step := func(c rune, n int) {
		mark()
		if c == invalid16 {
			u8++
		} else {
			u8 += int64(utf8.RuneLen(c))
		}
		src += int64(n)
	}
	buf := make([]byte, 1<<20)
	rest := 0
	for k < len(offs) {
		n, err := io.ReadFull(r, buf[rest:])
		b := buf[:rest+n]
		if err != nil { // the end: what is left is not UTF-16
			if err != io.EOF && err != io.ErrUnexpectedEOF {
				return nil, err
			}
			left := walk16(b, be, step)
			if len(left) > 0 {
				step(invalid16, len(left))
			}
			mark()
			break
		}
		rest = copy(buf, walk16(b, be, step))
	}
	if k < len(offs) {
		return nil, fmt.Errorf("table: offset %d is not a character's start in the UTF-16", offs[k])
	}
	return at, nil
}
