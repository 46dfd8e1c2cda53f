package providers

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestCompileErrorsHavePaths(t *testing.T) {
	spec := EntrySpec{
		Name:          "Bad Name",
		Hosts:         []string{"ok.example", "not a host"},
		RetryStatuses: []int{529, 42},
		Hints: []HintSpec{
			{Header: "Retry-After", Format: "fortnights"},
			{Header: "X Bad"},
			{Header: "A", Body: "b"},
			{Body: "not..a.path"},
			{Longest: []HintSpec{{Longest: []HintSpec{{Header: "A"}}}}},
			{Header: "X", Format: "json_seconds"},
		},
		ShouldRetry: []string{"ok", "bad header"},
		Quotas: []QuotaSpec{
			{},
			{Remaining: "R", Reset: "T", Format: "nope"},
			{RemainingPrefix: "x-", ResetIn: 0},
			{Header: "RateLimit", Format: "seconds"},
		},
		Scope: &ScopeSpec{},
		Rules: []RuleSpec{
			{Name: "ok", When: "status == 429", Action: "retry"},
			{Name: "ok", When: "true", Action: "retry"},
			{Name: "Bad", When: "true", Action: "maybe"},
			{Name: "syntax", When: "status ==\n  429 &&", Action: "retry"},
			{Name: "undeclared", When: "stauts == 429", Action: "retry"},
			{Name: "not_bool", When: "status + 1", Action: "retry"},
			{Name: "no_reason", When: "true", Action: "do_not_retry"},
			{Name: "dnr_delay", When: "true", Action: "do_not_retry", Reason: "x", Delay: &DelaySpec{Expr: "1"}},
			{Name: "two_delays", When: "true", Action: "retry", Delay: &DelaySpec{Expr: "1", Header: "X"}},
			{Name: "bad_delay_type", When: "true", Action: "retry", Delay: &DelaySpec{Expr: `"soon"`}},
			{Name: "bad_unit", When: "true", Action: "retry", Delay: &DelaySpec{Body: "a.b", Unit: "h"}},
			{Name: "bad_status", Statuses: []int{700}, When: "true", Action: "retry"},
			{Name: "empty_contains", BodyContains: []string{""}, When: "true", Action: "retry"},
		},
	}
	e, errs := Compile(spec)
	if e != nil {
		t.Fatal("a bad spec compiled")
	}
	got := map[string]*SpecError{}
	for _, se := range errs {
		got[se.Path] = se
	}
	for _, path := range []string{
		"name", "hosts[1]", "retry_statuses[1]", "hints[0].format", "hints[1].header", "hints[2]", "hints[3].body",
		"hints[4].longest[0].longest", "hints[5].format", "should_retry[1]", "quotas[0]", "quotas[1].format",
		"quotas[2].reset_in", "quotas[3].format", "scope", "rules[1].name", "rules[2].name", "rules[2].action",
		"rules[3].when", "rules[4].when", "rules[5].when", "rules[6].reason", "rules[7].delay", "rules[8].delay",
		"rules[9].delay.expr", "rules[10].delay.unit", "rules[11].statuses[0]", "rules[12].body_contains[0]",
	} {
		if got[path] == nil {
			t.Errorf("no error at %s", path)
		}
	}
	if len(got) != 28 {
		for _, se := range errs {
			t.Log(se)
		}
		t.Errorf("%d distinct error paths, want 28", len(got))
	}
	// CEL errors carry the position inside the expression (1-based).
	if se := got["rules[3].when"]; se == nil || se.Line != 2 || se.Column < 1 {
		t.Errorf("syntax error position: %+v", se)
	}
	if se := got["rules[4].when"]; se == nil || se.Line != 1 || se.Column != 1 || !strings.Contains(se.Msg, "stauts") {
		t.Errorf("undeclared reference: %+v", se)
	}
	if se := got["rules[5].when"]; se == nil || !strings.Contains(se.Msg, "want bool") {
		t.Errorf("type error: %+v", se)
	}
	if s := got["rules[4].when"].Error(); !strings.HasPrefix(s, "rules[4].when:1:1: ") {
		t.Errorf("Error() = %q", s)
	}
	if s := got["name"].Error(); !strings.HasPrefix(s, "name: ") {
		t.Errorf("Error() = %q", s)
	}
}

