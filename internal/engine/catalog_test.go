package engine_test

import (
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/providers"
)

// fixedReader returns one Reading for every response: it stands for a
// catalog entry whose rule has already matched, so the tests below exercise
// only the engine's side of the seam.
type fixedReader struct{ reading providers.Reading }

func (fixedReader) Name() string                                 { return "fixed" }
func (f fixedReader) Read(*providers.Response) providers.Reading { return f.reading }
func (fixedReader) ExtraRetryableStatuses() []int                { return nil }

func TestDecideVerdictRetryOnSuccessStatus(t *testing.T) {
	retryWithHint := providers.Reading{
		Verdict: providers.VerdictRetry, Rule: "shopify/graphql_throttled",
		Hint: providers.Hint{Delay: 1720 * time.Millisecond, Source: "rule:shopify/graphql_throttled"}, HasHint: true,
	}
	retryNoHint := providers.Reading{Verdict: providers.VerdictRetry, Rule: "x/rule"}
	tests := []struct {
		name       string
		mut        func(*engine.Policy)
		reading    providers.Reading
		status     int
		method     string
		attempt    int
		key        bool
		wantAction engine.Action
		wantReason engine.Reason
		wantDelay  time.Duration
		wantSource string
		wantRule   string
	}{
		{name: "200 with a retry rule and hint", reading: retryWithHint, status: 200, wantAction: engine.ActionRetry, wantReason: engine.ReasonServerHint, wantDelay: 1720 * time.Millisecond, wantSource: "rule:shopify/graphql_throttled", wantRule: "shopify/graphql_throttled"},
		{name: "204 with a retry rule backs off", reading: retryNoHint, status: 204, wantAction: engine.ActionRetry, wantReason: engine.ReasonBackoff, wantRule: "x/rule"},
		{name: "302 with a retry rule", reading: retryNoHint, status: 302, wantAction: engine.ActionRetry, wantReason: engine.ReasonBackoff, wantRule: "x/rule"},
		{name: "200 without a verdict is a success", reading: providers.Reading{Rule: "ignored"}, status: 200, wantAction: engine.ActionDoNotRetry, wantReason: engine.ReasonSuccess},
		{name: "200 with do-not-retry is a success", reading: providers.Reading{Verdict: providers.VerdictDoNotRetry, Rule: "x/no"}, status: 200, wantAction: engine.ActionDoNotRetry, wantReason: engine.ReasonSuccess},
		{name: "200 with a hint but no verdict is a success", reading: providers.Reading{Hint: providers.Hint{Delay: time.Second, Source: "retry-after"}, HasHint: true}, status: 200, wantAction: engine.ActionDoNotRetry, wantReason: engine.ReasonSuccess},
		{name: "unsafe method still refused", reading: retryWithHint, status: 200, method: "POST", wantAction: engine.ActionDoNotRetry, wantReason: engine.ReasonUnsafeMethod, wantRule: "shopify/graphql_throttled"},
		{name: "unsafe method with idempotency key", reading: retryWithHint, status: 200, method: "POST", key: true, wantAction: engine.ActionRetry, wantReason: engine.ReasonServerHint, wantDelay: 1720 * time.Millisecond, wantSource: "rule:shopify/graphql_throttled", wantRule: "shopify/graphql_throttled"},
		{name: "unsafe methods allowed by policy", mut: func(p *engine.Policy) { p.RetryUnsafeMethods = true }, reading: retryNoHint, status: 200, method: "POST", wantAction: engine.ActionRetry, wantReason: engine.ReasonBackoff, wantRule: "x/rule"},
		{name: "attempts still count", reading: retryWithHint, status: 200, attempt: 4, wantAction: engine.ActionDoNotRetry, wantReason: engine.ReasonAttemptsExhausted, wantRule: "shopify/graphql_throttled"},
		{
			name: "hint beyond max_delay gives up", status: 200,
			reading:    providers.Reading{Verdict: providers.VerdictRetry, Rule: "r/long", Hint: providers.Hint{Delay: 2 * time.Minute, Source: "rule:r/long"}, HasHint: true},
			wantAction: engine.ActionDoNotRetry, wantReason: engine.ReasonHintExceedsMaxDelay, wantRule: "r/long",
		},
		{
			name: "do-not-retry rule on 429", status: 429,
			reading:    providers.Reading{Verdict: providers.VerdictDoNotRetry, Rule: "openai/insufficient_quota"},
			wantAction: engine.ActionDoNotRetry, wantReason: engine.ReasonProviderForbidsRetry, wantRule: "openai/insufficient_quota",
		},
		{
			name: "do-not-retry rule keeps its reason over a hint", status: 429,
			reading:    providers.Reading{Verdict: providers.VerdictDoNotRetry, Rule: "openai/insufficient_quota", Hint: providers.Hint{Delay: time.Second, Source: "retry-after"}, HasHint: true},
			wantAction: engine.ActionDoNotRetry, wantReason: engine.ReasonProviderForbidsRetry, wantRule: "openai/insufficient_quota",
		},
		{
			name: "retry rule on 400", status: 400,
			reading:    providers.Reading{Verdict: providers.VerdictRetry, Rule: "aws/throttling_error_code"},
			wantAction: engine.ActionRetry, wantReason: engine.ReasonBackoff, wantRule: "aws/throttling_error_code",
		},
		{name: "plain readers leave the rule empty", status: 429, reading: providers.Reading{Hint: providers.Hint{Delay: 5 * time.Second, Source: "retry-after"}, HasHint: true}, wantAction: engine.ActionRetry, wantReason: engine.ReasonServerHint, wantDelay: 5 * time.Second, wantSource: "retry-after"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustPolicy(t, tt.mut)
			in := engine.Input{
				Method: tt.method, Attempt: tt.attempt, HasIdempotencyKey: tt.key,
				Response: resp(tt.status), Reader: fixedReader{tt.reading},
			}
			d := p.Decide(&in, minRand{})
			if d.Action != tt.wantAction || d.Reason != tt.wantReason || d.Rule != tt.wantRule {
				t.Fatalf("got %v %v rule %q; want %v %v rule %q", d.Action, d.Reason, d.Rule, tt.wantAction, tt.wantReason, tt.wantRule)
			}
			if tt.wantAction == engine.ActionRetry && tt.wantReason == engine.ReasonServerHint && (d.Delay != tt.wantDelay || d.HintSource != tt.wantSource) {
				t.Errorf("delay %v from %q; want %v from %q", d.Delay, d.HintSource, tt.wantDelay, tt.wantSource)
			}
			// The same reading handed over by the caller decides the same.
			r := tt.reading
			in.Reading, in.Reader = &r, nil
			if d2 := p.Decide(&in, minRand{}); d2 != d {
				t.Errorf("with Input.Reading: %+v, want %+v", d2, d)
			}
		})
	}
}

