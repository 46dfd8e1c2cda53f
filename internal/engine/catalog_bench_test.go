package engine_test

import (
	"strings"
	"testing"

	"github.com/retrybroker/retrybroker/internal/engine"
)

// shopifyThrottled1KiB is Shopify's GraphQL THROTTLED response padded to
// about 1 KiB with the kind of fields a real response carries (a longer
// error list and a request id), so the rule has to find its fields in a
// realistic document.
var shopifyThrottled1KiB = func() string {
	var b strings.Builder
	b.WriteString(`{"errors":[`)
	for i := 0; i < 4; i++ {
		b.WriteString(`{"message":"Field 'products' is deprecated and may be removed in a future version","locations":[{"line":2,"column":3}],"path":["products"],"extensions":{"code":"DEPRECATED"}},`)
	}
	b.WriteString(`{"message":"Throttled","extensions":{"code":"THROTTLED","documentation":"https://shopify.dev/api/usage/rate-limits"}}],`)
	b.WriteString(`"extensions":{"cost":{"requestedQueryCost":752,"actualQueryCost":null,"throttleStatus":{"maximumAvailable":1000.0,"currentlyAvailable":666,"restoreRate":50.0}}},`)
	b.WriteString(`"request_id":"` + strings.Repeat("0123456789abcdef", 2) + `"}`)
	return b.String()
}()

// shopifyOK1KiB is an ordinary GraphQL answer of about 1 KiB.
var shopifyOK1KiB = `{"data":{"products":{"edges":[` + strings.Repeat(`{"node":{"id":"gid://shopify/Product/1","title":"A product title"}},`, 13) +
	`{"node":{"id":"gid://shopify/Product/2","title":"Last"}}]}},"extensions":{"cost":{"requestedQueryCost":12,"actualQueryCost":12,"throttleStatus":{"maximumAvailable":1000.0,"currentlyAvailable":988,"restoreRate":50.0}}}}`

// openAIQuota1KiB is OpenAI's insufficient_quota body padded to about 1 KiB.
var openAIQuota1KiB = `{"error":{"message":"You exceeded your current quota, please check your plan and billing details. ` +
	strings.Repeat("For more information on this error, read the docs. ", 17) +
	`","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`

// BenchmarkClassifyCatalog classifies, side by side in one run, a plain
// Retry-After response (the fast path: no CEL, no JSON) and responses that
// trigger a CEL rule with a JSON body of about 1 KiB, through
// (*engine.Policy).Decide with the provider's catalog entry as reader.
// Targets: retry-after <= 1 µs and <= 3 allocs; cel-rule-1KiB <= 20 µs.
func BenchmarkClassifyCatalog(b *testing.B) {
	p := mustPolicy(b, nil)
	cases := []struct {
		name     string
		provider string
		status   int
		kv       []string
		body     string
		want     engine.Reason
	}{
		{"retry-after", "retry-after", 429, []string{"Retry-After", "5", "Content-Type", "application/json"}, "", engine.ReasonServerHint},
		{"retry-after-openai-entry", "openai", 503, []string{"Retry-After", "5", "Content-Type", "application/json"}, "", engine.ReasonServerHint},
		{"cel-rule-1KiB", "shopify", 200, []string{"Content-Type", "application/json"}, shopifyThrottled1KiB, engine.ReasonServerHint},
		{"cel-rule-1KiB-openai", "openai", 429, []string{"Content-Type", "application/json"}, openAIQuota1KiB, engine.ReasonProviderForbidsRetry},
		// An ordinary Shopify 200: the rule's body_contains prefilter keeps
		// it off the CEL path.
		{"prefiltered-200-1KiB", "shopify", 200, []string{"Content-Type", "application/json"}, shopifyOK1KiB, engine.ReasonSuccess},
	}
	for _, c := range cases {
		r := resp(c.status, c.kv...)
		if c.body != "" {
			r.Body = []byte(c.body)
		}
		in := engine.Input{Method: "GET", Attempt: 1, Response: r, Reader: p.ReaderFor(c.provider)}
		if d := p.Decide(&in, nil); d.Reason != c.want {
			b.Fatalf("%s: reason %v, want %v (%+v)", c.name, d.Reason, c.want, d)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.body)))
			for b.Loop() {
				if d := p.Decide(&in, nil); d.Reason != c.want {
					b.Fatal("decision changed")
				}
			}
		})
	}
}

// TestClassifyCatalogBodies keeps the benchmark bodies at about 1 KiB.
func TestClassifyCatalogBodies(t *testing.T) {
	for name, body := range map[string]string{"shopify": shopifyThrottled1KiB, "shopify-ok": shopifyOK1KiB, "openai": openAIQuota1KiB} {
		if n := len(body); n < 900 || n > 1200 {
			t.Errorf("%s body is %d bytes, want about 1 KiB", name, n)
		}
	}
}

// TestClassifyFastPathAllocs keeps the catalog off the fast paths: a plain
// Retry-After, a quota-exhausted GitHub 403 and an ordinary Shopify 200
// (whose rules' prefilters fail) classify without allocating.
func TestClassifyFastPathAllocs(t *testing.T) {
	p := mustPolicy(t, nil)
	cases := []struct {
		provider string
		r        func() *engine.Input
	}{
		{"retry-after", func() *engine.Input {
			return &engine.Input{Method: "GET", Attempt: 1, Response: resp(429, "Retry-After", "5")}
		}},
		{"github", func() *engine.Input {
			return &engine.Input{Method: "GET", Attempt: 1, Response: resp(403, "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1796126445")}
		}},
		{"shopify", func() *engine.Input {
			r := resp(200, "Content-Type", "application/json")
			r.Body = []byte(shopifyOK1KiB)
			return &engine.Input{Method: "POST", Attempt: 1, Response: r}
		}},
		{"openai", func() *engine.Input {
			r := resp(429, "retry-after-ms", "250")
			r.Body = []byte(`{"error":{"code":"rate_limit_exceeded"}}`)
			return &engine.Input{Method: "GET", Attempt: 1, Response: r}
		}},
	}
	for _, c := range cases {
		in := c.r()
		in.Reader = p.ReaderFor(c.provider)
		if n := testing.AllocsPerRun(100, func() { p.Decide(in, minRand{}) }); n != 0 {
			t.Errorf("%s: %v allocs per Decide, want 0", c.provider, n)
		}
	}
}
