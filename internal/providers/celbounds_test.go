package providers

import (
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/google/cel-go/common/types"
)

// maxRuleAlloc is the bound on the bytes one classification may allocate
// for its rules (issue 17: at most 16 MiB of extra memory).
const maxRuleAlloc = 16 << 20

// hostileCommas is issue 17's body: a word and 65,000 commas, within the
// 64 KiB peek limit.
var hostileCommas = []byte("word" + strings.Repeat(",", 65000))

// allocated returns the bytes f allocates (TotalAlloc, which counts garbage
// too, so it bounds the extra memory from above).
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestHostileReplaceIsRefusedAtLoad: issue 17's rule, whose result grows
// with the product of two sizes the response sets, is refused when it is
// compiled, with the position of the replace call.
func TestHostileReplaceIsRefusedAtLoad(t *testing.T) {
	e, errs := Compile(EntrySpec{Name: "op", Rules: []RuleSpec{{
		Name: "r", When: `body_text.replace(",", body_text).size() > 1`, Action: "retry",
	}}})
	if e != nil || len(errs) != 1 {
		t.Fatalf("compiled: %v, errors %v", e != nil, errs)
	}
	se := errs[0]
	if se.Path != "rules[0].when" || se.Line != 1 || se.Column != 18 || !strings.Contains(se.Msg, "replace") {
		t.Fatalf("error %+v, want rules[0].when:1:18 naming replace", se)
	}
}

// TestRuleBuildsAreBounded runs rules that would build far more than the
// bounds on issue 17's body (and on a long array), and checks that each
// fails (the rule does not match) and allocates at most maxRuleAlloc.
func TestRuleBuildsAreBounded(t *testing.T) {
	arr := []byte("[" + strings.Repeat("0,", 32000) + "0]")
	long := strings.Repeat("x", 512)
	obj := []byte(`{"a":[` + strings.Repeat("0,", 32000) + `0]}`)
	cases := []struct {
		when string
		body []byte
	}{
		// 65,000 commas, each replaced by 512 bytes: 32 MiB.
		{`body_text.replace(",", "` + long + `").size() > 1`, hostileCommas},
		{`body_text.replace(",", "` + long + `", 100000).size() > 1`, hostileCommas},
		{`body.map(x, body_text).join().size() > 1`, arr},
		{`[body_text, body_text, body_text, body_text, body_text, body_text, body_text, body_text, body_text, body_text, body_text, body_text, body_text, body_text, body_text, body_text, body_text].join("` + long + `").size() > 1`, hostileCommas},
		{`"%s".format([body.map(x, body_text)]).size() > 1`, arr},
		{`"%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s".format([body_text, body_text, body_text, body_text, body_text, body_text, body_text, body_text, body_text, body_text, body_text, body_text, body_text, body_text, body_text, body_text, body_text]).size() > 1`, hostileCommas},
		{`lists.range(100000000).size() > 1`, hostileCommas},
		{`body.map(x, body).flatten().size() > 1`, arr},
		{`body.map(x, body_text.charAt(60000)).size() > 1`, arr},
		{`body.map(x, body_text.indexOf("z")).size() > 1`, arr},
		{`body.map(x, body_text.split(",").size()).size() > 1`, arr},
		{`body.map(x, body_text + body_text).size() > 1`, arr},
		{`body.map(x, strings.quote(body_text)).size() > 1`, arr},
		{`body.map(x, body).distinct().size() > 1`, arr},
		{`lists.range(65536).distinct().size() > 1`, arr},
		{`body.exists(x, body.exists(y, x != y))`, arr},
		{`body.all(x, x == 0)`, arr},
		// Comparing body parts charged nothing below their top level, and
		// decoded the whole body each time: 4 GiB for the first.
		{`body.a.map(x, body == body).size() > 0`, obj},
		{`body.a.exists(x, body in [x])`, obj},
		{`body.a.exists(x, x == 1) || body.a.exists(x, body.a == [x])`, obj},
		{`cel.bind(s, body_text + body_text, cel.bind(t, s + s, cel.bind(u, t + t, cel.bind(v, u + u, cel.bind(w, v + v, w + w + w + w))))).size() > 1`, hostileCommas},
	}
	for _, c := range cases {
		e, errs := Compile(EntrySpec{Name: "op", Rules: []RuleSpec{{Name: "r", When: c.when, Action: "retry"}}})
		if len(errs) > 0 {
			t.Fatalf("%s: %v", c.when, errs)
		}
		r := &Response{Status: 400, Header: http.Header{}, Body: c.body, Now: now}
		var got Reading
		var tr Trace
		n := allocated(func() { got, tr = e.Explain(r) })
		if got.Rule != "" || len(tr.Rules) != 1 || tr.Rules[0].Err == "" {
			t.Errorf("%.60s: reading %+v, trace %+v; want an error and no match", c.when, got, tr.Rules)
		}
		if n > maxRuleAlloc {
			t.Errorf("%.60s: allocated %d bytes, over %d", c.when, n, maxRuleAlloc)
		}
	}
}

