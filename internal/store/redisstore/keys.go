package redisstore

import (
	"strings"

	"github.com/retrybroker/retrybroker/internal/store"
)

// DefaultKeyPrefix starts every key the store writes.
const DefaultKeyPrefix = "rb:v1:"

// keep reports whether b may appear unescaped in a key component.
func keep(b byte) bool {
	return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' ||
		b == '-' || b == '.' || b == '_' || b == '~'
}

// escape percent-escapes every byte of s outside [A-Za-z0-9._~-]. The
// result never contains ':', '{', '}' or a bare '%', and distinct inputs give
// distinct outputs.
func escape(s string) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if !keep(s[i]) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s) + 2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if keep(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// keys builds the key names of one store.
type keys struct{ prefix string }

func (k keys) tenant(t string) string {
	return k.prefix + "{t:" + escape(t) + "}:"
}

func (k keys) gate(g store.GateKey) string {
	return k.tenant(g.Tenant) + "g:" + escape(g.Scope) + ":" + escape(g.Credential)
}

func (k keys) inflight(g store.GateKey) string {
	return k.tenant(g.Tenant) + "f:" + escape(g.Scope) + ":" + escape(g.Credential)
}

func (k keys) quota(g store.GateKey) string {
	return k.tenant(g.Tenant) + "q:" + escape(g.Scope) + ":" + escape(g.Credential)
}

// state is the gate's learning, probe and breaker hash.
func (k keys) state(g store.GateKey) string {
	return k.tenant(g.Tenant) + "s:" + escape(g.Scope) + ":" + escape(g.Credential)
}

// index is the tenant's gate index: a sorted set of members (see member)
// scored by when each gate frees. A script rebuilds a gate's key names from
// its member, by putting the index key's name less its final "i", then a
// kind ("g:", "f:", "q:", "s:"), before it.
func (k keys) index(tenant string) string {
	return k.tenant(tenant) + "i"
}

// member is the gate's member in its tenant's index: the part of its key
// names after the kind.
func (k keys) member(g store.GateKey) string {
	return escape(g.Scope) + ":" + escape(g.Credential)
}

func (k keys) pace(tenant, host string) string {
	return k.tenant(tenant) + "p:" + escape(host)
}

func (k keys) budget(tenant string) string {
	return k.tenant(tenant) + "b"
}

// channel is where replicas announce the gates that stop being plain (the
// state key of each), for local admission.
func (k keys) channel() string { return k.prefix + "plain" }
