// Package memstore is the in-process implementation of store.Store: the
// default for a single broker, and the local state that store.Fallback
// serves from while Redis is unreachable. It is the reference
// implementation of the store's rules (learned quotas, the failure breaker,
// the gate bound): the Redis scripts follow the same code.
//
// All state sits behind one mutex; every operation is a few map look-ups,
// plus a count of the gate's calls in flight when the gate has a known quota
// (see store.Observation.HasQuota). Admit registers an attempt (and issues
// a ticket) only on such a gate, or when the attempt goes as the gate's
// probe. Gates are kept per tenant, at most [WithMaxGatesPerTenant] per
// tenant: when a tenant at the bound needs a new gate, one pass over its
// gates forgets those that hold nothing live and evicts, among those that
// hold no promise (a closed gate, an open breaker), the 1/16 of the bound
// that free soonest (each gate keeps the time it frees, updated by every
// operation on it); when every gate holds a promise, the new gate is a
// detached one the store does not keep (see [WithUntracked]). Expired entries (gates that hold nothing live,
// expired tickets and probes, forgotten learned state and breakers, passed
// pacing slots, budget buckets out of their window) are swept lazily: at
// most once per second of request time, an operation sweeps the whole
// state. No goroutine is started, so Close only marks the store closed.
package memstore
