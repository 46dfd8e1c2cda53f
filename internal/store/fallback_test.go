package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/retrybroker/retrybroker/internal/store"
	"github.com/retrybroker/retrybroker/internal/store/memstore"
	"github.com/retrybroker/retrybroker/internal/store/redisstore"
	"github.com/retrybroker/retrybroker/internal/store/redistest"
	"github.com/retrybroker/retrybroker/internal/store/storetest"
)

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{}) // outage tests make go-redis log every failed dial
	goleak.VerifyTestMain(m)
}

// patient gives redis clients long timeouts, so that only the Fallback's
// own bound can make a call return early.
func patient(o *redis.Options) {
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.PoolTimeout = 30*time.Second, 30*time.Second, 30*time.Second, 30*time.Second
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// switchable is a primary that fails every call while down.
type switchable struct {
	*memstore.Store
	down  atomic.Bool
	calls atomic.Int64
}

func newSwitchable() *switchable { return &switchable{Store: memstore.New()} }

func (s *switchable) err() error {
	s.calls.Add(1)
	if s.down.Load() {
		return fmt.Errorf("switchable: %w: down", store.ErrUnavailable)
	}
	return nil
}

func (s *switchable) Admit(ctx context.Context, req store.AdmitRequest) (store.Admission, error) {
	if err := s.err(); err != nil {
		return store.Admission{}, err
	}
	return s.Store.Admit(ctx, req)
}

func (s *switchable) Complete(ctx context.Context, req store.CompleteRequest) (store.CompleteResult, error) {
	if err := s.err(); err != nil {
		return store.CompleteResult{}, err
	}
	return s.Store.Complete(ctx, req)
}

func (s *switchable) Observe(ctx context.Context, req store.ObserveRequest) (store.GateStatus, error) {
	if err := s.err(); err != nil {
		return store.GateStatus{}, err
	}
	return s.Store.Observe(ctx, req)
}

func (s *switchable) GateState(ctx context.Context, g store.GateKey, now time.Time) (store.GateStatus, error) {
	if err := s.err(); err != nil {
		return store.GateStatus{}, err
	}
	return s.Store.GateState(ctx, g, now)
}

// hanging is a primary whose calls block until their ctx ends.
type hanging struct{ calls *atomic.Int64 }

func (h hanging) Admit(ctx context.Context, _ store.AdmitRequest) (store.Admission, error) {
	h.calls.Add(1)
	<-ctx.Done()
	return store.Admission{}, ctx.Err()
}

func (h hanging) Complete(ctx context.Context, _ store.CompleteRequest) (store.CompleteResult, error) {
	h.calls.Add(1)
	<-ctx.Done()
	return store.CompleteResult{}, ctx.Err()
}

func (hanging) Observe(ctx context.Context, _ store.ObserveRequest) (store.GateStatus, error) {
	<-ctx.Done()
	return store.GateStatus{}, ctx.Err()
}

func (hanging) GateState(ctx context.Context, _ store.GateKey, _ time.Time) (store.GateStatus, error) {
	<-ctx.Done()
	return store.GateStatus{}, ctx.Err()
}

func (hanging) Close() error { return nil }

// slack is the scheduling delay tolerated on top of a timeout: CI machines
// can be loaded. Clients without the Fallback's bound would wait 30 s.
const slack = 2 * time.Second

// transitions records state changes.
type transitions struct {
	mu  sync.Mutex
	got []bool
	ch  chan bool
}

func watch(f *store.Fallback) *transitions {
	tr := &transitions{ch: make(chan bool, 100)}
	f.OnStateChange(func(d bool) {
		tr.mu.Lock()
		tr.got = append(tr.got, d)
		tr.mu.Unlock()
		select {
		case tr.ch <- d:
		default: // a flapping Fallback must not block on its listener
		}
	})
	return tr
}

func (tr *transitions) wait(t *testing.T, want bool, within time.Duration) {
	t.Helper()
	select {
	case got := <-tr.ch:
		if got != want {
			t.Fatalf("state change to degraded=%v, want %v", got, want)
		}
	case <-time.After(within):
		t.Fatalf("no state change to degraded=%v within %v", want, within)
	}
}

func (tr *transitions) list() []bool {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]bool(nil), tr.got...)
}

var (
	gate = store.GateKey{Tenant: "acme", Scope: "github"}
	t0   = storetest.T0
)

func TestFallbackSuiteHealthy(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) store.Store {
			f := store.NewFallback(memstore.New(), memstore.New())
			t.Cleanup(func() { _ = f.Close() })
			return f
		})
	})
	t.Run("redis", func(t *testing.T) {
		url := redistest.Start(t) // one server; each subtest gets its own key prefix
		var n atomic.Int64
		storetest.Run(t, func(t *testing.T) store.Store {
			rs, err := redisstore.New(context.Background(), url, redisstore.WithRedisOptions(patient),
				redisstore.WithKeyPrefix(fmt.Sprintf("suite%d:", n.Add(1))))
			if err != nil {
				t.Fatal(err)
			}
			// A long primary timeout: this suite checks behaviour, not speed,
			// and must not degrade on a loaded machine.
			f := store.NewFallback(rs, memstore.New(), store.WithPrimaryTimeout(10*time.Second))
			t.Cleanup(func() {
				_ = f.Close()
				if f.Degraded() {
					t.Error("Fallback degraded on a healthy redis-server")
				}
			})
			return f
		})
	})
}

