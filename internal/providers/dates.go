package providers

import (
	"time"
)

var (
	shortDayNames = [7]string{"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"}
	longDayNames  = [7]string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"}
	monthNames    = [12]string{"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"}
)

// ParseHTTPDate parses an RFC 9110 HTTP-date in any of its three forms:
//
//	IMF-fixdate: Tue, 01 Dec 2026 12:00:30 GMT
//	RFC 850:     Tuesday, 01-Dec-26 12:00:20 GMT
//	asctime:     Tue Dec  1 12:00:10 2026
//
// Spaces and tabs around the value are trimmed; everything else must match the
// grammar exactly: case-sensitive day and month names, the short day name in
// IMF-fixdate and asctime and the long one in RFC 850, two-digit day, hour,
// minute and second fields, and the literal zone "GMT" (any other zone, such
// as "UTC" or "+0000", is invalid). The day name must be the true weekday of
// the date. A second of 60 (a leap second) is accepted and rolls over into
// the next minute.
//
// The RFC 850 form has a two-digit year; now chooses the century as RFC 9110
// requires: a timestamp that would be more than 50 years after now (the whole
// timestamp is compared, not the year number) is taken from the previous
// century. now is not used for the other forms.
func ParseHTTPDate(s string, now time.Time) (time.Time, bool) {
	s = trimOWS(s)
	switch {
	case len(s) == 29 && s[3] == ',':
		return parseIMFFixdate(s)
	case len(s) == 24 && s[3] == ' ':
		return parseASCTime(s)
	default:
		return parseRFC850(s, now)
	}
}

// parseIMFFixdate parses "Sun, 06 Nov 1994 08:49:37 GMT" (29 bytes).
func parseIMFFixdate(s string) (time.Time, bool) {
	if len(s) != 29 || s[3] != ',' || s[4] != ' ' || s[7] != ' ' || s[11] != ' ' ||
		s[16] != ' ' || s[25] != ' ' || s[26:] != "GMT" {
		return time.Time{}, false
	}
	wd, ok := lookupName(shortDayNames[:], s[:3])
	if !ok {
		return time.Time{}, false
	}
	day, ok := twoDigits(s[5:7])
	if !ok {
		return time.Time{}, false
	}
	month, ok := lookupName(monthNames[:], s[8:11])
	if !ok {
		return time.Time{}, false
	}
	year, ok := parseDigits(s[12:16], 9999)
	if !ok || len(s[12:16]) != 4 {
		return time.Time{}, false
	}
	return buildDate(int(year), month+1, day, s[17:25], wd)
}

// parseRFC850 parses "Sunday, 06-Nov-94 08:49:37 GMT".
func parseRFC850(s string, now time.Time) (time.Time, bool) {
	comma := -1
	for i := 0; i < len(s) && i < 10; i++ {
		if s[i] == ',' {
			comma = i
			break
		}
	}
	if comma < 0 {
		return time.Time{}, false
	}
	wd, ok := lookupName(longDayNames[:], s[:comma])
	if !ok {
		return time.Time{}, false
	}
	r := s[comma:]
	// ", 06-Nov-94 08:49:37 GMT" is 24 bytes.
	if len(r) != 24 || r[1] != ' ' || r[4] != '-' || r[8] != '-' || r[11] != ' ' ||
		r[20] != ' ' || r[21:] != "GMT" {
		return time.Time{}, false
	}
	day, ok := twoDigits(r[2:4])
	if !ok {
		return time.Time{}, false
	}
	month, ok := lookupName(monthNames[:], r[5:8])
	if !ok {
		return time.Time{}, false
	}
	yy, ok := twoDigits(r[9:11])
	if !ok {
		return time.Time{}, false
	}
	hour, min, sec, ok := parseClock(r[12:20])
	if !ok {
		return time.Time{}, false
	}
	return buildDate(rfc850Year(yy, month+1, day, hour, min, sec, now), month+1, day, r[12:20], wd)
}

