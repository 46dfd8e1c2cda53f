package config

import (
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// source is the text of the file being loaded, for placing a problem found
// inside a scalar's value (a CEL expression's syntax error) on the line and
// column of the file where that part of the value is written.
type source struct {
	data  []byte
	lines []int // byte offset of the start of each line, built on first use
}

// lineStart returns the byte offset where 1-based line n starts, or -1.
func (s *source) lineStart(n int) int {
	if s.lines == nil {
		s.lines = append(make([]int, 0, 64), 0)
		for i, c := range s.data {
			if c == '\n' {
				s.lines = append(s.lines, i+1)
			}
		}
	}
	if n < 1 || n > len(s.lines) {
		return -1
	}
	return s.lines[n-1]
}

// offset returns the byte offset of 1-based line and column (counted in
// characters, as yaml.v3 counts them), or -1.
func (s *source) offset(line, col int) int {
	off := s.lineStart(line)
	if off < 0 {
		return -1
	}
	for c := 1; c < col; c++ {
		if off >= len(s.data) || s.data[off] == '\n' {
			return -1
		}
		_, w := utf8.DecodeRune(s.data[off:])
		off += w
	}
	return off
}

// position returns the 1-based line and character column of byte offset
// off.
func (s *source) position(off int) (line, col int) {
	s.lineStart(1)
	lo, hi := 0, len(s.lines)-1
	for lo < hi { // the last line start <= off
		mid := (lo + hi + 1) / 2
		if s.lines[mid] <= off {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo + 1, utf8.RuneCount(s.data[s.lines[lo]:off]) + 1
}

// textPosition returns where, in the file, the character at 1-based line
// and column (in characters) of scalar n's value is written: the value of
// a CEL expression is its text, and CEL reports its errors by line and
// column within that text. A position past the end of the value (CEL's
// "unexpected end of input") is placed just after the value's last
// character.
//
// Plain, single-quoted and double-quoted scalars and literal (|) and
// folded (>) block scalars are all placed exactly, character for
// character: the value is aligned with the source, skipping what YAML
// removed (quotes, indentation, folded line breaks, the block header line,
// the backslash of an escape). exact is false when the alignment failed
// (the file does not hold the text the node says, which yaml.v3 never
// produces); the scalar's own position is returned then.
func (s *source) textPosition(n *yaml.Node, line, col int) (outLine, outCol int, exact bool) {
	idx := runeIndex(n.Value, line, col)
	start := s.offset(n.Line, n.Column)
	if idx < 0 || start < 0 {
		return n.Line, n.Column, false
	}
	off, ok := s.align(n, start, idx)
	if !ok {
		return n.Line, n.Column, false
	}
	l, c := s.position(off)
	return l, c, true
}

// runeIndex returns the index, in characters, of 1-based line and column
// of text, or -1 when line does not exist. A column past the end of its
// line is kept (it points past the end).
func runeIndex(text string, line, col int) int {
	if line < 1 || col < 1 {
		return -1
	}
	idx := 0
	for l := 1; l < line; l++ {
		nl := strings.IndexByte(text, '\n')
		if nl < 0 {
			return -1
		}
		idx += utf8.RuneCountInString(text[:nl+1])
		text = text[nl+1:]
	}
	return idx + col - 1
}

// align returns the byte offset in the file of character idx of n's value
// (or, for idx at or past the end of the value, the offset just after its
// last character). start is the offset of the node's first character: the
// indicator of a block scalar, the quote of a quoted one.
func (s *source) align(n *yaml.Node, start, idx int) (int, bool) {
	data := s.data
	p := start
	switch {
	case n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0:
		nl := indexByteFrom(data, p, '\n')
		if nl < 0 {
			return 0, false
		}
		p = nl + 1 // the content starts below the header line
	case n.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle) != 0:
		p++ // the opening quote
	}
	dq := n.Style&yaml.DoubleQuotedStyle != 0
	last := -1 // offset just after the last matched character
	i := 0
	for _, v := range n.Value {
		at, next, ok := matchRune(data, p, v, dq, n.Style&yaml.SingleQuotedStyle != 0)
		if !ok {
			return 0, false
		}
		if i == idx {
			return at, true
		}
		p, last = next, next
		i++
	}
	if last < 0 { // an empty value
		return start, true
	}
	if n.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle) == 0 && n.Value[len(n.Value)-1] == '\n' {
		// The end of a block scalar's last line: point at that line's end.
		return last - 1, true
	}
	return last, true
}

// matchRune finds, from offset p, the source of value character v: the
// same character, after skipping what YAML drops from a scalar's text
// (spaces, tabs and line breaks of indentation and folding, the doubled
// quote of a single-quoted scalar, an escaped line break of a
// double-quoted one); or, in a double-quoted scalar, an escape sequence
// that stands for v. It returns where v is written and the offset after
// it.
func matchRune(data []byte, p int, v rune, dq, sq bool) (at, next int, ok bool) {
	for p < len(data) {
		r, w := utf8.DecodeRune(data[p:])
		if dq && r == '\\' {
			e, ew, brk := unescape(data[p:])
			switch {
			case brk:
				p += ew // an escaped line break stands for nothing
				continue
			case ew > 0 && e == v:
				return p, p + ew, true
			case ew == 0:
				return 0, 0, false
			}
			if r == v { // a backslash that is not an escape: not YAML
				return p, p + w, true
			}
			return 0, 0, false
		}
		if r == v {
			return p, p + w, true
		}
		switch {
		case r == ' ' || r == '\t' || r == '\n' || r == '\r':
		case sq && r == '\'':
		default:
			return 0, 0, false
		}
		p += w
	}
	return 0, 0, false
}

// unescape decodes the double-quoted escape sequence at the start of b
// (which starts with a backslash): the character it stands for and its
// length in bytes, or brk for an escaped line break (whose length includes
// the break). A width of 0 means b does not start with a valid escape.
func unescape(b []byte) (r rune, width int, brk bool) {
	if len(b) < 2 {
		return 0, 0, false
	}
	switch c := b[1]; c {
	case '\n':
		return 0, 2, true
	case '\r':
		if len(b) > 2 && b[2] == '\n' {
			return 0, 3, true
		}
		return 0, 2, true
	case 'x', 'u', 'U':
		n := 2
		switch c {
		case 'u':
			n = 4
		case 'U':
			n = 8
		}
		if len(b) < 2+n {
			return 0, 0, false
		}
		var v rune
		for _, h := range b[2 : 2+n] {
			d, ok := unhex(h)
			if !ok {
				return 0, 0, false
			}
			v = v<<4 | rune(d)
		}
		return v, 2 + n, false
	default:
		if v, ok := simpleEscapes[c]; ok {
			return v, 2, false
		}
	}
	return 0, 0, false
}

// simpleEscapes are YAML's one-character escapes.
var simpleEscapes = map[byte]rune{
	'0': 0, 'a': '\a', 'b': '\b', 't': '\t', '\t': '\t', 'n': '\n', 'v': '\v', 'f': '\f',
	'r': '\r', 'e': 0x1b, ' ': ' ', '"': '"', '/': '/', '\\': '\\', 'N': 0x85, '_': 0xa0,
	'L': 0x2028, 'P': 0x2029,
}

// indexByteFrom returns the index of the first c in data at or after p, or
// -1.
func indexByteFrom(data []byte, p int, c byte) int {
	if p > len(data) {
		return -1
	}
	for i := p; i < len(data); i++ {
		if data[i] == c {
			return i
		}
	}
	return -1
}
