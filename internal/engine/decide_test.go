package engine_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/providers"
)

var now = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func resp(status int, kv ...string) *providers.Response {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return &providers.Response{Status: status, Header: h, Now: now}
}

func mustPolicy(t testing.TB, mut func(*engine.Policy)) *engine.Policy {
	t.Helper()
	p := engine.DefaultPolicy()
	if mut != nil {
		mut(&p)
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	return &p
}

func TestDecideRules(t *testing.T) {
	tests := []struct {
		name      string
		mut       func(*engine.Policy)
		in        engine.Input
		action    engine.Action
		reason    engine.Reason
		delay     time.Duration // checked when reason is ServerHint or jitter none
		checkHint time.Duration
	}{
		{name: "2xx success", in: engine.Input{Response: resp(204)}, action: engine.ActionDoNotRetry, reason: engine.ReasonSuccess},
		{name: "3xx success", in: engine.Input{Response: resp(304)}, action: engine.ActionDoNotRetry, reason: engine.ReasonSuccess},
		{name: "max_retries 0 never retries", mut: func(p *engine.Policy) { p.MaxRetries = 0 }, in: engine.Input{Attempt: 1, Response: resp(503)}, action: engine.ActionDoNotRetry, reason: engine.ReasonAttemptsExhausted},
		{name: "attempt equal to max_retries still retries", in: engine.Input{Attempt: 3, Response: resp(503, "Retry-After", "1")}, action: engine.ActionRetry, reason: engine.ReasonServerHint, delay: time.Second},
		{name: "attempt 0 counts as 1", in: engine.Input{Attempt: 0, Response: resp(429, "Retry-After", "2")}, action: engine.ActionRetry, reason: engine.ReasonServerHint, delay: 2 * time.Second},
		{name: "unsafe allowed by policy", mut: func(p *engine.Policy) { p.RetryUnsafeMethods = true }, in: engine.Input{Method: "POST", Response: resp(503, "Retry-After", "1")}, action: engine.ActionRetry, reason: engine.ReasonServerHint, delay: time.Second},
		{name: "unknown method is unsafe", in: engine.Input{Method: "PURGE", Response: resp(503)}, action: engine.ActionDoNotRetry, reason: engine.ReasonUnsafeMethod},
		{name: "idempotency key makes POST safe", in: engine.Input{Method: "POST", HasIdempotencyKey: true, Response: resp(429, "Retry-After", "4")}, action: engine.ActionRetry, reason: engine.ReasonServerHint, delay: 4 * time.Second},
		{name: "custom status list", mut: func(p *engine.Policy) { p.RetryableStatuses = engine.NewStatusSet(418) }, in: engine.Input{Response: resp(418, "Retry-After", "1")}, action: engine.ActionRetry, reason: engine.ReasonServerHint, delay: time.Second},
		{name: "custom status list drops 503", mut: func(p *engine.Policy) { p.RetryableStatuses = engine.NewStatusSet(418) }, in: engine.Input{Response: resp(503)}, action: engine.ActionDoNotRetry, reason: engine.ReasonStatusNotRetryable},
		{name: "max_delay override", mut: func(p *engine.Policy) { p.MaxDelay = 5 * time.Second }, in: engine.Input{Response: resp(429, "Retry-After", "6")}, action: engine.ActionDoNotRetry, reason: engine.ReasonHintExceedsMaxDelay, checkHint: 6 * time.Second},
		{name: "anthropic 529 retries", mut: func(p *engine.Policy) { p.Provider = "anthropic" }, in: engine.Input{Response: resp(529, "Retry-After", "3")}, action: engine.ActionRetry, reason: engine.ReasonServerHint, delay: 3 * time.Second},
		{name: "529 not retryable by default", in: engine.Input{Response: resp(529, "Retry-After", "3")}, action: engine.ActionDoNotRetry, reason: engine.ReasonStatusNotRetryable},
		{name: "stripe false forbids 503", mut: func(p *engine.Policy) { p.Provider = "stripe" }, in: engine.Input{Response: resp(503, "Stripe-Should-Retry", "false")}, action: engine.ActionDoNotRetry, reason: engine.ReasonProviderForbidsRetry},
		{name: "stripe true allows 409", mut: func(p *engine.Policy) { p.Provider = "stripe"; p.Backoff.Jitter = engine.JitterNone }, in: engine.Input{Response: resp(409, "Stripe-Should-Retry", "true")}, action: engine.ActionRetry, reason: engine.ReasonBackoff, delay: time.Second},
		{name: "provider none ignores hints", mut: func(p *engine.Policy) { p.Provider = "none"; p.Backoff.Jitter = engine.JitterNone }, in: engine.Input{Response: resp(429, "Retry-After", "50")}, action: engine.ActionRetry, reason: engine.ReasonBackoff, delay: time.Second},
		{name: "transport retries off", mut: func(p *engine.Policy) { p.RetryTransportErrors = false }, in: engine.Input{Transport: engine.TransportConnectionReset}, action: engine.ActionDoNotRetry, reason: engine.ReasonTransportRetryDisabled},
		{name: "transport retries off keeps response retries", mut: func(p *engine.Policy) { p.RetryTransportErrors = false }, in: engine.Input{Response: resp(503, "Retry-After", "1")}, action: engine.ActionRetry, reason: engine.ReasonServerHint, delay: time.Second},
		{name: "canceled", in: engine.Input{Transport: engine.TransportCanceled}, action: engine.ActionDoNotRetry, reason: engine.ReasonCanceled},
		{name: "eof retries", mut: func(p *engine.Policy) { p.Backoff.Jitter = engine.JitterNone }, in: engine.Input{Transport: engine.TransportEOF, Attempt: 2}, action: engine.ActionRetry, reason: engine.ReasonBackoff, delay: 2 * time.Second},
		{name: "dns temporary retries", in: engine.Input{Transport: engine.TransportDNSTemporary}, action: engine.ActionRetry, reason: engine.ReasonBackoff},
		{name: "invalid url not retried", in: engine.Input{Transport: engine.TransportInvalidURL}, action: engine.ActionDoNotRetry, reason: engine.ReasonTransportErrorNotRetryable},
		{name: "destination refused not retried", in: engine.Input{Transport: engine.TransportDestinationRefused}, action: engine.ActionDoNotRetry, reason: engine.ReasonTransportErrorNotRetryable},
		{name: "transport exhausted", in: engine.Input{Transport: engine.TransportTimeout, Attempt: 4}, action: engine.ActionDoNotRetry, reason: engine.ReasonAttemptsExhausted},
		{name: "deadline too short for hint", in: engine.Input{Response: resp(429, "Retry-After", "10"), Deadline: now.Add(5 * time.Second), Now: now}, action: engine.ActionDoNotRetry, reason: engine.ReasonDeadlineTooShort, checkHint: 10 * time.Second},
		{name: "deadline long enough", in: engine.Input{Response: resp(429, "Retry-After", "10"), Deadline: now.Add(11 * time.Second), Now: now}, action: engine.ActionRetry, reason: engine.ReasonServerHint, delay: 10 * time.Second},
		{name: "deadline exactly at the hinted time gives up", in: engine.Input{Response: resp(429, "Retry-After", "10"), Deadline: now.Add(10 * time.Second), Now: now}, action: engine.ActionDoNotRetry, reason: engine.ReasonDeadlineTooShort, checkHint: 10 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustPolicy(t, tt.mut)
			in := tt.in
			if in.Method == "" {
				in.Method = http.MethodGet
			}
			d := p.Decide(&in, nil)
			if d.Action != tt.action || d.Reason != tt.reason {
				t.Fatalf("got %s/%s, want %s/%s", d.Action, d.Reason, tt.action, tt.reason)
			}
			if tt.delay != 0 && d.Delay != tt.delay {
				t.Errorf("delay = %v, want %v", d.Delay, tt.delay)
			}
			if d.Action == engine.ActionDoNotRetry && d.Delay != 0 {
				t.Errorf("do-not-retry decision carries a delay %v", d.Delay)
			}
			if tt.checkHint != 0 && (!d.HasHint || d.Hint != tt.checkHint) {
				t.Errorf("hint = %v (present %v), want %v", d.Hint, d.HasHint, tt.checkHint)
			}
		})
	}
}

