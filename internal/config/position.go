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
		d := s.data
		for i := 0; i < len(d); {
			r, w := utf8.DecodeRune(d[i:])
			if r == '\r' && i+1 < len(d) && d[i+1] == '\n' {
				w = 2
			}
			i += w
			if isBreak(r) {
				s.lines = append(s.lines, i)
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
		if off >= len(s.data) {
			return -1
		}
		r, w := utf8.DecodeRune(s.data[off:])
		if isBreak(r) {
			return -1
		}
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
// the backslash of an escape), in a UTF-8 file. exact is false when the
// alignment failed (a UTF-16 file, which yaml.v3 also reads); the
// scalar's own position is returned then.
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
	p := skipProperties(data, start)
	switch {
	case n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0:
		for p < len(data) { // the content starts below the header line
			r, w := utf8.DecodeRune(data[p:])
			p += w
			if isBreak(r) {
				break
			}
		}
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
			case ew > 0 && (e == ' ' || e == '\t' || isBreak(e)):
				// An escaped space that an earlier space of the value
				// was matched against a fold in its place: white space
				// is placed only roughly, what is written exactly.
				p += ew
				continue
			case ew == 0:
				return 0, 0, false
			}
			if r == v { // a backslash that is not an escape: not YAML
				return p, p + w, true
			}
			return 0, 0, false
		}
		if r == v || isBreak(r) && (v == ' ' || v == '\n') { // a line break, or one folded into a space
			return p, p + w, true
		}
		switch {
		case r == ' ' || r == '\t' || isBreak(r):
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

// simpleEscapes are the one-character escapes of double-quoted scalars
// yaml.v3 reads: YAML 1.2's, and \'.
var simpleEscapes = map[byte]rune{
	'0': 0, 'a': '\a', 'b': '\b', 't': '\t', '\t': '\t', 'n': '\n', 'v': '\v', 'f': '\f',
	'r': '\r', 'e': 0x1b, ' ': ' ', '"': '"', '\'': '\'', '/': '/', '\\': '\\', 'N': 0x85, '_': 0xa0,
	'L': 0x2028, 'P': 0x2029,
}

// isBreak reports whether r breaks a line for YAML (and yaml.v3's line
// count): LF, CR (CR LF is one break), NEL, LS and PS.
func isBreak(r rune) bool {
	return r == '\n' || r == '\r' || r == 0x85 || r == 0x2028 || r == 0x2029
}

// skipProperties skips a node's tag (!tag) and anchor (&name), which a
// node's position includes, and the space and comments after them. No scalar starts
// with '!' or '&'.
func skipProperties(data []byte, p int) int {
	for p < len(data) && (data[p] == '!' || data[p] == '&') {
		anchor := data[p] == '&'
		p++
		switch {
		case anchor:
			for p < len(data) && isAnchorChar(data[p]) {
				p++
			}
		case p < len(data) && data[p] == '<': // a verbatim tag, !<...>
			for p < len(data) && data[p] != '>' {
				p++
			}
			p++
		default:
			for p < len(data) && (isAnchorChar(data[p]) || strings.IndexByte("!;/?:@&=+$,.~*'()[]%", data[p]) >= 0) {
				p++
			}
		}
		for p < len(data) && (isSpaceOrBreak(data[p]) || data[p] == '#') {
			if data[p] == '#' { // a comment, to the end of its line
				for p < len(data) && data[p] != '\n' && data[p] != '\r' {
					p++
				}
				continue
			}
			p++
		}
	}
	return p
}

// isAnchorChar reports the characters yaml.v3 allows in an anchor name.
func isAnchorChar(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '-'
}

func isSpaceOrBreak(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
