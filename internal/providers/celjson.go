package providers

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
)

// The body a rule sees is decoded lazily: json.Valid checks the whole body
// once, then objects and arrays are CEL values over the raw bytes that index
// their members only when a rule looks inside them, and scalars are
// converted when reached. A rule that reads two fields of a 1 KiB body never
// builds the rest of the document, which keeps a body rule within its
// budget (see BenchmarkClassifyCatalog in internal/engine).
//
// Semantics follow CEL's JSON mapping (google.protobuf.Value): objects are
// maps with string keys, arrays are lists, numbers are doubles, and null is
// null. When a key repeats, the last one wins, as with encoding/json.

// parseJSONBody returns the body as a CEL value: null when the body is empty
// or not one complete JSON value (for example when the peek cut it short).
func parseJSONBody(body []byte) ref.Val {
	if len(body) == 0 || !json.Valid(body) {
		return types.NullValue
	}
	start := skipWS(body, 0)
	end, ok := skipValue(body, start)
	if !ok {
		return types.NullValue
	}
	return jsonValueOf(body[start:end])
}

// jsonValueOf converts one raw, valid JSON value.
func jsonValueOf(raw []byte) ref.Val {
	if len(raw) == 0 {
		return types.NullValue
	}
	switch c := raw[0]; {
	case c == '{':
		return &jsonObject{raw: raw}
	case c == '[':
		return &jsonArray{raw: raw}
	case c == '"':
		s, ok := decodeJSONString(raw)
		if !ok {
			return types.NewErr("invalid JSON string")
		}
		return types.String(s)
	case c == 't':
		return types.True
	case c == 'f':
		return types.False
	case c == 'n':
		return types.NullValue
	default:
		f, err := strconv.ParseFloat(string(raw), 64)
		if err != nil {
			// Valid JSON numbers beyond float64's range.
			return types.NewErr("JSON number %s out of range", raw)
		}
		return types.Double(f)
	}
}

// decodeJSONString decodes a raw JSON string (with its quotes).
func decodeJSONString(raw []byte) (string, bool) {
	if len(raw) < 2 {
		return "", false
	}
	inner := raw[1 : len(raw)-1]
	escaped := false
	for _, c := range inner {
		if c == '\\' {
			escaped = true
			break
		}
	}
	if !escaped {
		return string(inner), true
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

// skipWS returns the index of the first non-whitespace byte at or after i.
func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the end of the JSON value starting at i. The input has
// passed json.Valid, but skipValue stays in bounds on any input.
func skipValue(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return i, false
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				end, ok := skipString(b, i)
				if !ok {
					return end, false
				}
				i = end
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, true
				}
			}
			i++
		}
		return i, false
	default:
		j := i
		for j < len(b) {
			switch b[j] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return j, j > i
			}
			j++
		}
		return j, j > i
	}
}

// skipString returns the end of the JSON string whose quote is at i.
func skipString(b []byte, i int) (int, bool) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1, true
		}
	}
	return len(b), false
}

// jsonMember is one key of an object: the raw key (without quotes) and the
// raw value.
type jsonMember struct {
	key     []byte
	decoded string // the key, when it holds escapes
	escaped bool
	val     []byte
}

func (m *jsonMember) is(k string) bool {
	if m.escaped {
		return m.decoded == k
	}
	return string(m.key) == k
}

func (m *jsonMember) name() string {
	if m.escaped {
		return m.decoded
	}
	return string(m.key)
}