// TestHintNeverShortenedByJitter: with a hint, every draw gives the hint exactly.
func TestHintNeverShortenedByJitter(t *testing.T) {
	p := mustPolicy(t, nil)
	for _, rnd := range []engine.Rand{minRand{}, maxRand{}, engine.GlobalRand} {
		in := engine.Input{Method: "GET", Attempt: 2, Response: resp(503, "Retry-After", "7")}
		if d := p.Decide(&in, rnd); d.Delay != 7*time.Second {
			t.Fatalf("rand %T: delay %v, want exactly 7s", rnd, d.Delay)
		}
	}
}

func TestBackoffCeilingAndModes(t *testing.T) {
	b := engine.Backoff{Base: time.Second, Factor: 2, Cap: 30 * time.Second, Jitter: engine.JitterFull}
	want := []time.Duration{1, 2, 4, 8, 16, 30, 30}
	for i, w := range want {
		if got := b.Ceiling(i + 1); got != w*time.Second {
			t.Errorf("Ceiling(%d) = %v, want %v", i+1, got, w*time.Second)
		}
	}
	if got := b.Ceiling(100000); got != 30*time.Second {
		t.Errorf("huge attempt must cap without overflow, got %v", got)
	}
	if got := b.Delay(3, maxRand{}); got != 4*time.Second {
		t.Errorf("full jitter top = %v, want 4s (inclusive)", got)
	}
	if got := b.Delay(3, minRand{}); got != 0 {
		t.Errorf("full jitter bottom = %v, want 0", got)
	}
	b.Jitter = engine.JitterEqual
	if got := b.Delay(3, minRand{}); got != 2*time.Second {
		t.Errorf("equal jitter bottom = %v, want 2s", got)
	}
	if got := b.Delay(3, maxRand{}); got != 4*time.Second {
		t.Errorf("equal jitter top = %v, want 4s", got)
	}
	b.Jitter = engine.JitterNone
	if got := b.Delay(2, engine.GlobalRand); got != 2*time.Second {
		t.Errorf("no jitter = %v, want 2s", got)
	}
	b = engine.Backoff{Base: 100 * time.Millisecond, Factor: 3, Cap: time.Second, Jitter: engine.JitterNone}
	if got := b.Delay(3, nil); got != 900*time.Millisecond {
		t.Errorf("base 100ms factor 3 attempt 3 = %v, want 900ms", got)
	}
}

