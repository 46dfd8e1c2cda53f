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
		tr.ch <- d
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
