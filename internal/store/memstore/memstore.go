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

// DefaultMaxGatesPerTenant is the bound on the gates one tenant may hold
// unless [WithMaxGatesPerTenant] sets another.
const DefaultMaxGatesPerTenant = 10_000

// HeldPoll is the longest Admission.HeldFor the store answers: how often a
// held caller checks again (sooner when the probe's registration ends
// sooner).
const HeldPoll = 100 * time.Millisecond

// Option configures a Store.
type Option func(*options)

type options struct {
	ticketTTL time.Duration
	maxGates  int
	untracked func(tenant string)
}

// WithTicketTTL sets how long an in-flight registration (and a probe) lives
// when it is never completed; zero or negative keeps
// [store.DefaultTicketTTL].
func WithTicketTTL(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.ticketTTL = d
		}
	}
}

// WithMaxGatesPerTenant bounds the number of gates (all per-gate state:
// closed-until time, known quota, calls in flight, probe, learned quota,
// breaker) one tenant may hold; zero or negative keeps
// [DefaultMaxGatesPerTenant]. When a tenant at the bound needs a new gate,
// its gates that hold nothing any more are forgotten first, then, among
// those that hold no promise to a provider (a closed gate, an open
// breaker), those that free soonest are evicted, 1/16 of the bound at a
// time. A gate that holds a promise is never evicted: when every gate of
// the tenant holds one, the new gate is not tracked (see [WithUntracked]).
// Other tenants' gates are never touched.
func WithMaxGatesPerTenant(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.maxGates = n
		}
	}
}

// WithUntracked sets a function called, with the store's lock held, each
// time a tenant at the gate bound cannot get a new gate because every gate
// it holds is a promise (see [WithMaxGatesPerTenant]): the call proceeds
// untracked. It must return quickly and must not call the store; the
// broker counts it in a metric and logs it once per tenant.
func WithUntracked(fn func(tenant string)) Option {
	return func(o *options) { o.untracked = fn }
}

// Store is an in-memory store.Store. The zero value is not usable; call New.
type Store struct {
	ticketTTL int64 // µs
	maxGates  int

	mu        sync.Mutex
	closed    bool
	nextID    uint64
	lastSweep int64 // µs of request time; 0 before the first sweep
	tenants   map[string]tenantGates
	gateCount int              // gates in all tenants
	scratch   []candidate      // reused by trim
	promised  []candidate      // reused by trim
	full      map[string]int64 // tenant -> until when trim makes no room, µs
	untracked func(tenant string)
	pace      map[paceKey]int64 // theoretical arrival time, µs
	budgets   map[string]*budget
}

type paceKey struct{ tenant, host string }

var _ store.Store = (*Store)(nil)

