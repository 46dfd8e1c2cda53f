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

// sourceGoogleBody is the hint source of the google_retry_info format.
const sourceGoogleBody = "body:retryDelay"

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
	formatSeconds         valueFormat = iota // delay-seconds
	formatMilliseconds                       // whole milliseconds
	formatUnixSeconds                        // absolute, Unix seconds
	formatRetryAfter                         // delay-seconds or HTTP-date
	formatISO8601                            // absolute, ISO 8601
	formatDecimalOrDate                      // decimal seconds or HTTP-date (Shopify)
	formatDecimalSeconds                     // decimal seconds
	formatHTTPDate                           // absolute, HTTP-date
	formatGoDuration                         // Go-style duration
	formatRFC3339                            // absolute, RFC 3339
	formatIETFRateLimit                      // IETF RateLimit list (hint steps only)
	formatJSONSeconds                        // JSON number of seconds in the body
	formatGoogleRetryInfo                    // google.rpc.RetryInfo in the body
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
