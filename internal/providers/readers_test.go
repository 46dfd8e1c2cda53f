package providers

import (
	"net/http"
	"testing"
	"time"
)

// hdr is a header line, added with http.Header.Add so keys are canonicalised
// as net/http does.
type hdr [2]string

func response(status int, headers []hdr, body string) *Response {
	h := http.Header{}
	for _, kv := range headers {
		h.Add(kv[0], kv[1])
	}
	r := &Response{Status: status, Header: h, Now: now}
	if body != "" {
		r.Body = []byte(body)
	}
	return r
}

type readerCase struct {
	name    string
	status  int
	headers []hdr
	body    string
	// want: the hint, when hasHint.
	hasHint bool
	delay   time.Duration
	source  string
	verdict RetryVerdict
	quota   *Quota
}

func runReaderCases(t *testing.T, name string, cases []readerCase) {
	t.Helper()
	rd, ok := Lookup(name)
	if !ok {
		t.Fatalf("Lookup(%q) failed", name)
	}
	if rd.Name() != name {
		t.Errorf("Lookup(%q).Name() = %q", name, rd.Name())
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status := c.status
			if status == 0 {
				status = http.StatusTooManyRequests
			}
			got := rd.Read(response(status, c.headers, c.body))
			if got.HasHint != c.hasHint || (c.hasHint && (got.Hint.Delay != c.delay || got.Hint.Source != c.source)) {
				t.Errorf("%s: hint = %+v (has %v); want {%v %q} (has %v)", name, got.Hint, got.HasHint, c.delay, c.source, c.hasHint)
			}
			if !got.HasHint && got.Hint != (Hint{}) {
				t.Errorf("%s: HasHint false but Hint = %+v", name, got.Hint)
			}
			if got.Verdict != c.verdict {
				t.Errorf("%s: verdict = %v; want %v", name, got.Verdict, c.verdict)
			}
			switch {
			case c.quota == nil && got.HasQuota:
				t.Errorf("%s: unexpected quota %+v", name, got.Quota)
			case c.quota != nil && (!got.HasQuota || got.Quota.Remaining != c.quota.Remaining ||
				!got.Quota.Reset.Equal(c.quota.Reset) || got.Quota.Source != c.quota.Source):
				t.Errorf("%s: quota = %+v (has %v); want %+v", name, got.Quota, got.HasQuota, *c.quota)
			}
		})
	}
}

// retryAfterCases are the Retry-After rules every reader that reads the
// header shares; they are run against each such reader.
func retryAfterCases() []readerCase {
	ok := func(name string, v string, d time.Duration) readerCase {
		return readerCase{name: name, headers: []hdr{{"Retry-After", v}}, hasHint: true, delay: d, source: "retry-after"}
	}
	bad := func(name string, vs ...string) readerCase {
		c := readerCase{name: name}
		for _, v := range vs {
			c.headers = append(c.headers, hdr{"Retry-After", v})
		}
		return c
	}
	return []readerCase{
		ok("seconds", "5", 5*time.Second),
		ok("zero", "0", 0),
		ok("whitespace trimmed", "  12  ", 12*time.Second),
		ok("imf-fixdate", "Tue, 01 Dec 2026 12:00:30 GMT", 30*time.Second),
		ok("rfc850", "Tuesday, 01-Dec-26 12:00:20 GMT", 20*time.Second),
		ok("asctime", "Tue Dec  1 12:00:10 2026", 10*time.Second),
		ok("past date is zero", "Tue, 01 Dec 2026 11:55:00 GMT", 0),
		{name: "lower-case header name", headers: []hdr{{"retry-after", "2"}}, hasHint: true, delay: 2 * time.Second, source: "retry-after"},
		{name: "upper-case header name", headers: []hdr{{"RETRY-AFTER", "2"}}, hasHint: true, delay: 2 * time.Second, source: "retry-after"},
		bad("decimal", "1.5"),
		bad("negative", "-1"),
		bad("plus sign", "+5"),
		bad("exponent", "1e3"),
		bad("list", "120, 60"),
		bad("twice", "5", "6"),
		bad("twice same value", "5", "5"),
		bad("twice as dates", "Tue, 01 Dec 2026 12:00:30 GMT", "Tue, 01 Dec 2026 12:00:30 GMT"),
		bad("garbage", "soon"),
		bad("overflow", "99999999999999999999"),
		bad("utc zone", "Tue, 01 Dec 2026 12:00:30 UTC"),
		bad("empty", ""),
		bad("absent"),
	}
}

// readersWithRetryAfter are the built-in readers whose first or only
// fallback is Retry-After as delay-seconds or HTTP-date.
var readersWithRetryAfter = []string{"retry-after", "azure", "aws", "github", "jira", "openai", "anthropic", "discord", "gitlab", "ietf", "google", "stripe"}

func TestRetryAfterRulesInEveryReader(t *testing.T) {
	for _, name := range readersWithRetryAfter {
		t.Run(name, func(t *testing.T) { runReaderCases(t, name, retryAfterCases()) })
	}
}

func TestReaderRetryAfterStatuses(t *testing.T) {
	// The reader does not judge statuses; the engine does.
	for _, status := range []int{200, 400, 403, 429, 500, 503} {
		rd, _ := Lookup("retry-after")
		got := rd.Read(response(status, []hdr{{"Retry-After", "7"}}, ""))
		if !got.HasHint || got.Hint.Delay != 7*time.Second {
			t.Errorf("status %d: %+v", status, got)
		}
	}
}

