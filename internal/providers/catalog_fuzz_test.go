package providers

import (
	"bytes"
	"encoding/json"
	"net/http"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
)

// FuzzRuleEval runs every built-in entry (rules included) on arbitrary
// statuses, headers and bodies (up to the peek limit; the seeds include
// hostile ones), and checks what every Reading keeps: no panic, at most
// maxRuleAlloc bytes allocated, a rule only with a verdict, and a body that
// NeedsBody says is not read changes nothing.
func FuzzRuleEval(f *testing.F) {
	entries := Builtin().Entries()
	f.Fuzz(func(t *testing.T, status int, attempt int, k1, v1, k2, v2 string, body []byte, repeat uint16) {
		body = peekOf(body, repeat)
		status = 100 + abs(status)%500
		h := http.Header{}
		h.Add(k1, v1)
		h.Add(k2, v2)
		r := &Response{Status: status, Header: h, Body: body, Now: now, Attempt: attempt % 100}
		noBody := *r
		noBody.Body = nil
		for _, e := range entries {
			var got Reading
			var tr Trace
			if n := allocatedNoGC(func() { got, tr = e.Explain(r) }); n > maxRuleAlloc {
				t.Fatalf("%s on %d bytes: allocated %d bytes, over %d", e.Name(), len(body), n, maxRuleAlloc)
			}
			switch {
			case got.HasHint && (got.Hint.Delay < 0 || got.Hint.Source == ""):
				t.Fatalf("%s: bad hint %+v", e.Name(), got.Hint)
			case !got.HasHint && got.Hint != (Hint{}):
				t.Fatalf("%s: stray hint %+v", e.Name(), got.Hint)
			case got.NotExecuted && got.Verdict != VerdictRetry:
				t.Fatalf("%s: not executed without a retry verdict: %+v", e.Name(), got)
			case got.Rule != "" && (got.Verdict == VerdictNone || !strings.HasPrefix(got.Rule, e.Name()+"/")):
				t.Fatalf("%s: rule %q with verdict %v", e.Name(), got.Rule, got.Verdict)
			case got.HasQuota && (got.Quota.Remaining < 0 || got.Quota.Source == "" || got.Quota.Reset.IsZero()):
				t.Fatalf("%s: bad quota %+v", e.Name(), got.Quota)
			case !got.HasQuota && got.Quota != (Quota{}):
				t.Fatalf("%s: stray quota %+v", e.Name(), got.Quota)
			}
			for _, rt := range tr.Rules {
				if strings.Contains(rt.Err, "cost") && strings.Contains(rt.Err, "limit") {
					// Exceeding the cost limit is allowed (the rule does not
					// match), but the built-in rules never get near it.
					t.Fatalf("%s: %s hit the cost limit: %s", e.Name(), rt.Name, rt.Err)
				}
			}
			if !e.NeedsBody(status) {
				if without := e.Read(&noBody); without != got {
					t.Fatalf("%s: NeedsBody(%d) is false, but the body changed the reading: %+v vs %+v", e.Name(), status, got, without)
				}
			}
		}
	})
}

// peekOf is body repeated repeat times (at least once), cut to the 64 KiB
// peek limit. Hostile bodies are long and repetitive; the fuzzer's inputs
// stay short, which keeps it fast.
func peekOf(body []byte, repeat uint16) []byte {
	if repeat > 1 && len(body) > 0 {
		body = bytes.Repeat(body[:min(len(body), 64<<10)], min(int(repeat), (64<<10)/len(body)+1))
	}
	return body[:min(len(body), 64<<10)]
}

// allocatedNoGC returns the bytes f allocates, without the collection
// allocated runs first (a fuzz target calls it on every input).
func allocatedNoGC(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func abs(n int) int {
	if n < 0 {
		if n = -n; n < 0 {
			return 0
		}
	}
	return n
}

// FuzzJSONBody checks the lazy JSON value against encoding/json: on a valid
// document every key and element it reaches decodes to what encoding/json
// decodes; on a document encoding/json rejects, a walk of the whole value
// meets an error or null somewhere (a malformed array is not a shorter
// one: issue 17 defect 10); and on any input, walking it never panics. The
// seeds include malformed arrays and objects, nested, and trailing garbage.
func FuzzJSONBody(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte) {
		v := parseJSONBody(body)
		walkJSON(t, v, 0)
		var want any
		if err := json.Unmarshal(body, &want); err != nil {
			if v == types.NullValue || types.IsError(v) {
				return
			}
			if strictlyWhole(v) {
				got, _ := nativeOf(v)
				t.Fatalf("%q: encoding/json rejects it (%v), but every part of the lazy value reads, as %#v", body, err, got)
			}
			return
		}
		if jsonDepth(want) > maxJSONDepth {
			if v != types.NullValue {
				t.Fatalf("%q: deeper than %d but not null", body, maxJSONDepth)
			}
			return
		}
		if types.IsError(v) {
			t.Fatalf("%q: valid JSON gave %v", body, v)
		}
		got, err := nativeOf(v)
		if err != nil {
			// A number beyond float64 is valid JSON that encoding/json
			// rejects too; anything else is a bug.
			t.Fatalf("%q: %v", body, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: lazy value %#v, encoding/json %#v", body, got, want)
		}
	})
}

