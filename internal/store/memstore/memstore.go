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
	if g != nil && g.closedUntil > now {
		return store.Admission{GateClosedUntil: time.UnixMicro(g.closedUntil)}, nil
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

	if g == nil {
		g = &gate{}
		s.gates[req.Gate] = g
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
	res.GateClosedUntil = s.observe(req.Gate, req.Ticket.ID, req.Obs, now)
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
func (s *Store) Observe(_ context.Context, key store.GateKey, obs store.Observation, now time.Time) (time.Time, error) {
	n := micros(now)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return time.Time{}, fmt.Errorf("memstore: observe: %w", store.ErrClosed)
	}
	s.maybeSweep(n)
	return s.observe(key, "", obs, n), nil
}

// GateState implements store.Store. It never blocks and ignores ctx.
func (s *Store) GateState(_ context.Context, key store.GateKey, now time.Time) (time.Time, error) {
	n := micros(now)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return time.Time{}, fmt.Errorf("memstore: gate state: %w", store.ErrClosed)
	}
	if g := s.gates[key]; g != nil {
		return timeOf(g.closedUntil, n), nil
	}
	return time.Time{}, nil
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
// the gate; it returns the gate's state afterwards. s.mu must be held.
func (s *Store) observe(key store.GateKey, ticket string, obs store.Observation, now int64) time.Time {
	g := s.gates[key]
	var cur int64
	if g != nil {
		delete(g.inflight, ticket)
		cur = g.closedUntil
	}
	target := cur
	if !obs.CloseUntil.IsZero() {
		if until := obs.CloseUntil.UnixMicro(); until > now && until > target {
			target = until
		}
	}
	if obs.HasQuota && !obs.Reset.IsZero() {
		if reset := obs.Reset.UnixMicro(); reset > now && reset > target {
			others := int64(0)
			if g != nil {
				for _, exp := range g.inflight {
					if exp > now {
						others++
					}
				}
			}
			if max(obs.Remaining, 0) <= others {
				target = reset
			}
		}
	}
	if target > cur {
		if g == nil {
			g = &gate{}
			s.gates[key] = g
		}
		g.closedUntil = target
	}
	return timeOf(target, now)
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
		if g.closedUntil <= now && len(g.inflight) == 0 {
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