func TestReaderAzure(t *testing.T) {
	runReaderCases(t, "azure", []readerCase{
		{name: "x-ms-retry-after-ms", headers: []hdr{{"x-ms-retry-after-ms", "1500"}}, hasHint: true, delay: 1500 * time.Millisecond, source: "x-ms-retry-after-ms"},
		{name: "retry-after-ms", headers: []hdr{{"retry-after-ms", "250"}}, hasHint: true, delay: 250 * time.Millisecond, source: "retry-after-ms"},
		{name: "invalid falls through", headers: []hdr{{"x-ms-retry-after-ms", "abc"}, {"retry-after-ms", "300"}}, hasHint: true, delay: 300 * time.Millisecond, source: "retry-after-ms"},
		{name: "ms beats retry-after", headers: []hdr{{"Retry-After", "10"}, {"x-ms-retry-after-ms", "2000"}}, hasHint: true, delay: 2 * time.Second, source: "x-ms-retry-after-ms"},
		{name: "retry-after only", status: 503, headers: []hdr{{"Retry-After", "3"}}, hasHint: true, delay: 3 * time.Second, source: "retry-after"},
		{name: "duplicate ms falls through", headers: []hdr{{"x-ms-retry-after-ms", "1"}, {"x-ms-retry-after-ms", "2"}, {"Retry-After", "3"}}, hasHint: true, delay: 3 * time.Second, source: "retry-after"},
		{name: "ms list falls through", headers: []hdr{{"retry-after-ms", "100, 200"}, {"Retry-After", "3"}}, hasHint: true, delay: 3 * time.Second, source: "retry-after"},
		{name: "ms decimal invalid", headers: []hdr{{"retry-after-ms", "1.5"}}},
		{name: "ms overflow invalid", headers: []hdr{{"retry-after-ms", "99999999999999999999"}}},
		{name: "ms date invalid", headers: []hdr{{"retry-after-ms", "Tue, 01 Dec 2026 12:00:30 GMT"}}},
		{name: "all invalid", headers: []hdr{{"x-ms-retry-after-ms", "-1"}, {"retry-after-ms", "+1"}, {"Retry-After", "1.5"}}},
	})
}

func TestReaderAWS(t *testing.T) {
	runReaderCases(t, "aws", []readerCase{
		{name: "x-amz-retry-after", status: 503, headers: []hdr{{"x-amz-retry-after", "2000"}}, hasHint: true, delay: 2 * time.Second, source: "x-amz-retry-after"},
		{name: "exponent falls through", status: 503, headers: []hdr{{"x-amz-retry-after", "1e3"}, {"Retry-After", "4"}}, hasHint: true, delay: 4 * time.Second, source: "retry-after"},
		{name: "x-amz wins", headers: []hdr{{"Retry-After", "4"}, {"X-Amz-Retry-After", "10"}}, hasHint: true, delay: 10 * time.Millisecond, source: "x-amz-retry-after"},
		{name: "whitespace", headers: []hdr{{"x-amz-retry-after", " 10 "}}, hasHint: true, delay: 10 * time.Millisecond, source: "x-amz-retry-after"},
		{name: "ignores retry-after-ms", headers: []hdr{{"retry-after-ms", "10"}}},
	})
}

func TestReaderGitHub(t *testing.T) {
	reset := func(sec int64) *Quota {
		return &Quota{Remaining: 0, Reset: time.Unix(sec, 0), Source: "x-ratelimit-reset"}
	}
	runReaderCases(t, "github", []readerCase{
		{
			name: "403 quota exhausted", status: 403, headers: []hdr{{"x-ratelimit-remaining", "0"}, {"x-ratelimit-reset", "1796126445"}},
			hasHint: true, delay: 45 * time.Second, source: "x-ratelimit-reset", quota: reset(1796126445),
		},
		{
			name: "429 quota exhausted", status: 429, headers: []hdr{{"X-RateLimit-Remaining", "0"}, {"X-RateLimit-Reset", "1796126445"}},
			hasHint: true, delay: 45 * time.Second, source: "x-ratelimit-reset", quota: reset(1796126445),
		},
		{
			name: "403 quota left", status: 403, headers: []hdr{{"x-ratelimit-remaining", "12"}, {"x-ratelimit-reset", "1796126445"}},
			quota: &Quota{Remaining: 12, Reset: time.Unix(1796126445, 0), Source: "x-ratelimit-reset"},
		},
		{name: "403 plain", status: 403},
		{
			name: "retry-after wins", status: 429, headers: []hdr{{"Retry-After", "30"}, {"x-ratelimit-remaining", "0"}, {"x-ratelimit-reset", "1796126450"}},
			hasHint: true, delay: 30 * time.Second, source: "retry-after", quota: reset(1796126450),
		},
		{
			name: "invalid retry-after falls through", status: 403, headers: []hdr{{"Retry-After", "1.5"}, {"x-ratelimit-remaining", "0"}, {"x-ratelimit-reset", "1796126450"}},
			hasHint: true, delay: 50 * time.Second, source: "x-ratelimit-reset", quota: reset(1796126450),
		},
		{
			name: "reset in past", status: 403, headers: []hdr{{"x-ratelimit-remaining", "0"}, {"x-ratelimit-reset", "1796126390"}},
			hasHint: true, delay: 0, source: "x-ratelimit-reset", quota: reset(1796126390),
		},
		{
			name: "reset ignored on 500", status: 500, headers: []hdr{{"x-ratelimit-remaining", "0"}, {"x-ratelimit-reset", "1796126445"}},
			quota: reset(1796126445),
		},
		{
			name: "reset too far is still a hint", status: 403, headers: []hdr{{"x-ratelimit-remaining", "0"}, {"x-ratelimit-reset", "1796128200"}},
			hasHint: true, delay: 30 * time.Minute, source: "x-ratelimit-reset", quota: reset(1796128200),
		},
		{
			name: "quota on 200", status: 200, headers: []hdr{{"x-ratelimit-remaining", "4999"}, {"x-ratelimit-reset", "1796130000"}},
			quota: &Quota{Remaining: 4999, Reset: time.Unix(1796130000, 0), Source: "x-ratelimit-reset"},
		},
		{
			name: "quota exhausted on 200 is no hint", status: 200, headers: []hdr{{"x-ratelimit-remaining", "0"}, {"x-ratelimit-reset", "1796130000"}},
			quota: reset(1796130000),
		},
		{name: "remaining missing", status: 403, headers: []hdr{{"x-ratelimit-reset", "1796126445"}}},
		{name: "remaining not a number", status: 403, headers: []hdr{{"x-ratelimit-remaining", "zero"}, {"x-ratelimit-reset", "1796126445"}}},
		{name: "remaining negative", status: 403, headers: []hdr{{"x-ratelimit-remaining", "-0"}, {"x-ratelimit-reset", "1796126445"}}},
		{name: "remaining twice", status: 403, headers: []hdr{{"x-ratelimit-remaining", "0"}, {"x-ratelimit-remaining", "0"}, {"x-ratelimit-reset", "1796126445"}}},
		{name: "reset decimal", status: 403, headers: []hdr{{"x-ratelimit-remaining", "0"}, {"x-ratelimit-reset", "1796126445.5"}}},
		{name: "reset overflow", status: 403, headers: []hdr{{"x-ratelimit-remaining", "0"}, {"x-ratelimit-reset", "99999999999999999999"}}},
		{name: "reset list", status: 403, headers: []hdr{{"x-ratelimit-remaining", "0"}, {"x-ratelimit-reset", "1796126445, 1796126446"}}},
		{name: "reset twice", status: 403, headers: []hdr{{"x-ratelimit-remaining", "0"}, {"x-ratelimit-reset", "1796126445"}, {"x-ratelimit-reset", "1796126446"}}},
		{name: "reset as date", status: 403, headers: []hdr{{"x-ratelimit-remaining", "0"}, {"x-ratelimit-reset", "Tue, 01 Dec 2026 12:00:30 GMT"}}},
		{
			name: "reset beyond duration range", status: 403, headers: []hdr{{"x-ratelimit-remaining", "0"}, {"x-ratelimit-reset", "253402300799"}},
			quota: reset(253402300799),
		},
	})
}