// TestFallbackTicketsGoHome checks that each ticket is completed by the
// backend that issued it, across an outage and a recovery.
func TestFallbackTicketsGoHome(t *testing.T) {
	p := newSwitchable()
	local := memstore.New()
	f := store.NewFallback(p, local, store.WithProbeBackoff(time.Millisecond, 5*time.Millisecond))
	t.Cleanup(func() { _ = f.Close() })
	tr := watch(f)
	ctx := context.Background()
	reset := t0.Add(time.Minute)

	// A known quota (mirrored locally), so that both backends register
	// attempts and issue tickets.
	if _, err := f.Observe(ctx, store.ObserveRequest{Gate: gate, Obs: store.Observation{HasQuota: true, Remaining: 100, Reset: reset}, Now: t0}); err != nil {
		t.Fatal(err)
	}
	a1, err := f.Admit(ctx, store.AdmitRequest{Gate: gate, Now: t0})
	if err != nil || !strings.HasPrefix(a1.Ticket.ID, "p") {
		t.Fatalf("healthy Admit = %+v, %v; want a primary ticket", a1, err)
	}

	p.down.Store(true)
	a2, err := f.Admit(ctx, store.AdmitRequest{Gate: gate, Now: t0})
	if err != nil || !strings.HasPrefix(a2.Ticket.ID, "l") {
		t.Fatalf("Admit during an outage = %+v, %v; want a local ticket", a2, err)
	}
	if !f.Degraded() {
		t.Fatal("not degraded after a primary failure")
	}
	tr.wait(t, true, time.Second)
	// Completing the primary ticket while degraded works locally; the local
	// in-flight count holds only the local ticket.
	r, err := f.Complete(ctx, store.CompleteRequest{
		Gate: gate, Ticket: a1.Ticket, Now: t0,
		Obs: store.Observation{HasQuota: true, Remaining: 1, Reset: reset},
	})
	if err != nil || !r.GateClosedUntil.Equal(reset) {
		t.Fatalf("Complete(primary ticket) while degraded = %+v, %v; want closed by the 1 local call in flight", r, err)
	}

	p.down.Store(false)
	tr.wait(t, false, time.Second)
	if f.Degraded() {
		t.Fatal("still degraded after recovery")
	}
	// The local ticket goes back to local state, not to the primary.
	before := p.calls.Load()
	r, err = f.Complete(ctx, store.CompleteRequest{
		Gate: gate, Ticket: a2.Ticket, Now: t0.Add(time.Minute),
		Obs: store.Observation{HasQuota: true, Remaining: 0, Reset: t0.Add(2 * time.Minute)},
	})
	if err != nil || r.GateClosedUntil.IsZero() {
		t.Fatalf("Complete(local ticket) after recovery = %+v, %v", r, err)
	}
	if p.calls.Load() != before {
		t.Fatal("a local ticket was completed on the primary")
	}
	if got := localInFlight(t, local, t0.Add(2*time.Minute)); got != 0 {
		t.Fatalf("local in flight = %d after completing the local ticket, want 0", got)
	}
	// The primary ticket a1 is still registered on the primary (it ages out).
	if got := localInFlight(t, p.Store, t0.Add(time.Minute)); got != 1 {
		t.Fatalf("primary in flight = %d, want 1 (a1, completed locally during the outage)", got)
	}
	if got := tr.list(); len(got) != 2 {
		t.Fatalf("transitions = %v, want [true false]", got)
	}
}

// localInFlight counts in-flight attempts on gate through the quota rule.
func localInFlight(t *testing.T, s store.Store, now time.Time) int {
	t.Helper()
	for n := range 10 {
		at := now.Add(time.Duration(2*n) * time.Microsecond) // after the previous probe's closing
		until, err := s.Observe(context.Background(), store.ObserveRequest{Gate: gate, Obs: store.Observation{HasQuota: true, Remaining: int64(n + 1), Reset: at.Add(time.Microsecond)}, Now: at})
		if err != nil {
			t.Fatal(err)
		}
		if until.ClosedUntil.IsZero() {
			return n
		}
	}
	return 10
}

func TestFallbackMirrorsClosedGates(t *testing.T) {
	p := newSwitchable()
	f := store.NewFallback(p, memstore.New(), store.WithProbeBackoff(time.Hour, time.Hour))
	t.Cleanup(func() { _ = f.Close() })
	ctx := context.Background()
	until := t0.Add(time.Minute)
	if _, err := f.Observe(ctx, store.ObserveRequest{Gate: gate, Obs: store.Observation{CloseUntil: until}, Now: t0}); err != nil {
		t.Fatal(err)
	}
	p.down.Store(true)
	a, err := f.Admit(ctx, store.AdmitRequest{Gate: gate, Now: t0.Add(time.Second)})
	if err != nil || !a.GateClosedUntil.Equal(until) {
		t.Fatalf("Admit during the outage = %+v, %v; want the gate closed before the outage", a, err)
	}
}

