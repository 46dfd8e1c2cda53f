package providers

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
)

// ErrInvalidHostPattern is returned by NewHostMap for a key that is neither a
// host name nor "*." followed by one.
var ErrInvalidHostPattern = errors.New("providers: invalid host pattern")

// ErrUnknownProvider is returned by NewHostMap for a value that is not the
// name of a built-in reader.
var ErrUnknownProvider = errors.New("providers: unknown provider")

// hostTable is one layer of a HostMap.
type hostTable struct {
	exact    map[string]string
	suffixes []hostSuffix // longest suffix first
}

// hostSuffix is a wildcard entry: suffix includes the leading dot.
type hostSuffix struct {
	suffix   string
	provider string
}

// lookup returns the provider for a normalised host: an exact entry first,
// then the longest matching wildcard.
func (t *hostTable) lookup(host string) (string, bool) {
	if p, ok := t.exact[host]; ok {
		return p, true
	}
	for _, s := range t.suffixes {
		if len(host) > len(s.suffix) && strings.HasSuffix(host, s.suffix) {
			return s.provider, true
		}
	}
	return "", false
}

// HostMap chooses a provider's reader from the host of a request URL. The
// zero value maps nothing. A HostMap is immutable and safe for concurrent
// use.
type HostMap struct {
	overrides hostTable
	defaults  hostTable
}

// DefaultHostMap returns the built-in mapping, made from the hosts of the
// built-in catalog's entries: api.github.com to github, *.atlassian.net to
// jira, management.azure.com to azure, *.amazonaws.com to aws,
// api.openai.com to openai, api.anthropic.com to anthropic, discord.com to
// discord, gitlab.com to gitlab, *.myshopify.com to shopify, api.x.com and
// api.twitter.com to x, *.googleapis.com to google, and api.stripe.com to
// stripe.
func DefaultHostMap() HostMap {
	return HostMap{defaults: defaultTable()}
}

// defaultTable is the built-in catalog's hosts, indexed once.
var defaultTable = sync.OnceValue(func() hostTable { return Builtin().hosts })

// isBuiltin reports whether name is a built-in reader.
func isBuiltin(name string) bool {
	_, ok := Builtin().Lookup(name)
	return ok
}

// NewHostMap returns the default mapping with a policy's overrides on top.
// Keys are exact hosts ("api.example.com") or wildcards ("*.example.com",
// which matches hosts below example.com but not example.com itself); they are
// case-insensitive and may end in a dot. Values are built-in reader names;
// "none" switches hints off for a host. An override wins over every default
// entry, exact or wildcard, that matches the same host. An invalid key
// (ErrInvalidHostPattern) or value (ErrUnknownProvider) is an error.
func NewHostMap(overrides map[string]string) (HostMap, error) {
	m := DefaultHostMap()
	t, err := buildTable(overrides, isBuiltin)
	if err != nil {
		return HostMap{}, err
	}
	m.overrides = t
	return m, nil
}

// buildTable validates and indexes a pattern-to-provider map; known says
// which provider names exist.
func buildTable(entries map[string]string, known func(string) bool) (hostTable, error) {
	t := hostTable{exact: make(map[string]string)}
	for pattern, provider := range entries {
		if !known(provider) {
			return hostTable{}, fmt.Errorf("host %q: provider %q: %w", pattern, provider, ErrUnknownProvider)
		}
		p, wild, ok := hostPattern(pattern)
		if !ok {
			return hostTable{}, fmt.Errorf("host %q: %w", pattern, ErrInvalidHostPattern)
		}
		if wild {
			t.suffixes = append(t.suffixes, hostSuffix{suffix: "." + p, provider: provider})
			continue
		}
		t.exact[p] = provider
	}
	slices.SortFunc(t.suffixes, func(a, b hostSuffix) int {
		if d := len(b.suffix) - len(a.suffix); d != 0 {
			return d
		}
		return strings.Compare(a.suffix, b.suffix)
	})
	return t, nil
}

// validHostName reports whether s is a lower-case DNS name: dot-separated,
// non-empty labels of letters, digits, '-' and '_'.
func validHostName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z') && !(c >= '0' && c <= '9') && c != '-' && c != '_' {
				return false
			}
		}
	}
	return true
}

// validIP reports whether s is an IP address, an IPv6 one possibly in
// brackets.
func validIP(s string) bool {
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	_, err := netip.ParseAddr(s)
	return err == nil
}

// ProviderFor returns the name of the reader for a request's host, as in a
// URL's Host ("api.github.com", "API.GitHub.com:443", "api.github.com.").
// Matching is case-insensitive and ignores a port and one trailing dot.
// Overrides are consulted before defaults; within each, an exact host wins
// over wildcards, and a longer wildcard over a shorter one. It reports false
// when nothing matches.
func (m HostMap) ProviderFor(host string) (string, bool) {
	h := normalizeHost(host)
	if h == "" {
		return "", false
	}
	if p, ok := m.overrides.lookup(h); ok {
		return p, true
	}
	return m.defaults.lookup(h)
}

// normalizeHost lowers host and strips a port and a trailing dot.
func normalizeHost(host string) string {
	if strings.HasPrefix(host, "[") {
		if end := strings.IndexByte(host, ']'); end >= 0 {
			host = host[1:end]
		}
	} else if i := strings.IndexByte(host, ':'); i >= 0 && strings.Count(host, ":") == 1 {
		host = host[:i]
	}
	host = strings.TrimSuffix(host, ".")
	return lowerASCII(host)
}