func TestReaderJira(t *testing.T) {
	at := func(s int) time.Time { return now.Add(time.Duration(s) * time.Second) }
	runReaderCases(t, "jira", []readerCase{
		{name: "429 iso reset", headers: []hdr{{"X-RateLimit-Reset", "2026-12-01T12:00:30Z"}}, hasHint: true, delay: 30 * time.Second, source: "x-ratelimit-reset"},
		{name: "429 iso reset without seconds", headers: []hdr{{"X-RateLimit-Reset", "2026-12-01T12:01Z"}}, hasHint: true, delay: time.Minute, source: "x-ratelimit-reset"},
		{name: "429 iso reset with offset", headers: []hdr{{"X-RateLimit-Reset", "2026-12-01T13:01+01:00"}}, hasHint: true, delay: time.Minute, source: "x-ratelimit-reset"},
		{name: "429 iso reset fractional", headers: []hdr{{"X-RateLimit-Reset", "2026-12-01T12:00:01.500Z"}}, hasHint: true, delay: 1500 * time.Millisecond, source: "x-ratelimit-reset"},
		{name: "429 iso reset past", headers: []hdr{{"X-RateLimit-Reset", "2026-12-01T11:00Z"}}, hasHint: true, delay: 0, source: "x-ratelimit-reset"},
		{name: "reset ignored on 503", status: 503, headers: []hdr{{"X-RateLimit-Reset", "2026-12-01T12:00:30Z"}}},
		{name: "reset ignored on 403", status: 403, headers: []hdr{{"X-RateLimit-Reset", "2026-12-01T12:00:30Z"}}},
		{name: "retry-after wins", headers: []hdr{{"Retry-After", "5"}, {"X-RateLimit-Reset", "2026-12-01T12:00:30Z"}}, hasHint: true, delay: 5 * time.Second, source: "retry-after"},
		{name: "invalid retry-after falls through", headers: []hdr{{"Retry-After", "5, 6"}, {"X-RateLimit-Reset", "2026-12-01T12:00:30Z"}}, hasHint: true, delay: 30 * time.Second, source: "x-ratelimit-reset"},
		{name: "reset as unix seconds", headers: []hdr{{"X-RateLimit-Reset", "1796126445"}}},
		{name: "reset without zone", headers: []hdr{{"X-RateLimit-Reset", "2026-12-01T12:00:30"}}},
		{name: "reset twice", headers: []hdr{{"X-RateLimit-Reset", "2026-12-01T12:00:30Z"}, {"X-RateLimit-Reset", "2026-12-01T12:00:30Z"}}},
		{
			name: "quota on 200", status: 200, headers: []hdr{{"X-RateLimit-Remaining", "10"}, {"X-RateLimit-Reset", "2026-12-01T12:00:30Z"}},
			quota: &Quota{Remaining: 10, Reset: at(30), Source: "x-ratelimit-reset"},
		},
		{
			name: "quota with hint", headers: []hdr{{"X-RateLimit-Remaining", "0"}, {"X-RateLimit-Reset", "2026-12-01T12:01Z"}},
			hasHint: true, delay: time.Minute, source: "x-ratelimit-reset", quota: &Quota{Remaining: 0, Reset: at(60), Source: "x-ratelimit-reset"},
		},
	})
}

