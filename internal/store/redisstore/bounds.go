package redisstore

import "time"

// DefaultMaxGatesPerTenant is the bound on the gates one tenant may hold
// unless [WithMaxGatesPerTenant] sets another.
const DefaultMaxGatesPerTenant = 10_000

// HeldPoll is the longest Admission.HeldFor the store answers: how often a
// held caller checks again (sooner when the probe's registration ends
// sooner).
const HeldPoll = 100 * time.Millisecond

// WithMaxGatesPerTenant bounds the number of gates (all per-gate state:
// closed-until time, known quota, calls in flight, probe, learned quota,
// breaker) one tenant may hold; zero or negative keeps
// [DefaultMaxGatesPerTenant]. Every replica sharing the Redis should use
// the same value. When a tenant at the bound needs a new gate, the gates
// of its index whose time passed are forgotten first, then those that free
// soonest are evicted (their keys deleted), 1/16 of the bound at a time.
// Other tenants' gates are never touched. See the package documentation,
// "Bounds".
func WithMaxGatesPerTenant(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.maxGates = n
		}
	}
}
