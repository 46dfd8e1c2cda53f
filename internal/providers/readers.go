package providers

import (
	"net/http"
	"net/textproto"
	"strings"
	"time"
)

// field is a header name in both the canonical form used as an http.Header
// key and the lower-case form reported as a Source. Both are computed once,
// so reading a header allocates nothing.
type field struct {
	key    string // canonical, e.g. "Retry-After"
	source string // lower case, e.g. "retry-after"
}

func newField(name string) field {
	return field{key: textproto.CanonicalMIMEHeaderKey(name), source: strings.ToLower(name)}
}

// Header fields the built-in readers look at.
var (
	hRetryAfter        = newField("Retry-After")
	hRetryAfterMs      = newField("retry-after-ms")
	hXMsRetryAfterMs   = newField("x-ms-retry-after-ms")
	hXAmzRetryAfter    = newField("x-amz-retry-after")
	hXRateLimitRemain  = newField("x-ratelimit-remaining")
	hXRateLimitReset   = newField("x-ratelimit-reset")
	hOpenAIRemainReq   = newField("x-ratelimit-remaining-requests")
	hOpenAIResetReq    = newField("x-ratelimit-reset-requests")
	hOpenAIRemainTok   = newField("x-ratelimit-remaining-tokens")
	hOpenAIResetTok    = newField("x-ratelimit-reset-tokens")
	hDiscordResetAfter = newField("x-ratelimit-reset-after")
	hRateLimitRemain   = newField("ratelimit-remaining")
	hRateLimitReset    = newField("ratelimit-reset")
	hRateLimitResetTm  = newField("ratelimit-resettime")
	hXRateLimit2Remain = newField("x-rate-limit-remaining")
	hXRateLimit2Reset  = newField("x-rate-limit-reset")
	hRateLimit         = newField("ratelimit")
	hStripeShouldRetry = newField("stripe-should-retry")

	anthropicFamilies = [...]struct{ remaining, reset field }{
		{newField("anthropic-ratelimit-requests-remaining"), newField("anthropic-ratelimit-requests-reset")},
		{newField("anthropic-ratelimit-tokens-remaining"), newField("anthropic-ratelimit-tokens-reset")},
		{newField("anthropic-ratelimit-input-tokens-remaining"), newField("anthropic-ratelimit-input-tokens-reset")},
		{newField("anthropic-ratelimit-output-tokens-remaining"), newField("anthropic-ratelimit-output-tokens-reset")},
	}
)

// Body field sources.
const (
	sourceDiscordBody = "body:retry_after"
	sourceGoogleBody  = "body:retryDelay"
)

// single returns the only value of a single-value header. A header that is
// absent or appears more than once is not usable and gives false. (A value
// holding a list, such as "120, 60", is rejected by every parser except the
// HTTP-date one, whose grammar has exactly one comma in a fixed place.)
func single(h http.Header, key string) (string, bool) {
	vs := h[key]
	if len(vs) != 1 {
		return "", false
	}
	return vs[0], true
}

// ParseRetryAfter parses a Retry-After value, which is either delay-seconds
// (see ParseDelaySeconds) or an HTTP-date (see ParseHTTPDate), into the wait
// from now. A date in the past gives 0.
func ParseRetryAfter(s string, now time.Time) (time.Duration, bool) {
	s = trimOWS(s)
	if s != "" && s[0] >= '0' && s[0] <= '9' {
		return ParseDelaySeconds(s)
	}
	t, ok := ParseHTTPDate(s, now)
	if !ok {
		return 0, false
	}
	return DelayUntil(t, now)
}

// valueFormat is how a header's value encodes a delay.
type valueFormat int8

const (
	formatSeconds        valueFormat = iota // delay-seconds
	formatMilliseconds                      // whole milliseconds
	formatUnixSeconds                       // absolute, Unix seconds
	formatRetryAfter                        // delay-seconds or HTTP-date
	formatISO8601                           // absolute, ISO 8601
	formatDecimalOrDate                     // decimal seconds or HTTP-date (Shopify)
	formatDecimalSeconds                    // decimal seconds
	formatHTTPDate                          // absolute, HTTP-date
	formatGoDuration                        // Go-style duration
	formatRFC3339                           // absolute, RFC 3339
)