func TestReaderOpenAI(t *testing.T) {
	runReaderCases(t, "openai", []readerCase{
		{name: "retry-after-ms", headers: []hdr{{"retry-after-ms", "1500"}, {"Retry-After", "2"}}, hasHint: true, delay: 1500 * time.Millisecond, source: "retry-after-ms"},
		{name: "invalid ms falls to retry-after", headers: []hdr{{"retry-after-ms", "1.5"}, {"Retry-After", "2"}}, hasHint: true, delay: 2 * time.Second, source: "retry-after"},
		{
			name: "requests exhausted", headers: []hdr{{"x-ratelimit-remaining-requests", "0"}, {"x-ratelimit-reset-requests", "6m0s"}},
			hasHint: true, delay: 6 * time.Minute, source: "x-ratelimit-reset-requests",
			quota: &Quota{Remaining: 0, Reset: now.Add(6 * time.Minute), Source: "x-ratelimit-reset-requests"},
		},
		{
			name: "tokens exhausted", headers: []hdr{
				{"x-ratelimit-remaining-requests", "10"},
				{"x-ratelimit-reset-requests", "1s"},
				{"x-ratelimit-remaining-tokens", "0"},
				{"x-ratelimit-reset-tokens", "1m30.5s"},
			},
			hasHint: true, delay: 90500 * time.Millisecond, source: "x-ratelimit-reset-tokens",
			quota: &Quota{Remaining: 10, Reset: now.Add(time.Second), Source: "x-ratelimit-reset-requests"},
		},
		{
			name: "both exhausted takes longer (tokens)", headers: []hdr{
				{"x-ratelimit-remaining-requests", "0"},
				{"x-ratelimit-reset-requests", "20ms"},
				{"x-ratelimit-remaining-tokens", "0"},
				{"x-ratelimit-reset-tokens", "2s"},
			},
			hasHint: true, delay: 2 * time.Second, source: "x-ratelimit-reset-tokens",
			quota: &Quota{Remaining: 0, Reset: now.Add(20 * time.Millisecond), Source: "x-ratelimit-reset-requests"},
		},
		{
			name: "both exhausted takes longer (requests)", headers: []hdr{
				{"x-ratelimit-remaining-requests", "0"},
				{"x-ratelimit-reset-requests", "1h2m3s"},
				{"x-ratelimit-remaining-tokens", "0"},
				{"x-ratelimit-reset-tokens", "2s"},
			},
			hasHint: true, delay: time.Hour + 2*time.Minute + 3*time.Second, source: "x-ratelimit-reset-requests",
			quota: &Quota{Remaining: 0, Reset: now.Add(time.Hour + 2*time.Minute + 3*time.Second), Source: "x-ratelimit-reset-requests"},
		},
		{
			name: "both exhausted, one reset invalid", headers: []hdr{
				{"x-ratelimit-remaining-requests", "0"},
				{"x-ratelimit-reset-requests", "-1h"},
				{"x-ratelimit-remaining-tokens", "0"},
				{"x-ratelimit-reset-tokens", "2s"},
			},
			hasHint: true, delay: 2 * time.Second, source: "x-ratelimit-reset-tokens",
		},
		{
			name: "nothing exhausted", headers: []hdr{
				{"x-ratelimit-remaining-requests", "5"},
				{"x-ratelimit-reset-requests", "6m0s"},
				{"x-ratelimit-remaining-tokens", "100"},
				{"x-ratelimit-reset-tokens", "2s"},
			},
			quota: &Quota{Remaining: 5, Reset: now.Add(6 * time.Minute), Source: "x-ratelimit-reset-requests"},
		},
		{
			name: "zero duration", headers: []hdr{{"x-ratelimit-remaining-requests", "0"}, {"x-ratelimit-reset-requests", "0s"}},
			hasHint: true, delay: 0, source: "x-ratelimit-reset-requests",
			quota: &Quota{Remaining: 0, Reset: now, Source: "x-ratelimit-reset-requests"},
		},
		{name: "bare number reset", headers: []hdr{{"x-ratelimit-remaining-requests", "0"}, {"x-ratelimit-reset-requests", "6"}}},
		{name: "signed reset", headers: []hdr{{"x-ratelimit-remaining-tokens", "0"}, {"x-ratelimit-reset-tokens", "+6s"}}},
		{name: "reset without remaining", headers: []hdr{{"x-ratelimit-reset-tokens", "6s"}}},
		{name: "overflowing reset", headers: []hdr{{"x-ratelimit-remaining-tokens", "0"}, {"x-ratelimit-reset-tokens", "9999999999h"}}},
	})
}

func TestReaderAnthropic(t *testing.T) {
	rd, _ := Lookup("anthropic")
	if got := rd.ExtraRetryableStatuses(); len(got) != 1 || got[0] != 529 {
		t.Errorf("anthropic extra statuses = %v, want [529]", got)
	}
	runReaderCases(t, "anthropic", []readerCase{
		{
			name: "requests exhausted", headers: []hdr{{"anthropic-ratelimit-requests-remaining", "0"}, {"anthropic-ratelimit-requests-reset", "2026-12-01T12:00:30Z"}},
			hasHint: true, delay: 30 * time.Second, source: "anthropic-ratelimit-requests-reset",
			quota: &Quota{Remaining: 0, Reset: now.Add(30 * time.Second), Source: "anthropic-ratelimit-requests-reset"},
		},
		{
			name: "latest exhausted family wins", headers: []hdr{
				{"anthropic-ratelimit-requests-remaining", "0"},
				{"anthropic-ratelimit-requests-reset", "2026-12-01T12:00:10Z"},
				{"anthropic-ratelimit-tokens-remaining", "0"},
				{"anthropic-ratelimit-tokens-reset", "2026-12-01T12:00:20Z"},
				{"anthropic-ratelimit-input-tokens-remaining", "0"},
				{"anthropic-ratelimit-input-tokens-reset", "2026-12-01T12:00:40Z"},
				{"anthropic-ratelimit-output-tokens-remaining", "5"},
				{"anthropic-ratelimit-output-tokens-reset", "2026-12-01T12:05:00Z"},
			},
			hasHint: true, delay: 40 * time.Second, source: "anthropic-ratelimit-input-tokens-reset",
			quota: &Quota{Remaining: 0, Reset: now.Add(10 * time.Second), Source: "anthropic-ratelimit-requests-reset"},
		},
		{
			name: "output tokens", headers: []hdr{{"anthropic-ratelimit-output-tokens-remaining", "0"}, {"anthropic-ratelimit-output-tokens-reset", "2026-12-01T12:00:05+00:00"}},
			hasHint: true, delay: 5 * time.Second, source: "anthropic-ratelimit-output-tokens-reset",
		},
		{
			name: "invalid reset skipped", headers: []hdr{
				{"anthropic-ratelimit-tokens-remaining", "0"},
				{"anthropic-ratelimit-tokens-reset", "2026-12-01T12:01Z"},
				{"anthropic-ratelimit-requests-remaining", "0"},
				{"anthropic-ratelimit-requests-reset", "2026-12-01T12:00:03Z"},
			},
			hasHint: true, delay: 3 * time.Second, source: "anthropic-ratelimit-requests-reset",
			quota: &Quota{Remaining: 0, Reset: now.Add(3 * time.Second), Source: "anthropic-ratelimit-requests-reset"},
		},
		{
			name: "past reset is zero", headers: []hdr{{"anthropic-ratelimit-tokens-remaining", "0"}, {"anthropic-ratelimit-tokens-reset", "2026-12-01T11:00:00Z"}},
			hasHint: true, delay: 0, source: "anthropic-ratelimit-tokens-reset",
		},
		{
			name: "retry-after wins", status: 529, headers: []hdr{{"Retry-After", "4"}, {"anthropic-ratelimit-tokens-remaining", "0"}, {"anthropic-ratelimit-tokens-reset", "2026-12-01T12:00:30Z"}},
			hasHint: true, delay: 4 * time.Second, source: "retry-after",
		},
		{
			name: "nothing exhausted", headers: []hdr{{"anthropic-ratelimit-requests-remaining", "49"}, {"anthropic-ratelimit-requests-reset", "2026-12-01T12:00:30Z"}},
			quota: &Quota{Remaining: 49, Reset: now.Add(30 * time.Second), Source: "anthropic-ratelimit-requests-reset"},
		},
	})
}

