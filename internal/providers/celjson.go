package providers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"unicode/utf8"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
)

// The body a rule sees is decoded lazily: objects and arrays are CEL values
// over the raw bytes that index their members only when a rule looks inside
// them, and scalars are converted (and checked) when reached. A rule that
// reads two fields of a 1 KiB body never builds the rest of the document,
// which keeps a body rule within its budget (see BenchmarkClassifyCatalog in
// internal/engine).
//
// Validation is lazy too. The body must be one complete JSON value with
// balanced, matching brackets and closed strings (so a body cut short by the
// peek limit is null), and every object, array, string, number and literal
// a rule reaches is checked strictly; a malformed part is an error for the
// rule that reaches it (the rule does not match), while malformed parts that
// no rule reaches are not noticed.
//
// Semantics follow CEL's JSON mapping (google.protobuf.Value): objects are
// maps with string keys, arrays are lists, numbers are doubles, and null is
// null. When a key repeats, the last one wins, as with encoding/json.

// maxJSONDepth bounds the nesting a body may have; a deeper body is null.
const maxJSONDepth = 64

// parseJSONBody returns the body as a CEL value: null when the body is empty
// or not one complete JSON value (for example when the peek cut it short).
func parseJSONBody(body []byte) ref.Val { return parseJSONBodyMetered(body, nil) }

// parseJSONBodyMetered is parseJSONBody with the comparisons of the values
// it makes (==, in) charged to m; nil means unmetered.
func parseJSONBodyMetered(body []byte, m *jsonMeter) ref.Val {
	start := skipWS(body, 0)
	end, ok := skipValue(body, start)
	if !ok || skipWS(body, end) != len(body) {
		return types.NullValue
	}
	return jsonValueOf(body[start:end], m)
}

// MaxRuleCompareBytes bounds the work of comparing JSON values (== and in
// on body parts) in one classification, in bytes compared (a member or an
// element visited counts as jsonVisitBytes). CEL charges a comparison by
// the number of keys or elements at its top, whatever lies below them, so
// without this bound a rule comparing the body with itself in a loop would
// do work the cost limit does not see.
const MaxRuleCompareBytes = 8 << 20

// jsonVisitBytes is what visiting one member or element of a comparison
// counts for.
const jsonVisitBytes = 64

var errCompareBudget = types.NewErr("rule compared more than %d bytes of JSON", MaxRuleCompareBytes)

// jsonMeter is the comparison budget of one classification's rules.
type jsonMeter struct{ used int }

// charge takes n bytes from m and reports whether the budget still holds.
// A nil meter always holds.
func (m *jsonMeter) charge(n int) bool {
	if m == nil {
		return true
	}
	m.used += n
	return m.used <= MaxRuleCompareBytes
}

// jsonValueOf converts one raw JSON value; a malformed scalar is an error
// value.
func jsonValueOf(raw []byte, m *jsonMeter) ref.Val {
	if len(raw) == 0 {
		return types.NullValue
	}
	switch c := raw[0]; {
	case c == '{':
		return checkedObject(&jsonObject{raw: raw, m: m})
	case c == '[':
		a := &jsonArray{raw: raw, m: m}
		if a.index(); a.bad {
			return errMalformedArray
		}
		return a
	case c == '"':
		s, ok := decodeJSONString(raw)
		if !ok {
			return types.NewErr("invalid JSON string")
		}
		return types.String(s)
	case string(raw) == "true":
		return types.True
	case string(raw) == "false":
		return types.False
	case string(raw) == "null":
		return types.NullValue
	case validJSONNumber(raw):
		f, err := strconv.ParseFloat(string(raw), 64)
		if err != nil {
			// Valid JSON numbers beyond float64's range.
			return types.NewErr("JSON number %s out of range", raw)
		}
		return types.Double(f)
	}
	return types.NewErr("invalid JSON value")
}

// Errors of malformed containers: an object or array a rule reaches is
// indexed then, and one whose members do not parse (`[1 2]`, `{"a":1
// "b":2}`, a trailing comma) is this error rather than the part before the
// fault, so that a rule never decides on half a body.
var (
	errMalformedObject = types.NewErr("malformed JSON object")
	errMalformedArray  = types.NewErr("malformed JSON array")
)