// parseValue parses one header value in format f into a delay from now.
func parseValue(v string, f valueFormat, now time.Time) (time.Duration, bool) {
	switch f {
	case formatSeconds:
		return ParseDelaySeconds(v)
	case formatMilliseconds:
		return ParseMilliseconds(v)
	case formatRetryAfter:
		return ParseRetryAfter(v, now)
	case formatDecimalSeconds:
		return ParseDecimalSeconds(v)
	case formatDecimalOrDate:
		if d, ok := ParseDecimalSeconds(v); ok {
			return d, true
		}
		return ParseRetryAfter(v, now)
	case formatGoDuration:
		return ParseGoDuration(v)
	}
	var t time.Time
	var ok bool
	switch f {
	case formatUnixSeconds:
		t, ok = ParseUnixSeconds(v)
	case formatISO8601:
		t, ok = ParseISO8601(v)
	case formatHTTPDate:
		t, ok = ParseHTTPDate(v, now)
	case formatRFC3339:
		t, ok = ParseRFC3339(v)
	}
	if !ok {
		return 0, false
	}
	return DelayUntil(t, now)
}

// parseTime parses one header value in format f into an absolute time;
// relative formats count from now.
func parseTime(v string, f valueFormat, now time.Time) (time.Time, bool) {
	switch f {
	case formatUnixSeconds:
		return ParseUnixSeconds(v)
	case formatISO8601:
		return ParseISO8601(v)
	case formatHTTPDate:
		return ParseHTTPDate(v, now)
	case formatRFC3339:
		return ParseRFC3339(v)
	}
	d, ok := parseValue(v, f, now)
	if !ok {
		return time.Time{}, false
	}
	return now.Add(d), true
}

// headerHint reads the delay set by one single-value header.
func headerHint(r *Response, f field, format valueFormat) (Hint, bool) {
	v, ok := single(r.Header, f.key)
	if !ok {
		return Hint{}, false
	}
	d, ok := parseValue(v, format, r.Now)
	if !ok {
		return Hint{}, false
	}
	return Hint{Delay: d, Source: f.source}, true
}

// isZero reports whether a single-value count header is present, valid and 0.
func isZero(h http.Header, f field) bool {
	v, ok := single(h, f.key)
	if !ok {
		return false
	}
	n, ok := ParseCount(v)
	return ok && n == 0
}

// quota reads a remaining count and a reset from two single-value headers.
func quota(r *Response, remaining, reset field, format valueFormat) (Quota, bool) {
	rv, ok := single(r.Header, remaining.key)
	if !ok {
		return Quota{}, false
	}
	n, ok := ParseCount(rv)
	if !ok {
		return Quota{}, false
	}
	tv, ok := single(r.Header, reset.key)
	if !ok {
		return Quota{}, false
	}
	t, ok := parseTime(tv, format, r.Now)
	if !ok {
		return Quota{}, false
	}
	return Quota{Remaining: n, Reset: t, Source: reset.source}, true
}

// reader is a built-in HintReader: a name, a read function and the statuses
// it adds.
type reader struct {
	name  string
	read  func(r *Response) Reading
	extra []int
}

// Name returns the reader's name as used in policies.
func (rd *reader) Name() string { return rd.name }

// Read returns what the response says. A nil response gives an empty Reading.
func (rd *reader) Read(r *Response) Reading {
	var out Reading
	if r != nil && rd.read != nil {
		out = rd.read(r)
	}
	return out
}

// ExtraRetryableStatuses returns the statuses this reader adds; callers must
// not modify the slice.
func (rd *reader) ExtraRetryableStatuses() []int { return rd.extra }

// setHint stores h in out when ok and out has no hint yet, and reports
// whether out now has a hint.
func setHint(out *Reading, h Hint, ok bool) bool {
	if ok && !out.HasHint {
		out.Hint, out.HasHint = h, true
	}
	return out.HasHint
}

// tryHeader reads a hint from one header into out when out has none yet, and
// reports whether out now has a hint.
func tryHeader(r *Response, out *Reading, f field, format valueFormat) bool {
	if out.HasHint {
		return true
	}
	out.Hint, out.HasHint = headerHint(r, f, format)
	return out.HasHint
}

