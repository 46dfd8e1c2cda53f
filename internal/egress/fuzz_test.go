package egress_test

import (
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/retrybroker/retrybroker/internal/egress"
)

// FuzzRedactURLString checks that the output is either the placeholder or
// a URL with no userinfo but "REDACTED", no fragment, and only redacted
// query values; and that redaction is stable.
func FuzzRedactURLString(f *testing.F) {
	for _, s := range []string{
		"https://user:pass@example.com/p?a=1&b=2#frag",
		"http://[::1]:8080/?token",
		"https://h/?a=1;b=2&&c",
		"http://h/%zz",
		"mailto:x@y",
		"//user@host/path",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := egress.RedactURLString(s)
		if out == egress.UnparsableURL || out == "" {
			return
		}
		u, err := url.Parse(out)
		if err != nil {
			t.Fatalf("RedactURLString(%q) = %q, which does not parse: %v", s, out, err)
		}
		if u.Fragment != "" || strings.Contains(out, "#") {
			t.Errorf("RedactURLString(%q) = %q keeps a fragment", s, out)
		}
		if u.User != nil && u.User.String() != egress.Redacted {
			t.Errorf("RedactURLString(%q) = %q keeps userinfo %q", s, out, u.User)
		}
		if u.RawQuery != "" {
			for _, part := range strings.Split(u.RawQuery, "&") {
				if part != "" && part != egress.Redacted && !strings.HasSuffix(part, "="+egress.Redacted) {
					t.Errorf("RedactURLString(%q) = %q keeps query part %q", s, out, part)
				}
				if name, _, ok := strings.Cut(part, "="); ok && strings.Contains(name, "=") {
					t.Errorf("query name %q holds '='", name)
				}
			}
		}
		in, err := url.Parse(s)
		if err != nil {
			t.Fatalf("%q parsed only after redaction", s)
		}
		if p, ok := in.User.Password(); ok && len(p) >= 6 && strings.Contains(out, p) && !strings.Contains(in.Host+in.Path, p) {
			t.Errorf("RedactURLString(%q) = %q leaks the password", s, out)
		}
		if again := egress.RedactURLString(out); again != out {
			t.Errorf("not stable: %q -> %q -> %q", s, out, again)
		}
	})
}

// FuzzCheckHostNumeric checks the numeric-host detector behind
// Guard.CheckHost against a reference inet_aton parser (the glibc rules
// that make "127.1" or "0x7f.1" mean 127.0.0.1): any host such a resolver
// would read as an IPv4 address is refused unless it is the canonical
// dotted quad, and a canonical dotted quad is never refused by name.
func FuzzCheckHostNumeric(f *testing.F) {
	for _, s := range []string{
		"127.0.0.1", "127.1", "2130706433", "0177.0.0.1", "0x7f.1", "0x7F000001",
		"017700000001", "127.0.0.1.", "1.2.3.4.5", "api.example.com", "foo.123",
		"0x", "08.0.0.1", "4294967296", "256.0.0.1", "1.2.65535", "1.16777215",
	} {
		f.Add(s)
	}
	var g *egress.Guard
	f.Fuzz(func(t *testing.T, host string) {
		err := g.CheckHost(host)
		n := strings.TrimSuffix(strings.ToLower(host), ".")
		if ip, perr := netip.ParseAddr(n); perr == nil {
			if err != nil {
				t.Errorf("CheckHost(%q) = %v, want nil for an IP literal", host, err)
			}
			_ = ip
			return
		}
		if err != nil {
			return
		}
		for _, cand := range []string{strings.ToLower(host), n} {
			if inetAton(cand) {
				t.Errorf("CheckHost(%q) = nil, but inet_aton reads %q as an IPv4 address", host, cand)
			}
		}
		last := n[strings.LastIndexByte(n, '.')+1:]
		if last != "" && strings.Trim(last, "0123456789") == "" {
			t.Errorf("CheckHost(%q) = nil for a host ending in a number", host)
		}
	})
}

// inetAton reports whether glibc's inet_aton accepts s: one to four
// dot-separated numbers (decimal, octal with a leading 0, hex with 0x),
// the last filling the remaining bytes, optionally followed by whitespace
// and anything.
func inetAton(s string) bool {
	var parts []uint64
	i := 0
	for {
		if i >= len(s) || s[i] < '0' || s[i] > '9' {
			return false
		}
		base := uint64(10)
		if s[i] == '0' {
			base = 8
			i++
			if i < len(s) && (s[i] == 'x' || s[i] == 'X') {
				base = 16
				i++
			}
		}
		var v uint64
		for i < len(s) {
			c := s[i]
			var d uint64
			switch {
			case '0' <= c && c <= '9':
				d = uint64(c - '0')
				if base == 8 && d >= 8 {
					return false
				}
			case base == 16 && 'a' <= c && c <= 'f':
				d = uint64(c-'a') + 10
			case base == 16 && 'A' <= c && c <= 'F':
				d = uint64(c-'A') + 10
			default:
				goto end
			}
			v = v*base + d
			if v > 0xffffffff {
				return false
			}
			i++
		}
	end:
		if i < len(s) && s[i] == '.' {
			if len(parts) >= 3 || v > 0xff {
				return false
			}
			parts = append(parts, v)
			i++
			continue
		}
		if i < len(s) && !strings.ContainsRune(" \t\n\v\f\r", rune(s[i])) {
			return false
		}
		limits := [...]uint64{0xffffffff, 0xffffff, 0xffff, 0xff}
		return v <= limits[len(parts)]
	}
}
