package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrybroker/retrybroker/internal/store"
)

// scripts are the store's scripts, preloaded by Open.
var scripts = []*redis.Script{admitScript, completeScript, stateScript, flushGateScript, flushBudgetScript, inspectScript}

// movedProbes is how many more hash tags a non-cluster client reads, after
// the full check, to find out whether it is talking to one node of a
// cluster: each lands on another slot, and a cluster of two or more
// masters answers MOVED to at least one of them (unless every one of 16
// fixed slots belongs to the node at hand).
const movedProbes = 15

// maxTagSearch bounds the search for a hash tag on each cluster master.
const maxTagSearch = 1 << 16

// Verify proves that the store's own operations work on what it is
// connected to: through the store's own methods (so the exact scripts and
// arguments the broker uses), on reserved gates of reserved tenants of its
// own (tenant ids no configuration can hold, "\x00verify-RUN-N", where RUN
// is new for each run and holds the store's random id; keys expiring
// within seconds), it records a known quota and spends a retry (Complete),
// admits and registers an attempt with pacing and a budget (Admit), reads
// the gate closed by that attempt (GateState) and completes it (Complete),
// then admits an attempt with learning and the breaker on (the state and
// index writes), writes the counts of one more attempt as local admission
// does (the flush scripts) and reads them back (InspectGate), and checks
// every result. On a cluster it does so on every
// master, with a tenant whose hash tag lands on that master's slots; on
// one server (or Sentinel's master) it then reads 15 more gates of other
// hash tags, so that a cluster behind a single-node client is found out by
// its MOVED replies. The error, an *Error, names the cause:
// store.CauseMoved, CauseNoPerm, CauseWrongPass, CauseOOM,
// CauseReadOnly, ... (see Classify), or store.CauseUnexpected for wrong
// results. Runs never share a key, so any number of them (replicas that
// start together, a probe and a check of one replica) may run at once,
// one right after another.
func (s *Store) Verify(ctx context.Context) error {
	if s.closed.Load() {
		return s.wrap("verify", redis.ErrClosed)
	}
	run := s.idPrefix + strconv.FormatUint(s.nextID.Add(1), 36)
	tenants, err := s.verifyTenants(ctx, run)
	if err != nil {
		return s.wrap("verify", err)
	}
	for _, t := range tenants {
		if err := s.verifyOn(ctx, t); err != nil {
			return err
		}
	}
	if s.topology == Cluster {
		return nil
	}
	now := time.Now()
	for n := 1; n <= movedProbes; n++ {
		if _, err := s.GateState(ctx, store.GateKey{Tenant: verifyTenant(run, n), Scope: "verify"}, now); err != nil {
			return err
		}
	}
	return nil
}

// verifyTenant is the reserved tenant id n of verification run. The
// tenant id is the keys' hash tag, so each n of a run lands on a slot of
// its own choosing.
func verifyTenant(run string, n int) string { return "\x00verify-" + run + "-" + strconv.Itoa(n) }

// verifyTenants returns the tenants run verifies on: verifyTenant(run, 0)
// without a cluster; on a cluster, one tenant whose keys live on each
// master.
func (s *Store) verifyTenants(ctx context.Context, run string) ([]string, error) {
	cc, ok := s.client.(*redis.ClusterClient)
	if !ok {
		return []string{verifyTenant(run, 0)}, nil
	}
	var mu sync.Mutex
	masters := map[string]bool{}
	if err := cc.ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		masters[c.Options().Addr] = true
		return nil
	}); err != nil {
		return nil, err
	}
	var tenants []string
	for n := 0; len(masters) > 0 && n < maxTagSearch; n++ {
		t := verifyTenant(run, n)
		m, err := cc.MasterForKey(ctx, s.keys.gate(store.GateKey{Tenant: t, Scope: "verify"}))
		if err != nil {
			return nil, err
		}
		if addr := m.Options().Addr; masters[addr] {
			delete(masters, addr)
			tenants = append(tenants, t)
		}
	}
	return tenants, nil
}

