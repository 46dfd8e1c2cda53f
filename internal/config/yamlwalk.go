package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// walker walks a yaml.v3 node tree, collecting every problem with its
// position instead of stopping at the first.
type walker struct {
	file     string
	problems []*Problem
}

// addf records a problem at node n (nil for the whole file).
func (w *walker) addf(n *yaml.Node, path, format string, args ...any) {
	p := &Problem{File: w.file, Path: path, Message: fmt.Sprintf(format, args...)}
	if n != nil {
		p.Line, p.Column = n.Line, n.Column
	}
	w.problems = append(w.problems, p)
}

// isNull reports whether n is an explicit or empty null ("key:", "key: ~").
func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// kindName names a node's kind for messages.
func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.DocumentNode:
		return "a document"
	}
	switch n.ShortTag() {
	case "!!null":
		return "nothing (null)"
	case "!!str":
		return "the string " + describe(n.Value)
	case "!!int", "!!float":
		return "the number " + n.Value
	case "!!bool":
		return "the boolean " + n.Value
	}
	return describe(n.Value)
}

// noAlias reports an alias as a problem: aliases are refused because they
// let a small file expand without bound, and shared policies with extends
// cover the same need.
func (w *walker) noAlias(n *yaml.Node, path string) bool {
	if n.Kind == yaml.AliasNode {
		w.addf(n, path, "YAML aliases (*%s) are not supported; define a shared policy under the top-level policies and reference it, or use extends", n.Value)
		return false
	}
	return true
}

// mapping calls fn for every key of mapping n, in order. It reports a
// non-mapping, non-string keys, YAML merge keys and duplicate keys. A null
// n is an empty mapping.
func (w *walker) mapping(n *yaml.Node, path string, fn func(key string, k, v *yaml.Node)) bool {
	if !w.noAlias(n, path) {
		return false
	}
	if isNull(n) {
		return true
	}
	if n.Kind != yaml.MappingNode {
		w.addf(n, path, "want a mapping (key: value lines), got %s", kindName(n))
		return false
	}
	var seen map[string]*yaml.Node
	if len(n.Content) > 16 {
		seen = make(map[string]*yaml.Node, len(n.Content)/2)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || isNull(k) {
			w.addf(k, path, "want a plain key, got %s", kindName(k))
			continue
		}
		if k.Value == "<<" && k.ShortTag() == "!!merge" {
			w.addf(k, path, "YAML merge keys (<<) are not supported; use extends with a shared policy instead")
			continue
		}
		dup := false
		if seen != nil {
			if first, ok := seen[k.Value]; ok {
				w.addf(k, join(path, k.Value), "duplicate key (first at line %d)", first.Line)
				dup = true
			} else {
				seen[k.Value] = k
			}
		} else {
			for j := 0; j < i; j += 2 {
				if first := n.Content[j]; first.Value == k.Value && first.Kind == yaml.ScalarNode {
					w.addf(k, join(path, k.Value), "duplicate key (first at line %d)", first.Line)
					dup = true
					break
				}
			}
		}
		if dup {
			continue
		}
		fn(k.Value, k, v)
	}
	return true
}

// sequence calls fn for every item of list n. A null n is an empty list.
func (w *walker) sequence(n *yaml.Node, path string, fn func(i int, item *yaml.Node)) bool {
	if !w.noAlias(n, path) {
		return false
	}
	if isNull(n) {
		return true
	}
	if n.Kind != yaml.SequenceNode {
		w.addf(n, path, "want a list, got %s", kindName(n))
		return false
	}
	for i, item := range n.Content {
		if !w.noAlias(item, index(path, i)) {
			continue
		}
		fn(i, item)
	}
	return true
}

// unknownKey reports a key the schema does not have, suggesting the
// closest known one.
func (w *walker) unknownKey(k *yaml.Node, path, key string, known []string) {
	if s := suggest(key, known); s != "" {
		w.addf(k, join(path, key), "unknown field; did you mean %s?", s)
		return
	}
	w.addf(k, join(path, key), "unknown field (known fields: %s)", strings.Join(known, ", "))
}

// scalar returns a scalar's text, reporting null and non-scalars.
func (w *walker) scalar(n *yaml.Node, path, want string) (string, bool) {
	if !w.noAlias(n, path) {
		return "", false
	}
	if n.Kind != yaml.ScalarNode || isNull(n) {
		w.addf(n, path, "want %s, got %s", want, kindName(n))
		return "", false
	}
	return n.Value, true
}

