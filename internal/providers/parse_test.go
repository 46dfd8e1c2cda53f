package providers

import (
	"math"
	"testing"
	"time"
)

// now is the clock of the conformance vectors: 2026-12-01T12:00:00Z, a Tuesday.
var now = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

type durationCase struct {
	in   string
	want time.Duration
	ok   bool
}

func checkDurations(t *testing.T, name string, parse func(string) (time.Duration, bool), cases []durationCase) {
	t.Helper()
	for _, c := range cases {
		got, ok := parse(c.in)
		if ok != c.ok || (ok && got != c.want) {
			t.Errorf("%s(%q) = %v, %v; want %v, %v", name, c.in, got, ok, c.want, c.ok)
		}
	}
}

func TestParseDelaySeconds(t *testing.T) {
	checkDurations(t, "ParseDelaySeconds", ParseDelaySeconds, []durationCase{
		{"0", 0, true},
		{"5", 5 * time.Second, true},
		{"120", 120 * time.Second, true},
		{"  12  ", 12 * time.Second, true},
		{"\t7\t", 7 * time.Second, true},
		{"0005", 5 * time.Second, true},
		{"00000000000000000000000000000005", 5 * time.Second, true},
		{"9223372036", 9223372036 * time.Second, true}, // the largest whole-second Duration
		{"9223372037", 0, false},
		{"99999999999999999999", 0, false},
		{"18446744073709551616", 0, false},
		{"", 0, false},
		{"   ", 0, false},
		{"-1", 0, false},
		{"+5", 0, false},
		{"1.5", 0, false},
		{"1.0", 0, false},
		{"1e3", 0, false},
		{"1_000", 0, false},
		{"0x10", 0, false},
		{"120, 60", 0, false},
		{"120,60", 0, false},
		{"5 5", 0, false},
		{"soon", 0, false},
		{"5s", 0, false},
		{"\n5", 0, false},
		{"5\r", 0, false},
		{"٥", 0, false}, // ARABIC-INDIC DIGIT FIVE
		{"５", 0, false}, // FULLWIDTH DIGIT FIVE
	})
}

func TestParseMilliseconds(t *testing.T) {
	checkDurations(t, "ParseMilliseconds", ParseMilliseconds, []durationCase{
		{"0", 0, true},
		{"250", 250 * time.Millisecond, true},
		{"1500", 1500 * time.Millisecond, true},
		{" 300 ", 300 * time.Millisecond, true},
		{"9223372036854", 9223372036854 * time.Millisecond, true},
		{"9223372036855", 0, false},
		{"99999999999999999999", 0, false},
		{"1e3", 0, false},
		{"1.5", 0, false},
		{"-5", 0, false},
		{"+5", 0, false},
		{"abc", 0, false},
		{"", 0, false},
		{"100, 200", 0, false},
	})
}

func TestParseDecimalSeconds(t *testing.T) {
	checkDurations(t, "ParseDecimalSeconds", ParseDecimalSeconds, []durationCase{
		{"2", 2 * time.Second, true},
		{"2.0", 2 * time.Second, true},
		{"1.234", 1234 * time.Millisecond, true},
		{"0.001", time.Millisecond, true},
		{"0.1", 100 * time.Millisecond, true},
		{"64.57", 64570 * time.Millisecond, true},
		{" 1.5 ", 1500 * time.Millisecond, true},
		{"0.000000001", time.Nanosecond, true},
		{"0.0000000019", time.Nanosecond, true}, // truncated beyond nine digits
		{"1.9999999999999", 1999999999 * time.Nanosecond, true},
		{"9223372036.854775807", math.MaxInt64, true},
		{"9223372036.854775808", 0, false},
		{"9223372037", 0, false},
		{"99999999999999999999", 0, false},
		{"", 0, false},
		{".5", 0, false},
		{"2.", 0, false},
		{"1.2.3", 0, false},
		{"-1.5", 0, false},
		{"+1.5", 0, false},
		{"1e3", 0, false},
		{"1.5e3", 0, false},
		{"1,5", 0, false},
		{"NaN", 0, false},
		{"Inf", 0, false},
		{"1_0", 0, false},
		{"1.0000000000x", 0, false},
		{"2.0, 3.0", 0, false},
	})
}