// jsonObject is a JSON object as a CEL map, indexed on first use.
type jsonObject struct {
	raw     []byte
	members []jsonMember
	indexed bool
	bad     bool
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
	i := skipWS(b, 1)
	if i < len(b) && b[i] == '}' {
		return
	}
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
		m := jsonMember{key: b[i+1 : kend-1]}
		for _, c := range m.key {
			if c == '\\' {
				s, ok := decodeJSONString(b[i:kend])
				if !ok {
					o.bad = true
					return
				}
				m.decoded, m.escaped = s, true
				break
			}
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
		m.val = b[i:vend]
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

// find returns the raw value of key k; the last occurrence wins.
func (o *jsonObject) find(k string) ([]byte, bool) {
	o.index()
	for i := len(o.members) - 1; i >= 0; i-- {
		if o.members[i].is(k) {
			return o.members[i].val, true
		}
	}
	return nil, false
}

// Find implements traits.Mapper.
func (o *jsonObject) Find(key ref.Val) (ref.Val, bool) {
	k, ok := key.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(key), false
	}
	raw, found := o.find(string(k))
	if o.bad {
		return types.NewErr("malformed JSON object"), false
	}
	if !found {
		return nil, false
	}
	return jsonValueOf(raw), true
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
		k := o.members[i].name()
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

// Size implements traits.Sizer: the number of distinct keys.
func (o *jsonObject) Size() ref.Val { return types.Int(len(o.keys())) }

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

// Equal implements ref.Val by comparing the decoded document.
func (o *jsonObject) Equal(other ref.Val) ref.Val { return equalJSON(o.raw, other) }

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
	indexed bool
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
	for i < len(b) {
		end, ok := skipValue(b, i)
		if !ok {
			return
		}
		a.elems = append(a.elems, b[i:end])
		i = skipWS(b, end)
		if i >= len(b) || b[i] == ']' {
			return
		}
		if b[i] != ',' {
			return
		}
		i = skipWS(b, i+1)
	}
}

func (a *jsonArray) values() []ref.Val {
	a.index()
	out := make([]ref.Val, len(a.elems))
	for i, e := range a.elems {
		out[i] = jsonValueOf(e)
	}
	return out
}

// Add implements traits.Adder (list concatenation).
func (a *jsonArray) Add(other ref.Val) ref.Val {
	return types.NewRefValList(types.DefaultTypeAdapter, a.values()).Add(other)
}

// Contains implements traits.Container.
func (a *jsonArray) Contains(v ref.Val) ref.Val {
	a.index()
	for _, e := range a.elems {
		if jsonValueOf(e).Equal(v) == types.True {
			return types.True
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
	a.index()
	if i < 0 || i >= len(a.elems) {
		return types.NewErr("index out of range: %d", i)
	}
	return jsonValueOf(a.elems[i])
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

// Equal implements ref.Val by comparing the decoded document.
func (a *jsonArray) Equal(other ref.Val) ref.Val { return equalJSON(a.raw, other) }

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

func equalJSON(raw []byte, other ref.Val) ref.Val {
	v, err := decodeJSON(raw)
	if err != nil {
		return types.WrapErr(err)
	}
	if o, ok := other.(*jsonObject); ok {
		ov, err := o.native()
		if err != nil {
			return types.WrapErr(err)
		}
		other = types.DefaultTypeAdapter.NativeToValue(ov)
	} else if a, ok := other.(*jsonArray); ok {
		ov, err := decodeJSON(a.raw)
		if err != nil {
			return types.WrapErr(err)
		}
		other = types.DefaultTypeAdapter.NativeToValue(ov)
	}
	return types.DefaultTypeAdapter.NativeToValue(v).Equal(other)
}

// lookupJSONPath follows a path of object keys from v (a value made by
// parseJSONBody) and returns the raw JSON value it reaches.
func lookupJSONPath(v ref.Val, path []string) ([]byte, bool) {
	o, ok := v.(*jsonObject)
	if !ok || len(path) == 0 {
		return nil, false
	}
	for i, k := range path {
		raw, found := o.find(k)
		if !found || o.bad {
			return nil, false
		}
		if i == len(path)-1 {
			return raw, true
		}
		if o, ok = jsonValueOf(raw).(*jsonObject); !ok {
			return nil, false
		}
	}
	return nil, false
}