func TestLoadCatalogErrors(t *testing.T) {
	_, err := LoadCatalog([]byte("version: x\nproviders:\n  - name: a\n    hintz: []\n"))
	if err == nil || !strings.Contains(err.Error(), "line 4") || !strings.Contains(err.Error(), "hintz") {
		t.Errorf("unknown field: %v", err)
	}
	_, err = LoadCatalog([]byte(`
providers:
  - name: a
    hosts: [api.example.com]
  - name: b
    hosts: [API.example.com.]
  - name: a
  - name: c
    rules:
      - {name: r, when: "status ==", action: retry}
`))
	for _, want := range []string{`providers[1].hosts[0]: host "API.example.com." already belongs to "a"`, `providers[2].name: provider "a" is defined twice`, "providers[3].rules[0].when:1:"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not contain %q", err, want)
		}
	}
}

func TestCatalogWithLayers(t *testing.T) {
	custom, errs := Compile(EntrySpec{Name: "github", Title: "GitHub Enterprise", Hints: []HintSpec{{Header: "X-Wait", Format: "seconds"}}})
	if errs != nil {
		t.Fatal(errs)
	}
	extra, errs := Compile(EntrySpec{Name: "acme", Hosts: []string{"api.acme.example"}})
	if errs != nil {
		t.Fatal(errs)
	}
	base := Builtin()
	c := base.With(custom, extra)
	if e, _ := c.Lookup("github"); e != custom {
		t.Error("a layered entry does not replace the built-in one")
	}
	if e, _ := base.Lookup("github"); e == custom {
		t.Error("With modified the base catalog")
	}
	if _, ok := c.Lookup("acme"); !ok || len(c.Names()) != len(base.Names())+1 || len(c.Entries()) != len(c.Names()) {
		t.Errorf("names %v", c.Names())
	}
	if m := c.hostTable(); m.exact["api.acme.example"] != "acme" || m.exact["api.github.com"] != "" {
		t.Errorf("layered hosts: %+v", m.exact)
	}
	hm, err := c.HostMap(map[string]string{"ghe.acme.example": "github"})
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]string{"API.acme.example": "acme", "ghe.acme.example": "github", "api.github.com": "", "api.openai.com": "openai"} {
		if got, _ := hm.ProviderFor(host); got != want {
			t.Errorf("ProviderFor(%q) = %q, want %q", host, got, want)
		}
	}
	if _, err := c.HostMap(map[string]string{"x.example": "nope"}); err == nil {
		t.Error("an override naming no entry was accepted")
	}
}

// TestRuleCostLimitStopsHostileBodies: an expression whose cost grows with
// the body stops at a bound (RuleCostLimit, MaxRuleIterations) and does not
// match.
func TestRuleCostLimitStopsHostileBodies(t *testing.T) {
	e, errs := Compile(EntrySpec{Name: "t", Rules: []RuleSpec{{
		Name: "quadratic", When: "body.l.all(x, body.l.all(y, x == y || true))", Action: "do_not_retry", Reason: "test",
	}}})
	if errs != nil {
		t.Fatal(errs)
	}
	small := `{"l":[1,2,3]}`
	big := `{"l":[` + strings.Repeat("1,", 3000) + `1]}`
	read := func(body string) (Reading, Trace) {
		return e.Explain(&Response{Status: 429, Header: http.Header{}, Body: []byte(body), Now: now})
	}
	if got, _ := read(small); got.Rule != "t/quadratic" {
		t.Fatalf("small body: %+v", got)
	}
	got, tr := read(big)
	if got.Rule != "" || len(tr.Rules) != 1 || !errRuleLimit(errors.New(tr.Rules[0].Err)) {
		t.Fatalf("big body: %+v, %+v", got, tr)
	}
}

