package providers

import (
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"
)

func TestNamesAndLookup(t *testing.T) {
	want := []string{"anthropic", "aws", "azure", "discord", "github", "gitlab", "google", "ietf", "jira", "none", "openai", "retry-after", "shopify", "stripe", "x"}
	got := Names()
	if !slices.Equal(got, want) {
		t.Fatalf("Names() = %v, want %v", got, want)
	}
	for _, n := range got {
		rd, ok := Lookup(n)
		if !ok || rd.Name() != n {
			t.Errorf("Lookup(%q) = %v, %v", n, rd, ok)
		}
	}
	for _, n := range []string{"", "GitHub", "custom", "retry_after", "default"} {
		if rd, ok := Lookup(n); ok || rd != nil {
			t.Errorf("Lookup(%q) = %v, %v; want nil, false", n, rd, ok)
		}
	}
	got[0] = "mutated"
	if Names()[0] != "anthropic" {
		t.Error("Names() shares its slice")
	}
}

func TestNewCustomReader(t *testing.T) {
	cases := []struct {
		header  string
		format  Format
		value   string
		hasHint bool
		delay   time.Duration
	}{
		{"X-Wait-Seconds", FormatSeconds, "5", true, 5 * time.Second},
		{"X-Wait-Seconds", FormatSeconds, "1.5", false, 0},
		{"X-Wait-Seconds", FormatSeconds, "Tue, 01 Dec 2026 12:00:30 GMT", false, 0},
		{"x-wait-ms", FormatMilliseconds, "250", true, 250 * time.Millisecond},
		{"x-wait-ms", FormatMilliseconds, "-250", false, 0},
		{"X-Reset", FormatUnixSeconds, "1796126445", true, 45 * time.Second},
		{"X-Reset", FormatUnixSeconds, "1796126000", true, 0},
		{"X-Reset", FormatUnixSeconds, "45", true, 0}, // 1970 is in the past
		{"X-Retry", FormatRetryAfter, "7", true, 7 * time.Second},
		{"X-Retry", FormatRetryAfter, "Tue, 01 Dec 2026 12:00:30 GMT", true, 30 * time.Second},
		{"X-Retry", FormatRetryAfter, "7, 8", false, 0},
		{"X-Reset-At", FormatISO8601, "2026-12-01T12:01Z", true, time.Minute},
		{"X-Reset-At", FormatISO8601, "2026-12-01T12:01", false, 0},
	}
	for _, c := range cases {
		rd, err := NewCustomReader(c.header, c.format)
		if err != nil {
			t.Fatalf("NewCustomReader(%q, %q): %v", c.header, c.format, err)
		}
		lower := lowerASCII(c.header)
		if rd.Name() != "custom:"+lower || rd.ExtraRetryableStatuses() != nil {
			t.Errorf("custom reader name %q, extra %v", rd.Name(), rd.ExtraRetryableStatuses())
		}
		got := rd.Read(response(429, []hdr{{lower, c.value}}, ""))
		if got.HasHint != c.hasHint || (c.hasHint && (got.Hint.Delay != c.delay || got.Hint.Source != lower)) {
			t.Errorf("custom %s/%s %q: %+v (has %v); want %v (has %v)", c.header, c.format, c.value, got.Hint, got.HasHint, c.delay, c.hasHint)
		}
		// The same header twice is ambiguous.
		twice := rd.Read(response(429, []hdr{{c.header, c.value}, {lower, c.value}}, ""))
		if twice.HasHint {
			t.Errorf("custom %s: duplicated header gave %+v", c.header, twice.Hint)
		}
	}
	if got := mustCustom(t, "X-Wait", FormatSeconds).Read(nil); got.HasHint {
		t.Errorf("Read(nil) = %+v", got)
	}
}

func mustCustom(t *testing.T, header string, f Format) HintReader {
	t.Helper()
	rd, err := NewCustomReader(header, f)
	if err != nil {
		t.Fatal(err)
	}
	return rd
}