// checkedObject indexes o and returns it, or errMalformedObject.
func checkedObject(o *jsonObject) ref.Val {
	if o.index(); o.bad {
		return errMalformedObject
	}
	return o
}

// validJSONNumber reports whether b is exactly an RFC 8259 number.
func validJSONNumber(b []byte) bool {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		start := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == start {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		start := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == start {
			return false
		}
	}
	return i == len(b)
}

// decodeJSONString decodes a raw JSON string (with its quotes). It rejects
// control characters and, through encoding/json, invalid escapes.
func decodeJSONString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	inner := raw[1 : len(raw)-1]
	escaped := false
	for _, c := range inner {
		if c < 0x20 {
			return "", false
		}
		if c == '\\' {
			escaped = true
		}
	}
	if !escaped && utf8.Valid(inner) {
		return string(inner), true
	}
	// Escapes, or invalid UTF-8 that encoding/json replaces with U+FFFD.
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

// hasControl reports whether b holds a control character, which a JSON
// string may not hold unescaped.
func hasControl(b []byte) bool {
	for _, c := range b {
		if c < 0x20 {
			return true
		}
	}
	return false
}

// skipWS returns the index of the first non-whitespace byte at or after i.
func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the end of the JSON value starting at i: a string up to
// its closing quote, a container up to its matching bracket (brackets must
// match in kind and nest at most maxJSONDepth deep), or a scalar up to the
// next delimiter. It stays in bounds on any input.
func skipValue(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return i, false
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		// stack holds one bit per open bracket: 1 for '{', 0 for '['.
		var stack uint64
		depth := 0
		for i < len(b) {
			switch c := b[i]; c {
			case '"':
				end, ok := skipString(b, i)
				if !ok {
					return end, false
				}
				i = end
				continue
			case '{', '[':
				if depth == maxJSONDepth {
					return i, false
				}
				stack <<= 1
				if c == '{' {
					stack |= 1
				}
				depth++
			case '}', ']':
				if depth == 0 || (stack&1 == 1) != (c == '}') {
					return i, false
				}
				stack >>= 1
				depth--
				if depth == 0 {
					return i + 1, true
				}
			}
			i++
		}
		return i, false
	case '}', ']', ',', ':':
		return i, false
	default:
		j := i
		for j < len(b) {
			switch b[j] {
			case ',', '}', ']', ':', ' ', '\t', '\n', '\r', '"', '{', '[':
				return j, j > i
			}
			j++
		}
		return j, j > i
	}
}

// skipString returns the end of the JSON string whose quote is at i.
func skipString(b []byte, i int) (int, bool) {
	j := i + 1
	// Keys and short values end within a few bytes: a plain loop beats
	// IndexByte's call overhead there.
	for n := 0; n < 16 && j < len(b); n++ {
		switch b[j] {
		case '"':
			return j + 1, true
		case '\\':
			j += 2
			continue
		}
		j++
	}
	if j >= len(b) {
		return len(b), false
	}
	for {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return len(b), false
		}
		j += k
		// The quote is escaped when an odd number of backslashes precede it.
		n := 0
		for p := j - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return j + 1, true
		}
		j++
	}
}

// jsonMember is one key of an object, as offsets into the object's raw
// bytes: the key without its quotes, and the value. Keeping it small keeps
// indexing an object cheap.
type jsonMember struct {
	ks, ke, vs, ve int32
	escaped        bool    // the key holds escapes or invalid UTF-8; decoded in jsonObject.decoded
	cached         ref.Val // the converted value, once a rule looked at it
}

// jsonObject is a JSON object as a CEL map, indexed on first use.
type jsonObject struct {
	raw     []byte
	members []jsonMember
	inline  [4]jsonMember  // members' first backing array: most objects need no other
	decoded map[int]string // keys with escapes, by member index
	indexed bool
	bad     bool
	m       *jsonMeter // charged for comparisons; shared by the whole body
}

func (o *jsonObject) key(i int) []byte { m := &o.members[i]; return o.raw[m.ks:m.ke] }

func (o *jsonObject) val(i int) []byte { m := &o.members[i]; return o.raw[m.vs:m.ve] }

