package config

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
)

// This file is the decoding layer every section of the file goes through.
//
// A section is a Go struct whose fields carry yaml tags, in documentation
// order, and whose UnmarshalYAML calls decodeStruct:
//
//	type backoffDoc struct {
//		section
//		Base   *duration `yaml:"base"`
//		Factor *number   `yaml:"factor"`
//	}
//
//	func (b *backoffDoc) UnmarshalYAML(n *yaml.Node) error {
//		return decodeStruct(n, &b.section, b, wantMapping)
//	}
//
// decodeStruct sends each key of the mapping to the field its tag names and
// refuses everything else with a position: unknown keys (with the closest
// known key as a suggestion), duplicate keys, YAML merge keys and aliases.
// Field types are the positioned scalars of scalars.go (scalar[T, K]),
// list[T], dict[T], or other sections. A pointer field is nil when the key
// is absent, which in a policy means "inherit". Every decoded value keeps its
// yaml.Node (see at), so a check that runs later, at load, can still place
// its problem on the line and column that set the value.
//
// Decoding never stops at the first problem. A value that cannot be decoded
// returns an issues error instead: every problem found, each with its node and
// its path below the value. The container that decoded it prefixes its own
// key or index (issues.under), so the loader receives every problem of the
// file with its full path and turns them into Problems.
//
// yaml.v3's Decoder.KnownFields(true) is not used: it applies only to
// Decoder.Decode over a byte stream, never to Node.Decode (which a custom
// UnmarshalYAML has to use for the values below it), and the unknown fields
// it finds come back as "line N: field x not found in type T" strings, with
// neither a column nor a path. decodeStruct gets the same strictness from the
// same struct tags, with the position, path and suggestion of each key.
//
// Adding a section is declaring its struct and adding it as a field where
// it is written. The provider catalog's operator-defined entries
// (providers.go) are an example: providerDoc and its hintDoc, quotaDoc,
// ruleDoc, ... sections, with Providers *providerDocs in fileDoc and in
// tenantDoc. A new kind of value is a kind type whose parse checks what it
// can alone (see scalars.go). What spans several fields of one entry is
// checked in the section's UnmarshalYAML, which returns issues (errAt,
// issues.addf) with a path below the entry. What needs the rest of the
// file (resolving extends: aws against the catalog below, compiling CEL
// rules) is checked by the loader, which places a Problem on any decoded
// value with loader.addf(v.node, path, ...); keyNode and fieldKey find the
// key that set a field, for problems about the key rather than the value,
// and source.textPosition places a problem found inside a scalar's text
// (a CEL expression's) on the character of the file. A nil pointer field
// means "inherit" there as it does in policies.

// wantMapping describes a plain mapping in "want ..., got ..." messages.
const wantMapping = "a mapping (key: value lines)"

// at records where a decoded value was written: the node it was decoded
// from, or nil when the file does not set it.
type at struct{ node *yaml.Node }

// Line returns the 1-based line of the value, or 0 when it was not written.
func (a at) Line() int {
	if a.node == nil {
		return 0
	}
	return a.node.Line
}

// Column returns the 1-based column of the value, or 0 when it was not
// written.
func (a at) Column() int {
	if a.node == nil {
		return 0
	}
	return a.node.Column
}

// issue is one problem found while decoding a value: the node it concerns,
// the path from the decoded value down to that node ("" for the value
// itself, else segments such as ".base", "[2]" or `["api.example.com"]`),
// and what is wrong.
type issue struct {
	node *yaml.Node
	path string
	msg  string
}

// issues is the error the decoded types return: every problem found in a
// value, in document order.
type issues []issue

// Error lists the problems as "line:column: path: message", one per line.
func (is issues) Error() string {
	var b strings.Builder
	for i, x := range is {
		if i > 0 {
			b.WriteByte('\n')
		}
		if x.node != nil {
			fmt.Fprintf(&b, "%d:%d: ", x.node.Line, x.node.Column)
		}
		if x.path != "" {
			b.WriteString(strings.TrimPrefix(x.path, ".") + ": ")
		}
		b.WriteString(x.msg)
	}
	return b.String()
}

// errAt returns an issues error holding one problem at n.
func errAt(n *yaml.Node, format string, args ...any) error {
	return issues{{node: n, msg: fmt.Sprintf(format, args...)}}
}

