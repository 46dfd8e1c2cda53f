package memstore

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/retrybroker/retrybroker/internal/store"
)

// sweepEvery is how much request time passes between two sweeps, in µs.
const sweepEvery = int64(time.Second / time.Microsecond)

// Option configures a Store.
type Option func(*options)

type options struct {
	ticketTTL time.Duration
}

// WithTicketTTL sets how long an in-flight registration lives when it is
// never completed; zero or negative keeps [store.DefaultTicketTTL].
func WithTicketTTL(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.ticketTTL = d
		}
	}
}

// Store is an in-memory store.Store. The zero value is not usable; call New.
type Store struct {
	ticketTTL int64 // µs

	mu        sync.Mutex
	closed    bool
	nextID    uint64
	lastSweep int64 // µs of request time; 0 before the first sweep
	gates     map[store.GateKey]*gate
	pace      map[paceKey]int64 // theoretical arrival time, µs
	budgets   map[string]*budget
}

type gate struct {
	closedUntil int64            // µs; <= now means open
	inflight    map[string]int64 // ticket id -> expiry, µs
	quota       quota            // last known provider quota
}

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

type paceKey struct{ tenant, host string }

var _ store.Store = (*Store)(nil)

// New returns an empty in-memory store.
func New(opts ...Option) *Store {
	o := options{ticketTTL: store.DefaultTicketTTL}
	for _, opt := range opts {
		opt(&o)
	}
	return &Store{
		ticketTTL: int64(o.ticketTTL / time.Microsecond),
		gates:     make(map[store.GateKey]*gate),
		pace:      make(map[paceKey]int64),
		budgets:   make(map[string]*budget),
	}
}

func micros(t time.Time) int64 {
	if t.IsZero() {
		t = time.Now()
	}
	return t.UnixMicro()
}

func timeOf(us int64, now int64) time.Time {
	if us <= now {
		return time.Time{}
	}
	return time.UnixMicro(us)
}

// Admit implements store.Store. It never blocks and ignores ctx.
func (s *Store) Admit(_ context.Context, req store.AdmitRequest) (store.Admission, error) {
	now := micros(req.Now)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.Admission{}, fmt.Errorf("memstore: admit: %w", store.ErrClosed)
	}
	s.maybeSweep(now)

	g := s.gates[req.Gate]
	if until := g.until(now); until > 0 {
		return store.Admission{GateClosedUntil: time.UnixMicro(until)}, nil
	}

	var adm store.Admission
	if interval := int64(req.Pace.Interval() / time.Microsecond); interval > 0 {
		pk := paceKey{req.Gate.Tenant, req.PaceHost}
		tat := max(s.pace[pk], now)
		newTAT := tat + interval
		wait := max(newTAT-int64(req.Pace.BurstOrOne())*interval-now, 0)
		adm.PaceWait = time.Duration(wait) * time.Microsecond
		if wait > int64(max(req.PaceMaxWait, 0)/time.Microsecond) {
			adm.PaceDenied = true
			return adm, nil
		}
		s.pace[pk] = newTAT
	}

	if req.FirstAttempt && !req.Budget.Unlimited() {
		s.budgetFor(req.Gate.Tenant).add(now, req.Budget.WindowSeconds(), 1, 0)
	}

	// In-flight counts matter only while the gate has a known quota: only
	// then is the attempt registered (g exists, holding that quota).
	if g == nil || !g.quota.known(now) {
		return adm, nil
	}
	if g.inflight == nil {
		g.inflight = make(map[string]int64)
	}
	s.nextID++
	id := "m" + strconv.FormatUint(s.nextID, 36)
	g.inflight[id] = now + s.ticketTTL
	adm.Ticket = store.Ticket{ID: id}
	return adm, nil
}

// Complete implements store.Store. It never blocks and ignores ctx.
func (s *Store) Complete(_ context.Context, req store.CompleteRequest) (store.CompleteResult, error) {
	now := micros(req.Now)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.CompleteResult{}, fmt.Errorf("memstore: complete: %w", store.ErrClosed)
	}
	s.maybeSweep(now)

	res := store.CompleteResult{RetryAllowed: true}
	res.GateClosedUntil = s.observe(req.Gate, req.Ticket.ID, req.Obs, now, bound(now, req.MaxGate))
	if req.SpendRetry && !req.Budget.Unlimited() {
		w := req.Budget.WindowSeconds()
		b := s.budgetFor(req.Gate.Tenant)
		requests, retries := b.sums(now, w)
		if float64(retries+1) <= req.Budget.Allowance(requests) {
			b.add(now, w, 0, 1)
		} else {
			res.RetryAllowed = false
		}
	}
	return res, nil
}