// firstHint tries each (field, format) pair in order and keeps the first
// valid hint.
func firstHint(r *Response, out *Reading, fields []field, formats []valueFormat) {
	for i, f := range fields {
		if h, ok := headerHint(r, f, formats[i]); ok {
			out.Hint, out.HasHint = h, true
			return
		}
	}
}

func readRetryAfter(r *Response) (res Reading) {
	out := &res
	out.Hint, out.HasHint = headerHint(r, hRetryAfter, formatRetryAfter)
	return res
}

func readAzure(r *Response) (res Reading) {
	out := &res
	firstHint(r, out,
		[]field{hXMsRetryAfterMs, hRetryAfterMs, hRetryAfter},
		[]valueFormat{formatMilliseconds, formatMilliseconds, formatRetryAfter})
	return res
}

func readAWS(r *Response) (res Reading) {
	out := &res
	firstHint(r, out,
		[]field{hXAmzRetryAfter, hRetryAfter},
		[]valueFormat{formatMilliseconds, formatRetryAfter})
	return res
}

func readGitHub(r *Response) (res Reading) {
	out := &res
	if !tryHeader(r, out, hRetryAfter, formatRetryAfter) &&
		(r.Status == http.StatusForbidden || r.Status == http.StatusTooManyRequests) &&
		isZero(r.Header, hXRateLimitRemain) {
		tryHeader(r, out, hXRateLimitReset, formatUnixSeconds)
	}
	out.Quota, out.HasQuota = quota(r, hXRateLimitRemain, hXRateLimitReset, formatUnixSeconds)
	return res
}

func readJira(r *Response) (res Reading) {
	out := &res
	if !tryHeader(r, out, hRetryAfter, formatRetryAfter) && r.Status == http.StatusTooManyRequests {
		tryHeader(r, out, hXRateLimitReset, formatISO8601)
	}
	out.Quota, out.HasQuota = quota(r, hXRateLimitRemain, hXRateLimitReset, formatISO8601)
	return res
}

func readOpenAI(r *Response) (res Reading) {
	out := &res
	if !tryHeader(r, out, hRetryAfterMs, formatMilliseconds) &&
		!tryHeader(r, out, hRetryAfter, formatRetryAfter) {
		// When both quotas are exhausted the longer reset wins.
		var best Hint
		found := false
		if isZero(r.Header, hOpenAIRemainReq) {
			best, found = headerHint(r, hOpenAIResetReq, formatGoDuration)
		}
		if isZero(r.Header, hOpenAIRemainTok) {
			if h, ok := headerHint(r, hOpenAIResetTok, formatGoDuration); ok && (!found || h.Delay > best.Delay) {
				best, found = h, true
			}
		}
		setHint(out, best, found)
	}
	out.Quota, out.HasQuota = quota(r, hOpenAIRemainReq, hOpenAIResetReq, formatGoDuration)
	return res
}

func readAnthropic(r *Response) (res Reading) {
	out := &res
	if !tryHeader(r, out, hRetryAfter, formatRetryAfter) {
		// The latest reset among exhausted families wins.
		var best Hint
		found := false
		for _, fam := range anthropicFamilies {
			if !isZero(r.Header, fam.remaining) {
				continue
			}
			if h, ok := headerHint(r, fam.reset, formatRFC3339); ok && (!found || h.Delay > best.Delay) {
				best, found = h, true
			}
		}
		setHint(out, best, found)
	}
	fam := anthropicFamilies[0]
	out.Quota, out.HasQuota = quota(r, fam.remaining, fam.reset, formatRFC3339)
	return res
}

func readDiscord(r *Response) (res Reading) {
	out := &res
	if !tryHeader(r, out, hRetryAfter, formatRetryAfter) {
		if isZero(r.Header, hXRateLimitRemain) {
			tryHeader(r, out, hDiscordResetAfter, formatDecimalSeconds)
		}
		if !out.HasHint {
			if d, ok := ParseDiscordBody(r.Body); ok {
				setHint(out, Hint{Delay: d, Source: sourceDiscordBody}, true)
			}
		}
	}
	out.Quota, out.HasQuota = quota(r, hXRateLimitRemain, hDiscordResetAfter, formatDecimalSeconds)
	return res
}