func TestFallbackFailClosed(t *testing.T) {
	p := newSwitchable()
	f := store.NewFallback(p, memstore.New(), store.WithFailClosed(), store.WithProbeBackoff(time.Millisecond, 5*time.Millisecond))
	t.Cleanup(func() { _ = f.Close() })
	tr := watch(f)
	ctx := context.Background()
	p.down.Store(true)
	for range 3 {
		if _, err := f.Admit(ctx, store.AdmitRequest{Gate: gate, Now: t0}); !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("fail-closed Admit error = %v, want ErrUnavailable", err)
		}
		if _, err := f.Complete(ctx, store.CompleteRequest{Gate: gate, Now: t0}); !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("fail-closed Complete error = %v, want ErrUnavailable", err)
		}
		if _, err := f.GateState(ctx, gate, t0); !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("fail-closed GateState error = %v, want ErrUnavailable", err)
		}
	}
	if !f.Degraded() {
		t.Fatal("fail-closed Fallback not degraded")
	}
	tr.wait(t, true, time.Second)
	p.down.Store(false)
	tr.wait(t, false, time.Second)
	if _, err := f.Admit(ctx, store.AdmitRequest{Gate: gate, Now: t0}); err != nil {
		t.Fatalf("Admit after recovery: %v", err)
	}
}

// TestFallbackBoundsHangingPrimary checks that a primary that never answers
// costs a caller with no deadline at most the primary timeout, and that
// degraded calls no longer wait for it.
// TestFallbackFailClosedPerCall: one call marked fail-closed gets an error
// while another, unmarked, is served from local state by the same Fallback.
func TestFallbackFailClosedPerCall(t *testing.T) {
	p := newSwitchable()
	f := store.NewFallback(p, memstore.New(), store.WithProbeBackoff(time.Millisecond, 5*time.Millisecond))
	t.Cleanup(func() { _ = f.Close() })
	p.down.Store(true)
	if _, err := f.Admit(context.Background(), store.AdmitRequest{Gate: gate, FailClosed: true, Now: t0}); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("fail-closed call: error = %v, want ErrUnavailable", err)
	}
	a, err := f.Admit(context.Background(), store.AdmitRequest{Gate: gate, Now: t0})
	if err != nil || !a.Admitted() {
		t.Fatalf("fail-open call: %v admitted=%v, want served locally", err, a.Admitted())
	}
	if _, err := f.Observe(context.Background(), store.ObserveRequest{Gate: gate, FailClosed: true, Now: t0}); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("fail-closed Observe error = %v, want ErrUnavailable", err)
	}
}

func TestFallbackBoundsHangingPrimary(t *testing.T) {
	const bound = 50 * time.Millisecond
	var calls atomic.Int64
	f := store.NewFallback(hanging{&calls}, memstore.New(), store.WithPrimaryTimeout(bound), store.WithProbeBackoff(time.Hour, time.Hour))
	t.Cleanup(func() { _ = f.Close() })

	start := time.Now()
	a, err := f.Admit(context.Background(), store.AdmitRequest{Gate: gate, Now: t0})
	if took := time.Since(start); took > bound+slack {
		t.Fatalf("Admit took %v with a %v primary timeout", took, bound)
	}
	if err != nil || !a.Admitted() || !f.Degraded() {
		t.Fatalf("Admit = %+v, %v, degraded %v; want served locally and degraded", a, err, f.Degraded())
	}
	before := calls.Load()
	for range 10 { // degraded: straight to local state
		if _, err := f.Admit(context.Background(), store.AdmitRequest{Gate: gate, Now: t0}); err != nil {
			t.Fatal(err)
		}
	}
	if calls.Load() != before {
		t.Fatal("degraded calls still went to the primary")
	}
}

// TestFallbackImpatientCaller checks that a caller whose deadline ends
// before the primary timeout gets its own error back, and that the
// Fallback still finds out, in the background, that the primary hangs.
func TestFallbackImpatientCaller(t *testing.T) {
	var calls atomic.Int64
	f := store.NewFallback(hanging{&calls}, memstore.New(), store.WithPrimaryTimeout(50*time.Millisecond), store.WithProbeBackoff(time.Hour, time.Hour))
	t.Cleanup(func() { _ = f.Close() })
	tr := watch(f)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	if _, err := f.Admit(ctx, store.AdmitRequest{Gate: gate, Now: t0}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Admit past the caller's deadline: err = %v, want DeadlineExceeded", err)
	}
	tr.wait(t, true, slack)
}

// ctxBound is a healthy primary that honours cancellation.
type ctxBound struct{ *memstore.Store }