// addf appends a problem at n, whose path below the decoded value is seg.
func (is *issues) addf(n *yaml.Node, seg, format string, args ...any) {
	*is = append(*is, issue{node: n, path: seg, msg: fmt.Sprintf(format, args...)})
}

// under appends the problems of err, returned by the value at seg below the
// value being decoded, prefixing their paths with seg. A nil err adds
// nothing.
func (is *issues) under(seg string, err error) {
	if err == nil {
		return
	}
	var sub issues
	if !errors.As(err, &sub) {
		*is = append(*is, issue{path: seg, msg: err.Error()})
		return
	}
	for _, x := range sub {
		x.path = seg + x.path
		*is = append(*is, x)
	}
}

// err returns is as an error, or nil when it holds no problem.
func (is issues) err() error {
	if len(is) == 0 {
		return nil
	}
	return is
}

// usable reports whether a value whose decoding from n returned err still
// holds what it could decode: err is nil, or no problem concerns n itself
// (a bad key in a mapping or a bad item in a list leaves the rest usable).
func usable(err error, n *yaml.Node) bool {
	if err == nil {
		return true
	}
	var is issues
	if !errors.As(err, &is) {
		return false
	}
	for _, x := range is {
		if x.node == n && x.path == "" {
			return false
		}
	}
	return true
}

// keySeg is the path segment of a mapping key: ".key", or `["key"]` for a
// key that cannot appear bare (host names with dots).
func keySeg(key string) string {
	if needsQuoting(key) {
		return "[" + strconv.Quote(key) + "]"
	}
	return "." + key
}

// indexSeg is the path segment of a list index: "[i]".
func indexSeg(i int) string { return "[" + strconv.Itoa(i) + "]" }

// below returns the path of a problem found at rel below the value at base
// (an absolute path, "" for the document). A key directly under the
// document is written bare, as join writes it.
func below(base, rel string) string {
	if base != "" {
		return base + rel
	}
	if rest, ok := strings.CutPrefix(rel, "."); ok {
		return rest
	}
	if strings.HasPrefix(rel, `["`) {
		if q, err := strconv.QuotedPrefix(rel[1:]); err == nil {
			key, _ := strconv.Unquote(q)
			return key + rel[1+len(q)+1:]
		}
	}
	return rel
}

// section is embedded in every decoded mapping type: the mapping's node,
// and whether it had a problem (in one of its keys or values, or in the
// checks of its own UnmarshalYAML).
type section struct {
	at
	bad bool
}

// key returns the node of key name in the section's mapping, or nil.
func (s *section) key(name string) *yaml.Node { return keyNode(s.node, name) }

// keyNode returns the key node of name in mapping m, or nil.
func keyNode(m *yaml.Node, name string) *yaml.Node {
	if i := keyIndex(m, name); i >= 0 {
		return m.Content[i]
	}
	return nil
}

// valueNode returns the value node of key name in mapping m, or nil.
func valueNode(m *yaml.Node, name string) *yaml.Node {
	if i := keyIndex(m, name); i >= 0 {
		return m.Content[i+1]
	}
	return nil
}

// keyIndex returns the index in m.Content of the first key name of
// mapping m, or -1.
func keyIndex(m *yaml.Node, name string) int {
	if m == nil || m.Kind != yaml.MappingNode {
		return -1
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if k := m.Content[i]; k.Kind == yaml.ScalarNode && k.Value == name {
			return i
		}
	}
	return -1
}

// decodeStruct decodes mapping n into v, a pointer to a struct that embeds
// s. Each key goes to the field whose yaml tag names it, decoded by the
// field's UnmarshalYAML; a pointer field is allocated for it. A field whose
// value is unusable (see usable) is left zero (nil). A null n is an empty
// mapping. want describes the mapping in a "want ..., got ..." message.
// Every problem is returned; s.bad records whether there was one.
func decodeStruct(n *yaml.Node, s *section, v any, want string) error {
	s.node = n
	if err := mappingNode(n, want); err != nil || isNull(n) {
		s.bad = err != nil
		return err
	}
	rv := reflect.ValueOf(v).Elem()
	ft := fieldsOf(rv.Type())
	var errs issues
	keys := newKeySet(n)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if !keys.check(&errs, i) {
			continue
		}
		f, ok := ft.index[k.Value]
		if !ok {
			errs = append(errs, unknownKey(k, ft.keys))
			continue
		}
		errs.under(keySeg(k.Value), decodeField(rv.Field(f), n.Content[i+1]))
	}
	s.bad = len(errs) > 0
	return errs.err()
}