// str returns a string value. Any non-null scalar is accepted as its text.
func (w *walker) str(n *yaml.Node, path string) (string, bool) {
	return w.scalar(n, path, "a string")
}

// integer returns an integer value within [lo, hi].
func (w *walker) integer(n *yaml.Node, path string, lo, hi int64) (int64, bool) {
	s, ok := w.scalar(n, path, "a whole number")
	if !ok {
		return 0, false
	}
	if n.ShortTag() != "!!int" {
		w.addf(n, path, "want a whole number, got %s", kindName(n))
		return 0, false
	}
	v, err := strconv.ParseInt(s, 0, 64)
	if err != nil {
		w.addf(n, path, "number %s is out of range", s)
		return 0, false
	}
	if v < lo || v > hi {
		w.addf(n, path, "must be between %d and %d, got %d", lo, hi, v)
		return 0, false
	}
	return v, true
}

// number returns a finite floating-point value (integers accepted).
func (w *walker) number(n *yaml.Node, path string) (float64, bool) {
	s, ok := w.scalar(n, path, "a number")
	if !ok {
		return 0, false
	}
	var v float64
	switch n.ShortTag() {
	case "!!int":
		i, err := strconv.ParseInt(s, 0, 64)
		if err != nil {
			w.addf(n, path, "number %s is out of range", s)
			return 0, false
		}
		v = float64(i)
	case "!!float":
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			w.addf(n, path, "want a finite number, got %s", s)
			return 0, false
		}
		v = f
	default:
		w.addf(n, path, "want a number, got %s", kindName(n))
		return 0, false
	}
	return v, true
}

// boolean returns true or false; YAML 1.1 spellings (yes, on) are refused.
func (w *walker) boolean(n *yaml.Node, path string) (bool, bool) {
	s, ok := w.scalar(n, path, "true or false")
	if !ok {
		return false, false
	}
	if n.ShortTag() != "!!bool" {
		w.addf(n, path, "want true or false, got %s", kindName(n))
		return false, false
	}
	return strings.EqualFold(s, "true"), true
}

// duration returns a Go duration ("1.5s", "2m", "1h30m"). Negative values
// pass through for the policy's own range checks.
func (w *walker) duration(n *yaml.Node, path string) (time.Duration, bool) {
	s, ok := w.scalar(n, path, "a duration such as 30s")
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		if _, nerr := strconv.ParseFloat(s, 64); nerr == nil && s != "0" {
			w.addf(n, path, "duration %s has no unit; write for example %ss or %sms", describe(s), s, s)
			return 0, false
		}
		w.addf(n, path, "invalid duration %s: want a Go duration such as 500ms, 30s, 2m or 1h30m", describe(s))
		return 0, false
	}
	return d, true
}

// size returns a byte size: an integer number of bytes or a string with a
// unit (see ParseByteSize).
func (w *walker) size(n *yaml.Node, path string) (int64, bool) {
	s, ok := w.scalar(n, path, "a size such as 1MiB")
	if !ok {
		return 0, false
	}
	if n.ShortTag() == "!!int" {
		v, err := strconv.ParseInt(s, 0, 64)
		if err != nil {
			w.addf(n, path, "size %s is out of range", s)
			return 0, false
		}
		return v, true
	}
	v, err := ParseByteSize(s)
	if err != nil {
		w.addf(n, path, "%v", err)
		return 0, false
	}
	return v, true
}

// join appends a key to a dotted path.
func join(path, key string) string {
	if path == "" {
		return key
	}
	if needsQuoting(key) {
		return path + "[" + strconv.Quote(key) + "]"
	}
	return path + "." + key
}

// index appends a list index to a path.
func index(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}

// needsQuoting reports whether key cannot appear bare in a dotted path
// (host names with dots do; they are quoted).
func needsQuoting(key string) bool {
	if key == "" {
		return true
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return true
		}
	}
	return false
}

// suggest returns the known name closest to s when it is close enough to
// be a likely typo.
func suggest(s string, known []string) string {
	limit := len(s)/3 + 1
	best, bestD := "", limit+1
	for _, k := range known {
		if d := editDistance(strings.ToLower(s), k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