func TestReaderDiscord(t *testing.T) {
	runReaderCases(t, "discord", []readerCase{
		{
			name: "reset-after when exhausted", headers: []hdr{{"X-RateLimit-Remaining", "0"}, {"X-RateLimit-Reset-After", "1.234"}},
			hasHint: true, delay: 1234 * time.Millisecond, source: "x-ratelimit-reset-after",
			quota: &Quota{Remaining: 0, Reset: now.Add(1234 * time.Millisecond), Source: "x-ratelimit-reset-after"},
		},
		{
			name: "reset-after ignored with quota left", headers: []hdr{{"X-RateLimit-Remaining", "3"}, {"X-RateLimit-Reset-After", "1.234"}},
			quota: &Quota{Remaining: 3, Reset: now.Add(1234 * time.Millisecond), Source: "x-ratelimit-reset-after"},
		},
		{
			name: "retry-after wins", headers: []hdr{{"Retry-After", "2"}, {"X-RateLimit-Remaining", "0"}, {"X-RateLimit-Reset-After", "1.234"}},
			hasHint: true, delay: 2 * time.Second, source: "retry-after",
			quota: &Quota{Remaining: 0, Reset: now.Add(1234 * time.Millisecond), Source: "x-ratelimit-reset-after"},
		},
		{
			name: "body retry_after", body: `{"message": "You are being rate limited.", "retry_after": 64.57, "global": false}`,
			hasHint: true, delay: 64570 * time.Millisecond, source: "body:retry_after",
		},
		{name: "body integer", body: `{"retry_after": 3}`, hasHint: true, delay: 3 * time.Second, source: "body:retry_after"},
		{
			name: "invalid reset-after falls to body", headers: []hdr{{"X-RateLimit-Remaining", "0"}, {"X-RateLimit-Reset-After", "-1"}},
			body: `{"retry_after": 3}`, hasHint: true, delay: 3 * time.Second, source: "body:retry_after",
		},
		{
			name: "header beats body", headers: []hdr{{"X-RateLimit-Remaining", "0"}, {"X-RateLimit-Reset-After", "0.5"}},
			body: `{"retry_after": 3}`, hasHint: true, delay: 500 * time.Millisecond, source: "x-ratelimit-reset-after",
			quota: &Quota{Remaining: 0, Reset: now.Add(500 * time.Millisecond), Source: "x-ratelimit-reset-after"},
		},
		{name: "truncated body", body: `{"retry_after": 3`},
		{name: "negative body", body: `{"retry_after": -3}`},
		{name: "non-json body", body: `slow down`},
		{name: "reset-after with exponent", headers: []hdr{{"X-RateLimit-Remaining", "0"}, {"X-RateLimit-Reset-After", "1e3"}}},
		{name: "reset-after twice", headers: []hdr{{"X-RateLimit-Remaining", "0"}, {"X-RateLimit-Reset-After", "1"}, {"X-RateLimit-Reset-After", "2"}}},
	})
}

func TestReaderGitLab(t *testing.T) {
	exhausted := hdr{"RateLimit-Remaining", "0"}
	runReaderCases(t, "gitlab", []readerCase{
		{
			name: "ratelimit-reset exhausted", headers: []hdr{exhausted, {"RateLimit-Reset", "1796126445"}},
			hasHint: true, delay: 45 * time.Second, source: "ratelimit-reset",
			quota: &Quota{Remaining: 0, Reset: time.Unix(1796126445, 0), Source: "ratelimit-reset"},
		},
		{
			name: "ratelimit-resettime exhausted", headers: []hdr{exhausted, {"RateLimit-ResetTime", "Tue, 01 Dec 2026 12:00:30 GMT"}},
			hasHint: true, delay: 30 * time.Second, source: "ratelimit-resettime",
		},
		{
			name: "invalid reset falls to resettime", headers: []hdr{exhausted, {"RateLimit-Reset", "soon"}, {"RateLimit-ResetTime", "Tue, 01 Dec 2026 12:00:30 GMT"}},
			hasHint: true, delay: 30 * time.Second, source: "ratelimit-resettime",
		},
		{
			name: "limit reported", status: 200, headers: []hdr{{"RateLimit-Limit", "2000"}, {"RateLimit-Remaining", "1999"}, {"RateLimit-Reset", "1796126445"}},
			quota: &Quota{Remaining: 1999, Reset: time.Unix(1796126445, 0), Source: "ratelimit-reset", Limit: 2000},
		},
		{name: "retry-after first", headers: []hdr{{"Retry-After", "9"}, {"RateLimit-Reset", "1796126445"}}, hasHint: true, delay: 9 * time.Second, source: "retry-after"},
		// The reset is read only when RateLimit-Remaining is present and 0.
		{name: "reset without remaining is no hint", headers: []hdr{{"RateLimit-Reset", "1796126445"}}},
		{name: "resettime without remaining is no hint", headers: []hdr{{"RateLimit-ResetTime", "Tue, 01 Dec 2026 12:00:30 GMT"}}},
		{name: "resettime in UTC invalid", headers: []hdr{exhausted, {"RateLimit-ResetTime", "Tue, 01 Dec 2026 12:00:30 UTC"}}},
		{name: "resettime as seconds invalid", headers: []hdr{exhausted, {"RateLimit-ResetTime", "30"}}},
		{
			name: "quota left is no hint", status: 403, headers: []hdr{{"RateLimit-Remaining", "1999"}, {"RateLimit-Reset", "1796126445"}},
			quota: &Quota{Remaining: 1999, Reset: time.Unix(1796126445, 0), Source: "ratelimit-reset"},
		},
		{
			name: "quota left on a 429 is no hint", headers: []hdr{{"RateLimit-Remaining", "12"}, {"RateLimit-Reset", "1796126445"}},
			quota: &Quota{Remaining: 12, Reset: time.Unix(1796126445, 0), Source: "ratelimit-reset"},
		},
		{name: "remaining invalid is no hint", headers: []hdr{{"RateLimit-Remaining", "x"}, {"RateLimit-Reset", "1796126445"}}},
	})
}