func TestParseGoDuration(t *testing.T) {
	checkDurations(t, "ParseGoDuration", ParseGoDuration, []durationCase{
		{"6m0s", 6 * time.Minute, true},
		{"1m30.5s", 90*time.Second + 500*time.Millisecond, true},
		{"20ms", 20 * time.Millisecond, true},
		{"1h2m3s", time.Hour + 2*time.Minute + 3*time.Second, true},
		{"0s", 0, true},
		{"1s", time.Second, true},
		{"59.004s", 59004 * time.Millisecond, true},
		{"1.5h", 90 * time.Minute, true},
		{"7us", 7 * time.Microsecond, true},
		{"7µs", 7 * time.Microsecond, true},
		{"7μs", 7 * time.Microsecond, true},
		{"7ns", 7, true},
		{"1h1ms", time.Hour + time.Millisecond, true},
		{"1ms5us", time.Millisecond + 5*time.Microsecond, true},
		{"1ms5µs", time.Millisecond + 5*time.Microsecond, true},
		{"1ms5μs", time.Millisecond + 5*time.Microsecond, true},
		{"1ms5ns", time.Millisecond + 5, true},
		{"1ms2us3ns", time.Millisecond + 2*time.Microsecond + 3, true},
		{"1s1ms1us1ns", time.Second + time.Millisecond + time.Microsecond + 1, true},
		{"1us1ms", 0, false},
		{"1ms1ms", 0, false},
		{"1µs1us", 0, false},
		{" 6m0s ", 6 * time.Minute, true},
		{"2562047h47m16.854775807s", math.MaxInt64, true},
		{"2562047h47m16.854775808s", 0, false},
		{"9999999999h", 0, false},
		{"99999999999999999999s", 0, false},
		{"", 0, false},
		{"0", 0, false},
		{"5", 0, false},
		{"-1s", 0, false},
		{"+1s", 0, false},
		{".5s", 0, false},
		{"1.s", 0, false},
		{"1d", 0, false},
		{"1S", 0, false},
		{"1s1h", 0, false},
		{"1s1s", 0, false},
		{"1us1µs", 0, false},
		{"1m 30s", 0, false},
		{"1e3s", 0, false},
		{"s", 0, false},
		{"1m,2s", 0, false},
	})
}

func TestParseProtoDuration(t *testing.T) {
	checkDurations(t, "ParseProtoDuration", ParseProtoDuration, []durationCase{
		{"37s", 37 * time.Second, true},
		{"1.5s", 1500 * time.Millisecond, true},
		{"0s", 0, true},
		{"0.000000001s", time.Nanosecond, true},
		{"3.000000000s", 3 * time.Second, true},
		{"3.0000000001s", 0, false}, // more than nine fraction digits
		{"315576000000s", 0, false}, // a valid proto Duration, too long for time.Duration
		{"37", 0, false},
		{"s", 0, false},
		{"-37s", 0, false},
		{"+37s", 0, false},
		{" 37s", 0, false},
		{"37S", 0, false},
		{"37ms", 0, false},
		{"1m", 0, false},
		{"1e2s", 0, false},
		{".5s", 0, false},
		{"5.s", 0, false},
	})
}

