package memstore

import (
	"time"

	"github.com/retrybroker/retrybroker/internal/store"
)

// gateName is a gate's identity within its tenant.
type gateName struct{ scope, credential string }

// tenantGates is one tenant's gates: the per-tenant index that the gate
// bound trims without looking at other tenants.
type tenantGates map[gateName]*gate

// gate is all the per-gate state: closed-until time, known quota and its
// calls in flight, the probe slot, the learned quota and the breaker.
type gate struct {
	closedUntil int64     // µs; <= now means open
	inflight    *inflight // calls in flight against a known or learned quota (nil: none)
	quota       quota     // last known provider quota
	probe       probe     // the single unproven call in flight, if any
	learn       *learning // nil: nothing learned (or forgotten)
	brk         *breaker  // nil: nothing counted (a closed, empty breaker)
	// freeAt is free() as of the last operation on the gate. free() only
	// changes when an operation changes the gate (parts that expire only
	// ever held times already past), so it is exact: trim reads it instead
	// of walking each gate's parts.
	freeAt int64
}

// probe is a gate's probe slot: the single unproven call in flight of a
// learning gate beyond its learned quota, or of a half-open breaker.
type probe struct {
	id          string
	expires     int64 // µs: the probe's registration ends (ticket TTL)
	epoch       int64 // the learning epoch it was admitted in (0 = none)
	forLearning bool  // admitted beyond the learned quota
	forBreaker  bool  // admitted while the breaker was half-open
}

// live reports whether the slot holds a probe still in flight at now.
func (p probe) live(now int64) bool { return p.id != "" && p.expires > now }

// quota is a gate's last known provider quota; see store.Observation.HasQuota.
type quota struct {
	remaining int64
	window    int64 // µs: the first reset seen for the window, its identity
	reset     int64 // µs: the latest reset seen for the window; <= now means unknown
}

// known reports whether q holds a quota whose window has not reset at now.
func (q quota) known(now int64) bool { return q.reset > now }

// apply records one observed quota (remaining, reset in µs) at now.
func (q *quota) apply(remaining, reset, now int64) {
	tol := int64(store.QuotaWindowTolerance / time.Microsecond)
	live := q.known(now)
	switch {
	case live && reset < q.window-tol: // a late response from an older window
	case reset <= now: // the window already reset
		*q = quota{}
	case !live || reset > q.window+tol: // a new window
		*q = quota{remaining: remaining, window: reset, reset: reset}
	default: // the same window
		q.remaining = min(q.remaining, remaining)
		q.reset = max(q.reset, reset)
	}
}

// liveInFlight returns the number of live in-flight registrations on g
// (nil: none) and the earliest expiry among them (µs).
func (g *gate) liveInFlight(now int64) (int64, int64) {
	if g == nil {
		return 0, 0
	}
	return g.inflight.live(now)
}

// inFlight counts the live in-flight registrations on g (nil: none).
func (g *gate) inFlight(now int64) int64 {
	n, _ := g.liveInFlight(now)
	return n
}

// until returns until when g is closed at now, in µs (0 = open; nil g is
// open): its closed-until time, or later its known quota's reset while the
// calls in flight use up the known remaining count.
func (g *gate) until(now int64) int64 {
	if g == nil {
		return 0
	}
	until := int64(0)
	if g.closedUntil > now {
		until = g.closedUntil
	}
	if g.quota.known(now) && g.quota.reset > until && g.quota.remaining-g.inFlight(now) <= 0 {
		until = g.quota.reset
	}
	return until
}

// breakerAt returns g's breaker at now, dropping it once it expired (nil g
// or nothing counted: nil).
func (g *gate) breakerAt(now int64) *breaker {
	if g == nil || g.brk == nil {
		return nil
	}
	if g.brk.expires <= now {
		g.brk = nil
	}
	return g.brk
}

// breakerOpenUntil returns until when g's breaker is open at now, in µs
// (0 = closed or half-open).
func (g *gate) breakerOpenUntil(now int64) int64 {
	if b := g.breakerAt(now); b != nil && b.openUntil > now {
		return b.openUntil
	}
	return 0
}

// learningAt returns g's learned state at now, dropping it once it expired
// (nil g or nothing learned: nil).
func (g *gate) learningAt(now int64) *learning {
	if g == nil || g.learn == nil {
		return nil
	}
	if g.learn.expires <= now {
		g.learn = nil
	}
	return g.learn
}

// free returns the time, in µs, after which g holds nothing: the gate can
// be forgotten then. Operations that change g store it in g.freeAt. For
// the calls in flight it takes the latest expiry registered since the gate
// last had none (inflight.latest): never early, and late only while a
// call is in flight, by at most the time between its registration and the
// last one.
func (g *gate) free() int64 {
	f := max(g.closedUntil, g.quota.reset)
	if g.inflight != nil {
		f = max(f, g.inflight.latest)
	}
	if g.probe.id != "" {
		f = max(f, g.probe.expires)
	}
	if g.learn != nil {
		f = max(f, g.learn.expires)
	}
	if g.brk != nil {
		f = max(f, g.brk.expires)
	}
	return f
}

// prune drops what expired at now: tickets, the probe slot, learned state
// and the breaker. It reports whether nothing is left (the gate can go).
func (g *gate) prune(now int64) (dead bool) {
	if g.inflight.prune(now); g.inflight.len() == 0 {
		g.inflight = nil
	}
	if g.probe.id != "" && g.probe.expires <= now {
		g.probe = probe{}
	}
	g.learningAt(now)
	g.breakerAt(now)
	return g.free() <= now
}