func TestReaderShopify(t *testing.T) {
	runReaderCases(t, "shopify", []readerCase{
		{name: "decimal", headers: []hdr{{"Retry-After", "2.0"}}, hasHint: true, delay: 2 * time.Second, source: "retry-after"},
		{name: "integer", headers: []hdr{{"Retry-After", "2"}}, hasHint: true, delay: 2 * time.Second, source: "retry-after"},
		{name: "fraction", headers: []hdr{{"Retry-After", " 1.25 "}}, hasHint: true, delay: 1250 * time.Millisecond, source: "retry-after"},
		{name: "date", headers: []hdr{{"Retry-After", "Tue, 01 Dec 2026 12:00:30 GMT"}}, hasHint: true, delay: 30 * time.Second, source: "retry-after"},
		{name: "negative", headers: []hdr{{"Retry-After", "-2.0"}}},
		{name: "exponent", headers: []hdr{{"Retry-After", "2e0"}}},
		{name: "comma decimal", headers: []hdr{{"Retry-After", "2,0"}}},
		{name: "twice", headers: []hdr{{"Retry-After", "2.0"}, {"Retry-After", "2.0"}}},
		{name: "trailing point", headers: []hdr{{"Retry-After", "2."}}},
	})
}

func TestReaderX(t *testing.T) {
	runReaderCases(t, "x", []readerCase{
		{
			name: "exhausted", headers: []hdr{{"x-rate-limit-remaining", "0"}, {"x-rate-limit-reset", "1796126445"}},
			hasHint: true, delay: 45 * time.Second, source: "x-rate-limit-reset",
			quota: &Quota{Remaining: 0, Reset: time.Unix(1796126445, 0), Source: "x-rate-limit-reset"},
		},
		{
			name: "quota left", status: 200, headers: []hdr{{"x-rate-limit-remaining", "899"}, {"x-rate-limit-reset", "1796126445"}},
			quota: &Quota{Remaining: 899, Reset: time.Unix(1796126445, 0), Source: "x-rate-limit-reset"},
		},
		{
			name: "past reset", headers: []hdr{{"x-rate-limit-remaining", "0"}, {"x-rate-limit-reset", "1796126000"}},
			hasHint: true, delay: 0, source: "x-rate-limit-reset",
			quota: &Quota{Remaining: 0, Reset: time.Unix(1796126000, 0), Source: "x-rate-limit-reset"},
		},
		{name: "retry-after ignored", headers: []hdr{{"Retry-After", "5"}}},
		{name: "reset without remaining", headers: []hdr{{"x-rate-limit-reset", "1796126445"}}},
		{name: "github-style names ignored", headers: []hdr{{"x-ratelimit-remaining", "0"}, {"x-ratelimit-reset", "1796126445"}}},
	})
}

func TestReaderIETF(t *testing.T) {
	at := func(d time.Duration) time.Time { return now.Add(d) }
	runReaderCases(t, "ietf", []readerCase{
		{
			name: "exhausted item", headers: []hdr{{"RateLimit", `"default";r=0;t=30`}}, hasHint: true, delay: 30 * time.Second, source: "ratelimit",
			quota: &Quota{Remaining: 0, Reset: at(30 * time.Second), Source: "ratelimit"},
		},
		{
			name: "largest exhausted t", headers: []hdr{{"RateLimit", `"default";r=0;t=30, "daily";r=0;t=3600, "burst";r=5;t=99999`}},
			hasHint: true, delay: time.Hour, source: "ratelimit",
			quota: &Quota{Remaining: 0, Reset: at(time.Hour), Source: "ratelimit"},
		},
		{
			name: "split lines", headers: []hdr{{"RateLimit", `"default";r=0;t=30`}, {"RateLimit", `"daily";r=0;t=60`}},
			hasHint: true, delay: time.Minute, source: "ratelimit",
			quota: &Quota{Remaining: 0, Reset: at(time.Minute), Source: "ratelimit"},
		},
		{
			name: "retry-after first", headers: []hdr{{"Retry-After", "3"}, {"RateLimit", `"default";r=0;t=30`}}, hasHint: true, delay: 3 * time.Second, source: "retry-after",
			quota: &Quota{Remaining: 0, Reset: at(30 * time.Second), Source: "ratelimit"},
		},
		{
			name: "invalid retry-after falls through", headers: []hdr{{"Retry-After", "3, 4"}, {"RateLimit", `"default";r=0;t=30`}}, hasHint: true, delay: 30 * time.Second, source: "ratelimit",
			quota: &Quota{Remaining: 0, Reset: at(30 * time.Second), Source: "ratelimit"},
		},
		{
			name: "quota left", status: 200, headers: []hdr{{"RateLimit", `"default";r=1;t=30`}},
			quota: &Quota{Remaining: 1, Reset: at(30 * time.Second), Source: "ratelimit"},
		},
		{
			name: "most constraining item is the quota", status: 200, headers: []hdr{{"RateLimit", `"hour";r=90;t=1800, "minute";r=3;t=20`}},
			quota: &Quota{Remaining: 3, Reset: at(20 * time.Second), Source: "ratelimit"},
		},
		{
			name: "policy limit and window", status: 200,
			headers: []hdr{{"RateLimit-Policy", `"default";q=100;w=60`}, {"RateLimit", `"default";r=7`}},
			quota:   &Quota{Remaining: 7, Reset: at(time.Minute), Source: "ratelimit", Limit: 100},
		},
		{
			name: "policy in content-bytes is not a call quota", status: 200,
			headers: []hdr{{"RateLimit-Policy", `"bytes";q=1000000;qu="content-bytes";w=60, "calls";q=50;qu="request";w=60`}, {"RateLimit", `"bytes";r=0;t=60, "calls";r=20;t=40`}},
			hasHint: true, delay: time.Minute, source: "ratelimit",
			quota: &Quota{Remaining: 20, Reset: at(40 * time.Second), Source: "ratelimit", Limit: 50},
		},
		{
			name: "item without t or policy has no reset", status: 200, headers: []hdr{{"RateLimit", `"default";r=7`}},
		},
		{name: "malformed ignored whole", headers: []hdr{{"RateLimit", `"default";r=0;t=30, daily;r=0;t=x=`}}},
		{name: "malformed line ignored whole", headers: []hdr{{"RateLimit", `"default";r=0;t=30`}, {"RateLimit", `"broken`}}},
		{name: "old dictionary draft", headers: []hdr{{"RateLimit", `limit=100, remaining=0, reset=30`}}},
		{name: "policy header alone", headers: []hdr{{"RateLimit-Policy", `"default";q=100;w=30`}}},
		// The earlier drafts' separate fields (draft-ietf-httpapi-ratelimit-headers-06).
		{
			name: "earlier drafts exhausted", headers: []hdr{{"RateLimit-Limit", "100"}, {"RateLimit-Remaining", "0"}, {"RateLimit-Reset", "50"}},
			hasHint: true, delay: 50 * time.Second, source: "ratelimit-reset",
			quota: &Quota{Remaining: 0, Reset: at(50 * time.Second), Source: "ratelimit-reset", Limit: 100},
		},
		{
			name: "earlier drafts quota left", status: 200, headers: []hdr{{"RateLimit-Limit", "100"}, {"RateLimit-Remaining", "42"}, {"RateLimit-Reset", "50"}},
			quota: &Quota{Remaining: 42, Reset: at(50 * time.Second), Source: "ratelimit-reset", Limit: 100},
		},
		{
			name: "structured field wins over earlier drafts", headers: []hdr{{"RateLimit", `"default";r=0;t=30`}, {"RateLimit-Remaining", "0"}, {"RateLimit-Reset", "50"}},
			hasHint: true, delay: 30 * time.Second, source: "ratelimit",
			quota: &Quota{Remaining: 0, Reset: at(30 * time.Second), Source: "ratelimit"},
		},
		{name: "earlier drafts reset as a date is invalid", headers: []hdr{{"RateLimit-Remaining", "0"}, {"RateLimit-Reset", "Tue, 01 Dec 2026 12:00:30 GMT"}}},
	})
}

