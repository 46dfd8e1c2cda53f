package egress

import (
	"net/url"
	"strings"
)

// Redacted replaces every secret-bearing part removed by RedactURL.
const Redacted = "REDACTED"

// UnparsableURL is what RedactURLString returns for input that is not a
// URL, and RedactURL for an opaque URL: nothing of the input survives.
const UnparsableURL = "REDACTED-UNPARSABLE-URL"

// RedactURL returns u as a string safe for logs and spans:
//   - userinfo, user name included, is replaced by "REDACTED"
//     (https://REDACTED@host/), since tokens are often sent as the user
//     name;
//   - every query value becomes "REDACTED", keeping the parameter names
//     and their order (?a=REDACTED&b=REDACTED); a parameter without '='
//     ("?token") may itself be a secret and becomes "REDACTED" whole;
//   - the fragment is dropped.
//
// Scheme, host, port and path are kept. An opaque URL
// ("scheme:opaque") gives UnparsableURL, and a nil u gives "".
func RedactURL(u *url.URL) string {
	if u == nil {
		return ""
	}
	if u.Opaque != "" {
		return UnparsableURL
	}
	r := url.URL{
		Scheme:   u.Scheme,
		Host:     u.Host,
		Path:     u.Path,
		RawPath:  u.RawPath,
		RawQuery: redactQuery(u.RawQuery),
	}
	if strings.ContainsAny(r.Host, "@/?#") {
		// Only a hand-built URL can get here; its host may hide userinfo.
		r.Host = Redacted
	}
	if u.User != nil {
		r.User = url.User(Redacted)
	}
	if u.ForceQuery && r.RawQuery == "" {
		r.ForceQuery = true
	}
	return r.String()
}

func redactQuery(raw string) string {
	if raw == "" {
		return ""
	}
	parts := strings.Split(raw, "&")
	for i, p := range parts {
		name, _, hasValue := strings.Cut(p, "=")
		switch {
		case p == "":
		case hasValue && safeName(name):
			parts[i] = name + "=" + Redacted
		default:
			parts[i] = Redacted
		}
	}
	return strings.Join(parts, "&")
}

// RedactURLString parses s and returns RedactURL of it, or UnparsableURL
// when s does not parse: the input is never echoed back unredacted.
func RedactURLString(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return UnparsableURL
	}
	return RedactURL(u)
}

// safeName reports whether a raw query parameter name can be shown as is:
// printable ASCII without '#'. Other names are replaced whole.
func safeName(name string) bool {
	for i := 0; i < len(name); i++ {
		if c := name[i]; c <= ' ' || c >= 0x7f || c == '#' {
			return false
		}
	}
	return true
}