// TestDecideCatalogEntries runs real catalog entries through the engine:
// the reader's rule, verdict and delay reach the Decision.
func TestDecideCatalogEntries(t *testing.T) {
	const (
		shopifyThrottled = `{"errors":[{"message":"Throttled","extensions":{"code":"THROTTLED"}}],"extensions":{"cost":{"requestedQueryCost":752,"actualQueryCost":null,"throttleStatus":{"maximumAvailable":1000.0,"currentlyAvailable":666,"restoreRate":50.0}}}}`
		insufficient     = `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`
		secondary        = `{"message":"You have exceeded a secondary rate limit."}`
	)
	tests := []struct {
		provider   string
		status     int
		attempt    int
		kv         []string
		body       string
		wantAction engine.Action
		wantReason engine.Reason
		wantDelay  time.Duration
		wantHint   time.Duration
		wantRule   string
	}{
		{provider: "shopify", status: 200, body: shopifyThrottled, wantAction: engine.ActionRetry, wantReason: engine.ReasonServerHint, wantDelay: 1720 * time.Millisecond, wantHint: 1720 * time.Millisecond, wantRule: "shopify/graphql_throttled"},
		{provider: "openai", status: 429, body: insufficient, wantAction: engine.ActionDoNotRetry, wantReason: engine.ReasonProviderForbidsRetry, wantRule: "openai/insufficient_quota"},
		{provider: "openai", status: 503, kv: []string{"x-should-retry", "false"}, wantAction: engine.ActionDoNotRetry, wantReason: engine.ReasonProviderForbidsRetry},
		{provider: "anthropic", status: 409, kv: []string{"x-should-retry", "true"}, wantAction: engine.ActionRetry, wantReason: engine.ReasonBackoff},
		{provider: "github", status: 403, attempt: 1, body: secondary, wantAction: engine.ActionRetry, wantReason: engine.ReasonServerHint, wantDelay: time.Minute, wantHint: time.Minute, wantRule: "github/secondary_rate_limit"},
		// The second wait (2 min) exceeds the default max_delay (60 s): the
		// broker gives up and reports the hint.
		{provider: "github", status: 403, attempt: 2, body: secondary, wantAction: engine.ActionDoNotRetry, wantReason: engine.ReasonHintExceedsMaxDelay, wantHint: 2 * time.Minute, wantRule: "github/secondary_rate_limit"},
		{provider: "aws", status: 400, kv: []string{"x-amzn-ErrorType", "ThrottlingException"}, wantAction: engine.ActionRetry, wantReason: engine.ReasonBackoff, wantRule: "aws/throttling_error_code"},
		{provider: "aws", status: 400, body: `{"__type":"ValidationException"}`, wantAction: engine.ActionDoNotRetry, wantReason: engine.ReasonStatusNotRetryable},
	}
	for _, tt := range tests {
		t.Run(tt.provider+"/"+tt.wantReason.String(), func(t *testing.T) {
			p := mustPolicy(t, nil)
			r := resp(tt.status, tt.kv...)
			r.Body, r.Attempt = []byte(tt.body), tt.attempt
			in := engine.Input{Method: "GET", Attempt: tt.attempt, Response: r, Reader: p.ReaderFor(tt.provider)}
			d := p.Decide(&in, minRand{})
			if d.Action != tt.wantAction || d.Reason != tt.wantReason || d.Rule != tt.wantRule {
				t.Fatalf("got %v %v rule %q; want %v %v rule %q", d.Action, d.Reason, d.Rule, tt.wantAction, tt.wantReason, tt.wantRule)
			}
			if tt.wantAction == engine.ActionRetry && tt.wantReason == engine.ReasonServerHint && d.Delay != tt.wantDelay {
				t.Errorf("delay = %v, want %v", d.Delay, tt.wantDelay)
			}
			if tt.wantHint != 0 && (!d.HasHint || d.Hint != tt.wantHint) {
				t.Errorf("hint = %v (%v), want %v", d.Hint, d.HasHint, tt.wantHint)
			}
		})
	}
}
