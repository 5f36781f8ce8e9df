package table

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// Range is one part of a delimited file: Size bytes from Offset, whole
// records, the first of them on line Line (1-based, as a text editor counts
// lines; a quoted field's newlines count).
type Range struct {
	Offset, Size int64
	Line         int64
}

// Layout is where a file's header and parts are.
type Layout struct {
	// Header is the header record's bytes, its line ending included.
	Header []byte
	Parts  []Range
}

// MaxHeader is the largest header record Cut reads.
const MaxHeader = 1 << 20

// MaxRecord is the longest record Cut takes: a part is about the chunk
// size the configuration allows plus one record, so the file must not
// choose that record's size (BigQuery's own limit on a CSV row is 100 MB;
// Convert takes fields of up to MaxField).
const MaxRecord = 64 << 20

// ErrUnterminatedQuote: the file ends inside a quoted field.
var ErrUnterminatedQuote = errors.New("unterminated quoted field: the file ends inside quotes")

// Cut reads r (a file of size bytes, path naming it in errors) once and
// cuts it after its header into parts of about target bytes, each ending at
// a record boundary: a newline outside quotes. Quotes are read as
// encoding/csv reads them with LazyQuotes (and DuckDB and BigQuery do): a
// quote opens a quoted field only at the start of a field (after a comma or
// a record's start), elsewhere it is a character (Monitor 27" LED); inside
// quotes "" is a quote, and a quote closes the field only before a comma or
// the line's end.
// Blocks with no quote are cut by counting newlines, at memory speed. A
// record longer than target makes a part of its own. An empty file, or one
// of a header only, has no parts.
func Cut(r io.Reader, path string, target int64, comma rune) (*Layout, error) {
	return cut(r, path, target, comma, true, true)
}

// CutUnquoted is Cut for a file whose quotes are characters (Text.Quote
// none): every newline ends a record.
func CutUnquoted(r io.Reader, path string, target int64, comma rune) (*Layout, error) {
	return cut(r, path, target, comma, true, false)
}

// quoteState is where a scan stands in a record's fields.
type quoteState uint8

const (
	fieldStart quoteState = iota // a quote here opens a quoted field
	unquoted                     // in a field that did not open with a quote
	quoted                       // inside quotes: a newline is the field's
	quoteSeen                    // a quote inside quotes: "", the field's end, or a character
)

// scanQuotes is st after the bytes of seg, which holds no newline.
func scanQuotes(st quoteState, seg []byte, comma byte) quoteState {
	if len(seg) == 0 {
		return st
	}
	if bytes.IndexByte(seg, '"') < 0 {
		switch {
		case st == quoted:
			return quoted
		case seg[len(seg)-1] == comma:
			return fieldStart
		}
		return unquoted
	}
	for i, c := range seg {
		switch st {
		case fieldStart, unquoted:
			switch {
			case c == comma:
				st = fieldStart
			case c == '"' && (st == fieldStart || comma == 0):
				st = quoted
			default:
				st = unquoted
			}
		case quoted:
			if c == '"' {
				st = quoteSeen
			}
		case quoteSeen:
			switch {
			case c == '"':
				st = quoted // ""
			case c == comma:
				st = fieldStart
			case c == '\r' && i == len(seg)-1:
				st = unquoted // closed before the line's \r\n
			default:
				st = quoted // a quote inside the field, as read lazily
			}
		}
	}
	return st
}

// commaByte is comma as scanQuotes takes it: 0 for one of more than a
// byte, where every quote opens quotes (the field starts are not known).
func commaByte(comma rune) byte {
	if comma <= 0 || comma >= utf8.RuneSelf {
		return 0
	}
	return byte(comma)
}