func (c ctxBound) Admit(ctx context.Context, req store.AdmitRequest) (store.Admission, error) {
	if err := ctx.Err(); err != nil {
		return store.Admission{}, err
	}
	return c.Store.Admit(ctx, req)
}

func (ctxBound) Ping(context.Context) error { return nil }

// TestFallbackCancelDoesNotDegrade checks that a caller's cancellation on
// a healthy primary leaves the Fallback healthy.
func TestFallbackCancelDoesNotDegrade(t *testing.T) {
	f := store.NewFallback(ctxBound{memstore.New()}, memstore.New())
	tr := watch(f)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := f.Admit(ctx, store.AdmitRequest{Gate: gate, Now: t0}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Admit with a cancelled ctx: err = %v, want Canceled", err)
	}
	if err := f.Close(); err != nil { // waits for the background check
		t.Fatal(err)
	}
	if f.Degraded() || len(tr.list()) != 0 {
		t.Fatalf("degraded = %v, transitions %v after a cancellation on a healthy primary", f.Degraded(), tr.list())
	}
}

// TestFallbackRedisOutage kills a real redis-server mid-run and restarts it:
// calls keep succeeding from local state within the bound, the Fallback
// reports degraded, and it recovers by itself.
func TestFallbackRedisOutage(t *testing.T) {
	const bound = 250 * time.Millisecond
	srv := redistest.StartServer(t)
	rs, err := redisstore.New(context.Background(), srv.URL(), redisstore.WithRedisOptions(patient))
	if err != nil {
		t.Fatal(err)
	}
	f := store.NewFallback(rs, memstore.New(), store.WithPrimaryTimeout(bound), store.WithProbeBackoff(20*time.Millisecond, 200*time.Millisecond))
	t.Cleanup(func() { _ = f.Close() })
	tr := watch(f)

	var slowest atomic.Int64
	call := func(i int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		now := t0.Add(time.Duration(i) * time.Millisecond)
		start := time.Now()
		a, err := f.Admit(ctx, store.AdmitRequest{Gate: gate, Now: now, FirstAttempt: true, Budget: store.DefaultBudget()})
		if err != nil || !a.Admitted() {
			t.Fatalf("call %d: Admit = %+v, %v", i, a, err)
		}
		if _, err := f.Complete(ctx, store.CompleteRequest{Gate: gate, Ticket: a.Ticket, Now: now, SpendRetry: true, Budget: store.DefaultBudget()}); err != nil {
			t.Fatalf("call %d: Complete: %v", i, err)
		}
		took := time.Since(start)
		if took > time.Duration(slowest.Load()) {
			slowest.Store(int64(took))
		}
		// Two primary calls at most, each bounded, plus scheduling slack.
		if took > 2*bound+slack {
			t.Fatalf("call %d took %v, beyond the bound", i, took)
		}
	}

	for i := range 20 {
		call(i)
	}
	if f.Degraded() {
		t.Fatal("degraded while redis-server runs")
	}

	srv.Stop()
	for i := 20; i < 60; i++ {
		call(i)
	}
	if !f.Degraded() {
		t.Fatal("not degraded with redis-server killed")
	}
	tr.wait(t, true, time.Second)

	srv.Restart()
	deadline := time.Now().Add(5 * time.Second)
	for i := 60; f.Degraded(); i++ {
		if time.Now().After(deadline) {
			t.Fatal("still degraded 5 s after redis-server restarted")
		}
		call(i)
		time.Sleep(10 * time.Millisecond)
	}
	tr.wait(t, false, time.Second)
	for i := 1000; i < 1020; i++ {
		call(i)
	}
	if f.Degraded() {
		t.Fatal("degraded again after recovery")
	}
	t.Logf("slowest Admit+Complete: %v", time.Duration(slowest.Load()))
}