func TestParseCount(t *testing.T) {
	cases := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true},
		{"00", 0, true},
		{" 12 ", 12, true},
		{"9223372036854775807", math.MaxInt64, true},
		{"9223372036854775808", 0, false},
		{"-0", 0, false},
		{"1.0", 0, false},
		{"", 0, false},
		{"0, 0", 0, false},
	}
	for _, c := range cases {
		got, ok := ParseCount(c.in)
		if ok != c.ok || got != c.want {
			t.Errorf("ParseCount(%q) = %d, %v; want %d, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

type timeCase struct {
	in   string
	want time.Time
	ok   bool
}

func checkTimes(t *testing.T, name string, parse func(string) (time.Time, bool), cases []timeCase) {
	t.Helper()
	for _, c := range cases {
		got, ok := parse(c.in)
		if ok != c.ok || (ok && !got.Equal(c.want)) {
			t.Errorf("%s(%q) = %v, %v; want %v, %v", name, c.in, got, ok, c.want, c.ok)
		}
		if ok && got.Location() != time.UTC {
			t.Errorf("%s(%q) is in %v, want UTC", name, c.in, got.Location())
		}
	}
}

func utc(y int, mo time.Month, d, h, mi, s, ns int) time.Time {
	return time.Date(y, mo, d, h, mi, s, ns, time.UTC)
}

func TestParseHTTPDate(t *testing.T) {
	parse := func(s string) (time.Time, bool) { return ParseHTTPDate(s, now) }
	checkTimes(t, "ParseHTTPDate", parse, []timeCase{
		// The three forms of RFC 9110.
		{"Tue, 01 Dec 2026 12:00:30 GMT", utc(2026, 12, 1, 12, 0, 30, 0), true},
		{"Tuesday, 01-Dec-26 12:00:20 GMT", utc(2026, 12, 1, 12, 0, 20, 0), true},
		{"Tue Dec  1 12:00:10 2026", utc(2026, 12, 1, 12, 0, 10, 0), true},
		{"Sun, 06 Nov 1994 08:49:37 GMT", utc(1994, 11, 6, 8, 49, 37, 0), true},
		{"Sunday, 06-Nov-94 08:49:37 GMT", utc(1994, 11, 6, 8, 49, 37, 0), true},
		{"Sun Nov  6 08:49:37 1994", utc(1994, 11, 6, 8, 49, 37, 0), true},
		{"Wed Dec 16 12:00:00 2026", utc(2026, 12, 16, 12, 0, 0, 0), true},
		{"Wednesday, 16-Dec-26 12:00:00 GMT", utc(2026, 12, 16, 12, 0, 0, 0), true},
		{"  Tue, 01 Dec 2026 12:00:30 GMT\t", utc(2026, 12, 1, 12, 0, 30, 0), true},
		{"Tue, 29 Feb 2028 00:00:00 GMT", utc(2028, 2, 29, 0, 0, 0, 0), true},
		{"Tue, 01 Dec 2026 23:59:60 GMT", utc(2026, 12, 2, 0, 0, 0, 0), true}, // leap second
		// RFC 850 years: no more than 50 years ahead of now (2026).
		{"Tuesday, 01-Dec-76 00:00:00 GMT", utc(2076, 12, 1, 0, 0, 0, 0), true},
		{"Thursday, 01-Dec-77 00:00:00 GMT", utc(1977, 12, 1, 0, 0, 0, 0), true},
		{"Sunday, 01-Dec-69 00:00:00 GMT", utc(2069, 12, 1, 0, 0, 0, 0), true},
		// The whole timestamp is compared with now+50y (2076-12-01T12:00:00Z),
		// not the year number: later in 2076 is more than 50 years ahead.
		{"Wednesday, 15-Dec-76 00:00:00 GMT", utc(1976, 12, 15, 0, 0, 0, 0), true},
		{"Tuesday, 01-Dec-76 12:00:00 GMT", utc(2076, 12, 1, 12, 0, 0, 0), true},
		{"Wednesday, 01-Dec-76 12:00:01 GMT", utc(1976, 12, 1, 12, 0, 1, 0), true},
		{"Tuesday, 15-Dec-76 00:00:00 GMT", time.Time{}, false}, // 2076-12-15 is a Tuesday, but the date means 1976
		{"Monday, 30-Nov-76 23:59:59 GMT", utc(2076, 11, 30, 23, 59, 59, 0), true},
		{"Sunday, 01-Dec-75 00:00:00 GMT", utc(2075, 12, 1, 0, 0, 0, 0), true},
		// Zones other than GMT.
		{"Tue, 01 Dec 2026 12:00:30 UTC", time.Time{}, false},
		{"Tue, 01 Dec 2026 12:00:30 +0000", time.Time{}, false},
		{"Tue, 01 Dec 2026 12:00:30 gmt", time.Time{}, false},
		{"Tuesday, 01-Dec-26 12:00:20 UTC", time.Time{}, false},
		{"Tue Dec  1 12:00:10 2026 GMT", time.Time{}, false},
		// Trailing or leading garbage.
		{"Tue, 01 Dec 2026 12:00:30 GMTx", time.Time{}, false},
		{"Tue, 01 Dec 2026 12:00:30 GMT, Tue, 01 Dec 2026 12:00:31 GMT", time.Time{}, false},
		{"xTue, 01 Dec 2026 12:00:30 GMT", time.Time{}, false},
		{"Tue, 01 Dec 2026 12:00:30 GMT\n", time.Time{}, false},
		// Wrong day-name forms and case.
		{"Tuesday, 01 Dec 2026 12:00:30 GMT", time.Time{}, false},
		{"Tue, 01-Dec-26 12:00:20 GMT", time.Time{}, false},
		{"tue, 01 Dec 2026 12:00:30 GMT", time.Time{}, false},
		{"TUE, 01 Dec 2026 12:00:30 GMT", time.Time{}, false},
		{"Tue, 01 dec 2026 12:00:30 GMT", time.Time{}, false},
		{"Tue, 01 DEC 2026 12:00:30 GMT", time.Time{}, false},
		{"Tuesday Dec  1 12:00:10 2026", time.Time{}, false},
		// The weekday must match the date.
		{"Mon, 01 Dec 2026 12:00:30 GMT", time.Time{}, false},
		{"Monday, 01-Dec-26 12:00:20 GMT", time.Time{}, false},
		{"Mon Dec  1 12:00:10 2026", time.Time{}, false},
		// Field shapes and ranges.
		{"Tue, 1 Dec 2026 12:00:30 GMT", time.Time{}, false},
		{"Tue,  1 Dec 2026 12:00:30 GMT", time.Time{}, false},
		{"Tue, 01 Dec 26 12:00:30 GMT", time.Time{}, false},
		{"Tue, 01 Dec 2026 12:00 GMT", time.Time{}, false},
		{"Tue, 01 Dec 2026 24:00:00 GMT", time.Time{}, false},
		{"Tue, 01 Dec 2026 12:60:00 GMT", time.Time{}, false},
		{"Tue, 01 Dec 2026 12:00:61 GMT", time.Time{}, false},
		{"Tue, 31 Nov 2026 12:00:30 GMT", time.Time{}, false},
		{"Sun, 29 Feb 2026 12:00:30 GMT", time.Time{}, false},
		{"Tue, 00 Dec 2026 12:00:30 GMT", time.Time{}, false},
		{"Tue, 01 Dec 2026 1a:00:30 GMT", time.Time{}, false},
		{"Tue, 01 Dec +026 12:00:30 GMT", time.Time{}, false},
		{"Tue Dec 01 12:00:10 2026", utc(2026, 12, 1, 12, 0, 10, 0), true}, // 2DIGIT day is allowed
		{"Tue Dec  0 12:00:10 2026", time.Time{}, false},
		{"Tue Dec 1  12:00:10 2026", time.Time{}, false},
		{"Tue Dec  1 12:00:10 26", time.Time{}, false},
		{"Tuesday, 01-Dec-2026 12:00:20 GMT", time.Time{}, false},
		{"Tuesday, 01 Dec 26 12:00:20 GMT", time.Time{}, false},
		{"", time.Time{}, false},
		{"5", time.Time{}, false},
		{"2026-12-01T12:00:30Z", time.Time{}, false},
	})
}

func TestParseUnixSeconds(t *testing.T) {
	checkTimes(t, "ParseUnixSeconds", ParseUnixSeconds, []timeCase{
		{"1796126445", utc(2026, 12, 1, 12, 0, 45, 0), true},
		{"0", time.Unix(0, 0).UTC(), true},
		{" 1796126445 ", utc(2026, 12, 1, 12, 0, 45, 0), true},
		{"253402300799", utc(9999, 12, 31, 23, 59, 59, 0), true},
		{"253402300800", time.Time{}, false},
		{"99999999999999999999", time.Time{}, false},
		{"-1", time.Time{}, false},
		{"+1796126445", time.Time{}, false},
		{"1796126445.5", time.Time{}, false},
		{"1.796126445e9", time.Time{}, false},
		{"", time.Time{}, false},
	})
}

func TestParseISO8601(t *testing.T) {
	checkTimes(t, "ParseISO8601", ParseISO8601, []timeCase{
		{"2026-12-01T12:00:30Z", utc(2026, 12, 1, 12, 0, 30, 0), true},
		{"2026-12-01T12:01Z", utc(2026, 12, 1, 12, 1, 0, 0), true},
		{"2026-12-01T13:01+01:00", utc(2026, 12, 1, 12, 1, 0, 0), true},
		{"2026-12-01T13:00:30+01:00", utc(2026, 12, 1, 12, 0, 30, 0), true},
		{"2026-12-01T13:00:30+0100", utc(2026, 12, 1, 12, 0, 30, 0), true},
		{"2026-12-01T07:00:30-05:00", utc(2026, 12, 1, 12, 0, 30, 0), true},
		{"2026-12-01T12:00:30.250Z", utc(2026, 12, 1, 12, 0, 30, 250000000), true},
		{"2026-12-01T12:00:30.1234567891Z", utc(2026, 12, 1, 12, 0, 30, 123456789), true},
		{"2026-12-01t12:00:30z", utc(2026, 12, 1, 12, 0, 30, 0), true},
		{" 2026-12-01T12:00:30Z ", utc(2026, 12, 1, 12, 0, 30, 0), true},
		{"2026-12-01T12:00:30", time.Time{}, false}, // no zone
		{"2026-12-01T12:01", time.Time{}, false},
		{"2026-12-01 12:00:30Z", time.Time{}, false},
		{"2026-12-01", time.Time{}, false},
		{"2026-12-01T12:00:30UTC", time.Time{}, false},
		{"2026-12-01T12:00:30+01", time.Time{}, false},
		{"2026-12-01T12:00:30+24:00", time.Time{}, false},
		{"2026-12-01T12:00:30.Z", time.Time{}, false},
		{"2026-12-01T12:00:3Z", time.Time{}, false},
		{"2026-13-01T12:00:30Z", time.Time{}, false},
		{"2026-02-30T12:00:30Z", time.Time{}, false},
		{"2026-12-01T25:00:30Z", time.Time{}, false},
		{"2026-12-01T12:00:30Zjunk", time.Time{}, false},
		{"+2026-12-01T12:00:30Z", time.Time{}, false},
		{"2026-12-01T12:00:30Z, 2026-12-01T12:00:31Z", time.Time{}, false},
		{"1796126445", time.Time{}, false},
	})
}

func TestParseRFC3339(t *testing.T) {
	checkTimes(t, "ParseRFC3339", ParseRFC3339, []timeCase{
		{"2026-12-01T12:00:30Z", utc(2026, 12, 1, 12, 0, 30, 0), true},
		{"2026-12-01T13:00:30+01:00", utc(2026, 12, 1, 12, 0, 30, 0), true},
		{"2026-12-01T12:00:30.5Z", utc(2026, 12, 1, 12, 0, 30, 500000000), true},
		{"2026-12-01T12:01Z", time.Time{}, false}, // seconds are required
		{"2026-12-01T13:00:30+0100", time.Time{}, false},
		{"2026-12-01T12:00:30", time.Time{}, false},
		{"Tue, 01 Dec 2026 12:00:30 GMT", time.Time{}, false},
	})
}

func TestParseRetryAfter(t *testing.T) {
	parse := func(s string) (time.Duration, bool) { return ParseRetryAfter(s, now) }
	checkDurations(t, "ParseRetryAfter", parse, []durationCase{
		{"5", 5 * time.Second, true},
		{"  12  ", 12 * time.Second, true},
		{"Tue, 01 Dec 2026 12:00:30 GMT", 30 * time.Second, true},
		{"Tuesday, 01-Dec-26 12:00:20 GMT", 20 * time.Second, true},
		{"Tue Dec  1 12:00:10 2026", 10 * time.Second, true},
		{"Tue, 01 Dec 2026 11:55:00 GMT", 0, true}, // past
		{"Tue, 01 Dec 2026 12:00:00 GMT", 0, true},
		{"Fri, 31 Dec 9999 23:59:59 GMT", 0, false}, // too far for a Duration
		{"1.5", 0, false},
		{"-1", 0, false},
		{"+5", 0, false},
		{"120, 60", 0, false},
		{"soon", 0, false},
		{"", 0, false},
		{"99999999999999999999", 0, false},
		{"Tue, 01 Dec 2026 12:00:30 UTC", 0, false},
	})
}

func TestDelayUntil(t *testing.T) {
	cases := []struct {
		t    time.Time
		want time.Duration
		ok   bool
	}{
		{now.Add(time.Second), time.Second, true},
		{now, 0, true},
		{now.Add(-time.Hour), 0, true},
		{now.Add(math.MaxInt64), math.MaxInt64, true},
		{now.Add(math.MaxInt64).Add(time.Nanosecond), 0, false},
		{utc(9999, 1, 1, 0, 0, 0, 0), 0, false},
	}
	for _, c := range cases {
		got, ok := DelayUntil(c.t, now)
		if ok != c.ok || got != c.want {
			t.Errorf("DelayUntil(%v) = %v, %v; want %v, %v", c.t, got, ok, c.want, c.ok)
		}
	}
}