func TestFullJitterIsSpread(t *testing.T) {
	b := engine.Backoff{Base: time.Second, Factor: 2, Cap: 30 * time.Second}
	lo, hi := 0, 0
	for range 2000 {
		d := b.Delay(1, nil)
		if d < 0 || d > time.Second {
			t.Fatalf("delay %v outside [0, 1s]", d)
		}
		if d < 250*time.Millisecond {
			lo++
		}
		if d > 750*time.Millisecond {
			hi++
		}
	}
	// Uniform: each quarter holds ~500 of 2000; 300 is > 8 sigma away.
	if lo < 300 || hi < 300 {
		t.Fatalf("draws not spread over the range: %d low, %d high of 2000", lo, hi)
	}
}

func TestPolicyValidate(t *testing.T) {
	bad := []struct {
		name  string
		mut   func(*engine.Policy)
		field string
	}{
		{"negative retries", func(p *engine.Policy) { p.MaxRetries = -1 }, "max_retries"},
		{"too many retries", func(p *engine.Policy) { p.MaxRetries = 101 }, "max_retries"},
		{"zero max delay", func(p *engine.Policy) { p.MaxDelay = 0 }, "max_delay"},
		{"zero base", func(p *engine.Policy) { p.Backoff.Base = 0 }, "backoff.base"},
		{"factor below one", func(p *engine.Policy) { p.Backoff.Factor = 0.5 }, "backoff.factor"},
		{"cap below base", func(p *engine.Policy) { p.Backoff.Cap = time.Millisecond }, "backoff.cap"},
		{"status out of range", func(p *engine.Policy) { p.RetryableStatuses.Add(99) }, "retryable_statuses"},
		{"bad idempotency header", func(p *engine.Policy) { p.IdempotencyHeader = "Idem Key" }, "idempotency_header"},
		{"bad attempt header", func(p *engine.Policy) { p.AttemptHeader = "X:Attempt" }, "attempt_header"},
		{"unknown provider", func(p *engine.Policy) { p.Provider = "myspace" }, "provider"},
		{"zero request body", func(p *engine.Policy) { p.MaxRequestBody = 0 }, "max_request_body"},
		{"zero attempt timeout", func(p *engine.Policy) { p.AttemptTimeout = 0 }, "attempt_timeout"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			p := engine.DefaultPolicy()
			tt.mut(&p)
			err := p.Validate()
			if err == nil {
				t.Fatal("want an error")
			}
			if got := err.Error(); len(got) < len(tt.field) || got[:len(tt.field)] != tt.field {
				t.Fatalf("error %q does not name field %q first", got, tt.field)
			}
		})
	}
	p := engine.DefaultPolicy()
	p.IdempotencyHeader = "x-idem-key"
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	if p.IdempotencyHeader != "X-Idem-Key" {
		t.Fatalf("header not canonicalised: %q", p.IdempotencyHeader)
	}
}