// TestFallbackRedisHang freezes a real redis-server (SIGSTOP): connections
// hang instead of failing, and calls must still return within the bound.
func TestFallbackRedisHang(t *testing.T) {
	const bound = 100 * time.Millisecond
	srv := redistest.StartServer(t)
	rs, err := redisstore.New(context.Background(), srv.URL(), redisstore.WithRedisOptions(patient))
	if err != nil {
		t.Fatal(err)
	}
	f := store.NewFallback(rs, memstore.New(), store.WithPrimaryTimeout(bound), store.WithProbeBackoff(20*time.Millisecond, 100*time.Millisecond))
	t.Cleanup(func() { _ = f.Close() })
	tr := watch(f)
	ctx := context.Background()
	// A known quota, so that Admit registers attempts and issues tickets.
	if _, err := f.Observe(ctx, store.ObserveRequest{Gate: gate, Obs: store.Observation{HasQuota: true, Remaining: 100, Reset: t0.Add(time.Hour)}, Now: t0}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Admit(ctx, store.AdmitRequest{Gate: gate, Now: t0}); err != nil {
		t.Fatal(err)
	}
	srv.Pause()
	start := time.Now()
	a, err := f.Admit(ctx, store.AdmitRequest{Gate: gate, Now: t0})
	if took := time.Since(start); took > bound+slack {
		t.Fatalf("Admit on a hung Redis took %v, bound %v", took, bound)
	}
	if err != nil || !a.Admitted() {
		t.Fatalf("Admit on a hung Redis = %+v, %v; want served locally", a, err)
	}
	tr.wait(t, true, time.Second)
	srv.Resume()
	tr.wait(t, false, 5*time.Second)
	if a, err := f.Admit(ctx, store.AdmitRequest{Gate: gate, Now: t0}); err != nil || !strings.HasPrefix(a.Ticket.ID, "p") {
		t.Fatalf("Admit after resume = %+v, %v; want a primary ticket", a, err)
	}
}

// TestFallbackMirrorsQuota checks that the quotas observations report, and
// gates closed because the calls in flight use up the known quota, carry
// into an outage.
func TestFallbackMirrorsQuota(t *testing.T) {
	p := newSwitchable()
	f := store.NewFallback(p, memstore.New(), store.WithProbeBackoff(time.Hour, time.Hour))
	t.Cleanup(func() { _ = f.Close() })
	ctx := context.Background()
	reset := t0.Add(time.Minute)
	quota := func(n int64) store.Observation { return store.Observation{HasQuota: true, Remaining: n, Reset: reset} }

	// Known quota: 3 left, one call in flight on the primary.
	if until, err := f.Observe(ctx, store.ObserveRequest{Gate: gate, Obs: quota(3), Now: t0}); err != nil || !until.ClosedUntil.IsZero() {
		t.Fatalf("Observe = %v, %v", until, err)
	}
	if a, err := f.Admit(ctx, store.AdmitRequest{Gate: gate, Now: t0}); err != nil || !a.Admitted() {
		t.Fatalf("Admit = %+v, %v", a, err)
	}
	// A gate closed by the known quota: 2 left, two calls in flight.
	g2 := store.GateKey{Tenant: "acme", Scope: "gitlab"}
	if until, err := f.Observe(ctx, store.ObserveRequest{Gate: g2, Obs: quota(2), Now: t0}); err != nil || !until.ClosedUntil.IsZero() {
		t.Fatalf("Observe = %v, %v", until, err)
	}
	for range 2 {
		if a, err := f.Admit(ctx, store.AdmitRequest{Gate: g2, Now: t0}); err != nil || !strings.HasPrefix(a.Ticket.ID, "p") {
			t.Fatalf("Admit = %+v, %v; want a primary ticket", a, err)
		}
	}
	if a, err := f.Admit(ctx, store.AdmitRequest{Gate: g2, Now: t0}); err != nil || !a.GateClosedUntil.Equal(reset) {
		t.Fatalf("Admit = %+v, %v; want closed by the known quota", a, err)
	}

	p.down.Store(true)
	now := t0.Add(time.Second)
	// Local state knows 3 are left; it cannot see the primary's call in
	// flight, so it admits 3 more.
	for i := range 3 {
		if a, err := f.Admit(ctx, store.AdmitRequest{Gate: gate, Now: now}); err != nil || !a.Admitted() {
			t.Fatalf("Admit %d during the outage = %+v, %v", i+1, a, err)
		}
	}
	if a, err := f.Admit(ctx, store.AdmitRequest{Gate: gate, Now: now}); err != nil || !a.GateClosedUntil.Equal(reset) {
		t.Fatalf("Admit 4 during the outage = %+v, %v; want closed by the mirrored quota", a, err)
	}
	// The gate the known quota closed stays closed until the reset.
	if a, err := f.Admit(ctx, store.AdmitRequest{Gate: g2, Now: now}); err != nil || !a.GateClosedUntil.Equal(reset) {
		t.Fatalf("Admit on g2 during the outage = %+v, %v; want closed until the reset", a, err)
	}
	if a, err := f.Admit(ctx, store.AdmitRequest{Gate: g2, Now: reset}); err != nil || !a.Admitted() {
		t.Fatalf("Admit on g2 at the reset = %+v, %v", a, err)
	}
}

// counting is a memory store that counts the calls it serves.
type counting struct {
	*memstore.Store
	completes atomic.Int64
	last      atomic.Value // the last CompleteRequest.Ticket.ID
}

func (c *counting) Complete(ctx context.Context, req store.CompleteRequest) (store.CompleteResult, error) {
	c.completes.Add(1)
	c.last.Store(req.Ticket.ID)
	return c.Store.Complete(ctx, req)
}

// TestFallbackEmptyTickets checks that an Admit that registered nothing
// gives an empty ticket from either backend (no backend prefix), and that
// Complete with an empty ticket goes to the primary while healthy and to
// local state while degraded, applying the observation and the budget.
func TestFallbackEmptyTickets(t *testing.T) {
	p := newSwitchable()
	local := &counting{Store: memstore.New()}
	f := store.NewFallback(p, local, store.WithProbeBackoff(time.Millisecond, 5*time.Millisecond))
	t.Cleanup(func() { _ = f.Close() })
	tr := watch(f)
	ctx := context.Background()
	reset := t0.Add(time.Minute)
	budget := store.BudgetConfig{FloorPerSecond: 1, Window: time.Second}

	// Healthy, no known quota: an empty ticket.
	a, err := f.Admit(ctx, store.AdmitRequest{Gate: gate, Now: t0})
	if err != nil || !a.Admitted() || a.Ticket.ID != "" {
		t.Fatalf("healthy Admit without a known quota = %+v, %v; want admitted with an empty ticket", a, err)
	}
	// Its Complete goes to the primary: the observation and the budget
	// apply there (and the quota is mirrored locally, not completed there).
	before := p.calls.Load()
	r, err := f.Complete(ctx, store.CompleteRequest{Gate: gate, Obs: store.Observation{HasQuota: true, Remaining: 1, Reset: reset}, SpendRetry: true, Budget: budget, Now: t0})
	if err != nil || !r.RetryAllowed || !r.GateClosedUntil.IsZero() {
		t.Fatalf("healthy empty-ticket Complete = %+v, %v", r, err)
	}
	if p.calls.Load() != before+1 || local.completes.Load() != 0 {
		t.Fatalf("healthy empty-ticket Complete: %d primary calls, %d local Completes; want 1 and 0", p.calls.Load()-before, local.completes.Load())
	}
	if r, err := f.Complete(ctx, store.CompleteRequest{Gate: gate, SpendRetry: true, Budget: budget, Now: t0}); err != nil || r.RetryAllowed {
		t.Fatalf("second retry of a floor of 1 = %+v, %v; want refused by the primary's budget", r, err)
	}
	// The primary now knows the quota (1 left): Admit registers there.
	a, err = f.Admit(ctx, store.AdmitRequest{Gate: gate, Now: t0})
	if err != nil || !strings.HasPrefix(a.Ticket.ID, "p") {
		t.Fatalf("healthy Admit with a known quota = %+v, %v; want a primary ticket", a, err)
	}

	// Degraded, on a gate without a known quota: an empty local ticket.
	p.down.Store(true)
	g := store.GateKey{Tenant: "acme", Scope: "gitlab"}
	a, err = f.Admit(ctx, store.AdmitRequest{Gate: g, Now: t0})
	if err != nil || !a.Admitted() || a.Ticket.ID != "" {
		t.Fatalf("degraded Admit without a known quota = %+v, %v; want admitted with an empty ticket", a, err)
	}
	tr.wait(t, true, time.Second)
	// Its Complete goes to local state, which then knows the quota.
	before = p.calls.Load()
	r, err = f.Complete(ctx, store.CompleteRequest{Gate: g, Obs: store.Observation{HasQuota: true, Remaining: 1, Reset: reset}, SpendRetry: true, Budget: budget, Now: t0})
	if err != nil || !r.RetryAllowed || !r.GateClosedUntil.IsZero() {
		t.Fatalf("degraded empty-ticket Complete = %+v, %v", r, err)
	}
	if p.calls.Load() != before || local.completes.Load() != 1 || local.last.Load() != "" {
		t.Fatalf("degraded empty-ticket Complete: %d primary calls, %d local Completes (ticket %q); want 0, 1 and empty",
			p.calls.Load()-before, local.completes.Load(), local.last.Load())
	}
	a, err = f.Admit(ctx, store.AdmitRequest{Gate: g, Now: t0})
	if err != nil || !strings.HasPrefix(a.Ticket.ID, "l") {
		t.Fatalf("degraded Admit with a known local quota = %+v, %v; want a local ticket", a, err)
	}
	if a, err := f.Admit(ctx, store.AdmitRequest{Gate: g, Now: t0}); err != nil || !a.GateClosedUntil.Equal(reset) {
		t.Fatalf("degraded Admit = %+v, %v; want closed by the local quota", a, err)
	}

	// Back to healthy: an empty ticket goes to the primary again.
	p.down.Store(false)
	tr.wait(t, false, time.Second)
	before = p.calls.Load()
	if _, err := f.Complete(ctx, store.CompleteRequest{Gate: g, SpendRetry: true, Budget: budget, Now: t0}); err != nil {
		t.Fatal(err)
	}
	if p.calls.Load() != before+1 || local.completes.Load() != 1 {
		t.Fatalf("empty-ticket Complete after recovery: %d primary calls, %d local Completes; want 1 and 1", p.calls.Load()-before, local.completes.Load())
	}
}

// TestFallbackOOMDoesNotFlap is the regression test of a Redis out of
// memory (maxmemory reached, noeviction): every script that writes fails
// while PING still answers. The Fallback must stay degraded, with the
// cause named, instead of flipping back at each probe; and it must return
// to Redis by itself once writes work again.
func TestFallbackOOMDoesNotFlap(t *testing.T) {
	srv := redistest.StartServer(t, "--maxmemory-policy", "noeviction")
	rs, err := redisstore.New(context.Background(), srv.URL(), redisstore.WithRedisOptions(patient))
	if err != nil {
		t.Fatal(err)
	}
	f := store.NewFallback(rs, memstore.New(), store.WithPrimaryTimeout(2*time.Second),
		store.WithProbeBackoff(5*time.Millisecond, 20*time.Millisecond))
	t.Cleanup(func() { _ = f.Close() })
	tr := watch(f)
	ctx := context.Background()
	admit := func(i int) {
		t.Helper()
		// A first attempt with a budget: the admit script writes.
		a, err := f.Admit(ctx, store.AdmitRequest{Gate: gate, FirstAttempt: true, Budget: store.DefaultBudget(), Now: t0.Add(time.Duration(i) * time.Millisecond)})
		if err != nil || !a.Admitted() {
			t.Fatalf("Admit %d = %+v, %v; want admitted (from local state while Redis refuses writes)", i, a, err)
		}
	}
	admit(0)
	raw := rawClient(t, srv.URL())
	if err := raw.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	if err := raw.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING with maxmemory reached: %v (the test needs PING to answer)", err)
	}
	begin := time.Now()
	for i := 1; i <= 150; i++ { // about 1.5 s: 75 probes or more at 20 ms
		admit(i)
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("calls took %v", time.Since(begin))
	if got := tr.list(); len(got) != 1 || !got[0] {
		t.Fatalf("transitions with Redis out of memory = %v, want one change to degraded (health must not flap)", got)
	}
	if h := f.Health(); !h.Degraded || h.Cause != store.CauseOOM || !strings.Contains(h.Detail, "OOM") {
		t.Fatalf("Health = %+v, want degraded by oom", h)
	}
	if err := raw.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	tr.wait(t, true, time.Second) // the degrading change, already listed
	tr.wait(t, false, 5*time.Second)
	if h := f.Health(); h.Degraded || h.Cause != store.CauseNone {
		t.Fatalf("Health after memory was freed = %+v", h)
	}
}

// rawClient returns a plain client on url, closed at cleanup.
func rawClient(t *testing.T, url string) *redis.Client {
	t.Helper()
	o, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	o.DisableIdentity = true
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestFallbackNamesTheCause checks that a wrong password is named (not
// "unreachable") in Health, for a call and for Verify at start, and that a
// fail-closed call's error names it too.
func TestFallbackNamesTheCause(t *testing.T) {
	srv := redistest.StartServer(t, "--requirepass", "right")
	rs, err := redisstore.Open(context.Background(), redisstore.Config{URL: srv.URL(), Password: "wrong"}, redisstore.WithRedisOptions(patient))
	if err != nil {
		t.Fatal(err)
	}
	f := store.NewFallback(rs, memstore.New(), store.WithPrimaryTimeout(5*time.Second), store.WithProbeBackoff(time.Hour, time.Hour))
	t.Cleanup(func() { _ = f.Close() })
	err = f.Verify(context.Background())
	if store.CauseOf(err) != store.CauseWrongPass {
		t.Fatalf("Verify = %v, want wrongpass", err)
	}
	h := f.Health()
	if !h.Degraded || h.Cause != store.CauseWrongPass || !strings.Contains(h.Detail, "WRONGPASS") || strings.Contains(h.Detail, "wrong\"") {
		t.Fatalf("Health = %+v, want degraded by wrongpass", h)
	}
	_, err = f.Admit(context.Background(), store.AdmitRequest{Gate: gate, FailClosed: true, Now: t0})
	if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "wrongpass") {
		t.Fatalf("fail-closed Admit = %v, want ErrUnavailable naming wrongpass", err)
	}
	if a, err := f.Admit(context.Background(), store.AdmitRequest{Gate: gate, Now: t0}); err != nil || !a.Admitted() {
		t.Fatalf("fail-open Admit = %+v, %v; want served locally", a, err)
	}
}

// verifying is a primary whose Verify fails with verr (when set), and whose
// calls fail with callErr (when set).
type verifying struct {
	*memstore.Store
	mu      sync.Mutex
	verr    error
	callErr error
}

func (v *verifying) set(verr, callErr error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.verr, v.callErr = verr, callErr
}

func (v *verifying) Verify(context.Context) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.verr
}

func (v *verifying) Admit(ctx context.Context, req store.AdmitRequest) (store.Admission, error) {
	v.mu.Lock()
	err := v.callErr
	v.mu.Unlock()
	if err != nil {
		return store.Admission{}, err
	}
	return v.Store.Admit(ctx, req)
}

// causeErr is an error naming a cause.
type causeErr store.Cause

func (c causeErr) Error() string           { return "trouble: " + string(c) }
func (c causeErr) StoreCause() store.Cause { return store.Cause(c) }

// TestFallbackVerifyAndCauseChanges: Verify at start degrades with the
// cause; a probe that fails with another cause reports the change; a
// passing Verify brings the Fallback back by itself.
func TestFallbackVerifyAndCauseChanges(t *testing.T) {
	p := &verifying{Store: memstore.New()}
	p.set(causeErr(store.CauseWrongPass), nil)
	f := store.NewFallback(p, memstore.New(), store.WithProbeBackoff(time.Millisecond, 5*time.Millisecond))
	t.Cleanup(func() { _ = f.Close() })
	var mu sync.Mutex
	var seen []store.Health
	changed := make(chan struct{}, 100)
	f.OnHealthChange(func(h store.Health) {
		mu.Lock()
		seen = append(seen, h)
		mu.Unlock()
		changed <- struct{}{}
	})
	if err := f.Verify(context.Background()); store.CauseOf(err) != store.CauseWrongPass || !f.Degraded() {
		t.Fatalf("Verify = %v, degraded %v", err, f.Degraded())
	}
	p.set(causeErr(store.CauseNoPerm), nil)
	<-changed
	<-changed
	if h := f.Health(); h.Cause != store.CauseNoPerm || !h.Degraded {
		t.Fatalf("Health after the cause changed = %+v", h)
	}
	p.set(nil, nil)
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("no recovery after Verify passed")
	}
	mu.Lock()
	defer mu.Unlock()
	want := []store.Cause{store.CauseWrongPass, store.CauseNoPerm, store.CauseNone}
	if len(seen) != len(want) {
		t.Fatalf("health changes %+v, want causes %v", seen, want)
	}
	for i, h := range seen {
		if h.Cause != want[i] || h.Degraded != (want[i] != store.CauseNone) {
			t.Fatalf("health change %d = %+v, want cause %q", i, h, want[i])
		}
	}
}