// verifyOn runs the checks of Verify with tenant t's keys.
func (s *Store) verifyOn(ctx context.Context, t string) error {
	now := time.Now()
	gate := store.GateKey{Tenant: t, Scope: "verify", Credential: s.idPrefix + strconv.FormatUint(s.nextID.Add(1), 36)}
	reset := now.Add(2 * time.Second)
	budget := store.BudgetConfig{FloorPerSecond: 1, Window: time.Second}
	short := 2 * time.Second
	bad := func(what string, got any) error {
		return unexpected("verify", fmt.Sprintf("%s for tenant %q: %+v", what, t, got))
	}
	// A known quota of 1 until reset, and a retry spent (a budget of one
	// retry a second): the gate stays open, the retry is allowed.
	r, err := s.Complete(ctx, store.CompleteRequest{
		Gate: gate, Obs: store.Observation{HasQuota: true, Remaining: 1, Reset: reset},
		SpendRetry: true, Budget: budget, MaxGate: short, Now: now,
	})
	if err != nil {
		return err
	}
	if !r.RetryAllowed || !r.GateClosedUntil.IsZero() {
		return bad("Complete with a quota and a retry", r)
	}
	// An attempt admitted with pacing and a budget, and registered.
	a, err := s.Admit(ctx, store.AdmitRequest{
		Gate: gate, PaceHost: "verify", Pace: store.PaceConfig{Rate: 1, Burst: 1},
		FirstAttempt: true, Budget: budget, Now: now,
	})
	if err != nil {
		return err
	}
	if !a.Admitted() || a.Ticket.ID == "" || a.PaceWait != 0 {
		return bad("Admit against the known quota", a)
	}
	// Its registration uses the known quota up: the gate is closed.
	st, err := s.GateState(ctx, gate, now)
	if err != nil {
		return err
	}
	if !st.ClosedUntil.Equal(reset.Truncate(time.Microsecond)) {
		return bad("GateState with the quota used up", st)
	}
	// Completing it gives its share back: open again.
	r, err = s.Complete(ctx, store.CompleteRequest{Gate: gate, Ticket: a.Ticket, MaxGate: short, Now: now})
	if err != nil {
		return err
	}
	if !r.GateClosedUntil.IsZero() {
		return bad("Complete of the registered attempt", r)
	}
	// Learning and the breaker on another gate: a fresh epoch admits.
	learned := store.GateKey{Tenant: t, Scope: "verify-learn", Credential: gate.Credential}
	a, err = s.Admit(ctx, store.AdmitRequest{
		Gate: learned, Learning: store.LearningConfig{Enabled: true, IdleExpiry: short, FirstWindowOff: true},
		Breaker: store.BreakerConfig{Enabled: true, Window: time.Second, OpenFor: time.Second, MaxOpen: time.Second}, Now: now,
	})
	if err != nil {
		return err
	}
	if !a.Admitted() || a.Probe || a.Ticket.Epoch == 0 {
		return bad("Admit with learning and the breaker", a)
	}
	// The counts of one more attempt, as local admission writes them
	// (flush scripts, and the payload of the next script on the gate):
	// the epoch has admitted two.
	sec := now.Unix()
	extra := &taken{
		gates: []*gatePending{{
			gate: learned, sig: admitSig{learnExpiry: int64(short / time.Microsecond), brkWindow: 1},
			epoch: a.Ticket.Epoch, n: 1, last: now, calls: map[int64]int64{sec: 1},
		}},
		budgets: []*budgetPending{{window: 1, last: now, q: map[int64]int64{sec: 1}}},
		budKey:  []string{s.keys.budget(t)},
	}
	if err := s.pipeline(ctx, s.flushCalls(extra)); err != nil {
		return s.wrap("verify", err)
	}
	info, err := s.InspectGate(ctx, learned, now)
	if err != nil {
		return err
	}
	if info.Epoch != a.Ticket.Epoch || info.Admitted != 2 {
		return bad("the counts of a locally admitted attempt", info)
	}
	return nil
}