func TestTransportErrorNames(t *testing.T) {
	for _, name := range []string{"connection_refused", "connection_reset", "eof", "timeout", "dns_temporary", "dns_not_found", "tls_certificate", "canceled"} {
		k, ok := engine.ParseTransportError(name)
		if !ok || k.String() != name {
			t.Errorf("%s: round trip gave %v %q", name, ok, k.String())
		}
	}
	if _, ok := engine.ParseTransportError("gremlins"); ok {
		t.Error("unknown name accepted")
	}
}

// TestNotExecutedSignals (issue 18 item 5; design: "Provider signals that a
// request was not executed"): a verdict header or a rule that the entry
// marks not_executed makes a retry safe for any method; an unmarked
// verdict overrides only the status rule, and Idempotency-Key keeps its
// meaning.
func TestNotExecutedSignals(t *testing.T) {
	corp, errs := providers.Compile(providers.EntrySpec{
		Name:        "corp",
		ShouldRetry: []string{"X-Not-Run", "X-Retryable"},
		NotExecuted: []string{"x-not-run"},
		Rules: []providers.RuleSpec{
			{Name: "refused", Statuses: []int{429}, When: "true", Action: "retry", NotExecuted: true},
			{Name: "busy", Statuses: []int{503}, When: `"x-busy" in headers`, Action: "retry"},
		},
	})
	if errs != nil {
		t.Fatal(errs)
	}
	cat := providers.Builtin().With(corp)
	shopifyBody := []byte(`{"errors":[{"message":"Throttled","extensions":{"code":"THROTTLED"}}],` +
		`"extensions":{"cost":{"requestedQueryCost":1000,"actualQueryCost":null,"throttleStatus":{"maximumAvailable":1000.0,"currentlyAvailable":624,"restoreRate":50.0}}}}`)
	withBody := func(r *providers.Response, b []byte) *providers.Response { r.Body = b; return r }
	for _, c := range []struct {
		name, provider, method string
		key                    bool
		r                      *providers.Response
		action                 engine.Action
		reason                 engine.Reason
		delay                  time.Duration // exact for a hint; -1 for backoff
	}{
		{
			"openai POST 429 x-should-retry true", "openai", "POST", false,
			resp(429, "x-should-retry", "true", "retry-after-ms", "1200"), engine.ActionRetry, engine.ReasonServerHint, 1200 * time.Millisecond,
		},
		{
			"openai POST 429 without it", "openai", "POST", false,
			resp(429, "retry-after-ms", "1200"), engine.ActionDoNotRetry, engine.ReasonUnsafeMethod, 0,
		},
		{
			"openai POST 500 x-should-retry false", "openai", "POST", false,
			resp(500, "x-should-retry", "false"), engine.ActionDoNotRetry, engine.ReasonProviderForbidsRetry, 0,
		},
		{
			"anthropic POST 529 x-should-retry true", "anthropic", "POST", false,
			resp(529, "x-should-retry", "true"), engine.ActionRetry, engine.ReasonBackoff, -1,
		},
		{
			"shopify POST THROTTLED", "shopify", "POST", false,
			withBody(resp(200, "Content-Type", "application/json"), shopifyBody), engine.ActionRetry, engine.ReasonServerHint, 7520 * time.Millisecond,
		},
		{
			"stripe POST Stripe-Should-Retry true (unmarked)", "stripe", "POST", false,
			resp(409, "Stripe-Should-Retry", "true"), engine.ActionDoNotRetry, engine.ReasonUnsafeMethod, 0,
		},
		{
			"stripe POST Stripe-Should-Retry true with a key", "stripe", "POST", true,
			resp(409, "Stripe-Should-Retry", "true"), engine.ActionRetry, engine.ReasonBackoff, -1,
		},
		{
			"operator marked header", "corp", "PATCH", false,
			resp(409, "X-Not-Run", "true"), engine.ActionRetry, engine.ReasonBackoff, -1,
		},
		{
			"operator unmarked header", "corp", "PATCH", false,
			resp(409, "X-Retryable", "true"), engine.ActionDoNotRetry, engine.ReasonUnsafeMethod, 0,
		},
		{
			"operator marked rule", "corp", "DELETE", false,
			resp(429), engine.ActionRetry, engine.ReasonBackoff, -1,
		},
		{
			"operator unmarked rule", "corp", "DELETE", false,
			resp(503, "X-Busy", "1"), engine.ActionDoNotRetry, engine.ReasonUnsafeMethod, 0,
		},
		{
			"operator unmarked rule with a key", "corp", "DELETE", true,
			resp(503, "X-Busy", "1"), engine.ActionRetry, engine.ReasonBackoff, -1,
		},
		{
			"marked header, attempts exhausted", "openai", "POST", false,
			resp(429, "x-should-retry", "true"), engine.ActionDoNotRetry, engine.ReasonAttemptsExhausted, 0,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := mustPolicy(t, func(p *engine.Policy) { p.Catalog, p.Provider = cat, c.provider })
			attempt := 1
			if c.reason == engine.ReasonAttemptsExhausted {
				attempt = p.MaxRetries + 1
			}
			d := p.Decide(&engine.Input{Method: c.method, Attempt: attempt, Response: c.r, HasIdempotencyKey: c.key}, minRand{})
			if d.Action != c.action || d.Reason != c.reason || (c.delay >= 0 && d.Delay != c.delay) {
				t.Fatalf("%+v; want %v %v delay %v", d, c.action, c.reason, c.delay)
			}
		})
	}
	// Transport errors are unchanged: no provider spoke.
	p := mustPolicy(t, nil)
	if d := p.Decide(&engine.Input{Method: "POST", Attempt: 1, Transport: engine.TransportConnectionReset}, nil); d.Reason != engine.ReasonUnsafeMethod {
		t.Errorf("transport error on a POST: %+v", d)
	}
}