func TestRuleDelaySources(t *testing.T) {
	e, errs := Compile(EntrySpec{Name: "t", Rules: []RuleSpec{
		{Name: "hdr", When: `"x-wait" in headers`, Action: "retry", Delay: &DelaySpec{Header: "X-Wait", Format: "milliseconds"}},
		{Name: "field", When: `has(body.wait_ms)`, Action: "retry", Delay: &DelaySpec{Body: "wait_ms", Unit: "ms"}},
		{Name: "nested", When: `has(body.a)`, Action: "retry", Delay: &DelaySpec{Body: "a.b"}},
		{Name: "dur", When: `method == "PUT"`, Action: "retry", Delay: &DelaySpec{Expr: `duration("1m30s")`}},
		{Name: "neg", When: `status == 418`, Action: "retry", Delay: &DelaySpec{Expr: `-3`}},
		{Name: "neg_field", When: `status == 409 && has(body.wait)`, Action: "retry", Delay: &DelaySpec{Expr: `double(body.wait) / 1000.0`}},
		{Name: "neg_dur", When: `status == 410`, Action: "retry", Delay: &DelaySpec{Expr: `duration("-5s")`}},
		{Name: "nan", When: `status == 411`, Action: "retry", Delay: &DelaySpec{Expr: `0.0 / 0.0`}},
		{Name: "huge", When: `status == 412`, Action: "retry", Delay: &DelaySpec{Expr: `1e300`}},
		{Name: "zero", When: `status == 413`, Action: "retry", Delay: &DelaySpec{Expr: `0`}},
	}})
	if errs != nil {
		t.Fatal(errs)
	}
	cases := []struct {
		status  int
		method  string
		headers []hdr
		body    string
		rule    string
		hint    *Hint
	}{
		{429, "", []hdr{{"X-Wait", "250"}}, "", "t/hdr", &Hint{250 * time.Millisecond, "x-wait"}},
		{429, "", []hdr{{"X-Wait", "soon"}}, "", "t/hdr", nil}, // matched; the delay is invalid: backoff
		{429, "", nil, `{"wait_ms": 1500}`, "t/field", &Hint{1500 * time.Millisecond, "body:wait_ms"}},
		{429, "", nil, `{"wait_ms": "1500"}`, "t/field", nil},
		{429, "", nil, `{"a": {"b": 2.5}}`, "t/nested", &Hint{2500 * time.Millisecond, "body:a.b"}},
		{429, "PUT", nil, "", "t/dur", &Hint{90 * time.Second, "rule:t/dur"}},
		// Issue 17 defect 6: a negative, NaN or overflowing delay from an
		// expression is an invalid hint (backoff), as from a header.
		{418, "", nil, "", "t/neg", nil},
		{409, "", nil, `{"wait": -5000}`, "t/neg_field", nil},
		{410, "", nil, "", "t/neg_dur", nil},
		{411, "", nil, "", "t/nan", nil},
		{412, "", nil, "", "t/huge", nil},
		{413, "", nil, "", "t/zero", &Hint{0, "rule:t/zero"}},
		{429, "GET", nil, "", "", nil},
	}
	for i, c := range cases {
		r := response(c.status, c.headers, c.body)
		r.Method = c.method
		got := e.Read(r)
		if got.Rule != c.rule || got.HasHint != (c.hint != nil) || (c.hint != nil && got.Hint != *c.hint) {
			t.Errorf("case %d: %+v; want rule %q hint %+v", i, got, c.rule, c.hint)
		}
		if c.rule != "" && got.Verdict != VerdictRetry {
			t.Errorf("case %d: verdict %v", i, got.Verdict)
		}
	}
}

// BenchmarkCompileEntry compiles one operator-sized entry (two hints, a
// quota and two CEL rules) in the shared environment: a configuration with
// 1,000 tenants each defining one provider compiles 1,000 of these.
func BenchmarkCompileEntry(b *testing.B) {
	if _, err := ruleEnv(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		spec := EntrySpec{
			Name:   fmt.Sprintf("tenant-%d", i),
			Hosts:  []string{fmt.Sprintf("api%d.example.com", i)},
			Hints:  []HintSpec{{Header: "Retry-After"}, {Header: "X-Wait-Ms", Format: "milliseconds"}},
			Quotas: []QuotaSpec{{Remaining: "X-Left", Reset: "X-Reset", Format: "unix_seconds"}},
			Rules: []RuleSpec{
				{Name: "billing", Statuses: []int{402, 429}, When: `body.error.code == "billing"`, Action: "do_not_retry", Reason: "billing"},
				{Name: "busy", Statuses: []int{400}, When: `"x-busy" in headers && headers["x-busy"][0] == "1"`, Action: "retry", Delay: &DelaySpec{Expr: "5 * attempt"}},
			},
		}
		if _, errs := Compile(spec); errs != nil {
			b.Fatal(errs)
		}
	}
}