// is reports whether member i has key k.
func (o *jsonObject) is(i int, k string) bool {
	if o.members[i].escaped {
		return o.decoded[i] == k
	}
	return string(o.key(i)) == k
}

// name returns member i's key.
func (o *jsonObject) name(i int) string {
	if o.members[i].escaped {
		return o.decoded[i]
	}
	return string(o.key(i))
}

// sameKey reports whether members i and j have the same key.
func (o *jsonObject) sameKey(i, j int) bool {
	if o.members[i].escaped || o.members[j].escaped {
		return o.name(i) == o.name(j)
	}
	return bytes.Equal(o.key(i), o.key(j))
}

// value returns member i's value as a CEL value, converted once: a nested
// object keeps its index, so a rule that reads three fields below
// body.extensions.cost indexes each level once.
func (o *jsonObject) value(i int) ref.Val {
	m := &o.members[i]
	if m.cached == nil {
		m.cached = jsonValueOf(o.val(i), o.m)
	}
	return m.cached
}

var (
	_ traits.Mapper = (*jsonObject)(nil)
	_ traits.Lister = (*jsonArray)(nil)
)

func (o *jsonObject) index() {
	if o.indexed {
		return
	}
	o.indexed = true
	b := o.raw
	if len(b) > math.MaxInt32 {
		o.bad = true
		return
	}
	i := skipWS(b, 1)
	if i < len(b) && b[i] == '}' {
		return
	}
	o.members = o.inline[:0]
	for i < len(b) {
		if b[i] != '"' {
			o.bad = true
			return
		}
		kend, ok := skipString(b, i)
		if !ok {
			o.bad = true
			return
		}
		m := jsonMember{ks: int32(i + 1), ke: int32(kend - 1)}
		if k := b[i+1 : kend-1]; bytes.IndexByte(k, '\\') >= 0 || !utf8.Valid(k) || hasControl(k) {
			s, ok := decodeJSONString(b[i:kend])
			if !ok {
				o.bad = true
				return
			}
			if o.decoded == nil {
				o.decoded = map[int]string{}
			}
			o.decoded[len(o.members)] = s
			m.escaped = true
		}
		i = skipWS(b, kend)
		if i >= len(b) || b[i] != ':' {
			o.bad = true
			return
		}
		i = skipWS(b, i+1)
		vend, ok := skipValue(b, i)
		if !ok {
			o.bad = true
			return
		}
		m.vs, m.ve = int32(i), int32(vend)
		o.members = append(o.members, m)
		i = skipWS(b, vend)
		if i >= len(b) {
			o.bad = true
			return
		}
		if b[i] == '}' {
			return
		}
		if b[i] != ',' {
			o.bad = true
			return
		}
		i = skipWS(b, i+1)
	}
	o.bad = true
}

// member returns the index of key k's member; the last occurrence wins.
func (o *jsonObject) member(k string) (int, bool) {
	o.index()
	for i := len(o.members) - 1; i >= 0; i-- {
		if o.is(i, k) {
			return i, true
		}
	}
	return 0, false
}

// Find implements traits.Mapper.
func (o *jsonObject) Find(key ref.Val) (ref.Val, bool) {
	k, ok := key.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(key), false
	}
	i, found := o.member(string(k))
	if o.bad {
		return types.NewErr("malformed JSON object"), false
	}
	if !found {
		return nil, false
	}
	return o.value(i), true
}

// Get implements traits.Indexer.
func (o *jsonObject) Get(key ref.Val) ref.Val {
	v, found := o.Find(key)
	if !found {
		if v != nil {
			return v
		}
		return types.NewErr("no such key: %v", key)
	}
	return v
}

// Contains implements traits.Container (the `in` operator).
func (o *jsonObject) Contains(key ref.Val) ref.Val {
	v, found := o.Find(key)
	if !found && types.IsError(v) {
		return v
	}
	return types.Bool(found)
}

