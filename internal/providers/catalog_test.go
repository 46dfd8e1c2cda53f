package providers

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestBuiltinCatalogCompiles(t *testing.T) {
	c, err := builtin()
	if err != nil {
		t.Fatalf("embedded catalog: %v", err)
	}
	if c.Version() == "" {
		t.Error("catalog has no version")
	}
	want := []string{"anthropic", "aws", "azure", "discord", "github", "gitlab", "google", "ietf", "jira", "none", "openai", "retry-after", "shopify", "stripe", "x"}
	if got := c.Names(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("names = %v, want %v", got, want)
	}
	for _, e := range c.Entries() {
		if e.Spec().Title == "" {
			t.Errorf("%s: no title (the generated docs need one)", e.Name())
		}
		if e.Name() != "none" && e.Name() != "retry-after" && len(e.Spec().Docs) == 0 {
			t.Errorf("%s: no documentation links", e.Name())
		}
	}
}

// Response bodies as the providers document them (sources in
// testdata/VECTORS.md).
const (
	openAIInsufficientQuota = `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`
	openAISpendLimit        = `{"error":{"message":"You exceeded your current quota.","type":"insufficient_quota","code":"project_spend_limit_exceeded"}}`
	openAIRateLimited       = `{"error":{"message":"Rate limit reached for requests","type":"requests","param":null,"code":"rate_limit_exceeded"}}`
	gitHubSecondary         = `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again.","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits","status":"403"}`
	gitHubForbidden         = `{"message":"Resource not accessible by integration","documentation_url":"https://docs.github.com/rest","status":"403"}`
	dynamoThrottled         = `{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException","message":"The level of configured provisioned throughput for the table was exceeded."}`
	awsValidation           = `{"__type":"com.amazon.coral.validate#ValidationException","message":"1 validation error detected"}`
	shopifyThrottled        = `{"errors":[{"message":"Throttled","extensions":{"code":"THROTTLED","documentation":"https://shopify.dev/api/usage/rate-limits"}}],"extensions":{"cost":{"requestedQueryCost":752,"actualQueryCost":null,"throttleStatus":{"maximumAvailable":1000.0,"currentlyAvailable":666,"restoreRate":50.0}}}}`
	shopifyOK               = `{"data":{"shop":{"name":"x"}},"extensions":{"cost":{"requestedQueryCost":1,"actualQueryCost":1,"throttleStatus":{"maximumAvailable":1000.0,"currentlyAvailable":999,"restoreRate":50.0}}}}`
)

type catalogCase struct {
	name     string
	status   int
	method   string
	attempt  int
	headers  []hdr
	body     string
	hasHint  bool
	delay    time.Duration
	source   string
	verdict  RetryVerdict
	rule     string
	scope    string
	quota    *Quota
	needBody bool
}

func runCatalogCases(t *testing.T, name string, cases []catalogCase) {
	t.Helper()
	e, ok := Builtin().Lookup(name)
	if !ok {
		t.Fatalf("no entry %q", name)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := response(c.status, c.headers, c.body)
			r.Method, r.Attempt = c.method, c.attempt
			got, tr := e.Explain(r)
			if got != e.Read(r) {
				t.Fatalf("Explain and Read disagree: %+v vs %+v", got, e.Read(r))
			}
			if got.HasHint != c.hasHint || (c.hasHint && (got.Hint.Delay != c.delay || got.Hint.Source != c.source)) {
				t.Errorf("hint = %+v (has %v); want {%v %q} (has %v); trace %+v", got.Hint, got.HasHint, c.delay, c.source, c.hasHint, tr)
			}
			if got.Verdict != c.verdict || got.Rule != c.rule {
				t.Errorf("verdict %v rule %q; want %v %q; trace %+v", got.Verdict, got.Rule, c.verdict, c.rule, tr)
			}
			if got.Scope != c.scope {
				t.Errorf("scope = %q, want %q", got.Scope, c.scope)
			}
			switch {
			case c.quota == nil && got.HasQuota:
				t.Errorf("unexpected quota %+v", got.Quota)
			case c.quota != nil && (!got.HasQuota || got.Quota.Remaining != c.quota.Remaining ||
				!got.Quota.Reset.Equal(c.quota.Reset) || got.Quota.Source != c.quota.Source || got.Quota.Limit != c.quota.Limit):
				t.Errorf("quota = %+v (has %v); want %+v", got.Quota, got.HasQuota, *c.quota)
			}
			if e.NeedsBody(c.status) != c.needBody {
				t.Errorf("NeedsBody(%d) = %v, want %v", c.status, e.NeedsBody(c.status), c.needBody)
			}
		})
	}
}