// TestCompilerSharesPrograms: a Compiler compiles an expression text once
// for every entry that repeats it, and gives each entry its origin.
func TestCompilerSharesPrograms(t *testing.T) {
	var c Compiler
	rule := RuleSpec{Name: "slow_down", Statuses: []int{400}, When: `body.error == "slow_down"`, Action: "retry", Delay: &DelaySpec{Expr: "double(body.wait_ms) / 1000.0"}}
	a, errs := c.Compile(EntrySpec{Name: "a", Rules: []RuleSpec{rule}}, "f.yaml:3")
	if errs != nil {
		t.Fatal(errs)
	}
	b, errs := c.Compile(EntrySpec{Name: "b", Rules: []RuleSpec{rule}}, "f.yaml:9, tenant x")
	if errs != nil {
		t.Fatal(errs)
	}
	if a.rules[0].when != b.rules[0].when || a.rules[0].delay.expr != b.rules[0].delay.expr {
		t.Error("the same expressions were compiled twice")
	}
	if a.rules[0].when == a.rules[0].delay.expr {
		t.Error("a condition and a delay share a program")
	}
	if a.Origin() != "f.yaml:3" || b.Origin() != "f.yaml:9, tenant x" {
		t.Errorf("origins %q %q", a.Origin(), b.Origin())
	}
	if e, _ := Builtin().Lookup("aws"); e.Origin() != "" {
		t.Errorf("a built-in entry has origin %q", e.Origin())
	}
	// Each entry still reports under its own name.
	r := &Response{Status: 400, Body: []byte(`{"error":"slow_down","wait_ms":1500}`)}
	if got := b.Read(r); got.Rule != "b/slow_down" || got.Hint.Delay != 1500*time.Millisecond || got.Hint.Source != "rule:b/slow_down" {
		t.Errorf("b reads %+v", got)
	}
	// A failed compilation is remembered too, and reported for each entry.
	bad := RuleSpec{Name: "r", When: "status ==", Action: "retry"}
	for _, name := range []string{"c", "d"} {
		if _, errs := c.Compile(EntrySpec{Name: name, Rules: []RuleSpec{bad}}, ""); len(errs) != 1 || errs[0].Path != "rules[0].when" || errs[0].Line != 1 {
			t.Errorf("%s: %v", name, errs)
		}
	}
}