// keys returns the distinct keys, in first-seen order.
func (o *jsonObject) keys() []string {
	o.index()
	seen := make(map[string]bool, len(o.members))
	out := make([]string, 0, len(o.members))
	for i := range o.members {
		k := o.name(i)
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

// Size implements traits.Sizer: the number of distinct keys. CEL's cost
// tracker asks for sizes often, so small objects are counted without
// allocating.
func (o *jsonObject) Size() ref.Val {
	o.index()
	if len(o.members) > 32 {
		return types.Int(len(o.keys()))
	}
	n := 0
	for i := range o.members {
		dup := false
		for j := 0; j < i; j++ {
			if o.sameKey(j, i) {
				dup = true
				break
			}
		}
		if !dup {
			n++
		}
	}
	return types.Int(n)
}

// Iterator implements traits.Iterable over the keys.
func (o *jsonObject) Iterator() traits.Iterator {
	return types.NewStringList(types.DefaultTypeAdapter, o.keys()).Iterator()
}

// native decodes the whole object.
func (o *jsonObject) native() (any, error) { return decodeJSON(o.raw) }

// ConvertToNative implements ref.Val.
func (o *jsonObject) ConvertToNative(typ reflect.Type) (any, error) {
	return convertJSON(o.raw, typ)
}

// ConvertToType implements ref.Val.
func (o *jsonObject) ConvertToType(t ref.Type) ref.Val {
	switch t {
	case types.MapType:
		return o
	case types.TypeType:
		return types.MapType
	}
	return types.NewErr("type conversion error from map to '%s'", t)
}

// Equal implements ref.Val: other is a map with the same keys, whose
// values are equal (CEL's equality, numbers across types). The work is
// charged to the body's meter.
func (o *jsonObject) Equal(other ref.Val) ref.Val {
	if x, ok := other.(*jsonObject); ok && bytes.Equal(o.raw, x.raw) {
		if !o.m.charge(len(o.raw)) {
			return errCompareBudget
		}
		return types.True
	}
	om, ok := other.(traits.Mapper)
	if !ok {
		return types.False
	}
	if n, ok := om.Size().(types.Int); !ok || n != o.Size() {
		return types.False
	}
	for _, k := range o.keys() {
		if !o.m.charge(jsonVisitBytes + len(k)) {
			return errCompareBudget
		}
		i, _ := o.member(k)
		ov, found := om.Find(types.String(k))
		if !found {
			if ov != nil && types.IsError(ov) {
				return ov
			}
			return types.False
		}
		if r := o.value(i).Equal(ov); r != types.True {
			return r
		}
	}
	return types.True
}

// Type implements ref.Val.
func (o *jsonObject) Type() ref.Type { return types.MapType }

// Value implements ref.Val: the decoded object (map[string]any), or nil.
func (o *jsonObject) Value() any {
	v, _ := o.native()
	return v
}

// jsonArray is a JSON array as a CEL list, indexed on first use.
type jsonArray struct {
	raw     []byte
	elems   [][]byte
	vals    []ref.Val // converted elements, built on first use
	indexed bool
	bad     bool // the elements do not parse; jsonValueOf gives an error instead
	m       *jsonMeter
}

func (a *jsonArray) index() {
	if a.indexed {
		return
	}
	a.indexed = true
	b := a.raw
	i := skipWS(b, 1)
	if i < len(b) && b[i] == ']' {
		return
	}
	a.elems = make([][]byte, 0, 4)
	for i < len(b) {
		end, ok := skipValue(b, i)
		if !ok {
			a.bad = true
			return
		}
		a.elems = append(a.elems, b[i:end])
		i = skipWS(b, end)
		if i >= len(b) {
			a.bad = true
			return
		}
		if b[i] == ']' {
			if i != len(b)-1 {
				a.bad = true
			}
			return
		}
		if b[i] != ',' {
			a.bad = true
			return
		}
		i = skipWS(b, i+1)
	}
	a.bad = true
}

// values returns the converted elements, converting each once.
func (a *jsonArray) values() []ref.Val {
	a.index()
	if a.vals == nil {
		a.vals = make([]ref.Val, len(a.elems))
		var objs []jsonObject // one allocation for the object elements
		for i, e := range a.elems {
			if len(e) > 0 && e[0] == '{' {
				if objs == nil {
					objs = make([]jsonObject, len(a.elems))
				}
				objs[i].raw, objs[i].m = e, a.m
				a.vals[i] = checkedObject(&objs[i])
				continue
			}
			a.vals[i] = jsonValueOf(e, a.m)
		}
	}
	return a.vals
}

// Add implements traits.Adder (list concatenation).
func (a *jsonArray) Add(other ref.Val) ref.Val {
	return types.NewRefValList(types.DefaultTypeAdapter, a.values()).Add(other)
}

// Contains implements traits.Container: some element equals v.
func (a *jsonArray) Contains(v ref.Val) ref.Val {
	for _, e := range a.values() {
		if !a.m.charge(jsonVisitBytes) {
			return errCompareBudget
		}
		switch r := e.Equal(v); {
		case r == types.True:
			return types.True
		case types.IsError(r):
			return r
		}
	}
	return types.False
}

// Get implements traits.Indexer.
func (a *jsonArray) Get(idx ref.Val) ref.Val {
	i, err := types.IndexOrError(idx)
	if err != nil {
		return types.WrapErr(err)
	}
	vals := a.values()
	if i < 0 || i >= len(vals) {
		return types.NewErr("index out of range: %d", i)
	}
	return vals[i]
}

// Iterator implements traits.Iterable.
func (a *jsonArray) Iterator() traits.Iterator {
	return types.NewRefValList(types.DefaultTypeAdapter, a.values()).Iterator()
}

// Size implements traits.Sizer.
func (a *jsonArray) Size() ref.Val {
	a.index()
	return types.Int(len(a.elems))
}

// ConvertToNative implements ref.Val.
func (a *jsonArray) ConvertToNative(typ reflect.Type) (any, error) {
	return convertJSON(a.raw, typ)
}

// ConvertToType implements ref.Val.
func (a *jsonArray) ConvertToType(t ref.Type) ref.Val {
	switch t {
	case types.ListType:
		return a
	case types.TypeType:
		return types.ListType
	}
	return types.NewErr("type conversion error from list to '%s'", t)
}

// Equal implements ref.Val: other is a list of the same length whose
// elements are equal in order. The work is charged to the body's meter.
func (a *jsonArray) Equal(other ref.Val) ref.Val {
	if x, ok := other.(*jsonArray); ok && bytes.Equal(a.raw, x.raw) {
		if !a.m.charge(len(a.raw)) {
			return errCompareBudget
		}
		return types.True
	}
	ol, ok := other.(traits.Lister)
	if !ok {
		return types.False
	}
	vals := a.values()
	if n, ok := ol.Size().(types.Int); !ok || int(n) != len(vals) {
		return types.False
	}
	for i, e := range vals {
		if !a.m.charge(jsonVisitBytes) {
			return errCompareBudget
		}
		if r := e.Equal(ol.Get(types.Int(i))); r != types.True {
			return r
		}
	}
	return types.True
}

// Type implements ref.Val.
func (a *jsonArray) Type() ref.Type { return types.ListType }

// Value implements ref.Val: the decoded array ([]any), or nil.
func (a *jsonArray) Value() any {
	v, _ := decodeJSON(a.raw)
	return v
}

func decodeJSON(raw []byte) (any, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("decode JSON: %w", err)
	}
	return v, nil
}

func convertJSON(raw []byte, typ reflect.Type) (any, error) {
	if typ.Kind() == reflect.Interface {
		return decodeJSON(raw)
	}
	p := reflect.New(typ)
	if err := json.Unmarshal(raw, p.Interface()); err != nil {
		return nil, fmt.Errorf("convert JSON to %v: %w", typ, err)
	}
	return p.Elem().Interface(), nil
}

// lookupJSONPath follows a path of object keys from v (a value made by
// parseJSONBody) and returns the raw JSON value it reaches.
func lookupJSONPath(v ref.Val, path []string) ([]byte, bool) {
	o, ok := v.(*jsonObject)
	if !ok || len(path) == 0 {
		return nil, false
	}
	for n, k := range path {
		i, found := o.member(k)
		if !found || o.bad {
			return nil, false
		}
		if n == len(path)-1 {
			return o.val(i), true
		}
		if o, ok = o.value(i).(*jsonObject); !ok {
			return nil, false
		}
	}
	return nil, false
}
