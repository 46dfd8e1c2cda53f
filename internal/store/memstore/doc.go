// Package memstore is the in-process implementation of store.Store: the
// default for a single broker, and the local state that store.Fallback
// serves from while Redis is unreachable.
//
// All state sits behind one mutex; every operation is a few map look-ups,
// plus a count of the gate's calls in flight when the gate has a known quota
// (see store.Observation.HasQuota). Admit registers an attempt (and issues
// a ticket) only on such a gate. Expired entries (open gates with nothing
// in flight and no quota known for a window that has not reset, expired
// tickets, passed pacing slots, budget buckets out of their window) are
// swept lazily: at most once per second of request time, an operation sweeps
// the whole state. No goroutine is started, so Close only marks the store
// closed.
package memstore