// New returns an empty in-memory store.
func New(opts ...Option) *Store {
	o := options{ticketTTL: store.DefaultTicketTTL, maxGates: DefaultMaxGatesPerTenant}
	for _, opt := range opts {
		opt(&o)
	}
	return &Store{
		ticketTTL: int64(o.ticketTTL / time.Microsecond),
		maxGates:  o.maxGates,
		tenants:   make(map[string]tenantGates),
		full:      make(map[string]int64),
		untracked: o.untracked,
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

// NonBlocking implements store.NonBlocking: every operation returns at
// once and ignores its context.
func (s *Store) NonBlocking() bool { return true }

// Admit implements store.Store. It never blocks and ignores ctx.
func (s *Store) Admit(_ context.Context, req store.AdmitRequest) (store.Admission, error) {
	now := micros(req.Now)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.Admission{}, fmt.Errorf("memstore: admit: %w", store.ErrClosed)
	}
	s.maybeSweep(now)

	g := s.lookup(req.Gate)
	defer func() {
		if g != nil {
			g.freeAt = g.free()
		}
	}()
	if until := g.until(now); until > 0 {
		return store.Admission{GateClosedUntil: time.UnixMicro(until)}, nil
	}
	var w want
	var refused store.Admission
	g, w, refused = s.wants(g, req, now)
	if refused != (store.Admission{}) {
		return refused, nil
	}
	adm, ok := s.reservePace(req, now)
	if !ok {
		return adm, nil
	}
	if req.FirstAttempt && !req.Budget.Unlimited() {
		s.budgetFor(req.Gate.Tenant).add(now, req.Budget.WindowSeconds(), 1, 0)
	}
	g = s.register(g, req, w, &adm, now)
	return adm, nil
}

// want is what an admitted attempt is on its gate.
type want struct {
	known       bool      // the gate has a live announced quota
	forBreaker  bool      // it probes a half-open breaker
	forLearning bool      // it probes beyond the learned quota, or scouts a fresh epoch
	scout       bool      // it is the scout of a fresh epoch (forLearning too)
	learned     bool      // it goes within a learned quota, or in slow start: registered in flight
	learn       *learning // the gate's learned state (nil: learning off or a known quota)
}

func (w want) probe() bool { return w.forBreaker || w.forLearning }

// wants decides what an attempt on open gate g would be: the breaker, then
// the learned quota (or, in a fresh epoch, the first-window rule), decide
// whether it goes as the probe or the scout, or is held. It answers an
// Admission when the attempt may not go now (open breaker, held), the zero
// Admission otherwise.
func (s *Store) wants(g *gate, req store.AdmitRequest, now int64) (*gate, want, store.Admission) {
	w := want{known: g != nil && g.quota.known(now)}
	if req.Breaker.Enabled {
		if b := g.breakerAt(now); b != nil && b.openUntil > 0 {
			if b.openUntil > now {
				return g, w, store.Admission{BreakerOpenUntil: time.UnixMicro(b.openUntil)}
			}
			w.forBreaker = true // half-open
		}
	}
	first := req.Learning.FirstWindow()
	if req.Learning.Enabled && !w.known { // an announced quota takes precedence
		// A known quota whose window reset is a window nothing is known
		// of: it starts with a scout, as a fresh gate does.
		lapsed := first && g != nil && g.quota.reset != 0
		if lapsed {
			g.quota = quota{}
		}
		g = s.gateFor(req.Gate, g, now)
		w.learn = g.startEpoch(now, int64(req.Learning.Expiry()/time.Microsecond), lapsed)
		w.forLearning = w.learn.wantsProbe()
		if first && !w.learn.known && w.learn.accepted == 0 {
			w.forLearning, w.scout = true, true
		}
	}
	if w.probe() && g.probe.live(now) {
		return g, w, store.Admission{Held: true, HeldFor: min(HeldPoll, time.Duration(g.probe.expires-now)*time.Microsecond)}
	}
	// A learning probe goes only once the epoch's learned calls are back:
	// an accepted probe must show room beyond them, not win a race
	// against the slowest of them to the provider.
	if w.forLearning && !w.forBreaker {
		if n, first := g.liveInFlight(now); n > 0 {
			return g, w, store.Admission{Held: true, HeldFor: min(HeldPoll, time.Duration(first-now)*time.Microsecond)}
		}
	}
	if l := w.learn; l != nil && !w.probe() {
		switch {
		case l.known:
			// In an epoch with a learned quota, the learned calls are
			// registered in flight (their Complete says they are back).
			w.learned = true
		case first:
			// Slow start: after the scout, a few calls per round trip,
			// growing with those accepted, until a refusal gives L.
			if lim := store.SlowStartLimit(l.accepted); lim > 0 {
				if n, _ := g.liveInFlight(now); n >= lim {
					return g, w, store.Admission{Held: true, HeldFor: HeldPoll}
				}
				w.learned = true
			}
		}
	}
	return g, w, store.Admission{}
}

// reservePace takes the attempt's pacing slot; ok is false (and the
// Admission says PaceDenied) when the slot lies beyond the caller's wait.
func (s *Store) reservePace(req store.AdmitRequest, now int64) (store.Admission, bool) {
	var adm store.Admission
	interval := int64(req.Pace.Interval() / time.Microsecond)
	if interval <= 0 {
		return adm, true
	}
	pk := paceKey{req.Gate.Tenant, req.PaceHost}
	tat := max(s.pace[pk], now)
	newTAT := tat + interval
	wait := max(newTAT-int64(req.Pace.BurstOrOne())*interval-now, 0)
	adm.PaceWait = time.Duration(wait) * time.Microsecond
	if wait > int64(max(req.PaceMaxWait, 0)/time.Microsecond) {
		adm.PaceDenied = true
		return adm, false
	}
	s.pace[pk] = newTAT
	return adm, true
}

// register records an admitted attempt: in flight (against a known quota,
// or within a learned one), in the probe slot, in its epoch's count and in
// the breaker's window. It returns g, created when the breaker needed it.
func (s *Store) register(g *gate, req store.AdmitRequest, w want, adm *store.Admission, now int64) *gate {
	if w.known || w.probe() || w.learned {
		s.nextID++
		adm.Ticket.ID = "m" + strconv.FormatUint(s.nextID, 36)
	}
	if w.known || w.learned {
		if g.inflight == nil {
			g.inflight = new(inflight)
		}
		g.inflight.add(adm.Ticket.ID, now+s.ticketTTL)
	}
	if w.learn != nil {
		w.learn.admitted++
		adm.Ticket.Epoch = w.learn.epoch
	}
	if w.probe() {
		adm.Probe = true
		expires := now + s.ticketTTL
		if w.scout {
			// A scout holds the others for a bounded time only.
			expires = min(expires, now+int64(req.Learning.Hold()/time.Microsecond))
		}
		g.probe = probe{
			id: adm.Ticket.ID, expires: expires, epoch: adm.Ticket.Epoch,
			forLearning: w.forLearning, forBreaker: w.forBreaker,
		}
	}
	if req.Breaker.Enabled {
		g = s.gateFor(req.Gate, g, now)
		if g.brk == nil {
			g.brk = &breaker{}
		}
		g.brk.add(now, req.Breaker.WindowSeconds(), 1, 0)
		if w.forBreaker {
			// A half-open breaker outlives its probe as it outlives its
			// open time.
			g.brk.expires = max(g.brk.expires, g.probe.expires+g.brk.keep)
		}
	}
	return g
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
	st := s.settle(req.Gate, req.Ticket, req.Obs, req.Result, req.Learning, req.Breaker, false, now, bound(now, req.MaxGate))
	res.GateClosedUntil, res.BreakerOpenUntil, res.BreakerChange = st.ClosedUntil, st.BreakerOpenUntil, st.BreakerChange
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
	return s.settle(req.Gate, store.Ticket{}, req.Obs, req.Result, req.Learning, req.Breaker, true, n, bound(n, req.MaxGate)), nil
}

// GateState implements store.Store. It never blocks and ignores ctx.
func (s *Store) GateState(_ context.Context, key store.GateKey, now time.Time) (store.GateStatus, error) {
	n := micros(now)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.GateStatus{}, fmt.Errorf("memstore: gate state: %w", store.ErrClosed)
	}
	g := s.lookup(key)
	return store.GateStatus{ClosedUntil: timeOf(g.until(n), n), BreakerOpenUntil: timeOf(g.breakerOpenUntil(n), n)}, nil
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
	s.tenants, s.pace, s.budgets, s.scratch, s.promised, s.full, s.gateCount = nil, nil, nil, nil, nil, nil, 0
	return nil
}