func TestReaderGoogle(t *testing.T) {
	const body = `{"error":{"code":429,"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"37s"}]}}`
	runReaderCases(t, "google", []readerCase{
		{name: "retry info", body: body, hasHint: true, delay: 37 * time.Second, source: "body:retryDelay"},
		{
			name: "retry info fraction", body: `{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"1.5s"}]}}`,
			hasHint: true, delay: 1500 * time.Millisecond, source: "body:retryDelay",
		},
		{name: "retry-after checked first", headers: []hdr{{"Retry-After", "2"}}, body: body, hasHint: true, delay: 2 * time.Second, source: "retry-after"},
		{name: "invalid retry-after falls to body", headers: []hdr{{"Retry-After", "2.5"}}, body: body, hasHint: true, delay: 37 * time.Second, source: "body:retryDelay"},
		{name: "truncated body", body: body[:40]},
		{name: "no body"},
	})
}

func TestReaderStripe(t *testing.T) {
	runReaderCases(t, "stripe", []readerCase{
		{name: "true", status: 409, headers: []hdr{{"Stripe-Should-Retry", "true"}}, verdict: VerdictRetry},
		{name: "false", status: 500, headers: []hdr{{"Stripe-Should-Retry", "false"}}, verdict: VerdictDoNotRetry},
		{name: "lower-case name", status: 500, headers: []hdr{{"stripe-should-retry", " false "}}, verdict: VerdictDoNotRetry},
		{
			name: "with retry-after", status: 429, headers: []hdr{{"Stripe-Should-Retry", "true"}, {"Retry-After", "1"}},
			verdict: VerdictRetry, hasHint: true, delay: time.Second, source: "retry-after",
		},
		{name: "other value", status: 500, headers: []hdr{{"Stripe-Should-Retry", "yes"}}},
		{name: "upper case value", status: 500, headers: []hdr{{"Stripe-Should-Retry", "TRUE"}}},
		{name: "duplicated", status: 500, headers: []hdr{{"Stripe-Should-Retry", "true"}, {"Stripe-Should-Retry", "false"}}},
		{name: "list", status: 500, headers: []hdr{{"Stripe-Should-Retry", "true, false"}}},
		{name: "absent", status: 500},
	})
}

func TestReaderNone(t *testing.T) {
	runReaderCases(t, "none", []readerCase{
		{name: "retry-after ignored", headers: []hdr{{"Retry-After", "5"}}},
		{name: "github headers ignored", status: 403, headers: []hdr{{"x-ratelimit-remaining", "0"}, {"x-ratelimit-reset", "1796126445"}}},
		{name: "stripe ignored", headers: []hdr{{"Stripe-Should-Retry", "false"}}},
	})
}

func TestReadersNeverPanicOnEmpty(t *testing.T) {
	for _, name := range Names() {
		rd, _ := Lookup(name)
		for _, r := range []*Response{nil, {}, {Status: 429}, {Header: http.Header{"Retry-After": nil}}} {
			got := rd.Read(r)
			if got.HasHint || got.HasQuota || got.Verdict != VerdictNone {
				t.Errorf("%s.Read(%+v) = %+v", name, r, got)
			}
		}
	}
}

