package config

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// lineCol returns the 1-based line and column (in characters) of
// character i of text.
func lineCol(text string, i int) (int, int) {
	line, col := 1, 1
	for j, r := range []rune(text) {
		if j == i {
			break
		}
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return line, col
}

// checkPositions checks, for every scalar of data, that every character
// of its value that is not white space is placed on the file where that
// character (or, in a double-quoted scalar, an escape standing for it) is
// written.
func checkPositions(t *testing.T, data []byte) {
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil {
		return
	}
	src := source{data: data}
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		for _, c := range n.Content {
			walk(c)
		}
		if n.Kind != yaml.ScalarNode || n.Line == 0 || !utf8.ValidString(n.Value) {
			return
		}
		for i, r := range []rune(n.Value) {
			if unicode.IsSpace(r) || r == '\ufeff' {
				continue
			}
			line, col := lineCol(n.Value, i)
			l, c, exact := src.textPosition(n, line, col)
			if !exact {
				t.Fatalf("value %q (style %d at %d:%d): character %d not placed", n.Value, n.Style, n.Line, n.Column, i)
			}
			off := src.offset(l, c)
			if off < 0 {
				t.Fatalf("value %q: %d:%d is not in the file", n.Value, l, c)
			}
			got, w := utf8.DecodeRune(data[off:])
			if got == r {
				continue
			}
			if e, ew, _ := unescape(data[off:]); n.Style&yaml.DoubleQuotedStyle != 0 && got == '\\' && e == r && ew > 0 {
				continue
			}
			t.Fatalf("value %q (style %d): character %d %q placed at %d:%d, which holds %q", n.Value, n.Style, i, r, l, c, data[off:off+w])
		}
	}
	walk(&doc)
}

func TestTextPositions(t *testing.T) {
	for _, s := range positionSeeds {
		checkPositions(t, []byte(s))
	}
}

var positionSeeds = []string{
	"k: status == 400 && stauts\n",
	"k: 'it''s'\n",
	"k: \"a\\\"b\\u00e9\\x41\\N\\\n  c\"\n",
	"k: |\n  a &&\n    b\n",
	"k: >-\n  a\n  b\n\n  c\n",
	"k: |2-\n    indented\n   x\n",
	"k: plain\n  continued\n\n  para\n",
	"- [a, 'b c', \"d\\te\"]\n- {x: y z}\n",
	"k: é == 'à'\r\n",
	"k: \"\\\r\n  x\"\n",
}

// FuzzTextPositions: every character of every scalar of a YAML file is
// placed where it is written.
func FuzzTextPositions(f *testing.F) {
	for _, s := range positionSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// yaml.v3 also reads UTF-16 (with a byte order mark); the
		// positions inside a value are placed in UTF-8 files only, and a
		// UTF-16 file's problems stay at the scalar.
		if len(data) > 4096 || strings.Contains(string(data), "\x00") || !utf8.Valid(data) {
			return
		}
		checkPositions(t, data)
	})
}