func TestCatalogOpenAI(t *testing.T) {
	runCatalogCases(t, "openai", []catalogCase{
		{name: "insufficient_quota", status: 429, body: openAIInsufficientQuota, verdict: VerdictDoNotRetry, rule: "openai/insufficient_quota", needBody: true},
		{name: "spend limit code", status: 429, body: openAISpendLimit, verdict: VerdictDoNotRetry, rule: "openai/insufficient_quota", needBody: true},
		{
			name: "insufficient_quota keeps a hint it came with", status: 429, headers: []hdr{{"Retry-After", "20"}}, body: openAIInsufficientQuota,
			hasHint: true, delay: 20 * time.Second, source: "retry-after", verdict: VerdictDoNotRetry, rule: "openai/insufficient_quota", needBody: true,
		},
		{
			name: "rate limited is retried", status: 429, headers: []hdr{{"x-ratelimit-remaining-requests", "0"}, {"x-ratelimit-reset-requests", "1s"}}, body: openAIRateLimited,
			hasHint: true, delay: time.Second, source: "x-ratelimit-reset-requests", needBody: true,
			quota: &Quota{Remaining: 0, Reset: now.Add(time.Second), Source: "x-ratelimit-reset-requests"},
		},
		{name: "truncated body is not a billing state", status: 429, body: openAIInsufficientQuota[:60], needBody: true},
		{name: "x-should-retry false", status: 500, headers: []hdr{{"x-should-retry", "false"}}, verdict: VerdictDoNotRetry},
		{name: "x-should-retry true", status: 409, headers: []hdr{{"X-Should-Retry", " true "}}, verdict: VerdictRetry},
		{name: "x-should-retry on a success is ignored", status: 200, headers: []hdr{{"x-should-retry", "true"}}},
		{name: "x-should-retry twice is ambiguous", status: 500, headers: []hdr{{"x-should-retry", "true"}, {"x-should-retry", "false"}}},
		{name: "x-should-retry other value", status: 500, headers: []hdr{{"x-should-retry", "maybe"}}},
		{
			name: "insufficient_quota beats x-should-retry", status: 429, headers: []hdr{{"x-should-retry", "true"}}, body: openAIInsufficientQuota,
			verdict: VerdictDoNotRetry, rule: "openai/insufficient_quota", needBody: true,
		},
		{
			name: "limit reported", status: 200,
			headers: []hdr{{"x-ratelimit-limit-requests", "500"}, {"x-ratelimit-remaining-requests", "499"}, {"x-ratelimit-reset-requests", "120ms"}},
			quota:   &Quota{Remaining: 499, Reset: now.Add(120 * time.Millisecond), Source: "x-ratelimit-reset-requests", Limit: 500},
		},
		{name: "reset with ms then us", status: 429, headers: []hdr{{"x-ratelimit-remaining-tokens", "0"}, {"x-ratelimit-reset-tokens", "1ms500us"}}, hasHint: true, delay: 1500 * time.Microsecond, source: "x-ratelimit-reset-tokens", needBody: true},
	})
}

func TestCatalogAnthropic(t *testing.T) {
	runCatalogCases(t, "anthropic", []catalogCase{
		{name: "x-should-retry false on 529", status: 529, headers: []hdr{{"x-should-retry", "false"}}, verdict: VerdictDoNotRetry},
		{name: "x-should-retry true on 400", status: 400, headers: []hdr{{"x-should-retry", "true"}}, verdict: VerdictRetry},
		{name: "retry-after and x-should-retry", status: 429, headers: []hdr{{"retry-after", "4"}, {"x-should-retry", "true"}}, hasHint: true, delay: 4 * time.Second, source: "retry-after", verdict: VerdictRetry},
	})
}