// cut is Cut; plain lets it jump from cut to cut through a block with no
// quote in it (every newline there ends a record), counting newlines at
// memory speed instead of visiting each line: a seed-like file's scan
// takes a third of the time. The tests compare it with the line-by-line
// scan. Without quotes (quotes false), every block is one with no quote.
func cut(r io.Reader, path string, target int64, comma rune, plain, quotes bool) (*Layout, error) {
	if target <= 0 {
		return nil, fmt.Errorf("table: part size %d", target)
	}
	const block = 1 << 20
	buf := make([]byte, block)
	var (
		l        Layout
		pos      int64              // file offset of buf[0]
		st             = fieldStart // where the scan stands in the record
		cb             = commaByte(comma)
		line     int64 = 1
		start    int64 = -1 // the open part's start; -1: in the header
		partLine int64
		record   int64 // where the record being read starts
		recLine  int64 = 1
	)
	tooLong := func(at int64) error {
		if start >= 0 && at-record > MaxRecord {
			return fmt.Errorf("%s: line %d: a record of more than %d bytes (a missing newline or quote?)", path, recLine, MaxRecord)
		}
		return nil
	}
	for {
		n, err := io.ReadFull(r, buf)
		b := buf[:n]
		jump := plain && (!quotes || bytes.IndexByte(b, '"') < 0)
		for i := 0; i < len(b); {
			if jump && start >= 0 && st != quoted {
				// The newline that closes the open part is the first
				// at or after j (end-start >= target, end past it).
				first := bytes.IndexByte(b[i:], '\n')
				if first < 0 {
					jump = false // the rest of the block is one record's
					continue
				}
				if err := tooLong(pos + int64(i+first+1)); err != nil {
					return nil, err // the later records are within the block
				}
				at := -1
				if j := max(int64(i), start+target-1-pos); j < int64(len(b)) {
					if k := bytes.IndexByte(b[j:], '\n'); k >= 0 {
						at = int(j) + k
					}
				}
				if at < 0 {
					at = i + bytes.LastIndexByte(b[i:], '\n') // no cut here: to the last record's end
				}
				line += int64(bytes.Count(b[i:at+1], []byte{'\n'}))
				end := pos + int64(at+1)
				record, recLine = end, line
				if end-start >= target {
					l.Parts = append(l.Parts, Range{Offset: start, Size: end - start, Line: partLine})
					start, partLine = end, line
				}
				i = at + 1
				st = fieldStart
				continue
			}
			nl := bytes.IndexByte(b[i:], '\n')
			if nl < 0 {
				if err := tooLong(pos + int64(n)); err != nil {
					return nil, err
				}
				if quotes {
					st = scanQuotes(st, b[i:], cb)
				}
				if start < 0 {
					l.Header = append(l.Header, b[i:]...)
					if len(l.Header) > MaxHeader {
						return nil, fmt.Errorf("%s: line 1: the header record is longer than %d bytes (is this a delimited text file?)", path, MaxHeader)
					}
				}
				break
			}
			if quotes {
				st = scanQuotes(st, b[i:i+nl], cb)
			}
			end := pos + int64(i+nl+1) // just past the newline
			if start < 0 {
				l.Header = append(l.Header, b[i:i+nl+1]...)
				if len(l.Header) > MaxHeader {
					return nil, fmt.Errorf("%s: line 1: the header record is longer than %d bytes (is this a delimited text file?)", path, MaxHeader)
				}
			}
			i += nl + 1
			line++
			if st == quoted {
				continue // a newline inside a quoted field
			}
			st = fieldStart
			if err := tooLong(end); err != nil {
				return nil, err
			}
			record, recLine = end, line
			if start < 0 {
				start, partLine = end, line
				continue
			}
			if end-start >= target {
				l.Parts = append(l.Parts, Range{Offset: start, Size: end - start, Line: partLine})
				start, partLine = end, line
			}
		}
		pos += int64(n)
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	if st == quoted {
		// Named by the record it opened in: everything after it was
		// read as one field.
		return nil, fmt.Errorf("%s: line %d: %w", path, recLine, ErrUnterminatedQuote)
	}
	if start >= 0 && pos > start {
		// The last records, the very last perhaps without its newline.
		l.Parts = append(l.Parts, Range{Offset: start, Size: pos - start, Line: partLine})
	}
	return &l, nil
}