// TestConformanceVectors mirrors, by hand, the hint-related vectors of the
// shared classify.jsonl (the engine's tests run the file itself): each
// reader must produce the hint or no-hint those decisions rest on.
func TestConformanceVectors(t *testing.T) {
	cases := []struct {
		name     string
		provider string
		status   int
		headers  []hdr
		hasHint  bool
		delayMs  int64
		source   string
	}{
		{"400-with-retry-after-not-retryable", "", 400, []hdr{{"Retry-After", "5"}}, true, 5000, "retry-after"},
		{"403-without-hint", "", 403, nil, false, 0, ""},
		{"403-with-retry-after", "", 403, []hdr{{"Retry-After", "7"}}, true, 7000, "retry-after"},
		{"429-retry-after-seconds", "", 429, []hdr{{"Retry-After", "5"}}, true, 5000, "retry-after"},
		{"503-retry-after-seconds", "", 503, []hdr{{"Retry-After", "3"}}, true, 3000, "retry-after"},
		{"retry-after-imf-fixdate", "", 503, []hdr{{"Retry-After", "Tue, 01 Dec 2026 12:00:30 GMT"}}, true, 30000, "retry-after"},
		{"retry-after-rfc850", "", 503, []hdr{{"Retry-After", "Tuesday, 01-Dec-26 12:00:20 GMT"}}, true, 20000, "retry-after"},
		{"retry-after-asctime", "", 503, []hdr{{"Retry-After", "Tue Dec  1 12:00:10 2026"}}, true, 10000, "retry-after"},
		{"retry-after-past-date-is-zero", "", 429, []hdr{{"Retry-After", "Tue, 01 Dec 2026 11:55:00 GMT"}}, true, 0, "retry-after"},
		{"retry-after-zero", "", 429, []hdr{{"Retry-After", "0"}}, true, 0, "retry-after"},
		{"retry-after-decimal-invalid", "", 429, []hdr{{"Retry-After", "1.5"}}, false, 0, ""},
		{"retry-after-negative-invalid", "", 429, []hdr{{"Retry-After", "-1"}}, false, 0, ""},
		{"retry-after-plus-sign-invalid", "", 429, []hdr{{"Retry-After", "+5"}}, false, 0, ""},
		{"retry-after-list-ambiguous", "", 429, []hdr{{"Retry-After", "120, 60"}}, false, 0, ""},
		{"retry-after-twice-ambiguous", "", 429, []hdr{{"Retry-After", "5"}, {"Retry-After", "6"}}, false, 0, ""},
		{"retry-after-whitespace-trimmed", "", 429, []hdr{{"Retry-After", "  12  "}}, true, 12000, "retry-after"},
		{"retry-after-garbage", "", 429, []hdr{{"Retry-After", "soon"}}, false, 0, ""},
		{"retry-after-overflow", "", 429, []hdr{{"Retry-After", "99999999999999999999"}}, false, 0, ""},
		{"retry-after-utc-zone-invalid", "", 429, []hdr{{"Retry-After", "Tue, 01 Dec 2026 12:00:30 UTC"}}, false, 0, ""},
		{"retry-after-at-max-delay", "", 429, []hdr{{"Retry-After", "60"}}, true, 60000, "retry-after"},
		{"retry-after-over-max-delay", "", 429, []hdr{{"Retry-After", "61"}}, true, 61000, "retry-after"},
		{"retry-after-header-name-case", "", 429, []hdr{{"retry-after", "2"}}, true, 2000, "retry-after"},
		{"azure-x-ms-retry-after-ms", "azure", 429, []hdr{{"x-ms-retry-after-ms", "1500"}}, true, 1500, "x-ms-retry-after-ms"},
		{"azure-retry-after-ms", "azure", 429, []hdr{{"retry-after-ms", "250"}}, true, 250, "retry-after-ms"},
		{"azure-invalid-falls-through", "azure", 429, []hdr{{"x-ms-retry-after-ms", "abc"}, {"retry-after-ms", "300"}}, true, 300, "retry-after-ms"},
		{"azure-ms-beats-retry-after", "azure", 429, []hdr{{"Retry-After", "10"}, {"x-ms-retry-after-ms", "2000"}}, true, 2000, "x-ms-retry-after-ms"},
		{"azure-retry-after-only", "azure", 503, []hdr{{"Retry-After", "3"}}, true, 3000, "retry-after"},
		{"aws-x-amz-retry-after", "aws", 503, []hdr{{"x-amz-retry-after", "2000"}}, true, 2000, "x-amz-retry-after"},
		{"aws-invalid-falls-to-retry-after", "aws", 503, []hdr{{"x-amz-retry-after", "1e3"}, {"Retry-After", "4"}}, true, 4000, "retry-after"},
		{"github-403-quota-exhausted", "github", 403, []hdr{{"x-ratelimit-remaining", "0"}, {"x-ratelimit-reset", "1796126445"}}, true, 45000, "x-ratelimit-reset"},
		{"github-403-quota-left-not-retryable", "github", 403, []hdr{{"x-ratelimit-remaining", "12"}, {"x-ratelimit-reset", "1796126445"}}, false, 0, ""},
		{"github-403-plain", "github", 403, nil, false, 0, ""},
		{"github-retry-after-wins", "github", 429, []hdr{{"Retry-After", "30"}, {"x-ratelimit-remaining", "0"}, {"x-ratelimit-reset", "1796126450"}}, true, 30000, "retry-after"},
		{"github-reset-in-past", "github", 403, []hdr{{"x-ratelimit-remaining", "0"}, {"x-ratelimit-reset", "1796126390"}}, true, 0, "x-ratelimit-reset"},
		{"github-reset-ignored-on-500", "github", 500, []hdr{{"x-ratelimit-remaining", "0"}, {"x-ratelimit-reset", "1796126445"}}, false, 0, ""},
		{"github-reset-too-far", "github", 403, []hdr{{"x-ratelimit-remaining", "0"}, {"x-ratelimit-reset", "1796128200"}}, true, 1800000, "x-ratelimit-reset"},
		{"jira-429-iso-reset", "jira", 429, []hdr{{"X-RateLimit-Reset", "2026-12-01T12:00:30Z"}}, true, 30000, "x-ratelimit-reset"},
		{"jira-429-iso-reset-no-seconds", "jira", 429, []hdr{{"X-RateLimit-Reset", "2026-12-01T12:01Z"}}, true, 60000, "x-ratelimit-reset"},
		{"jira-reset-ignored-on-503", "jira", 503, []hdr{{"X-RateLimit-Reset", "2026-12-01T12:00:30Z"}}, false, 0, ""},
		{"jira-retry-after-wins", "jira", 429, []hdr{{"Retry-After", "5"}, {"X-RateLimit-Reset", "2026-12-01T12:00:30Z"}}, true, 5000, "retry-after"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := c.provider
			if p == "" {
				p = "retry-after"
			}
			rd, ok := Lookup(p)
			if !ok {
				t.Fatalf("no reader %q", p)
			}
			got := rd.Read(response(c.status, c.headers, ""))
			want := time.Duration(c.delayMs) * time.Millisecond
			if got.HasHint != c.hasHint || (c.hasHint && (got.Hint.Delay != want || got.Hint.Source != c.source)) {
				t.Errorf("got %+v (has %v); want {%v %q} (has %v)", got.Hint, got.HasHint, want, c.source, c.hasHint)
			}
		})
	}
}