func readGitLab(r *Response) (res Reading) {
	out := &res
	if !tryHeader(r, out, hRetryAfter, formatRetryAfter) && rateLimitExhaustedOrUnknown(r.Header) {
		if !tryHeader(r, out, hRateLimitReset, formatUnixSeconds) {
			tryHeader(r, out, hRateLimitResetTm, formatHTTPDate)
		}
	}
	out.Quota, out.HasQuota = quota(r, hRateLimitRemain, hRateLimitReset, formatUnixSeconds)
	return res
}

// rateLimitExhaustedOrUnknown reports whether GitLab's RateLimit-Remaining is
// absent or 0. A reset time that comes with quota still left is not a request
// to wait: GitLab may send its RateLimit-* headers on ordinary responses, and
// a 403 that is not about quota must not turn into a retry.
func rateLimitExhaustedOrUnknown(h http.Header) bool {
	if _, present := h[hRateLimitRemain.key]; !present {
		return true
	}
	return isZero(h, hRateLimitRemain)
}

func readShopify(r *Response) (res Reading) {
	out := &res
	out.Hint, out.HasHint = headerHint(r, hRetryAfter, formatDecimalOrDate)
	return res
}

func readX(r *Response) (res Reading) {
	out := &res
	if isZero(r.Header, hXRateLimit2Remain) {
		out.Hint, out.HasHint = headerHint(r, hXRateLimit2Reset, formatUnixSeconds)
	}
	out.Quota, out.HasQuota = quota(r, hXRateLimit2Remain, hXRateLimit2Reset, formatUnixSeconds)
	return res
}

func readIETF(r *Response) (res Reading) {
	out := &res
	if tryHeader(r, out, hRetryAfter, formatRetryAfter) {
		return res
	}
	lines := r.Header[hRateLimit.key]
	if len(lines) == 0 {
		return res
	}
	if d, ok := RateLimitDelay(lines); ok {
		out.Hint, out.HasHint = Hint{Delay: d, Source: hRateLimit.source}, true
	}
	return res
}

// readGoogle checks Retry-After before the body. Google's APIs put the delay
// in the body's RetryInfo; some front ends (and proxies in front of Google)
// send Retry-After instead, and a header that the server did send is as
// authoritative as the body, so it is honoured first.
func readGoogle(r *Response) (res Reading) {
	out := &res
	if tryHeader(r, out, hRetryAfter, formatRetryAfter) {
		return res
	}
	if d, ok := ParseGoogleRetryInfo(r.Body); ok {
		out.Hint, out.HasHint = Hint{Delay: d, Source: sourceGoogleBody}, true
	}
	return res
}

func readStripe(r *Response) (res Reading) {
	out := &res
	*out = readRetryAfter(r)
	if v, ok := single(r.Header, hStripeShouldRetry.key); ok {
		switch trimOWS(v) {
		case "true":
			out.Verdict = VerdictRetry
		case "false":
			out.Verdict = VerdictDoNotRetry
		}
	}
	return res
}

// Built-in readers, by name.
var builtins = map[string]*reader{
	"retry-after": {name: "retry-after", read: readRetryAfter},
	"azure":       {name: "azure", read: readAzure},
	"aws":         {name: "aws", read: readAWS},
	"github":      {name: "github", read: readGitHub},
	"jira":        {name: "jira", read: readJira},
	"openai":      {name: "openai", read: readOpenAI},
	"anthropic":   {name: "anthropic", read: readAnthropic, extra: []int{529}},
	"discord":     {name: "discord", read: readDiscord},
	"gitlab":      {name: "gitlab", read: readGitLab},
	"shopify":     {name: "shopify", read: readShopify},
	"x":           {name: "x", read: readX},
	"ietf":        {name: "ietf", read: readIETF},
	"google":      {name: "google", read: readGoogle},
	"stripe":      {name: "stripe", read: readStripe},
	"none":        {name: "none"},
}