func TestNewCustomReaderErrors(t *testing.T) {
	for _, h := range []string{"", "X Wait", "X-Wait:", "X-Wait\r\n", "Wait(s)", "X-Wäit", "a/b", `"x"`} {
		if _, err := NewCustomReader(h, FormatSeconds); !errors.Is(err, ErrInvalidHeaderName) {
			t.Errorf("NewCustomReader(%q) error = %v; want ErrInvalidHeaderName", h, err)
		}
	}
	for _, f := range []Format{"", "Seconds", "ms", "http-date", "unix"} {
		if _, err := NewCustomReader("X-Wait", f); !errors.Is(err, ErrUnknownFormat) {
			t.Errorf("NewCustomReader(format %q) error = %v; want ErrUnknownFormat", f, err)
		}
	}
	if _, err := NewCustomReader("x!#$%&'*+-.^_`|~9", FormatSeconds); err != nil {
		t.Errorf("every tchar should be accepted: %v", err)
	}
}

// fixedReader returns a canned reading.
type fixedReader struct {
	name  string
	out   Reading
	extra []int
}

func (f fixedReader) Name() string                  { return f.name }
func (f fixedReader) Read(*Response) Reading        { return f.out }
func (f fixedReader) ExtraRetryableStatuses() []int { return f.extra }

func TestChain(t *testing.T) {
	hintA := Reading{Hint: Hint{Delay: time.Second, Source: "a"}, HasHint: true}
	hintB := Reading{
		Hint: Hint{Delay: 2 * time.Second, Source: "b"}, HasHint: true,
		Verdict: VerdictDoNotRetry, Quota: Quota{Remaining: 3, Source: "b"}, HasQuota: true,
	}
	verdictC := Reading{Verdict: VerdictRetry, Quota: Quota{Remaining: 9, Source: "c"}, HasQuota: true}

	c := Chain("policy", nil, fixedReader{name: "empty", extra: []int{529, 503}},
		fixedReader{name: "a", out: hintA}, fixedReader{name: "b", out: hintB, extra: []int{503, 420}},
		fixedReader{name: "c", out: verdictC})
	if c.Name() != "policy" {
		t.Errorf("Name() = %q", c.Name())
	}
	got := c.Read(&Response{})
	want := Reading{Hint: hintA.Hint, HasHint: true, Verdict: VerdictDoNotRetry, Quota: hintB.Quota, HasQuota: true}
	if got != want {
		t.Errorf("Read = %+v; want %+v", got, want)
	}
	if extra := c.ExtraRetryableStatuses(); !slices.Equal(extra, []int{420, 503, 529}) {
		t.Errorf("ExtraRetryableStatuses = %v", extra)
	}
	if extra := Chain("x", fixedReader{}).ExtraRetryableStatuses(); extra != nil {
		t.Errorf("empty union = %v, want nil", extra)
	}
	if got := Chain("empty").Read(&Response{}); got != (Reading{}) {
		t.Errorf("empty chain read %+v", got)
	}
}

func TestChainCustomBeforeAndAfterProvider(t *testing.T) {
	custom := mustCustom(t, "X-Backoff-Ms", FormatMilliseconds)
	github, _ := Lookup("github")
	anthropic, _ := Lookup("anthropic")
	resp := response(429, []hdr{{"Retry-After", "5"}, {"X-Backoff-Ms", "750"}, {"x-ratelimit-remaining", "0"}, {"x-ratelimit-reset", "1796126445"}}, "")

	before := Chain("before", custom, github).Read(resp)
	if before.Hint != (Hint{Delay: 750 * time.Millisecond, Source: "x-backoff-ms"}) || !before.HasQuota {
		t.Errorf("custom before provider: %+v", before)
	}
	after := Chain("after", github, custom).Read(resp)
	if after.Hint != (Hint{Delay: 5 * time.Second, Source: "retry-after"}) {
		t.Errorf("custom after provider: %+v", after)
	}
	// The custom reader is the fallback when the provider finds nothing.
	resp.Header.Del("Retry-After")
	resp.Status = http.StatusInternalServerError
	fallback := Chain("after", github, custom).Read(resp)
	if fallback.Hint != (Hint{Delay: 750 * time.Millisecond, Source: "x-backoff-ms"}) {
		t.Errorf("custom as fallback: %+v", fallback)
	}
	if got := Chain("c", custom, anthropic).ExtraRetryableStatuses(); !slices.Equal(got, []int{529}) {
		t.Errorf("extra = %v", got)
	}
}