// evictBatch returns how many gates the bound evicts at once when a tenant
// is full: 1/16 of the bound (at least one), so that the cost of finding
// them (a pass over the tenant's gates) is amortized over as many gate
// creations.
func evictBatch(maxGates int) int { return max(maxGates/16, 1) }

// promiseUntil returns until when g holds a promise to a provider at now,
// in µs (0 = none): a closed-until time (a hint, or a quota reported
// exhausted) or an open breaker. The bound never evicts a gate before
// then. The rest of a gate's state is soft: a learned quota, breaker
// counts, a half-open breaker, a known quota with calls left, calls in
// flight and the probe slot; forgetting it costs at most a refusal the
// provider sends again.
func (g *gate) promiseUntil(now int64) int64 {
	p := int64(0)
	if g.closedUntil > now {
		p = g.closedUntil
	}
	if g.brk != nil && g.brk.expires > now && g.brk.openUntil > p {
		p = g.brk.openUntil
	}
	return p
}

// lookup returns the gate of key, or nil.
func (s *Store) lookup(key store.GateKey) *gate {
	return s.tenants[key.Tenant][gateName{key.Scope, key.Credential}]
}

// newGate creates the gate of key, which must not exist, making room first
// when the tenant holds s.maxGates gates. When no room can be made (every
// gate holds a promise), it returns a detached gate that the store does not
// keep: the call proceeds untracked, and s.untracked hears of it. s.mu
// must be held.
func (s *Store) newGate(key store.GateKey, now int64) *gate {
	tg := s.tenants[key.Tenant]
	if tg == nil {
		tg = make(tenantGates)
		s.tenants[key.Tenant] = tg
	}
	if len(tg) >= s.maxGates && !s.trim(key.Tenant, tg, now) {
		if s.untracked != nil {
			s.untracked(key.Tenant)
		}
		return &gate{}
	}
	g := &gate{}
	tg[gateName{key.Scope, key.Credential}] = g
	s.gateCount++
	return g
}

// gateFor returns the gate of key, creating it when needed. s.mu must be held.
func (s *Store) gateFor(key store.GateKey, g *gate, now int64) *gate {
	if g != nil {
		return g
	}
	return s.newGate(key, now)
}

// trim makes room in a full tenant and reports whether there is room: it
// forgets the gates that hold nothing any more, then evicts, among the
// gates that hold no promise (see promiseUntil), those that free soonest,
// until the tenant is a batch below the bound. It never evicts a gate that
// holds a promise. When the gates without one are fewer than the batch, it
// evicts them all and refuses new gates until enough promises have ended to
// make a whole batch (s.full): promises end only as time passes, so that
// time is exact, and a tenant full of promises costs one pass per batch,
// not one per new gate. It looks only at this tenant's gates. s.mu must be
// held.
func (s *Store) trim(tenant string, tg tenantGates, now int64) bool {
	if until, ok := s.full[tenant]; ok {
		if now < until {
			return false
		}
		delete(s.full, tenant)
	}
	cand, promised := s.scratch[:0], s.promised[:0]
	for name, g := range tg {
		if g.freeAt <= now {
			delete(tg, name)
			s.gateCount--
			continue
		}
		if p := g.promiseUntil(now); p > now {
			promised = append(promised, candidate{free: p})
			continue
		}
		cand = append(cand, candidate{free: g.freeAt, name: name})
	}
	if drop := len(tg) - (s.maxGates - evictBatch(s.maxGates)); drop > 0 {
		k := min(drop, len(cand))
		selectSoonest(cand, k)
		for _, c := range cand[:k] {
			delete(tg, c.name)
			s.gateCount--
		}
		if short := drop - k; short > 0 {
			// len(promised) = len(tg) before the evictions less k >= short.
			selectSoonest(promised, short)
			until := int64(0)
			for _, c := range promised[:short] {
				until = max(until, c.free)
			}
			s.full[tenant] = until
		}
	}
	clear(cand) // drop the references to the names
	s.scratch, s.promised = cand[:0], promised[:0]
	return len(tg) < s.maxGates
}

// candidate is a gate considered for eviction.
type candidate struct {
	free int64
	name gateName
}

// selectSoonest reorders c so that its first k entries are the k that free
// soonest (in no particular order): quickselect, linear on average.
func selectSoonest(c []candidate, k int) {
	lo, hi := 0, len(c)-1
	for lo < hi {
		// Median of three as the pivot, which keeps sorted input linear.
		mid := lo + (hi-lo)/2
		if c[mid].free < c[lo].free {
			c[mid], c[lo] = c[lo], c[mid]
		}
		if c[hi].free < c[lo].free {
			c[hi], c[lo] = c[lo], c[hi]
		}
		if c[hi].free < c[mid].free {
			c[hi], c[mid] = c[mid], c[hi]
		}
		pivot := c[mid].free
		i, j := lo, hi
		for i <= j {
			for c[i].free < pivot {
				i++
			}
			for c[j].free > pivot {
				j--
			}
			if i <= j {
				c[i], c[j] = c[j], c[i]
				i++
				j--
			}
		}
		switch {
		case k-1 <= j:
			hi = j
		case k-1 >= i:
			lo = i
		default:
			return
		}
	}
}