// settle ends the attempt of ticket (if any; observed = from Observe, with
// no admitted attempt), applies obs to the gate, closing it no later than
// limit (µs), and feeds result to the probe slot, the learned quota and
// the breaker. It returns the gate's state afterwards. s.mu must be held.
func (s *Store) settle(key store.GateKey, ticket store.Ticket, obs store.Observation, result store.Result,
	lc store.LearningConfig, bc store.BreakerConfig, observed bool, now, limit int64,
) store.GateStatus {
	g := s.lookup(key)
	var cur int64
	var pr probe // the probe this attempt was, if it was one
	if g != nil {
		if ticket.ID != "" {
			g.inflight.remove(ticket.ID) // an emptied set stays, for the gate's next calls (prune drops it)
			if g.probe.id == ticket.ID && g.probe.live(now) {
				pr, g.probe = g.probe, probe{}
			}
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
	if target > cur || hasQuota && reset > now {
		g = s.gateFor(key, g, now)
	}
	if g != nil && target > cur {
		g.closedUntil = target
	}
	if g != nil && hasQuota {
		g.quota.apply(remaining, reset, now)
	}

	if l := g.learningAt(now); l != nil {
		l.settle(ticket.Epoch, result, pr.id != "" && pr.forLearning && pr.epoch == ticket.Epoch, g.closedUntil)
		if l.ended {
			// The idle time of an ended epoch runs from the reopening:
			// a long close does not forget what the next epoch needs.
			l.expires = max(l.expires, g.closedUntil+int64(lc.Expiry()/time.Microsecond))
		}
	}
	change := s.feedBreaker(key, g, pr.id != "" && pr.forBreaker, result, bc.Normalized(), observed, now, limit)

	if g == nil {
		g = s.lookup(key)
	}
	if g != nil {
		g.freeAt = g.free()
	}
	return store.GateStatus{ClosedUntil: timeOf(g.until(now), now), BreakerOpenUntil: timeOf(g.breakerOpenUntil(now), now), BreakerChange: change}
}

// feedBreaker applies one result to g's breaker (g may be nil). A probe's
// result, or Observe's while the breaker is half-open, decides it; while
// it is closed, Observe counts a call (any answer but None; ClassifyResponse
// callers are not admitted, so not counted at Admit) and a failure counts
// one, which may open it. While it is open, results change nothing. s.mu
// must be held.
func (s *Store) feedBreaker(key store.GateKey, g *gate, probe bool, result store.Result, c store.BreakerConfig,
	observed bool, now, limit int64,
) store.BreakerChange {
	b := g.breakerAt(now)
	if b != nil && b.openUntil > 0 {
		if probe || observed && b.openUntil <= now {
			if b.probeResult(result, now, limit, c) {
				g.brk = nil // closed: counts cleared, k = 0
				return store.BreakerClosed
			}
			if result.BreakerFailure() {
				return store.BreakerReopened
			}
		}
		return store.BreakerUnchanged
	}
	if !c.Enabled {
		return store.BreakerUnchanged
	}
	var calls, failures int64
	if observed && result.Answered() {
		calls = 1
	}
	if result.BreakerFailure() {
		failures = 1
	}
	if calls+failures == 0 {
		return store.BreakerUnchanged
	}
	g = s.gateFor(key, g, now)
	if g.brk == nil {
		g.brk = &breaker{}
	}
	g.brk.add(now, c.WindowSeconds(), calls, failures)
	if failures > 0 && g.brk.trips(now, c) {
		g.brk.open(now, limit, c)
		return store.BreakerOpened
	}
	return store.BreakerUnchanged
}

// InFlight implements store.InFlightCounter: the registrations that count
// against a known quota (a probe on a gate without one is not among them).
func (s *Store) InFlight(_ context.Context, key store.GateKey, now time.Time) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, fmt.Errorf("memstore: in flight: %w", store.ErrClosed)
	}
	return s.lookup(key).inFlight(micros(now)), nil
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
	for t, tg := range s.tenants {
		for name, g := range tg {
			if g.prune(now) {
				delete(tg, name)
				s.gateCount--
			}
		}
		if len(tg) == 0 {
			delete(s.tenants, t)
		}
	}
	for t, until := range s.full {
		if until <= now {
			delete(s.full, t)
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
	return s.gateCount + len(s.pace) + len(s.budgets)
}

// Gates returns the number of gates tenant holds, for tests and metrics:
// it shows the per-tenant bound.
func (s *Store) Gates(tenant string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.tenants[tenant])
}
