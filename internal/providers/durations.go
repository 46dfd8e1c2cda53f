package providers

import (
	"time"
)

// goDurationUnits lists the units ParseGoDuration accepts, largest first.
// Their order is the order units must appear in a value.
var goDurationUnits = [...]struct {
	name string
	size time.Duration
}{
	{"h", time.Hour},
	{"m", time.Minute},
	{"s", time.Second},
	{"ms", time.Millisecond},
	{"us", time.Microsecond},
	{"µs", time.Microsecond}, // U+00B5 MICRO SIGN
	{"μs", time.Microsecond}, // U+03BC GREEK SMALL LETTER MU
	{"ns", time.Nanosecond},
}

// ParseGoDuration parses a duration in the form Go's time.Duration.String
// produces, as OpenAI sends in x-ratelimit-reset-requests ("6m0s", "1m30.5s",
// "20ms", "1h2m3s", "0s"). After trimming spaces and tabs, s is one or more
// number-unit pairs. A number is one or more ASCII digits, optionally followed
// by '.' and one or more digits. Units are h, m, s, ms, us (or µs, μs) and ns,
// each at most once and from largest to smallest. There is no sign, and a
// bare number without a unit (even "0") is invalid. A value that does not fit
// a time.Duration is invalid. Fractions are exact to the nanosecond
// (time.ParseDuration's arithmetic).
func ParseGoDuration(s string) (time.Duration, bool) {
	s = trimOWS(s)
	if s == "" {
		return 0, false
	}
	// Validate the strict grammar first; time.ParseDuration then does the
	// arithmetic, including its overflow checks, on a value it can only
	// read as a non-negative duration.
	next := 0 // index into goDurationUnits of the smallest unit still allowed
	r := s
	for r != "" {
		n := 0
		for n < len(r) && r[n] >= '0' && r[n] <= '9' {
			n++
		}
		if n == 0 {
			return 0, false
		}
		if n < len(r) && r[n] == '.' {
			f := n + 1
			for f < len(r) && r[f] >= '0' && r[f] <= '9' {
				f++
			}
			if f == n+1 {
				return 0, false
			}
			n = f
		}
		r = r[n:]
		u := len(r)
		for i := 0; i < len(r); i++ {
			if c := r[i]; c == '.' || (c >= '0' && c <= '9') {
				u = i
				break
			}
		}
		unit := r[:u]
		found := false
		for i := next; i < len(goDurationUnits); i++ {
			if goDurationUnits[i].name == unit {
				found = true
				next = i + 1
				// The three spellings of microseconds share one slot: after
				// one of them, skip the others (but after "ms", all three
				// remain allowed, so "1ms5us" is valid).
				if goDurationUnits[i].size == time.Microsecond {
					for next < len(goDurationUnits) && goDurationUnits[next].size == time.Microsecond {
						next++
					}
				}
				break
			}
		}
		if !found {
			return 0, false
		}
		r = r[u:]
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, false
	}
	return d, true
}

// ParseProtoDuration parses a google.protobuf.Duration in its JSON form, as
// in google.rpc.RetryInfo's retryDelay ("37s", "1.5s"): one or more ASCII
// digits of seconds, optionally '.' and one to nine digits, then 's'. There is
// no sign (a negative retry delay is meaningless), and no surrounding
// whitespace. A value that does not fit a time.Duration is invalid.
func ParseProtoDuration(s string) (time.Duration, bool) {
	if len(s) < 2 || s[len(s)-1] != 's' {
		return 0, false
	}
	num := s[:len(s)-1]
	for i := 0; i < len(num); i++ {
		if num[i] == '.' {
			if len(num)-i-1 > 9 {
				return 0, false
			}
			break
		}
	}
	return parseDecimalSeconds(num)
}