func TestCatalogGitHubSecondary(t *testing.T) {
	rule := "github/secondary_rate_limit"
	src := "rule:" + rule
	runCatalogCases(t, "github", []catalogCase{
		{name: "first wait is a minute", status: 403, body: gitHubSecondary, hasHint: true, delay: time.Minute, source: src, verdict: VerdictRetry, rule: rule, needBody: true},
		{name: "attempt 0 means 1", status: 429, attempt: 0, body: gitHubSecondary, hasHint: true, delay: time.Minute, source: src, verdict: VerdictRetry, rule: rule, needBody: true},
		{name: "second wait doubles", status: 403, attempt: 2, body: gitHubSecondary, hasHint: true, delay: 2 * time.Minute, source: src, verdict: VerdictRetry, rule: rule, needBody: true},
		{name: "third wait doubles again", status: 429, attempt: 3, body: gitHubSecondary, hasHint: true, delay: 4 * time.Minute, source: src, verdict: VerdictRetry, rule: rule, needBody: true},
		{name: "growth is capped", status: 403, attempt: 60, body: gitHubSecondary, hasHint: true, delay: 1024 * time.Minute, source: src, verdict: VerdictRetry, rule: rule, needBody: true},
		{
			name: "retry-after wins", status: 403, headers: []hdr{{"Retry-After", "30"}}, body: gitHubSecondary,
			hasHint: true, delay: 30 * time.Second, source: "retry-after", needBody: true,
		},
		{
			name: "exhausted primary quota uses the reset", status: 403,
			headers: []hdr{{"x-ratelimit-remaining", "0"}, {"x-ratelimit-reset", "1796126445"}}, body: gitHubSecondary,
			hasHint: true, delay: 45 * time.Second, source: "x-ratelimit-reset", needBody: true,
			quota: &Quota{Remaining: 0, Reset: time.Unix(1796126445, 0), Source: "x-ratelimit-reset"},
		},
		{
			name: "quota left and secondary", status: 403,
			headers: []hdr{{"x-ratelimit-limit", "5000"}, {"x-ratelimit-remaining", "4990"}, {"x-ratelimit-reset", "1796126445"}}, body: gitHubSecondary,
			hasHint: true, delay: time.Minute, source: src, verdict: VerdictRetry, rule: rule, needBody: true,
			quota: &Quota{Remaining: 4990, Reset: time.Unix(1796126445, 0), Source: "x-ratelimit-reset", Limit: 5000},
		},
		{name: "older abuse wording", status: 403, body: `{"message":"You have triggered an abuse detection mechanism."}`, hasHint: true, delay: time.Minute, source: src, verdict: VerdictRetry, rule: rule, needBody: true},
		{name: "plain 403 is not a limit", status: 403, body: gitHubForbidden, needBody: true},
		{name: "html body", status: 403, body: `<html>secondary rate limit</html>`, needBody: true},
		{name: "secondary wording on a 500 is not read", status: 500, body: gitHubSecondary},
	})
}

func TestCatalogAWSThrottling(t *testing.T) {
	rule := "aws/throttling_error_code"
	runCatalogCases(t, "aws", []catalogCase{
		{name: "x-amzn-ErrorType", status: 400, headers: []hdr{{"x-amzn-ErrorType", "ThrottlingException:http://internal.amazon.com/coral/com.amazon.coral.availability/"}}, verdict: VerdictRetry, rule: rule, needBody: true},
		{name: "x-amzn-ErrorType bare code", status: 400, headers: []hdr{{"X-Amzn-Errortype", "TooManyRequestsException"}}, verdict: VerdictRetry, rule: rule, needBody: true},
		{name: "__type with namespace", status: 400, body: dynamoThrottled, verdict: VerdictRetry, rule: rule, needBody: true},
		{name: "__type bare", status: 400, body: `{"__type":"ThrottlingException","message":"Rate exceeded"}`, verdict: VerdictRetry, rule: rule, needBody: true},
		{name: "code field", status: 400, body: `{"code":"RequestLimitExceeded","message":"Request limit exceeded."}`, verdict: VerdictRetry, rule: rule, needBody: true},
		{name: "SlowDown", status: 400, body: `{"code":"SlowDown"}`, verdict: VerdictRetry, rule: rule, needBody: true},
		{
			name: "x-amz-retry-after still sets the delay", status: 400, headers: []hdr{{"x-amz-retry-after", "1500"}}, body: dynamoThrottled,
			hasHint: true, delay: 1500 * time.Millisecond, source: "x-amz-retry-after", verdict: VerdictRetry, rule: rule, needBody: true,
		},
		{name: "validation error is not throttling", status: 400, body: awsValidation, needBody: true},
		{name: "code that only contains a throttling word", status: 400, body: `{"__type":"NotThrottlingException"}`, needBody: true},
		{name: "other status", status: 401, body: dynamoThrottled},
		{name: "non-json body", status: 400, body: `<Error><Code>Throttling</Code></Error>`, needBody: true},
	})
}

func TestCatalogShopifyGraphQL(t *testing.T) {
	rule := "shopify/graphql_throttled"
	runCatalogCases(t, "shopify", []catalogCase{
		// (752 - 666) / 50 = 1.72 s.
		{name: "throttled in a 200", status: 200, body: shopifyThrottled, hasHint: true, delay: 1720 * time.Millisecond, source: "rule:" + rule, verdict: VerdictRetry, rule: rule, needBody: true},
		{name: "success", status: 200, body: shopifyOK, needBody: true},
		{name: "no body", status: 200, needBody: true},
		{
			name: "restore rate 0 still retries, with backoff", status: 200,
			body:    strings.Replace(shopifyThrottled, `"restoreRate":50.0`, `"restoreRate":0`, 1),
			verdict: VerdictRetry, rule: rule, needBody: true,
		},
		{
			name: "available above requested waits 0", status: 200,
			body:    strings.Replace(shopifyThrottled, `"currentlyAvailable":666`, `"currentlyAvailable":900`, 1),
			hasHint: true, delay: 0, source: "rule:" + rule, verdict: VerdictRetry, rule: rule, needBody: true,
		},
		{name: "rest 429", status: 429, headers: []hdr{{"Retry-After", "2.0"}}, hasHint: true, delay: 2 * time.Second, source: "retry-after"},
	})
}

