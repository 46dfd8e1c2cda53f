package redisstore_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrybroker/retrybroker/internal/store"
	"github.com/retrybroker/retrybroker/internal/store/redisstore"
	"github.com/retrybroker/retrybroker/internal/store/redistest"
	"github.com/retrybroker/retrybroker/internal/store/storetest"
)

// rtCounter is a go-redis hook counting round trips: one per command or
// pipeline.
type rtCounter struct{ n atomic.Int64 }

// plainLearning is the standard learning without the first-window rule: a
// fresh gate is then plain at once. With the rule on, a gate is plain only
// once its slow start ended (TestFirstWindowGateIsNotPlain).
var plainLearning = store.LearningConfig{Enabled: true, IdleExpiry: store.DefaultLearningIdleExpiry, FirstWindowOff: true}

func (c *rtCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *rtCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c *rtCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmds)
	}
}

// localStore returns a store on url with local admission on (ready), its
// round trips counted.
func localStore(t *testing.T, url string, opts ...redisstore.Option) (*redisstore.Store, *rtCounter) {
	t.Helper()
	s, err := redisstore.New(context.Background(), url, append([]redisstore.Option{redisstore.WithRedisOptions(patient)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	rt := &rtCounter{}
	s.AddHook(rt)
	ready(t, s)
	return s, rt
}

// defaults is an Admit with the default policy's learning, breaker and
// budget: the common case local admission is for.
func defaults(g store.GateKey, now time.Time) store.AdmitRequest {
	return store.AdmitRequest{
		Gate: g, FirstAttempt: true, Budget: store.DefaultBudget(),
		Learning: plainLearning, Breaker: store.DefaultBreaker(), Now: now,
	}
}

// TestLocalAdmissionCountsEverything admits 1,000 attempts on a plain gate
// (the default policy: learning, breaker and budget on): the first is a
// round trip, the others are admitted locally, and everything they count
// reaches Redis: the learning epoch's admitted count (InspectGate, which
// first writes this replica's pending counts), the breaker's calls of the
// second, and the budget's first attempts (a retry budget of 0.1% allows
// exactly one retry after 1,000 first attempts).
func TestLocalAdmissionCountsEverything(t *testing.T) {
	srv := redistest.StartServer(t)
	s, rt := localStore(t, srv.URL())
	ctx := context.Background()
	g := store.GateKey{Tenant: "acme", Scope: "plain"}
	now := storetest.T0
	before := rt.n.Load()
	const n = 1000
	var epoch int64
	for i := range n {
		req := defaults(g, now)
		req.Budget = store.BudgetConfig{Ratio: 0.001, Window: 10 * time.Second}
		a, err := s.Admit(ctx, req)
		if err != nil || !a.Admitted() || a.Ticket.ID != "" || a.Ticket.Epoch == 0 {
			t.Fatalf("Admit %d = %+v, %v; want admitted in a learning epoch, not registered", i, a, err)
		}
		if i == 0 {
			epoch = a.Ticket.Epoch
		} else if a.Ticket.Epoch != epoch {
			t.Fatalf("Admit %d in epoch %d, want %d", i, a.Ticket.Epoch, epoch)
		}
	}
	trips := rt.n.Load() - before
	st := s.LocalAdmissionStats()
	t.Logf("%d Admits: %d round trips (flushes included), %+v", n, trips, st)
	if st.Admitted != n-1 {
		t.Errorf("%d admitted locally, want %d (all but the first)", st.Admitted, n-1)
	}
	if trips > n/20 {
		t.Errorf("%d round trips for %d Admits, want at most %d", trips, n, n/20)
	}
	info, err := s.InspectGate(ctx, g, now)
	if err != nil {
		t.Fatal(err)
	}
	if info.Epoch != epoch || info.Admitted != n {
		t.Errorf("InspectGate: epoch %d admitted %d, want epoch %d admitted %d", info.Epoch, info.Admitted, epoch, n)
	}
	raw := rawClient(t, srv.URL())
	bucket := strconv.FormatInt(now.Unix()%store.DefaultBreaker().WindowSeconds(), 10)
	if calls := raw.HGet(ctx, "rb:v1:{t:acme}:s:plain:", "bc"+bucket).Val(); calls != strconv.Itoa(n) {
		t.Errorf("breaker calls in the second: %q, want %d", calls, n)
	}
	spend := func() bool {
		r, err := s.Complete(ctx, store.CompleteRequest{
			Gate: g, SpendRetry: true, Budget: store.BudgetConfig{Ratio: 0.001, Window: 10 * time.Second}, Now: now,
		})
		if err != nil {
			t.Fatal(err)
		}
		return r.RetryAllowed
	}
	if !spend() {
		t.Error("no retry allowed after 1,000 first attempts at a ratio of 0.1%")
	}
	if spend() {
		t.Error("a second retry allowed after 1,000 first attempts at a ratio of 0.1%")
	}
	if st := s.LocalAdmissionStats(); st.Dropped != 0 {
		t.Errorf("counts dropped: %+v", st)
	}
}

// TestLocalAdmissionSharedGate has two replicas on one Redis. Replica B
// admits a plain gate locally, at one instant of its clock (its remembered
// gate never runs out by time); replica A then closes the gate (a 429 with
// Retry-After). B must learn it from A's announcement: its next Admits go
// to Redis and find the gate closed, and it writes its pending counts at
// once, so that A sees them without waiting for B's flush.
// A announces with local admission on or off.
func TestLocalAdmissionSharedGate(t *testing.T) {
	srv := redistest.StartServer(t)
	for _, mode := range []struct {
		name string
		opts []redisstore.Option
	}{{"A local", nil}, {"A remote", []redisstore.Option{redisstore.WithLocalAdmission(0)}}} {
		t.Run(mode.name, func(t *testing.T) {
			a, _ := localStore(t, srv.URL(), mode.opts...)
			b, _ := localStore(t, srv.URL())
			sharedGate(t, a, b, store.GateKey{Tenant: "acme", Scope: mode.name})
		})
	}
}

func sharedGate(t *testing.T, a, b *redisstore.Store, g store.GateKey) {
	t.Helper()
	ctx := context.Background()
	now := storetest.T0
	for i := range 20 {
		if adm, err := b.Admit(ctx, defaults(g, now)); err != nil || !adm.Admitted() {
			t.Fatalf("B: Admit %d = %+v, %v", i, adm, err)
		}
	}
	if st := b.LocalAdmissionStats(); st.Admitted != 19 {
		t.Fatalf("B admitted %d locally, want 19", st.Admitted)
	}
	until := now.Add(30 * time.Second)
	if _, err := a.Observe(ctx, store.ObserveRequest{
		Gate: g, Obs: store.Observation{CloseUntil: until}, Result: store.ResultRefused,
		Learning: plainLearning, Breaker: store.DefaultBreaker(), Now: now,
	}); err != nil {
		t.Fatal(err)
	}
	closedAt := time.Now()
	local := b.LocalAdmissionStats().Admitted
	for {
		adm, err := b.Admit(ctx, defaults(g, now))
		if err != nil {
			t.Fatal(err)
		}
		if adm.GateClosedUntil.Equal(until) {
			break
		}
		if !adm.Admitted() {
			t.Fatalf("B: Admit = %+v, want admitted or the gate closed until %v", adm, until)
		}
		if time.Since(closedAt) > 5*time.Second {
			t.Fatal("B still admits the gate A closed 5 s ago: the announcement never arrived")
		}
		time.Sleep(100 * time.Microsecond)
	}
	t.Logf("B learned of the closed gate after %v and %d more local admissions", time.Since(closedAt), b.LocalAdmissionStats().Admitted-local)
	// B wrote its counts on the announcement: A reads them without B's
	// flush timer (its 10 ms are long past by the deadline, so poll).
	deadline := time.Now().Add(5 * time.Second)
	for {
		info, err := a.InspectGate(ctx, g, now)
		if err != nil {
			t.Fatal(err)
		}
		want := 20 + b.LocalAdmissionStats().Admitted - 19
		if info.Admitted == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("A sees %d admitted, want %d", info.Admitted, want)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestLocalAdmissionNeedsItsSubscription kills the store's subscription
// connection (CLIENT KILL TYPE pubsub): it may have missed announcements,
// so once it subscribes again it has forgotten every plain gate and asks
// Redis first.
func TestLocalAdmissionNeedsItsSubscription(t *testing.T) {
	srv := redistest.StartServer(t)
	s, rt := localStore(t, srv.URL())
	ctx := context.Background()
	g := store.GateKey{Tenant: "acme", Scope: "sub"}
	now := storetest.T0
	for range 3 {
		if _, err := s.Admit(ctx, defaults(g, now)); err != nil {
			t.Fatal(err)
		}
	}
	if st := s.LocalAdmissionStats(); st.Admitted != 2 || st.Subscribed != 1 {
		t.Fatalf("stats %+v, want 2 local admissions, 1 subscription", st)
	}
	raw := rawClient(t, srv.URL())
	if n, err := raw.ClientKillByFilter(ctx, "TYPE", "pubsub").Result(); err != nil || n != 1 {
		t.Fatalf("CLIENT KILL TYPE pubsub = %d, %v; want 1 killed", n, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.LocalAdmissionStats().Subscribed < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("no new subscription 10 s after the kill: %+v", s.LocalAdmissionStats())
		}
		time.Sleep(time.Millisecond)
	}
	before := rt.n.Load()
	if _, err := s.Admit(ctx, defaults(g, now)); err != nil {
		t.Fatal(err)
	}
	if rt.n.Load() == before {
		t.Fatal("Admit after a new subscription was admitted locally: the gate was not forgotten")
	}
	before = rt.n.Load()
	if _, err := s.Admit(ctx, defaults(g, now)); err != nil {
		t.Fatal(err)
	}
	if rt.n.Load() != before {
		t.Error("the next Admit was not local again")
	}
}

// TestLocalAdmissionOnlyPlainGates: a gate with a known quota (its
// attempts are registered in flight) and an attempt with pacing go to
// Redis every time; an expired remembered gate is asked again.
func TestLocalAdmissionOnlyPlainGates(t *testing.T) {
	srv := redistest.StartServer(t)
	s, rt := localStore(t, srv.URL())
	ctx := context.Background()
	now := storetest.T0
	known := store.GateKey{Tenant: "acme", Scope: "known"}
	if _, err := s.Observe(ctx, store.ObserveRequest{Gate: known, Obs: store.Observation{HasQuota: true, Remaining: 100, Reset: now.Add(time.Hour)}, Now: now}); err != nil {
		t.Fatal(err)
	}
	paced := store.GateKey{Tenant: "acme", Scope: "paced"}
	count := func(what string, req store.AdmitRequest, n int, wantTrips int64) {
		t.Helper()
		before := rt.n.Load()
		for range n {
			a, err := s.Admit(ctx, req)
			if err != nil || !a.Admitted() {
				t.Fatalf("%s: Admit = %+v, %v", what, a, err)
			}
			if a.Ticket.ID != "" {
				if _, err := s.Complete(ctx, store.CompleteRequest{Gate: req.Gate, Ticket: a.Ticket, Now: req.Now}); err != nil {
					t.Fatal(err)
				}
			}
		}
		if got := rt.n.Load() - before; got != wantTrips {
			t.Errorf("%s: %d round trips for %d Admits, want %d", what, got, n, wantTrips)
		}
	}
	count("known quota", defaults(known, now), 10, 20) // Admit and Complete each time
	pace := defaults(paced, now)
	pace.Pace, pace.PaceMaxWait = store.PaceConfig{Rate: 1e6, Burst: 1000}, time.Second
	count("pacing", pace, 10, 10)
	plain := store.GateKey{Tenant: "acme", Scope: "plain"}
	count("plain", defaults(plain, now), 10, 1)
	count("plain, later than its TTL", defaults(plain, now.Add(redisstore.DefaultLocalAdmissionTTL)), 10, 1)
}

// TestLocalAdmissionCloseWrites: Close writes the pending counts.
func TestLocalAdmissionCloseWrites(t *testing.T) {
	srv := redistest.StartServer(t)
	s, _ := localStore(t, srv.URL())
	ctx := context.Background()
	g := store.GateKey{Tenant: "acme", Scope: "closing"}
	for range 5 {
		if _, err := s.Admit(ctx, defaults(g, storetest.T0)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if la := rawClient(t, srv.URL()).HGet(ctx, "rb:v1:{t:acme}:s:closing:", "la").Val(); la != "5" {
		t.Errorf("admitted in the epoch after Close: %q, want 5", la)
	}
}

// TestLocalAdmissionTTLBounded: a TTL beyond MaxLocalAdmissionTTL is cut to
// it, zero turns local admission off, and the default is
// DefaultLocalAdmissionTTL.
func TestLocalAdmissionTTLBounded(t *testing.T) {
	srv := redistest.StartServer(t)
	for _, c := range []struct {
		opts []redisstore.Option
		want time.Duration
	}{
		{nil, redisstore.DefaultLocalAdmissionTTL},
		{[]redisstore.Option{redisstore.WithLocalAdmission(time.Hour)}, redisstore.MaxLocalAdmissionTTL},
		{[]redisstore.Option{redisstore.WithLocalAdmission(0)}, 0},
	} {
		s, err := redisstore.New(context.Background(), srv.URL(), c.opts...)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.LocalAdmissionTTL(); got != c.want {
			t.Errorf("LocalAdmissionTTL() = %v, want %v", got, c.want)
		}
		_ = s.Close()
	}
}

// TestLocalAdmissionComesBackAfterASilence: Redis stops answering (SIGSTOP)
// for longer than three of the subscription's pings; the store stops
// admitting locally. Once Redis answers the pings again on the same
// connection, local admission comes back by itself.
func TestLocalAdmissionComesBackAfterASilence(t *testing.T) {
	srv := redistest.StartServer(t)
	s, _ := localStore(t, srv.URL())
	srv.Pause()
	deadline := time.Now().Add(10 * time.Second)
	for s.LocalAdmissionStats().Live {
		if time.Now().After(deadline) {
			srv.Resume()
			t.Fatal("still live 10 s into Redis's silence")
		}
		time.Sleep(10 * time.Millisecond)
	}
	srv.Resume()
	deadline = time.Now().Add(10 * time.Second)
	for !s.LocalAdmissionStats().Live {
		if time.Now().After(deadline) {
			t.Fatalf("local admission did not come back 10 s after Redis answered again: %+v", s.LocalAdmissionStats())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestFirstWindowGateIsNotPlain: with the first-window rule on (the
// standard learning), a gate nothing is known of is not plain: its scout
// and its slow-start calls go to Redis and are registered, so that every
// replica counts them. Once slow start has ended (SlowStartMax in flight
// would be allowed), the gate is plain and admitted locally.
func TestFirstWindowGateIsNotPlain(t *testing.T) {
	srv := redistest.StartServer(t)
	s, rt := localStore(t, srv.URL())
	ctx := context.Background()
	now := storetest.T0
	g := store.GateKey{Tenant: "acme", Scope: "first"}
	req := func() store.AdmitRequest {
		return store.AdmitRequest{Gate: g, Learning: store.DefaultLearning(), Breaker: store.DefaultBreaker(), Now: now}
	}
	a, err := s.Admit(ctx, req())
	if err != nil || !a.Probe || a.Ticket.ID == "" {
		t.Fatalf("first Admit = %+v, %v; want the scout, registered", a, err)
	}
	if h, err := s.Admit(ctx, req()); err != nil || !h.Held {
		t.Fatalf("Admit while the scout is out = %+v, %v; want held", h, err)
	}
	// Accept calls one by one until slow start ends.
	need := store.SlowStartShare * (store.SlowStartMax - 1)
	for i := 0; ; i++ {
		if _, err := s.Complete(ctx, store.CompleteRequest{
			Gate: g, Ticket: a.Ticket, Result: store.ResultAccepted,
			Learning: store.DefaultLearning(), Breaker: store.DefaultBreaker(), Now: now,
		}); err != nil {
			t.Fatal(err)
		}
		if i+1 >= need {
			break
		}
		before := rt.n.Load()
		if a, err = s.Admit(ctx, req()); err != nil || !a.Admitted() || a.Ticket.ID == "" {
			t.Fatalf("slow-start Admit %d = %+v, %v; want admitted and registered", i+1, a, err)
		}
		if rt.n.Load() == before {
			t.Fatalf("slow-start Admit %d made no round trip: admitted locally", i+1)
		}
	}
	// Slow start has ended: the gate is plain; after the Admit that says
	// so, the next ones are local.
	if a, err = s.Admit(ctx, req()); err != nil || !a.Admitted() || a.Ticket.ID != "" {
		t.Fatalf("Admit after slow start = %+v, %v; want admitted, unregistered", a, err)
	}
	before := rt.n.Load()
	for range 10 {
		if a, err := s.Admit(ctx, req()); err != nil || !a.Admitted() {
			t.Fatalf("Admit = %+v, %v", a, err)
		}
	}
	if got := rt.n.Load() - before; got != 0 {
		t.Errorf("%d round trips for 10 Admits on a plain gate, want 0", got)
	}
}