// TestCatalogWithHostPrecedence: a host listed by an entry of an upper
// layer maps to it, even when an entry below lists it too.
func TestCatalogWithHostPrecedence(t *testing.T) {
	mine, errs := Compile(EntrySpec{Name: "corp-github", Hosts: []string{"api.github.com"}})
	if errs != nil {
		t.Fatal(errs)
	}
	c := Builtin().With(mine)
	hm, err := c.HostMap(nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := hm.ProviderFor("api.github.com"); got != "corp-github" {
		t.Errorf("api.github.com -> %q", got)
	}
	if !c.Has("github") || !c.Has("corp-github") || c.Len() != Builtin().Len()+1 || Builtin().Has("corp-github") {
		t.Error("Has or Len")
	}
	if Builtin().With() != Builtin() {
		t.Error("With() copies")
	}
}

// TestNotExecutedMarks: not_executed names should_retry headers (any case)
// and marks retry rules only; the Reading says which signal spoke.
func TestNotExecutedMarks(t *testing.T) {
	_, errs := Compile(EntrySpec{
		Name: "t", ShouldRetry: []string{"X-A"}, NotExecuted: []string{"x-a", "X-B"},
		Rules: []RuleSpec{{Name: "r", When: "true", Action: "do_not_retry", Reason: "x", NotExecuted: true}},
	})
	paths := map[string]bool{}
	for _, se := range errs {
		paths[se.Path] = true
	}
	if len(errs) != 2 || !paths["not_executed[1]"] || !paths["rules[0].not_executed"] {
		t.Fatalf("errors %v, want not_executed[1] and rules[0].not_executed", errs)
	}
	e, errs := Compile(EntrySpec{
		Name: "t", ShouldRetry: []string{"X-A", "X-B"}, NotExecuted: []string{"x-a"},
		Rules: []RuleSpec{
			{Name: "marked", Statuses: []int{429}, When: "true", Action: "retry", NotExecuted: true},
			{Name: "plain", Statuses: []int{503}, When: "true", Action: "retry"},
			{Name: "stop", Statuses: []int{400}, When: "true", Action: "do_not_retry", Reason: "x"},
		},
	})
	if errs != nil {
		t.Fatal(errs)
	}
	for _, c := range []struct {
		status int
		h      []hdr
		want   bool
	}{
		{409, []hdr{{"X-A", "true"}}, true},
		{409, []hdr{{"X-A", "false"}}, false},
		{409, []hdr{{"X-B", "true"}}, false},
		{429, nil, true},
		{503, nil, false},
		{503, []hdr{{"X-A", "true"}}, true}, // the header said so; the rule does not unsay it
		{400, []hdr{{"X-A", "true"}}, false},
	} {
		if got := e.Read(response(c.status, c.h, "")); got.NotExecuted != c.want {
			t.Errorf("%d %v: %+v, want NotExecuted %v", c.status, c.h, got, c.want)
		}
	}
	lookup := func(name string) *Entry {
		e, ok := Builtin().Lookup(name)
		if !ok {
			t.Fatal(name)
		}
		return e
	}
	for _, name := range []string{"openai", "anthropic"} {
		if got := lookup(name).Read(response(429, []hdr{{"x-should-retry", "true"}}, "")); !got.NotExecuted {
			t.Errorf("%s: x-should-retry: true is not marked not_executed", name)
		}
	}
	if got := lookup("stripe").Read(response(409, []hdr{{"Stripe-Should-Retry", "true"}}, "")); got.NotExecuted {
		t.Error("stripe's Stripe-Should-Retry is marked not_executed; Stripe does not document it so")
	}
}

// TestFormatPlaces compiles every value format in each place a spec can
// name one, and checks which places accept it: the formats of one header
// value in hint headers, rule delay headers and quota resets; the IETF
// RateLimit field in hint headers and structured quota headers; the body
// formats in body hints only. A refusal names the format and the place.
func TestFormatPlaces(t *testing.T) {
	body := map[string]bool{"json_seconds": true, "google_retry_info": true}
	field := map[string]bool{"ietf_ratelimit": true}
	places := []struct {
		name, what string
		accepts    func(format string) bool
		spec       func(format string) EntrySpec
	}{
		{
			"hint header", "a hint header", func(f string) bool { return !body[f] },
			func(f string) EntrySpec { return EntrySpec{Hints: []HintSpec{{Header: "X-Wait", Format: f}}} },
		},
		{
			"hint body", "a hint in the body", func(f string) bool { return body[f] },
			func(f string) EntrySpec {
				h := HintSpec{Body: "error.wait", Format: f}
				if f == "google_retry_info" {
					h.Body = ""
				}
				return EntrySpec{Hints: []HintSpec{h}}
			},
		},
		{
			"quota reset", "a quota's reset header", func(f string) bool { return !body[f] && !field[f] },
			func(f string) EntrySpec {
				return EntrySpec{Quotas: []QuotaSpec{{Remaining: "X-Left", Reset: "X-Reset", Format: f}}}
			},
		},
		{
			"structured quota", "a structured quota header", func(f string) bool { return field[f] },
			func(f string) EntrySpec { return EntrySpec{Quotas: []QuotaSpec{{Header: "RateLimit", Format: f}}} },
		},
		{
			"delay header", "a rule's delay header", func(f string) bool { return !body[f] && !field[f] },
			func(f string) EntrySpec {
				return EntrySpec{Rules: []RuleSpec{{Name: "r", When: "true", Action: "retry", Delay: &DelaySpec{Header: "X-Wait", Format: f}}}}
			},
		},
	}
	formats := Formats()
	if len(formats) != 13 {
		t.Fatalf("%d formats, want 13", len(formats))
	}
	for _, f := range formats {
		if want := map[bool]string{true: "body", false: "header"}[body[f.Name]]; f.Where != want {
			t.Errorf("format %s: docs say it reads %q, want %q", f.Name, f.Where, want)
		}
		for _, p := range places {
			spec := p.spec(f.Name)
			spec.Name = "p"
			e, errs := Compile(spec)
			if p.accepts(f.Name) {
				if len(errs) != 0 {
					t.Errorf("%s in a %s: refused: %v", f.Name, p.name, errs)
					continue
				}
				// Every accepted place has a reader: an error response with
				// nothing it reads gives an empty Reading (no reader is nil).
				got := e.Read(&Response{Status: 429, Header: http.Header{}, Body: []byte(`{}`), Now: time.Unix(1e9, 0)})
				if got.HasHint || got.HasQuota {
					t.Errorf("%s in a %s: read %+v from a response that says nothing", f.Name, p.name, got)
				}
				continue
			}
			if f.Name == "google_retry_info" && p.name == "hint header" {
				// Format google_retry_info is a body hint of its own: with a
				// header as well, the hint names two kinds.
				if len(errs) != 1 || errs[0].Path != "hints[0]" || !strings.Contains(errs[0].Msg, "needs exactly one of header, body") {
					t.Errorf("%s in a %s: got %v, want one error: two kinds", f.Name, p.name, errs)
				}
				continue
			}
			if len(errs) != 1 || !strings.HasSuffix(errs[0].Path, ".format") ||
				!strings.Contains(errs[0].Msg, fmt.Sprintf("format %q cannot be used for %s", f.Name, p.what)) {
				t.Errorf("%s in a %s: got %v, want one error at .format naming the format and %s", f.Name, p.name, errs, p.what)
			}
		}
	}
	_, errs := Compile(EntrySpec{Name: "p", Hints: []HintSpec{{Header: "X-Wait", Format: "fortnights"}}})
	if len(errs) != 1 || !strings.Contains(errs[0].Msg, `unknown format "fortnights"`) {
		t.Errorf("unknown format: got %v", errs)
	}
}