func TestDefaultHostMap(t *testing.T) {
	hosts := 0
	for _, e := range Builtin().Entries() {
		hosts += len(e.Hosts())
	}
	if tb := defaultTable(); len(tb.exact)+len(tb.suffixes) != hosts || hosts != 13 {
		t.Fatalf("default host table has %d exact and %d wildcard entries; the catalog has %d hosts, want 13", len(tb.exact), len(tb.suffixes), hosts)
	}
	m := DefaultHostMap()
	cases := map[string]string{
		"api.github.com":                     "github",
		"API.GitHub.com":                     "github",
		"api.github.com:443":                 "github",
		"api.github.com.":                    "github",
		"api.github.com.:8443":               "github",
		"foo.atlassian.net":                  "jira",
		"a.b.atlassian.net":                  "jira",
		"management.azure.com":               "azure",
		"s3.us-east-1.amazonaws.com":         "aws",
		"api.openai.com":                     "openai",
		"api.anthropic.com":                  "anthropic",
		"discord.com":                        "discord",
		"gitlab.com":                         "gitlab",
		"shop.myshopify.com":                 "shopify",
		"api.x.com":                          "x",
		"api.twitter.com":                    "x",
		"generativelanguage.googleapis.com":  "google",
		"api.stripe.com":                     "stripe",
		"atlassian.net":                      "",
		"evilatlassian.net":                  "",
		"foo.atlassian.net.evil.com":         "",
		"github.com":                         "",
		"www.api.github.com":                 "",
		"example.com":                        "",
		"":                                   "",
		"[::1]:443":                          "",
		"api.github.com@evil.com":            "",
		"FOO.ATLASSIAN.NET:443":              "jira",
		"bucket.s3.amazonaws.com.":           "aws",
		"api.stripe.com:":                    "stripe",
		"2001:db8::1":                        "",
		"a.googleapis.com.evil.googleapis.c": "",
	}
	for host, want := range cases {
		got, ok := m.ProviderFor(host)
		if got != want || ok != (want != "") {
			t.Errorf("ProviderFor(%q) = %q, %v; want %q", host, got, ok, want)
		}
	}
	var zero HostMap
	if p, ok := zero.ProviderFor("api.github.com"); ok {
		t.Errorf("zero HostMap mapped to %q", p)
	}
}

func TestNewHostMap(t *testing.T) {
	m, err := NewHostMap(map[string]string{
		"api.github.com":      "none",        // exact override of an exact default
		"*.amazonaws.com":     "retry-after", // wildcard override of a wildcard default
		"*.openai.com":        "azure",       // wildcard override beats an exact default
		"ghe.corp.example.":   "github",      // new exact host, trailing dot
		"*.Corp.Example":      "gitlab",      // new wildcard, mixed case
		"*.deep.corp.example": "jira",        // longer wildcard wins
		"10.0.0.1":            "stripe",
		"[2001:db8::1]":       "discord",
	})
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		"api.github.com":       "none",
		"s3.amazonaws.com":     "retry-after",
		"api.openai.com":       "azure",
		"ghe.corp.example":     "github",
		"GHE.corp.example:443": "github",
		"other.corp.example":   "gitlab",
		"a.deep.corp.example":  "jira",
		"deep.corp.example":    "gitlab",
		"corp.example":         "",
		"foo.atlassian.net":    "jira", // defaults still apply
		"10.0.0.1:8080":        "stripe",
		"[2001:db8::1]:443":    "discord",
	}
	for host, want := range cases {
		got, ok := m.ProviderFor(host)
		if got != want || ok != (want != "") {
			t.Errorf("ProviderFor(%q) = %q, %v; want %q", host, got, ok, want)
		}
	}

	for _, bad := range []string{"", "*", "*.", "*.*.example.com", "a*.example.com", "example.com:443", "exa mple.com", "http://example.com", "a..b", "*example.com", "ex/ample"} {
		if _, err := NewHostMap(map[string]string{bad: "github"}); !errors.Is(err, ErrInvalidHostPattern) {
			t.Errorf("NewHostMap key %q: err = %v; want ErrInvalidHostPattern", bad, err)
		}
	}
	for _, bad := range []string{"", "GitHub", "custom:x", "default"} {
		if _, err := NewHostMap(map[string]string{"api.example.com": bad}); !errors.Is(err, ErrUnknownProvider) {
			t.Errorf("NewHostMap value %q: err = %v; want ErrUnknownProvider", bad, err)
		}
	}
	if m, err := NewHostMap(nil); err != nil {
		t.Errorf("NewHostMap(nil): %v", err)
	} else if p, _ := m.ProviderFor("api.github.com"); p != "github" {
		t.Errorf("NewHostMap(nil) lost defaults: %q", p)
	}
}
