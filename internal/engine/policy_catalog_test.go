package engine_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/providers"
)

// catalogWith returns the built-in catalog with one more entry, "corp",
// and retry-after extended to read X-Wait-Ms first.
func catalogWith(t *testing.T) *providers.Catalog {
	t.Helper()
	corp, errs := providers.Compile(providers.EntrySpec{Name: "corp", Hints: []providers.HintSpec{{Header: "X-Corp-Wait", Format: "seconds"}}})
	if errs != nil {
		t.Fatal(errs)
	}
	ra, errs := providers.Compile(providers.EntrySpec{Name: "retry-after", Hints: []providers.HintSpec{{Header: "X-Wait-Ms", Format: "milliseconds"}, {Header: "Retry-After"}}})
	if errs != nil {
		t.Fatal(errs)
	}
	return providers.Builtin().With(corp, ra)
}

// TestPolicyCatalog: a policy resolves names through its own catalog, in
// Validate and in ReaderFor; without one, through the built-in catalog.
func TestPolicyCatalog(t *testing.T) {
	p := engine.DefaultPolicy()
	p.Provider = "corp"
	err := p.Validate()
	if err == nil || !strings.Contains(err.Error(), `unknown provider "corp"`) {
		t.Fatalf("corp without a catalog: %v", err)
	}
	p.Catalog = catalogWith(t)
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	r := &providers.Response{Status: 503, Header: http.Header{"X-Corp-Wait": {"7"}, "X-Wait-Ms": {"250"}}}
	if got := p.Reader().Read(r); got.Hint.Delay != 7*time.Second {
		t.Errorf("own reader: %+v", got)
	}
	for _, name := range []string{"", "retry-after", "no-such-provider"} {
		if got := p.ReaderFor(name).Read(r); got.Hint.Delay != 250*time.Millisecond {
			t.Errorf("ReaderFor(%q) does not use the catalog's retry-after: %+v", name, got)
		}
	}
	if got := p.ReaderFor("github").Name(); got != "github" {
		t.Errorf("ReaderFor(github) = %s", got)
	}
	p.Provider = "nope"
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "corp") {
		t.Errorf("unknown name: %v, want the catalog's names listed", err)
	}
}

// TestReaderForOwnProviderAllocs: the reader of the policy's own provider
// comes without a lookup or an allocation, with custom readers too.
func TestReaderForOwnProviderAllocs(t *testing.T) {
	p := engine.DefaultPolicy()
	p.Catalog = catalogWith(t)
	p.Provider = "corp"
	custom, err := providers.NewCustomReader("X-Other", providers.FormatSeconds)
	if err != nil {
		t.Fatal(err)
	}
	p.CustomBefore = []providers.HintReader{custom}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _ = p.ReaderFor("corp") }); n != 0 {
		t.Errorf("ReaderFor(own provider): %v allocs", n)
	}
	p.CustomBefore = nil
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _ = p.ReaderFor("github") }); n != 0 {
		t.Errorf("ReaderFor(another provider) without custom readers: %v allocs", n)
	}
}

// TestNegativeExpressionDelayIsBackoff (issue 17 defect 6): a rule's delay
// expression that yields a negative delay is an invalid hint, as the same
// field read without an expression is: the retry falls back to backoff,
// never a zero-second REASON_SERVER_HINT.
func TestNegativeExpressionDelayIsBackoff(t *testing.T) {
	rule := func(name string, d providers.DelaySpec) providers.RuleSpec {
		return providers.RuleSpec{Name: name, Statuses: []int{400}, When: `body.error == "slow_down"`, Action: "retry", Delay: &d}
	}
	for _, c := range []struct {
		name  string
		delay providers.DelaySpec
	}{
		{"expr", providers.DelaySpec{Expr: "double(body.wait_ms) / 1000.0"}},
		{"field", providers.DelaySpec{Body: "wait_ms", Unit: "ms"}},
	} {
		e, errs := providers.Compile(providers.EntrySpec{Name: "corp", Rules: []providers.RuleSpec{rule("slow_down", c.delay)}})
		if errs != nil {
			t.Fatal(errs)
		}
		p := engine.DefaultPolicy()
		p.Catalog = providers.Builtin().With(e)
		p.Provider = "corp"
		p.Backoff.Jitter = engine.JitterNone
		if err := p.Validate(); err != nil {
			t.Fatal(err)
		}
		r := &providers.Response{Status: 400, Header: http.Header{}, Body: []byte(`{"error":"slow_down","wait_ms":-5000}`)}
		d := p.Decide(&engine.Input{Method: "GET", Attempt: 1, Response: r}, nil)
		if d.Action != engine.ActionRetry || d.Reason != engine.ReasonBackoff || d.Delay != p.Backoff.Ceiling(1) || d.HintSource != "" || d.Rule != "corp/slow_down" {
			t.Errorf("%s: %+v, want a retry with backoff (%v) by corp/slow_down", c.name, d, p.Backoff.Ceiling(1))
		}
	}
}