// nativeOf rebuilds a plain Go value from a lazy JSON value through the CEL
// interfaces only (Find, Get, Size, Iterator), so that the traits are what
// is checked.
func nativeOf(v ref.Val) (any, error) {
	switch x := v.(type) {
	case *jsonObject:
		out := map[string]any{}
		it := x.Iterator()
		for it.HasNext() == types.True {
			k := it.Next()
			val, found := x.Find(k)
			if !found || types.IsError(val) {
				return nil, errString("key " + string(k.(types.String)) + " not found again")
			}
			n, err := nativeOf(val)
			if err != nil {
				return nil, err
			}
			out[string(k.(types.String))] = n
		}
		if int(x.Size().(types.Int)) != len(out) {
			return nil, errString("object size disagrees with its keys")
		}
		return out, nil
	case *jsonArray:
		n := int(x.Size().(types.Int))
		out := make([]any, 0, n)
		for i := 0; i < n; i++ {
			e, err := nativeOf(x.Get(types.Int(i)))
			if err != nil {
				return nil, err
			}
			out = append(out, e)
		}
		return out, nil
	case types.String:
		return string(x), nil
	case types.Double:
		return float64(x), nil
	case types.Bool:
		return bool(x), nil
	case types.Null:
		return nil, nil
	}
	return nil, errString("unexpected value " + v.Type().TypeName())
}

// strictlyWhole reports whether every part of v reads without an error,
// the values of repeated keys too (a rule sees only the last, but a fault
// in an earlier one is still a fault of the document).
func strictlyWhole(v ref.Val) bool {
	switch x := v.(type) {
	case *jsonObject:
		x.index()
		if x.bad {
			return false
		}
		for i := range x.members {
			if !strictlyWhole(x.value(i)) {
				return false
			}
		}
		return true
	case *jsonArray:
		x.index()
		if x.bad {
			return false
		}
		for _, e := range x.values() {
			if !strictlyWhole(e) {
				return false
			}
		}
		return true
	case types.String, types.Double, types.Bool, types.Null:
		return true
	}
	return false
}

// jsonDepth is the nesting depth of a decoded value (a scalar is 0).
func jsonDepth(v any) int {
	d := 0
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			d = max(d, jsonDepth(e))
		}
		return d + 1
	case []any:
		for _, e := range x {
			d = max(d, jsonDepth(e))
		}
		return d + 1
	}
	return 0
}

type errString string

func (e errString) Error() string { return string(e) }

// walkJSON visits everything reachable, as a rule could.
func walkJSON(t *testing.T, v ref.Val, depth int) {
	if depth > maxJSONDepth+2 {
		t.Fatal("walk deeper than maxJSONDepth")
	}
	switch x := v.(type) {
	case traits.Mapper:
		_ = x.Size()
		_ = x.Contains(types.String("a"))
		_ = x.Equal(x)
		for it := x.Iterator(); it.HasNext() == types.True; {
			k := it.Next()
			if val, ok := x.Find(k); ok {
				walkJSON(t, val, depth+1)
			}
		}
	case traits.Lister:
		n, _ := x.Size().(types.Int)
		for i := types.Int(0); i < n; i++ {
			walkJSON(t, x.Get(i), depth+1)
		}
		_ = x.Contains(types.Double(1))
		_ = x.Get(types.Int(-1))
	}
}

func FuzzRateLimitPolicy(f *testing.F) {
	f.Fuzz(func(t *testing.T, a, b string) {
		ps, ok := ParseRateLimitPolicy([]string{a})
		if !ok && ps != nil {
			t.Fatalf("%q: invalid but returned %+v", a, ps)
		}
		for _, p := range ps {
			if p.Quota < 0 || p.Window < 0 || (!p.HasWindow && p.Window != 0) {
				t.Fatalf("%q: bad policy %+v", a, p)
			}
		}
		two, ok2 := ParseRateLimitPolicy([]string{a, b})
		joined, okj := ParseRateLimitPolicy([]string{a + ", " + b})
		if ok2 != okj || !reflect.DeepEqual(two, joined) {
			t.Fatalf("%q + %q: lines %+v, %v; joined %+v, %v", a, b, two, ok2, joined, okj)
		}
	})
}

// FuzzCompileRule compiles arbitrary rule expressions: Compile never
// panics, reports errors with a path, and a rule that compiles evaluates
// without panicking, on any body within the peek limit, allocating at most
// maxRuleAlloc bytes (the seeds include issue 17's hostile rules and
// bodies).
func FuzzCompileRule(f *testing.F) {
	f.Fuzz(func(t *testing.T, when, delay string, body []byte, repeat uint16) {
		body = peekOf(body, repeat)
		spec := EntrySpec{Name: "fuzz", Rules: []RuleSpec{{Name: "r", When: when, Action: "retry", Delay: &DelaySpec{Expr: delay}}}}
		e, errs := Compile(spec)
		if (e == nil) == (len(errs) == 0) {
			t.Fatalf("entry %v with %d errors", e != nil, len(errs))
		}
		for _, se := range errs {
			if !strings.HasPrefix(se.Path, "rules[0].") || se.Msg == "" || se.Line < 0 || se.Column < 0 {
				t.Fatalf("bad error %+v", se)
			}
		}
		if e != nil {
			r := &Response{Status: 429, Header: http.Header{"Retry-After": {"1"}}, Body: body, Now: now}
			var got Reading
			if n := allocatedNoGC(func() { got = e.Read(r) }); n > maxRuleAlloc {
				t.Fatalf("%q / %q on %d bytes: allocated %d bytes, over %d", when, delay, len(body), n, maxRuleAlloc)
			}
			if got.HasHint && got.Hint.Delay < 0 {
				t.Fatalf("negative delay %+v", got)
			}
		}
	})
}
