package redisstore

import (
	"context"
	"time"
)

// DefaultMaxGatesPerTenant is the bound on the gates one tenant may hold
// unless [WithMaxGatesPerTenant] sets another.
const DefaultMaxGatesPerTenant = 10_000

// HeldPoll is the longest Admission.HeldFor the store answers: how often a
// held caller checks again (sooner when the probe's registration ends
// sooner).
const HeldPoll = 100 * time.Millisecond

// OrderGrace is how long a replica's queue at a gate (store.Order) outlives
// the time its head said it would ask again: a replica that died, or
// whose queue emptied without asking, stops holding other replicas' calls
// that long after.
const OrderGrace = time.Second

// OrderPoll is the HeldFor of a call held by the arrival order alone (the
// counts would admit it; older calls of other replicas go first): those
// calls are taking the free slots now, one store call each, and the slots
// they leave go on to whichever call is then oldest, so a held call asks
// again soon rather than at the next HeldPoll. With HeldPoll, every slot
// that passed from one replica's calls to another's waited for a poll:
// at a reopening whose waiting calls alternate between three replicas,
// the window's calls took longer to go than the window.
const OrderPoll = 10 * time.Millisecond

// WithMaxGatesPerTenant bounds the number of gates (all per-gate state:
// closed-until time, known quota, calls in flight, probe, learned quota,
// breaker) one tenant may hold; zero or negative keeps
// [DefaultMaxGatesPerTenant]. Every replica sharing the Redis should use
// the same value. When a tenant at the bound needs a new gate, the gates
// of its index whose time passed are forgotten first, then, among those
// that hold no promise to a provider (a closed gate, an open breaker),
// those that free soonest are evicted (their keys deleted), 1/16 of the
// bound at a time. A gate that holds a promise is never evicted: when
// every gate of the tenant holds one, the new gate is not tracked (see
// [WithUntracked]). Other tenants' gates are never touched. See the
// package documentation, "Bounds".
func WithMaxGatesPerTenant(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.maxGates = n
		}
	}
}

// WithUntracked sets a function called each time a tenant at the gate
// bound could not get a new gate because every gate it holds is a promise
// (see [WithMaxGatesPerTenant]): the call proceeded untracked. It is
// called after the script's answer, on the caller's goroutine, and must
// return quickly; the broker counts it in a metric and logs it once per
// tenant. Calls admitted locally (see [WithLocalAdmission]) and flushed
// later are not reported.
func WithUntracked(fn func(tenant string)) Option {
	return func(o *options) { o.untracked = fn }
}

// noteUntracked reports that a new gate of tenant was not tracked.
func (s *Store) noteUntracked(tenant string) {
	if s.untracked != nil {
		s.untracked(tenant)
	}
}

// Gates returns the size of tenant's gate index, for tests and metrics: an
// upper bound on the gates the tenant holds (members whose time passed
// stay until the next trim), which the gate bound keeps at most
// [WithMaxGatesPerTenant].
func (s *Store) Gates(ctx context.Context, tenant string) (int64, error) {
	n, err := s.client.ZCard(ctx, s.keys.index(tenant)).Result()
	if err != nil {
		return 0, s.wrap("gates", err)
	}
	return n, nil
}
