package engine_test

import (
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/store/memstore"
)

// TestRunCatalogSignals runs catalog rules end to end through Execute's
// attempt loop against a loopback upstream, for the signals that arrive in
// error responses (the runner peeks at error bodies) and for Shopify's
// THROTTLED, which arrives in a 200 (the runner peeks there because the
// reader's NeedsBody(200) says so).
func TestRunCatalogSignals(t *testing.T) {
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		provider string
		first    reply
		attempts int
		outcome  engine.Outcome
		rule     string
		sleeps   []time.Duration
	}{
		{
			name: "openai insufficient_quota is not retried", provider: "openai",
			first:    reply{status: 429, kv: []string{"Content-Type", "application/json"}, body: `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`},
			attempts: 1, outcome: engine.OutcomeNotRetryable, rule: "openai/insufficient_quota",
		},
		{
			name: "aws throttling on 400 is retried with backoff", provider: "aws",
			first:    reply{status: 400, kv: []string{"x-amzn-ErrorType", "ThrottlingException:http://internal.amazon.com/coral/com.amazon.coral.availability/"}},
			attempts: 2, outcome: engine.OutcomeSuccess, rule: "aws/throttling_error_code", sleeps: []time.Duration{time.Second},
		},
		{
			name: "github secondary limit waits a minute", provider: "github",
			first:    reply{status: 403, kv: []string{"Content-Type", "application/json", "x-ratelimit-remaining", "4990"}, body: `{"message":"You have exceeded a secondary rate limit."}`},
			attempts: 2, outcome: engine.OutcomeSuccess, rule: "github/secondary_rate_limit", sleeps: []time.Duration{time.Minute},
		},
		{
			name: "shopify throttling inside a 200 waits the exact delay", provider: "shopify",
			first: reply{status: 200, kv: []string{"Content-Type", "application/json"}, body: `{"errors":[{"message":"Throttled","extensions":{"code":"THROTTLED"}}],` +
				`"extensions":{"cost":{"requestedQueryCost":752,"actualQueryCost":null,"throttleStatus":{"maximumAvailable":1000.0,"currentlyAvailable":666,"restoreRate":50.0}}}}`},
			attempts: 2, outcome: engine.OutcomeSuccess, rule: "shopify/graphql_throttled", sleeps: []time.Duration{1720 * time.Millisecond},
		},
		{
			name: "x-should-retry false stops a 503", provider: "anthropic",
			first:    reply{status: 503, kv: []string{"x-should-retry", "false"}},
			attempts: 1, outcome: engine.OutcomeNotRetryable,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := newUpstream(t, tt.first, reply{status: 200, body: "ok"})
			clock := engine.NewFakeClock(start)
			f := newFixture(t, clock, memstore.New())
			res, err := f.runner.Run(t.Context(), newCall(t, up.URL, "GET", mustPolicy(t, nil), tt.provider))
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != tt.outcome || len(res.Attempts) != tt.attempts || up.count() != tt.attempts {
				t.Fatalf("outcome %s after %d attempts (%d arrivals); want %s after %d", res.Outcome, len(res.Attempts), up.count(), tt.outcome, tt.attempts)
			}
			if d := res.Attempts[0].Decision; d.Rule != tt.rule {
				t.Errorf("first decision %+v, want rule %q", d, tt.rule)
			}
			got := clock.Sleeps()
			if len(got) != len(tt.sleeps) {
				t.Fatalf("slept %v, want %v", got, tt.sleeps)
			}
			for i := range got {
				if got[i] != tt.sleeps[i] {
					t.Fatalf("slept %v, want %v", got, tt.sleeps)
				}
			}
		})
	}
}