// decodeField decodes n into field f with its UnmarshalYAML, allocating a
// pointer field's value, and refuses an alias. An unusable result leaves f
// zero.
func decodeField(f reflect.Value, n *yaml.Node) error {
	if f.Kind() == reflect.Pointer {
		p := reflect.New(f.Type().Elem())
		err := decodeValue(p.Interface().(yaml.Unmarshaler), n)
		if usable(err, n) {
			f.Set(p)
		}
		return err
	}
	err := decodeValue(f.Addr().Interface().(yaml.Unmarshaler), n)
	if !usable(err, n) {
		f.SetZero()
	}
	return err
}

// fieldTable lists the keys of a section type.
type fieldTable struct {
	index map[string]int // key -> field index
	keys  []string       // in declaration order, for messages
}

var (
	fieldTables     sync.Map // reflect.Type -> *fieldTable
	unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()
)

// fieldsOf returns the table of struct type t: its fields with a yaml tag
// other than "-". It panics when such a field cannot decode itself, which
// is a mistake in this package (every section type is exercised by tests).
func fieldsOf(t reflect.Type) *fieldTable {
	if ft, ok := fieldTables.Load(t); ok {
		return ft.(*fieldTable)
	}
	ft := &fieldTable{index: make(map[string]int, t.NumField())}
	for i := range t.NumField() {
		f := t.Field(i)
		key, ok := f.Tag.Lookup("yaml")
		if !ok || key == "-" {
			continue
		}
		if f.Type.Kind() == reflect.Pointer && !f.Type.Implements(unmarshalerType) ||
			f.Type.Kind() != reflect.Pointer && !reflect.PointerTo(f.Type).Implements(unmarshalerType) {
			panic(fmt.Sprintf("config: field %s.%s (%s) does not implement yaml.Unmarshaler", t, f.Name, f.Type))
		}
		ft.index[key] = i
		ft.keys = append(ft.keys, key)
	}
	fieldTables.Store(t, ft)
	return ft
}

// mappingNode checks that n can be decoded as a mapping: not an alias, and
// a mapping or null.
func mappingNode(n *yaml.Node, want string) error {
	if n.Kind == yaml.AliasNode {
		return errAlias(n)
	}
	if n.Kind != yaml.MappingNode && !isNull(n) {
		return errAt(n, "want %s, got %s", want, kindName(n))
	}
	return nil
}

// errAlias refuses an alias: aliases let a small file expand without
// bound, and shared policies with extends cover the same need.
func errAlias(n *yaml.Node) error {
	return errAt(n, "YAML aliases (*%s) are not supported; define a shared policy under the top-level policies and reference it, or use extends", n.Value)
}

// keySet finds duplicate keys in one mapping: by scanning for small
// mappings, with a map for large ones.
type keySet struct {
	n    *yaml.Node
	seen map[string]*yaml.Node
}

func newKeySet(n *yaml.Node) keySet {
	ks := keySet{n: n}
	if len(n.Content) > 32 {
		ks.seen = make(map[string]*yaml.Node, len(n.Content)/2)
	}
	return ks
}

// check reports whether the key at n.Content[i] is a plain key seen for
// the first time, adding a problem to errs when it is not: a non-scalar or
// null key, a YAML merge key, or a duplicate.
func (ks *keySet) check(errs *issues, i int) bool {
	k := ks.n.Content[i]
	switch {
	case k.Kind != yaml.ScalarNode || isNull(k):
		errs.addf(k, "", "want a plain key, got %s", kindName(k))
		return false
	case k.Value == "<<" && k.ShortTag() == "!!merge":
		errs.addf(k, "", "YAML merge keys (<<) are not supported; use extends with a shared policy instead")
		return false
	}
	if first := ks.first(i); first != nil {
		errs.addf(k, keySeg(k.Value), "duplicate key (first at line %d)", first.Line)
		return false
	}
	return true
}

