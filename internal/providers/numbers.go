package providers

import (
	"math"
	"time"
)

// maxDelaySeconds is the largest whole number of seconds a time.Duration holds.
const maxDelaySeconds = math.MaxInt64 / int64(time.Second)

// trimOWS removes optional whitespace (space and horizontal tab) from both
// ends of s, as RFC 9110 allows around a field value.
func trimOWS(s string) string {
	i, j := 0, len(s)
	for i < j && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	for j > i && (s[j-1] == ' ' || s[j-1] == '\t') {
		j--
	}
	return s[i:j]
}

// parseDigits parses s, which must be one or more ASCII digits and nothing
// else, as a non-negative integer no larger than limit. It reports false for
// an empty string, any other byte, or a value above limit. Leading zeros are
// allowed.
func parseDigits(s string, limit int64) (int64, bool) {
	if s == "" {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		d := int64(c - '0')
		// Check the bound before multiplying: n*10+d <= limit.
		if n > (limit-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// ParseCount parses a non-negative integer count, such as a remaining-quota
// header. After trimming spaces and tabs, s must be one or more ASCII digits:
// no sign, exponent, underscore or decimal point. Values above math.MaxInt64
// are invalid.
func ParseCount(s string) (int64, bool) {
	return parseDigits(trimOWS(s), math.MaxInt64)
}

// ParseDelaySeconds parses an RFC 9110 delay-seconds value, in whole seconds,
// into a duration. After trimming spaces and tabs, s must be one or more ASCII
// digits: no sign, exponent, underscore or decimal point. A value that does
// not fit a time.Duration (more than about 292 years) is invalid.
func ParseDelaySeconds(s string) (time.Duration, bool) {
	n, ok := parseDigits(trimOWS(s), maxDelaySeconds)
	if !ok {
		return 0, false
	}
	return time.Duration(n) * time.Second, true
}

// ParseMilliseconds parses a delay in whole milliseconds (as in
// retry-after-ms or x-amz-retry-after) into a duration. The syntax rules are
// those of ParseDelaySeconds. A value that does not fit a time.Duration is
// invalid.
func ParseMilliseconds(s string) (time.Duration, bool) {
	n, ok := parseDigits(trimOWS(s), math.MaxInt64/int64(time.Millisecond))
	if !ok {
		return 0, false
	}
	return time.Duration(n) * time.Millisecond, true
}

// ParseDecimalSeconds parses a non-negative decimal number of seconds such as
// "2", "2.0" or "1.234" into a duration. After trimming spaces and tabs, s
// must be one or more ASCII digits, optionally followed by a '.' and one or
// more digits: no sign, exponent or underscore, and no leading or trailing
// point. The conversion is exact to the nanosecond; fractional digits beyond
// the ninth are truncated (they must still be digits). A value that does not
// fit a time.Duration is invalid.
func ParseDecimalSeconds(s string) (time.Duration, bool) {
	return parseDecimalSeconds(trimOWS(s))
}

// parseDecimalSeconds is ParseDecimalSeconds without the trimming.
func parseDecimalSeconds(s string) (time.Duration, bool) {
	intPart, frac := s, ""
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			intPart, frac = s[:i], s[i+1:]
			if frac == "" {
				return 0, false
			}
			break
		}
	}
	secs, ok := parseDigits(intPart, maxDelaySeconds)
	if !ok {
		return 0, false
	}
	var nanos int64
	scale := int64(time.Second)
	for i := 0; i < len(frac); i++ {
		c := frac[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if scale > 1 {
			scale /= 10
			nanos += int64(c-'0') * scale
		}
	}
	// secs*1e9 fits because secs <= maxDelaySeconds; check the sum.
	base := secs * int64(time.Second)
	if nanos > math.MaxInt64-base {
		return 0, false
	}
	return time.Duration(base + nanos), true
}

// ParseUnixSeconds parses an absolute time given as whole seconds since the
// Unix epoch (UTC), as in x-ratelimit-reset. After trimming spaces and tabs, s
// must be one or more ASCII digits: no sign, exponent, underscore or decimal
// point. Values beyond year 9999 are invalid.
func ParseUnixSeconds(s string) (time.Time, bool) {
	// 253402300799 is 9999-12-31T23:59:59Z.
	n, ok := parseDigits(trimOWS(s), 253402300799)
	if !ok {
		return time.Time{}, false
	}
	return time.Unix(n, 0).UTC(), true
}

// DelayUntil returns the wait from now until t: zero when t is not after now.
// It reports false when the wait does not fit a time.Duration.
func DelayUntil(t, now time.Time) (time.Duration, bool) {
	if !t.After(now) {
		return 0, true
	}
	d := t.Sub(now)
	if d == math.MaxInt64 && !now.Add(d).Equal(t) {
		// Sub saturated: the true difference is larger than any Duration.
		return 0, false
	}
	return d, true
}