// rfc850Year resolves a two-digit RFC 850 year as RFC 9110 section 5.6.7
// requires: the whole timestamp, not just the year, is compared with now,
// and a timestamp that would be more than 50 years after now means the most
// recent year in the past with the same last two digits. So the result is
// the latest year ending in yy whose timestamp is at most 50 years after
// now: seen on 2026-12-01, "15-Dec-76" is 1976 (2076-12-15 would be more
// than 50 years ahead) while "01-Dec-76 00:00:00" is 2076.
func rfc850Year(yy, month, day, hour, min, sec int, now time.Time) int {
	limit := now.UTC().AddDate(50, 0, 0)
	year := limit.Year() - mod(limit.Year(), 100) + yy
	if year > limit.Year() {
		year -= 100
	}
	// time.Date normalises an impossible day (29 Feb of a common year);
	// buildDate rejects it afterwards for the year chosen here.
	if time.Date(year, time.Month(month), day, hour, min, sec, 0, time.UTC).After(limit) {
		year -= 100
	}
	return year
}

// parseASCTime parses "Sun Nov  6 08:49:37 1994" (24 bytes).
func parseASCTime(s string) (time.Time, bool) {
	if len(s) != 24 || s[3] != ' ' || s[7] != ' ' || s[10] != ' ' || s[19] != ' ' {
		return time.Time{}, false
	}
	wd, ok := lookupName(shortDayNames[:], s[:3])
	if !ok {
		return time.Time{}, false
	}
	month, ok := lookupName(monthNames[:], s[4:7])
	if !ok {
		return time.Time{}, false
	}
	var day int
	if s[8] == ' ' {
		// ( SP DIGIT ): a single digit 1-9 padded with a space.
		c := s[9]
		if c < '1' || c > '9' {
			return time.Time{}, false
		}
		day = int(c - '0')
	} else {
		day, ok = twoDigits(s[8:10])
		if !ok {
			return time.Time{}, false
		}
	}
	year, ok := parseDigits(s[20:24], 9999)
	if !ok {
		return time.Time{}, false
	}
	return buildDate(int(year), month+1, day, s[11:19], wd)
}

// buildDate validates the fields and the weekday and returns the UTC time.
// clock is "HH:MM:SS".
func buildDate(year, month, day int, clock string, weekday int) (time.Time, bool) {
	hour, min, sec, ok := parseClock(clock)
	if !ok || day < 1 || day > daysIn(month, year) {
		return time.Time{}, false
	}
	t := time.Date(year, time.Month(month), day, hour, min, sec, 0, time.UTC)
	// A leap second rolls over; the weekday belongs to the date as written.
	if int(time.Date(year, time.Month(month), day, 0, 0, 0, 0, time.UTC).Weekday()) != weekday {
		return time.Time{}, false
	}
	return t, true
}

// parseClock parses "HH:MM:SS" with hour 00-23, minute 00-59, second 00-60.
func parseClock(s string) (hour, min, sec int, ok bool) {
	if len(s) != 8 || s[2] != ':' || s[5] != ':' {
		return 0, 0, 0, false
	}
	h, ok1 := twoDigits(s[0:2])
	m, ok2 := twoDigits(s[3:5])
	sc, ok3 := twoDigits(s[6:8])
	if !ok1 || !ok2 || !ok3 || h > 23 || m > 59 || sc > 60 {
		return 0, 0, 0, false
	}
	return h, m, sc, true
}

// twoDigits parses exactly two ASCII digits.
func twoDigits(s string) (int, bool) {
	if len(s) != 2 || s[0] < '0' || s[0] > '9' || s[1] < '0' || s[1] > '9' {
		return 0, false
	}
	return int(s[0]-'0')*10 + int(s[1]-'0'), true
}

// lookupName returns the index of s in names (case-sensitive).
func lookupName(names []string, s string) (int, bool) {
	for i, n := range names {
		if n == s {
			return i, true
		}
	}
	return 0, false
}

// daysIn returns the number of days in month (1-12) of year.
func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	default:
		return 31
	}
}

// mod is the mathematical modulus (never negative for m > 0).
func mod(a, m int) int {
	r := a % m
	if r < 0 {
		r += m
	}
	return r
}

// ParseRFC3339 parses an RFC 3339 date-time such as "2026-12-01T12:00:30Z"
// or "2026-12-01T13:00:30.5+01:00" (as in anthropic-ratelimit-*-reset).
// Seconds are required; a fraction of up to any number of digits is allowed
// and truncated to nanoseconds; the zone is "Z" or "±hh:mm". "T" and "Z" may
// be lower case. Spaces and tabs around the value are trimmed. The result is
// in UTC.
func ParseRFC3339(s string) (time.Time, bool) {
	return parseISOTime(trimOWS(s), false)
}