// first returns the earlier key with the same text as n.Content[i], if
// any, and otherwise remembers this one.
func (ks *keySet) first(i int) *yaml.Node {
	k := ks.n.Content[i]
	if ks.seen != nil {
		if f, ok := ks.seen[k.Value]; ok {
			return f
		}
		ks.seen[k.Value] = k
		return nil
	}
	for j := 0; j < i; j += 2 {
		if f := ks.n.Content[j]; f.Kind == yaml.ScalarNode && f.Value == k.Value {
			return f
		}
	}
	return nil
}

// unknownKey reports a key the section does not have, suggesting the
// closest known one.
func unknownKey(k *yaml.Node, known []string) issue {
	if s := suggest(k.Value, known); s != "" {
		return issue{node: k, path: keySeg(k.Value), msg: "unknown field; did you mean " + s + "?"}
	}
	return issue{node: k, path: keySeg(k.Value), msg: "unknown field (known fields: " + strings.Join(known, ", ") + ")"}
}

// decoder is the constraint of list and dict elements: *T decodes itself.
type decoder[T any] interface {
	*T
	yaml.Unmarshaler
}

// list is a decoded YAML list. A null value is an empty list. Items that
// cannot be decoded are left out (and reported).
type list[T any, P decoder[T]] struct {
	at
	Items []T
}

// UnmarshalYAML decodes each item of sequence n.
func (l *list[T, P]) UnmarshalYAML(n *yaml.Node) error {
	l.node = n
	switch {
	case n.Kind == yaml.AliasNode:
		return errAlias(n)
	case isNull(n):
		return nil
	case n.Kind != yaml.SequenceNode:
		return errAt(n, "want a list, got %s", kindName(n))
	}
	l.Items = make([]T, len(n.Content))
	var errs issues
	j := 0
	for i, item := range n.Content {
		err := decodeValue(P(&l.Items[j]), item)
		errs.under(indexSeg(i), err)
		if usable(err, item) {
			j++
		} else {
			var zero T
			l.Items[j] = zero
		}
	}
	l.Items = l.Items[:j]
	return errs.err()
}

// written returns the number of items the list was written with, decoded
// or not.
func (l *list[T, P]) written() int {
	if l.node == nil || l.node.Kind != yaml.SequenceNode {
		return 0
	}
	return len(l.node.Content)
}

// itemIndex returns the index in the file of the item decoded from node
// item.
func (l *list[T, P]) itemIndex(item *yaml.Node) int {
	for i, n := range l.node.Content {
		if n == item {
			return i
		}
	}
	return -1
}

// dict is a decoded YAML mapping with keys of the file's choosing (names,
// hosts). A null value is an empty mapping. Every entry with a plain,
// unique key is kept, in file order; OK says whether its value was decoded.
type dict[T any, P decoder[T]] struct {
	at
	Entries []entry[T]
}

// entry is one key and value of a dict.
type entry[T any] struct {
	// Key is the key's node; Key.Value is the key.
	Key *yaml.Node
	V   T
	// OK is false when V could not be decoded (the problem is reported).
	OK bool
}

// UnmarshalYAML decodes each value of mapping n.
func (d *dict[T, P]) UnmarshalYAML(n *yaml.Node) error {
	d.node = n
	if err := mappingNode(n, wantMapping); err != nil || isNull(n) {
		return err
	}
	d.Entries = make([]entry[T], 0, len(n.Content)/2)
	var errs issues
	keys := newKeySet(n)
	for i := 0; i+1 < len(n.Content); i += 2 {
		if !keys.check(&errs, i) {
			continue
		}
		k, v := n.Content[i], n.Content[i+1]
		d.Entries = append(d.Entries, entry[T]{Key: k})
		e := &d.Entries[len(d.Entries)-1]
		err := decodeValue(P(&e.V), v)
		e.OK = usable(err, v)
		errs.under(keySeg(k.Value), err)
	}
	return errs.err()
}

// decodeValue decodes n with u, refusing an alias.
func decodeValue(u yaml.Unmarshaler, n *yaml.Node) error {
	if n.Kind == yaml.AliasNode {
		return errAlias(n)
	}
	return u.UnmarshalYAML(n)
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

// join appends a key to a dotted path.
func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + keySeg(key)
}

// index appends a list index to a path.
func index(path string, i int) string { return path + indexSeg(i) }

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