// TestFallbackFlapDamping: a primary that passes its probe but fails every
// call makes the Fallback flap; each flap in a row holds the next recovery
// back longer (probe max × 2^(n-1), capped), so flips stay few.
func TestFallbackFlapDamping(t *testing.T) {
	const probeMax, maxHold = 20 * time.Millisecond, 80 * time.Millisecond
	p := &verifying{Store: memstore.New()}
	p.set(nil, causeErr(store.CauseOOM))
	f := store.NewFallback(p, memstore.New(), store.WithProbeBackoff(time.Millisecond, probeMax), store.WithFlapDamping(time.Hour, maxHold))
	t.Cleanup(func() { _ = f.Close() })
	var mu sync.Mutex
	var degradedAt []time.Time
	var periods []time.Duration // how long each degraded period lasted
	f.OnStateChange(func(d bool) {
		mu.Lock()
		defer mu.Unlock()
		if d {
			degradedAt = append(degradedAt, time.Now())
		} else {
			periods = append(periods, time.Since(degradedAt[len(degradedAt)-1]))
		}
	})
	deadline := time.Now().Add(600 * time.Millisecond)
	calls := 0
	for time.Now().Before(deadline) {
		if _, err := f.Admit(context.Background(), store.AdmitRequest{Gate: gate, Now: t0}); err != nil {
			t.Fatal(err)
		}
		calls++
		time.Sleep(time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(periods) < 3 {
		t.Fatalf("%d recoveries in 600 ms; the test needs the flapping primary to recover at least 3 times", len(periods))
	}
	// The first recovery needs one probe; the n-th flap holds it back.
	for i, d := range periods[1:] {
		hold := min(probeMax<<i, maxHold)
		if d < hold {
			t.Errorf("degraded period %d lasted %v, want at least the hold-down %v (periods %v)", i+2, d, hold, periods)
		}
	}
	if len(periods) > 12 {
		t.Errorf("%d recoveries in 600 ms of %d calls: flapping is not damped", len(periods), calls)
	}
	t.Logf("%d calls, %d recoveries, degraded periods %v", calls, len(periods), periods)
}

// TestFallbackStableRecoveryIsFast: a failure long after the last
// recovery is no flap, and recovery then needs one passing probe; a
// failure soon after a recovery waits for the hold-down.
func TestFallbackStableRecoveryIsFast(t *testing.T) {
	const probeMax = time.Second
	p := &verifying{Store: memstore.New()}
	f := store.NewFallback(p, memstore.New(), store.WithProbeBackoff(time.Millisecond, probeMax), store.WithFlapDamping(50*time.Millisecond, 10*time.Second))
	t.Cleanup(func() { _ = f.Close() })
	tr := watch(f)
	fail := func() time.Time {
		t.Helper()
		p.set(nil, causeErr(store.CauseUnreachable))
		if _, err := f.Admit(context.Background(), store.AdmitRequest{Gate: gate, Now: t0}); err != nil {
			t.Fatal(err)
		}
		p.set(nil, nil)
		tr.wait(t, true, time.Second)
		return time.Now()
	}
	fail()
	tr.wait(t, false, 5*time.Second)
	time.Sleep(100 * time.Millisecond) // longer than stableAfter
	start := fail()
	tr.wait(t, false, 5*time.Second)
	if d := time.Since(start); d >= probeMax {
		t.Fatalf("recovery after a stable period took %v, want one probe (no hold-down of %v)", d, probeMax)
	}
	start = fail() // right after a recovery: a flap
	tr.wait(t, false, 5*time.Second)
	if d := time.Since(start); d < probeMax {
		t.Fatalf("recovery after a flap took %v, want the hold-down of at least %v", d, probeMax)
	}
}