// ParseISO8601 parses the ISO 8601 date-times Jira sends in
// X-RateLimit-Reset: the RFC 3339 forms accepted by ParseRFC3339, and also
// without seconds ("2026-12-01T12:01Z") and with a basic-format offset
// ("+0100"). A zone is required. Spaces and tabs around the value are
// trimmed. The result is in UTC.
func ParseISO8601(s string) (time.Time, bool) {
	return parseISOTime(trimOWS(s), true)
}

// parseISOTime parses YYYY-MM-DDTHH:MM[:SS[.frac]]zone. lenient allows a
// missing seconds field and a "±hhmm" offset.
func parseISOTime(s string, lenient bool) (time.Time, bool) {
	// "2026-12-01T12:01" is 16 bytes, and a zone follows.
	if len(s) < 17 || s[10] != 'T' && s[10] != 't' {
		return time.Time{}, false
	}
	year, month, day, ok := parseISODate(s[:10])
	if !ok {
		return time.Time{}, false
	}
	hour, minute, ok := parseISOClock(s[11:16])
	if !ok {
		return time.Time{}, false
	}
	sec, nanos, r, ok := parseISOSeconds(s[16:], lenient)
	if !ok {
		return time.Time{}, false
	}
	offset, ok := parseZone(r, lenient)
	if !ok {
		return time.Time{}, false
	}
	t := time.Date(year, time.Month(month), day, hour, minute, sec, nanos, time.UTC)
	return t.Add(-time.Duration(offset) * time.Second), true
}

// parseISODate parses YYYY-MM-DD, checking the day against the month.
func parseISODate(s string) (year, month, day int, ok bool) {
	if s[4] != '-' || s[7] != '-' {
		return 0, 0, 0, false
	}
	y, ok := parseDigits(s[0:4], 9999)
	if !ok {
		return 0, 0, 0, false
	}
	month, ok1 := twoDigits(s[5:7])
	day, ok2 := twoDigits(s[8:10])
	if !ok1 || !ok2 || month < 1 || month > 12 || day < 1 || day > daysIn(month, int(y)) {
		return 0, 0, 0, false
	}
	return int(y), month, day, true
}

// parseISOClock parses HH:MM.
func parseISOClock(s string) (hour, minute int, ok bool) {
	if s[2] != ':' {
		return 0, 0, false
	}
	hour, ok1 := twoDigits(s[0:2])
	minute, ok2 := twoDigits(s[3:5])
	return hour, minute, ok1 && ok2 && hour <= 23 && minute <= 59
}

// parseISOSeconds parses an optional ":SS[.frac]" (required unless
// lenient) and returns the seconds, the fraction in nanoseconds (digits
// beyond nanoseconds are read and dropped) and the rest of s.
func parseISOSeconds(s string, lenient bool) (sec, nanos int, rest string, ok bool) {
	if s == "" || s[0] != ':' {
		return 0, 0, s, lenient
	}
	if len(s) < 3 {
		return 0, 0, s, false
	}
	sec, ok = twoDigits(s[1:3])
	if !ok || sec > 60 {
		return 0, 0, s, false
	}
	s = s[3:]
	if s == "" || s[0] != '.' {
		return sec, 0, s, true
	}
	s = s[1:]
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	if n == 0 {
		return 0, 0, s, false
	}
	scale := int(time.Second)
	for i := 0; i < n && scale > 1; i++ {
		scale /= 10
		nanos += int(s[i]-'0') * scale
	}
	return sec, nanos, s[n:], true
}

// parseZone parses "Z", "±hh:mm" or, when lenient, "±hhmm", returning the
// offset east of UTC in seconds.
func parseZone(s string, lenient bool) (int, bool) {
	if s == "Z" || s == "z" {
		return 0, true
	}
	if len(s) < 5 || (s[0] != '+' && s[0] != '-') {
		return 0, false
	}
	var hh, mm string
	switch {
	case len(s) == 6 && s[3] == ':':
		hh, mm = s[1:3], s[4:6]
	case lenient && len(s) == 5:
		hh, mm = s[1:3], s[3:5]
	default:
		return 0, false
	}
	h, ok1 := twoDigits(hh)
	m, ok2 := twoDigits(mm)
	if !ok1 || !ok2 || h > 23 || m > 59 {
		return 0, false
	}
	off := h*3600 + m*60
	if s[0] == '-' {
		off = -off
	}
	return off, true
}