// Observe implements store.Store. It never blocks and ignores ctx.
func (s *Store) Observe(_ context.Context, req store.ObserveRequest) (store.GateStatus, error) {
	n := micros(req.Now)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.GateStatus{}, fmt.Errorf("memstore: observe: %w", store.ErrClosed)
	}
	s.maybeSweep(n)
	return store.GateStatus{ClosedUntil: s.observe(req.Gate, "", req.Obs, n, bound(n, req.MaxGate))}, nil
}

// GateState implements store.Store. It never blocks and ignores ctx.
func (s *Store) GateState(_ context.Context, key store.GateKey, now time.Time) (store.GateStatus, error) {
	n := micros(now)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.GateStatus{}, fmt.Errorf("memstore: gate state: %w", store.ErrClosed)
	}
	return store.GateStatus{ClosedUntil: timeOf(s.gates[key].until(n), n)}, nil
}

// bound returns the latest gate time, in µs, an observation at now may set.
func bound(now int64, maxGate time.Duration) int64 {
	if maxGate <= 0 {
		maxGate = store.DefaultMaxGate
	}
	return now + int64(maxGate/time.Microsecond)
}

// Close marks the store closed; later calls fail with store.ErrClosed.
// It is idempotent and always returns nil.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.gates, s.pace, s.budgets = nil, nil, nil
	return nil
}

// observe ends the in-flight registration ticket (if any) and applies obs to
// the gate, closing it no later than limit (µs); it returns the gate's state
// afterwards. s.mu must be held.
func (s *Store) observe(key store.GateKey, ticket string, obs store.Observation, now, limit int64) time.Time {
	g := s.gates[key]
	var cur int64
	if g != nil {
		if ticket != "" {
			delete(g.inflight, ticket)
		}
		cur = g.closedUntil
	}
	target := cur
	if !obs.CloseUntil.IsZero() {
		if until := min(obs.CloseUntil.UnixMicro(), limit); until > now && until > target {
			target = until
		}
	}
	hasQuota := obs.HasQuota && !obs.Reset.IsZero()
	remaining, reset := max(obs.Remaining, 0), int64(0)
	if hasQuota {
		reset = min(obs.Reset.UnixMicro(), limit)
		// Only an exhausted quota closes the gate outright (until the
		// reset). A remaining count at or below the calls in flight is
		// enforced by Admit from the known quota, not by a sticky close:
		// some of those calls may already have been served, with their
		// responses still on the way.
		if reset > now && reset > target && remaining == 0 {
			target = reset
		}
	}
	if g == nil && (target > cur || hasQuota && reset > now) {
		g = &gate{}
		s.gates[key] = g
	}
	if g == nil {
		return time.Time{}
	}
	if target > cur {
		g.closedUntil = target
	}
	if hasQuota {
		g.quota.apply(remaining, reset, now)
	}
	return timeOf(g.until(now), now)
}

// InFlight implements store.InFlightCounter.
func (s *Store) InFlight(_ context.Context, key store.GateKey, now time.Time) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gates[key].inFlight(micros(now)), nil
}

// inFlight counts the live in-flight registrations on g (nil: none).
func (g *gate) inFlight(now int64) int64 {
	if g == nil {
		return 0
	}
	n := int64(0)
	for _, exp := range g.inflight {
		if exp > now {
			n++
		}
	}
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

func (s *Store) budgetFor(tenant string) *budget {
	b := s.budgets[tenant]
	if b == nil {
		b = &budget{}
		s.budgets[tenant] = b
	}
	return b
}

// maybeSweep drops expired state at most once per second of request time
// (or when the clock jumped back by more than a minute). s.mu must be held.
func (s *Store) maybeSweep(now int64) {
	if now < s.lastSweep+sweepEvery && now > s.lastSweep-60*sweepEvery {
		return
	}
	s.lastSweep = now
	for k, g := range s.gates {
		for id, exp := range g.inflight {
			if exp <= now {
				delete(g.inflight, id)
			}
		}
		if g.closedUntil <= now && len(g.inflight) == 0 && !g.quota.known(now) {
			delete(s.gates, k)
		}
	}
	for k, tat := range s.pace {
		if tat <= now {
			delete(s.pace, k)
		}
	}
	for k, b := range s.budgets {
		if b.expired(now) {
			delete(s.budgets, k)
		}
	}
}

// Len returns the number of gates, pacing slots and budgets held, for tests
// and metrics: it shows that expired state is swept.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.gates) + len(s.pace) + len(s.budgets)
}