// TestUnboundedRulesAreRefused: calls whose cost no runtime check can bound
// are refused at load, each at its position.
func TestUnboundedRulesAreRefused(t *testing.T) {
	for _, c := range []struct {
		when      string
		line, col int
	}{
		{`body_text.matches(body_text)`, 1, 18},
		{"status == 400 &&\n  body_text.matches(headers[\"x\"][0])", 2, 20},
		{`cel.bind(a, [body_text], (a + a).size() > 1)`, 1, 29},
		{`cel.bind(a, lists.range(100), cel.bind(b, a.map(x, a), b == b))`, 1, 52},
		{`cel.bind(a, [1, 2], [a, a] == [a, a])`, 1, 22},
		{`[dyn(headers["x"])].size() > 0`, 1, 13},
		{`{"k": headers["x"]}.size() > 0`, 1, 14},
		{`[status > 0 ? headers["x"] : body].size() > 0`, 1, 13},
		{`size(body.a + body.b) > 1`, 1, 13},
	} {
		_, errs := Compile(EntrySpec{Name: "op", Rules: []RuleSpec{{Name: "r", When: c.when, Action: "retry"}}})
		if len(errs) < 1 || errs[0].Line != c.line || errs[0].Column != c.col {
			t.Errorf("%s: errors %v, want the first at %d:%d", c.when, errs, c.line, c.col)
		}
	}
	// What stays allowed: literal patterns and replacements, string
	// concatenation, and map/filter (which build with + on their
	// accumulator).
	for _, ok := range []string{
		`body_text.matches("^[a-z]+$")`,
		`body_text.replace(",", ";").size() > 1`,
		`body.map(x, x).filter(x, x > 0).size() > 1`,
		`string(body.a) + "x" == "yx"`,
		`double(body.a) + double(body.b) > 1.0`,
		`"%s".format([headers["x"]]) == "[1]"`,
		`[[1, 2], [3]].size() == 2`,
		`body.l.map(x, x.items).size() > 0`,
		`body.l.map(x, [x, 1]).size() > 0`,
	} {
		if _, errs := Compile(EntrySpec{Name: "op", Rules: []RuleSpec{{Name: "r", When: ok, Action: "retry"}}}); len(errs) > 0 {
			t.Errorf("%s: %v", ok, errs)
		}
	}
}

// TestMalformedArrayIsBad (issue 17 defect 10): a malformed array that a
// rule reaches is an error, as a malformed object is, never the part
// before the fault.
func TestMalformedArrayIsBad(t *testing.T) {
	for _, c := range []struct{ body, when string }{
		{`[1 2]`, `body.size() >= 0`},
		{`[1 2]`, `1.0 in body`},
		{`[1,2,]`, `body.size() == 2`},
		{`{"l":[1 2]}`, `body.l.size() >= 0`},
		{`{"l":[1 2]}`, `body.l.exists(x, true)`},
		{`{"l":[{"a":1 "b":2}]}`, `body.l.exists(x, x.size() >= 0)`},
		{`{"a":1 "b":2}`, `body.size() >= 0`},
		{`{"l":[[1] [2]]}`, `body.l.size() >= 0`},
	} {
		e, errs := Compile(EntrySpec{Name: "t", Rules: []RuleSpec{{Name: "r", When: c.when, Action: "retry"}}})
		if errs != nil {
			t.Fatal(errs)
		}
		if got, tr := e.Explain(&Response{Status: 400, Body: []byte(c.body), Now: now}); got.Rule != "" || len(tr.Rules) != 1 || !strings.Contains(tr.Rules[0].Err, "malformed") {
			t.Errorf("%s on %s: %+v %+v, want an error", c.when, c.body, got, tr.Rules)
		}
	}
	v := parseJSONBody([]byte(`[1 2]`))
	if !types.IsError(v) {
		t.Fatalf("[1 2] is %v, want an error", v)
	}
	// Well-formed neighbours still read.
	e, _ := Compile(EntrySpec{Name: "t", Rules: []RuleSpec{{Name: "r", When: `body.l.size() == 2 && body.l[1].a == 2.0`, Action: "retry"}}})
	if got := e.Read(&Response{Status: 400, Body: []byte(`{"l":[1, {"a": 2}], "m": [1 2]}`), Now: now}); got.Rule != "t/r" {
		t.Errorf("well-formed part: %+v", got)
	}
}

// TestJSONEquality: comparing body values follows CEL's equality (numbers
// across types, maps by keys) without decoding the document.
func TestJSONEquality(t *testing.T) {
	body := `{"a": 1, "l": [1, 2.0, "x"], "m": [1,2,"x"], "o": {"k": [true, null]}, "p": {"k": [true, null]}, "q": {"k": [false]}}`
	for when, want := range map[string]bool{
		`body.a == 1`:                    true,
		`body.l == [1, 2, "x"]`:          true,
		`body.l == body.m`:               true,
		`body.l == [1, 2]`:               false,
		`body.o == body.p`:               true,
		`body.o == body.q`:               false,
		`body.o == {"k": [true, null]}`:  true,
		`{"k": [true, null]} == body.o`:  true,
		`body.o != {"k": [true]}`:        true,
		`2.0 in body.l && "x" in body.l`: true,
		`3 in body.l`:                    false,
		`body == body`:                   true,
		`body.l == body.o`:               false,
	} {
		e, errs := Compile(EntrySpec{Name: "t", Rules: []RuleSpec{{Name: "r", When: when, Action: "retry"}}})
		if errs != nil {
			t.Fatal(when, errs)
		}
		got, tr := e.Explain(&Response{Status: 400, Body: []byte(body), Now: now})
		if (got.Rule != "") != want || (len(tr.Rules) == 1 && tr.Rules[0].Err != "") {
			t.Errorf("%s: %+v, want %v", when, tr.Rules, want)
		}
	}
}
