package redisstore

import (
	"github.com/retrybroker/retrybroker/internal/store"
)

// DefaultKeyPrefix starts every key the store writes.
const DefaultKeyPrefix = "rb:v1:"

// escape is the form of every key component (store.EscapeComponent).
func escape(s string) string { return store.EscapeComponent(s) }

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

// order is the gate's hash of the replicas' queues (store.Order): one
// field per replica with calls waiting on the gate. It lives a little
// longer than its entries, which expire on their own; the index does not
// know it (an evicted gate's entries lapse within seconds).
func (k keys) order(g store.GateKey) string {
	return k.tenant(g.Tenant) + "o:" + escape(g.Scope) + ":" + escape(g.Credential)
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
	return store.GatePosition(g.Scope, g.Credential)
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
