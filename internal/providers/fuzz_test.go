package providers

import (
	"math"
	"math/big"
	"net/http"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The seed corpora live in testdata/fuzz/<FuzzName>/ and run as ordinary
// tests with `go test`. Run a target with, for example:
//
//	go test -run='^$' -fuzz='^FuzzRetryAfter$' -fuzztime=30s ./internal/providers/

var (
	digitsRE  = regexp.MustCompile(`^[0-9]+$`)
	decimalRE = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`)
)

// checkDigits compares a digits-only parser with strconv.
func checkDigits(t *testing.T, s string, got int64, ok bool, limit int64) {
	t.Helper()
	trimmed := trimOWS(s)
	if !digitsRE.MatchString(trimmed) {
		if ok {
			t.Fatalf("%q accepted but is not digits only", s)
		}
		return
	}
	var want uint64
	var err error
	if nz := strings.TrimLeft(trimmed, "0"); nz != "" {
		want, err = strconv.ParseUint(nz, 10, 64)
	}
	fits := err == nil && want <= uint64(limit)
	if ok != fits || (ok && uint64(got) != want) {
		t.Fatalf("%q: got %d, %v; strconv says %d (err %v, fits %v)", s, got, ok, want, err, fits)
	}
}

func FuzzDelaySeconds(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := ParseDelaySeconds(s)
		if ok && (d < 0 || d%time.Second != 0) {
			t.Fatalf("%q: bad delay %v", s, d)
		}
		checkDigits(t, s, int64(d/time.Second), ok, maxDelaySeconds)
		n, okCount := ParseCount(s)
		checkDigits(t, s, n, okCount, math.MaxInt64)
	})
}

func FuzzMilliseconds(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := ParseMilliseconds(s)
		if ok && (d < 0 || d%time.Millisecond != 0) {
			t.Fatalf("%q: bad delay %v", s, d)
		}
		checkDigits(t, s, int64(d/time.Millisecond), ok, math.MaxInt64/int64(time.Millisecond))
	})
}

func FuzzUnixSeconds(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		tm, ok := ParseUnixSeconds(s)
		if ok && tm.Location() != time.UTC {
			t.Fatalf("%q: not UTC", s)
		}
		checkDigits(t, s, tm.Unix(), ok, 253402300799)
	})
}

func FuzzDecimalSeconds(f *testing.F) {
	billion := big.NewRat(int64(time.Second), 1)
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := ParseDecimalSeconds(s)
		trimmed := trimOWS(s)
		if !decimalRE.MatchString(trimmed) {
			if ok {
				t.Fatalf("%q accepted but is not a plain decimal", s)
			}
			return
		}
		// Exact reference: floor(value * 1e9) with big rationals.
		r, valid := new(big.Rat).SetString(trimmed)
		if !valid {
			t.Fatalf("big.Rat rejects %q", trimmed)
		}
		r.Mul(r, billion)
		want := new(big.Int).Quo(r.Num(), r.Denom())
		fits := want.IsInt64()
		if ok != fits || (ok && int64(d) != want.Int64()) {
			t.Fatalf("%q: got %d, %v; want %v (fits %v)", s, int64(d), ok, want, fits)
		}
	})
}

func FuzzGoDuration(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := ParseGoDuration(s)
		if !ok {
			return
		}
		if d < 0 || strings.ContainsAny(s, "+-") {
			t.Fatalf("%q: accepted as %v", s, d)
		}
		ref, err := time.ParseDuration(trimOWS(s))
		if err != nil || ref != d {
			t.Fatalf("%q: got %v; time.ParseDuration says %v, %v", s, d, ref, err)
		}
		// The canonical form round-trips.
		if back, ok := ParseGoDuration(d.String()); !ok || back != d {
			t.Fatalf("%q: %v formats as %q, which parses as %v, %v", s, d, d.String(), back, ok)
		}
	})
}

func FuzzProtoDuration(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := ParseProtoDuration(s)
		if !ok {
			return
		}
		if d < 0 || !strings.HasSuffix(s, "s") || strings.ContainsAny(s, "+- \t") {
			t.Fatalf("%q: accepted as %v", s, d)
		}
		canon := strconv.FormatInt(int64(d/time.Second), 10) + "." + strconv.FormatInt(int64(d%time.Second)+1e9, 10)[1:] + "s"
		if back, ok := ParseProtoDuration(canon); !ok || back != d {
			t.Fatalf("%q: %v formats as %q, which parses as %v, %v", s, d, canon, back, ok)
		}
	})
}

func FuzzHTTPDate(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string, sec int64) {
		tm, ok := ParseHTTPDate(s, now)
		if ok {
			if tm.Location() != time.UTC || tm.Nanosecond() != 0 {
				t.Fatalf("%q: %v", s, tm)
			}
			// Whatever is accepted, net/http accepts too with the same
			// meaning (net/http is looser, so not the other way round). A
			// leap second and RFC 850 years outside Go's 1969-2068 pivot
			// are where the two legitimately differ.
			leap := strings.Contains(s, ":60 ") || strings.HasSuffix(trimOWS(s), ":60")
			if y := tm.Year(); !leap && (strings.Contains(s, "-") == false || (y >= 1977 && y <= 2068)) {
				ref, err := http.ParseTime(trimOWS(s))
				if err != nil || !ref.Equal(tm) {
					t.Fatalf("%q: got %v; http.ParseTime says %v, %v", s, tm, ref, err)
				}
			}
		}
		// Every time net/http can format parses back in all three forms.
		sec = sec % 253402300800
		if sec < 0 {
			sec = -sec
		}
		want := time.Unix(sec, 0).UTC()
		forms := []string{want.Format(http.TimeFormat), want.Format(time.ANSIC)}
		// RFC 850 round-trips in the century that ends 50 years after now
		// (the whole timestamp is compared, as RFC 9110 says).
		if want.After(now.AddDate(-50, 0, 0)) && !want.After(now.AddDate(50, 0, 0)) {
			forms = append(forms, want.Format("Monday, 02-Jan-06 15:04:05 GMT"))
		}
		for _, form := range forms {
			if got, ok := ParseHTTPDate(form, now); !ok || !got.Equal(want) {
				t.Fatalf("%q: got %v, %v; want %v", form, got, ok, want)
			}
		}
	})
}

func FuzzISO8601(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		tm, ok := ParseISO8601(s)
		tm2, ok2 := ParseRFC3339(s)
		if ok2 && (!ok || !tm.Equal(tm2)) {
			t.Fatalf("%q: RFC 3339 accepts (%v) but ISO 8601 gives %v, %v", s, tm2, tm, ok)
		}
		if !ok {
			return
		}
		if tm.Location() != time.UTC {
			t.Fatalf("%q: not UTC", s)
		}
		checkAgainstTimeParse(t, s, tm, ok2)
	})
}

func FuzzRFC3339(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		tm, ok := ParseRFC3339(s)
		if ok {
			checkAgainstTimeParse(t, s, tm, true)
		}
	})
}

// checkAgainstTimeParse compares an accepted RFC 3339 value with time.Parse,
// where time.Parse has the same grammar: upper-case T and Z, no leap second,
// at most nine fraction digits.
func checkAgainstTimeParse(t *testing.T, s string, tm time.Time, rfc3339 bool) {
	t.Helper()
	v := trimOWS(s)
	if !rfc3339 || strings.ContainsAny(v, "tz") || len(v) < 19 || v[17:19] == "60" {
		return
	}
	if i := strings.IndexByte(v, '.'); i >= 0 {
		n := 0
		for n < len(v)-i-1 && v[i+1+n] >= '0' && v[i+1+n] <= '9' {
			n++
		}
		if n > 9 {
			return
		}
	}
	ref, err := time.Parse(time.RFC3339Nano, v)
	if err != nil || !ref.Equal(tm) {
		t.Fatalf("%q: got %v; time.Parse says %v, %v", s, tm, ref, err)
	}
}

func FuzzRetryAfter(f *testing.F) {
	rd, _ := Lookup("retry-after")
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := ParseRetryAfter(s, now)
		if ok && d < 0 {
			t.Fatalf("%q: negative %v", s, d)
		}
		got := rd.Read(&Response{Status: 429, Header: http.Header{"Retry-After": {s}}, Now: now})
		if got.HasHint != ok || got.Hint.Delay != d || (ok && got.Hint.Source != "retry-after") {
			t.Fatalf("%q: reader %+v disagrees with ParseRetryAfter %v, %v", s, got, d, ok)
		}
		// One of the two grammars, never both.
		secsD, secs := ParseDelaySeconds(s)
		tm, date := ParseHTTPDate(s, now)
		if secs && date {
			t.Fatalf("%q: both delay-seconds and HTTP-date", s)
		}
		switch {
		case secs:
			if !ok || d != secsD {
				t.Fatalf("%q: %v, %v; delay-seconds %v", s, d, ok, secsD)
			}
		case date:
			if want, wok := DelayUntil(tm, now); ok != wok || want != d {
				t.Fatalf("%q: %v, %v; HTTP-date delay %v, %v", s, d, ok, want, wok)
			}
		case ok:
			t.Fatalf("%q: accepted as %v by neither grammar", s, d)
		}
		// A comma makes a list unless the value is an HTTP-date.
		if ok && strings.Contains(s, ",") && !date {
			t.Fatalf("%q: list accepted", s)
		}
	})
}

func FuzzRateLimit(f *testing.F) {
	f.Fuzz(func(t *testing.T, a, b string) {
		items, ok := ParseRateLimit([]string{a})
		d, dok := RateLimitDelay([]string{a})
		var want time.Duration
		wantOK := false
		for _, it := range items {
			if (it.HasRemaining && it.Remaining < 0) || (it.HasReset && it.Reset < 0) {
				t.Fatalf("%q: negative item %+v", a, it)
			}
			if it.HasRemaining && it.Remaining == 0 && it.HasReset && it.Reset >= want {
				want, wantOK = it.Reset, true
			}
		}
		if !ok && items != nil {
			t.Fatalf("%q: invalid but returned %+v", a, items)
		}
		if dok != (ok && wantOK) || d != want {
			t.Fatalf("%q: RateLimitDelay %v, %v; items say %v, %v", a, d, dok, want, ok && wantOK)
		}
		// Two field lines mean the same as one joined with ", ".
		two, ok2 := ParseRateLimit([]string{a, b})
		joined, okj := ParseRateLimit([]string{a + ", " + b})
		if ok2 != okj || !reflect.DeepEqual(two, joined) {
			t.Fatalf("%q + %q: lines %+v, %v; joined %+v, %v", a, b, two, ok2, joined, okj)
		}
	})
}

func FuzzDiscordBody(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte) {
		if d, ok := ParseDiscordBody(body); ok && d < 0 {
			t.Fatalf("%q: negative %v", body, d)
		}
	})
}

func FuzzGoogleRetryInfo(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte) {
		if d, ok := ParseGoogleRetryInfo(body); ok && d < 0 {
			t.Fatalf("%q: negative %v", body, d)
		}
	})
}

// FuzzReaders runs every reader, and a chain with a custom reader, on
// arbitrary headers and bodies, and checks the invariants every Reading
// keeps.
func FuzzReaders(f *testing.F) {
	custom, err := NewCustomReader("X-Custom-Reset", FormatISO8601)
	if err != nil {
		f.Fatal(err)
	}
	var readers []HintReader
	for _, n := range Names() {
		rd, _ := Lookup(n)
		readers = append(readers, rd)
	}
	readers = append(readers, custom, Chain("chain", custom, readers[0]))
	f.Fuzz(func(t *testing.T, status int, k1, v1, k2, v2 string, body []byte) {
		h := http.Header{}
		h.Add(k1, v1)
		h.Add(k2, v2)
		r := &Response{Status: status, Header: h, Body: body, Now: now}
		for _, rd := range readers {
			got := rd.Read(r)
			switch {
			case got.HasHint && (got.Hint.Delay < 0 || got.Hint.Source == "" ||
				(lowerASCII(got.Hint.Source) != got.Hint.Source && !strings.HasPrefix(got.Hint.Source, "body:"))):
				t.Fatalf("%s: bad hint %+v", rd.Name(), got.Hint)
			case !got.HasHint && got.Hint != (Hint{}):
				t.Fatalf("%s: stray hint %+v", rd.Name(), got.Hint)
			case got.Verdict < VerdictNone || got.Verdict > VerdictDoNotRetry:
				t.Fatalf("%s: bad verdict %v", rd.Name(), got.Verdict)
			case got.HasQuota && (got.Quota.Remaining < 0 || got.Quota.Source == ""):
				t.Fatalf("%s: bad quota %+v", rd.Name(), got.Quota)
			case !got.HasQuota && got.Quota != (Quota{}):
				t.Fatalf("%s: stray quota %+v", rd.Name(), got.Quota)
			}
		}
	})
}

func FuzzHostMap(f *testing.F) {
	m, err := NewHostMap(map[string]string{"*.corp.example": "github", "ghe.example": "gitlab"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, host string) {
		p, ok := m.ProviderFor(host)
		if ok {
			if !isBuiltin(p) {
				t.Fatalf("%q: unknown provider %q", host, p)
			}
		} else if p != "" {
			t.Fatalf("%q: %q without ok", host, p)
		}
		if up, upOK := m.ProviderFor(upperASCII(host)); up != p || upOK != ok {
			t.Fatalf("%q: case changes the answer: %q vs %q", host, p, up)
		}
		// A key is valid exactly when it builds; building never panics.
		_, _ = NewHostMap(map[string]string{host: "github"})
	})
}

// upperASCII upper-cases ASCII letters only, as DNS case-folding does.
func upperASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - ('a' - 'A')
		}
	}
	return string(b)
}