func TestCatalogDiscordScope(t *testing.T) {
	runCatalogCases(t, "discord", []catalogCase{
		{name: "global header", status: 429, headers: []hdr{{"Retry-After", "2"}, {"X-RateLimit-Global", "true"}, {"X-RateLimit-Scope", "global"}}, hasHint: true, delay: 2 * time.Second, source: "retry-after", scope: ScopeGlobal, needBody: true},
		{name: "global wins over scope", status: 429, headers: []hdr{{"X-RateLimit-Global", "true"}, {"X-RateLimit-Scope", "user"}}, scope: ScopeGlobal, needBody: true},
		{name: "user scope", status: 429, headers: []hdr{{"X-RateLimit-Scope", "user"}}, scope: ScopeUser, needBody: true},
		{name: "shared scope", status: 429, headers: []hdr{{"X-RateLimit-Scope", "Shared"}}, scope: ScopeShared, needBody: true},
		{name: "global false", status: 429, headers: []hdr{{"X-RateLimit-Global", "false"}}, needBody: true},
		{name: "body retry_after", status: 429, body: `{"message":"You are being rate limited.","retry_after":64.57,"global":false}`, hasHint: true, delay: 64570 * time.Millisecond, source: "body:retry_after", needBody: true},
		{name: "body on a 200 is not read", status: 200, body: `{"retry_after":5}`},
	})
}

func TestCatalogAzureQuota(t *testing.T) {
	at := now.Add(time.Second)
	runCatalogCases(t, "azure", []catalogCase{
		{
			name: "smallest remaining count", status: 200,
			headers: []hdr{{"x-ms-ratelimit-remaining-subscription-reads", "249"}, {"x-ms-ratelimit-remaining-tenant-reads", "12"}},
			quota:   &Quota{Remaining: 12, Reset: at, Source: "x-ms-ratelimit-remaining-tenant-reads"},
		},
		{
			name: "resource pairs are skipped", status: 200,
			headers: []hdr{{"x-ms-ratelimit-remaining-resource", "Microsoft.Compute/GetVMScaleSet3Min;197,Microsoft.Compute/GetVMScaleSet30Min;1297"}, {"x-ms-ratelimit-remaining-subscription-writes", "199"}},
			quota:   &Quota{Remaining: 199, Reset: at, Source: "x-ms-ratelimit-remaining-subscription-writes"},
		},
		{name: "only resource pairs", status: 200, headers: []hdr{{"x-ms-ratelimit-remaining-resource", "Microsoft.Compute/GetVMScaleSet3Min;197"}}},
		{
			name: "exhausted with retry-after", status: 429,
			headers: []hdr{{"Retry-After", "17"}, {"x-ms-ratelimit-remaining-subscription-reads", "0"}},
			hasHint: true, delay: 17 * time.Second, source: "retry-after",
			quota: &Quota{Remaining: 0, Reset: at, Source: "x-ms-ratelimit-remaining-subscription-reads"},
		},
		{name: "duplicate count is ambiguous", status: 200, headers: []hdr{{"x-ms-ratelimit-remaining-subscription-reads", "5"}, {"x-ms-ratelimit-remaining-subscription-reads", "6"}}},
	})
}

func TestNeedsBodyThroughChain(t *testing.T) {
	shopify, _ := Lookup("shopify")
	custom, err := NewCustomReader("X-Wait", FormatSeconds)
	if err != nil {
		t.Fatal(err)
	}
	c := Chain("shopify", custom, shopify)
	if !NeedsBody(c, 200) || NeedsBody(c, 204) || NeedsBody(custom, 200) {
		t.Errorf("NeedsBody through chain: 200 %v, 204 %v, custom %v", NeedsBody(c, 200), NeedsBody(c, 204), NeedsBody(custom, 200))
	}
	r := &Response{Status: 200, Header: http.Header{}, Body: []byte(shopifyThrottled), Now: now}
	if got := c.Read(r); got.Rule != "shopify/graphql_throttled" || got.Verdict != VerdictRetry {
		t.Errorf("chain lost the rule: %+v", got)
	}
	rd, _ := Lookup("retry-after")
	for _, s := range []int{200, 429, 503} {
		if NeedsBody(rd, s) {
			t.Errorf("retry-after needs the body of a %d", s)
		}
	}
}
