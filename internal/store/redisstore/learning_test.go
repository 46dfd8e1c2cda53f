package redisstore_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/retrybroker/retrybroker/internal/store"
	"github.com/retrybroker/retrybroker/internal/store/redisstore"
	"github.com/retrybroker/retrybroker/internal/store/redistest"
	"github.com/retrybroker/retrybroker/internal/store/storetest"
)

func TestSuiteBounded(t *testing.T) {
	url := redistest.Start(t)
	var n atomic.Int64
	storetest.RunBounded(t, storetest.Bounded{New: func(t *testing.T, maxGates int) store.Store {
		s, err := redisstore.New(context.Background(), url, redisstore.WithRedisOptions(patient),
			redisstore.WithKeyPrefix(fmt.Sprintf("bounded%d:", n.Add(1))), redisstore.WithMaxGatesPerTenant(maxGates))
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}, Gates: indexGates})
}

func TestSuiteBoundedMiniredis(t *testing.T) {
	mr := miniredis.RunT(t)
	storetest.RunBounded(t, storetest.Bounded{New: func(t *testing.T, maxGates int) store.Store {
		s, err := redisstore.NewFromClient(redis.NewClient(&redis.Options{Addr: mr.Addr(), DisableIdentity: true}),
			redisstore.WithKeyPrefix(t.Name()+":"), redisstore.WithMaxGatesPerTenant(maxGates))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}, Gates: indexGates, Flood: miniredisFlood})
}

// miniredisFlood is the flood of distinct hosts the bound's suite reports
// on miniredis, whose Lua is far slower than Redis's: the real server runs
// the whole storetest.FloodHosts.
const miniredisFlood = 5_000

// indexGates is storetest.Bounded.Gates for the Redis store: the size of
// the tenant's gate index.
func indexGates(t *testing.T, s store.Store, tenant string) int {
	t.Helper()
	n, err := s.(*redisstore.Store).Gates(context.Background(), tenant)
	if err != nil {
		t.Fatal(err)
	}
	return int(n)
}

// slack is how much longer than its need (life) the store keeps a state
// key: a quarter of the life, at most 5 minutes (see doc.go, "Expiry").
func slack(life time.Duration) time.Duration { return min(life/4, 5*time.Minute) }

// wantPTTL checks a key's TTL on the server: within [lo, hi].
func wantPTTL(t *testing.T, c *redis.Client, key string, lo, hi time.Duration) {
	t.Helper()
	ttl, err := c.PTTL(context.Background(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	if ttl < lo || ttl > hi {
		t.Errorf("key %q: TTL %v, want within [%v, %v]", key, ttl, lo, hi)
	}
}

// TestClampedTTLs sends hints of ten years (Retry-After: 315360000, a quota
// reset as far, a breaker that would open as long) with a max gate of an
// hour: every key's TTL follows from the clamped time, checked with PTTL on
// the real server.
func TestClampedTTLs(t *testing.T) {
	s, srv := newStore(t)
	c := rawClient(t, srv.URL())
	ctx := context.Background()
	t0 := storetest.T0
	tenYears := t0.Add(315360000 * time.Second)
	g := store.GateKey{Tenant: "acme", Scope: "closed"}
	st, err := s.Observe(ctx, store.ObserveRequest{Gate: g, Obs: store.Observation{CloseUntil: tenYears}, Result: store.ResultRefused, MaxGate: time.Hour, Now: t0})
	if err != nil || !st.ClosedUntil.Equal(t0.Add(time.Hour)) {
		t.Fatalf("Observe = %+v, %v; want closed for the max gate", st, err)
	}
	wantPTTL(t, c, "rb:v1:{t:acme}:g:closed:", time.Hour, time.Hour+10*time.Second)

	q := store.GateKey{Tenant: "acme", Scope: "quota"}
	st, err = s.Observe(ctx, store.ObserveRequest{Gate: q, Obs: store.Observation{HasQuota: true, Remaining: 0, Reset: tenYears}, MaxGate: time.Hour, Now: t0})
	if err != nil || !st.ClosedUntil.Equal(t0.Add(time.Hour)) {
		t.Fatalf("Observe = %+v, %v; want closed for the max gate", st, err)
	}
	wantPTTL(t, c, "rb:v1:{t:acme}:g:quota:", time.Hour, time.Hour+10*time.Second)
	wantPTTL(t, c, "rb:v1:{t:acme}:q:quota:", time.Hour, time.Hour+10*time.Second)

	b := store.GateKey{Tenant: "acme", Scope: "breaker"}
	long := store.BreakerConfig{Enabled: true, MinCalls: 1, OpenFor: 315360000 * time.Second, MaxOpen: 315360000 * time.Second}
	st, err = s.Observe(ctx, store.ObserveRequest{Gate: b, Result: store.ResultFailed, Breaker: long, MaxGate: time.Hour, Now: t0})
	if err != nil || !st.BreakerOpenUntil.Equal(t0.Add(time.Hour)) {
		t.Fatalf("Observe = %+v, %v; want the breaker open for the max gate", st, err)
	}
	// The breaker is kept, half open, for MaxOpen after its open time, but
	// no longer than the max gate: open for the hour, kept an hour more.
	wantPTTL(t, c, "rb:v1:{t:acme}:s:breaker:", 2*time.Hour, 2*time.Hour+slack(2*time.Hour)+10*time.Second)
	d := store.GateKey{Tenant: "acme", Scope: "default-breaker"}
	def := store.DefaultBreaker()
	def.MinCalls = 1
	if _, err := s.Observe(ctx, store.ObserveRequest{Gate: d, Result: store.ResultFailed, Breaker: def, MaxGate: time.Hour, Now: t0}); err != nil {
		t.Fatal(err)
	}
	// Open for 5 s, kept 2 min after: 2 min 5 s plus the slack and the margin.
	life := def.OpenFor + def.MaxOpen
	wantPTTL(t, c, "rb:v1:{t:acme}:s:default-breaker:", life, life+slack(life)+10*time.Second)

	// Learned state lives its idle expiry, at most MaxLearningIdleExpiry.
	l := store.GateKey{Tenant: "acme", Scope: "learned"}
	if _, err := s.Admit(ctx, store.AdmitRequest{Gate: l, Learning: store.LearningConfig{Enabled: true, IdleExpiry: 100 * 365 * 24 * time.Hour}, Now: t0}); err != nil {
		t.Fatal(err)
	}
	wantPTTL(t, c, "rb:v1:{t:acme}:s:learned:", store.MaxLearningIdleExpiry, store.MaxLearningIdleExpiry+slack(store.MaxLearningIdleExpiry)+10*time.Second)
	// The index lives as long as its furthest gate's key (slack included),
	// plus at most 5 minutes of its own slack and the margin.
	wantPTTL(t, c, "rb:v1:{t:acme}:i", store.MaxLearningIdleExpiry, store.MaxLearningIdleExpiry+10*time.Minute+21*time.Second)
	for _, k := range c.Keys(ctx, "*").Val() {
		if ttl := c.PTTL(ctx, k).Val(); ttl <= 0 {
			t.Errorf("key %q has no TTL (%v)", k, ttl)
		}
	}
}

// TestLearningBreakerOneRoundTrip checks, with learning and the breaker on,
// what an attempt costs: one Admit (one EVALSHA) whatever it answers
// (admitted within L, probe, held, breaker open); an accepted attempt that
// is no probe has nothing to record, so the engine sends no Complete: one
// round trip in all. The index is written when a gate is created or
// extended, not on every Admit.
func TestLearningBreakerOneRoundTrip(t *testing.T) {
	srv := redistest.StartServer(t)
	o, err := redis.ParseURL(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	patient(o)
	o.DisableIdentity = true
	client := redis.NewClient(o)
	log := &cmdLog{}
	client.AddHook(log)
	// Every Admit a round trip: this test counts what the scripts cost
	// (TestLocalAdmission* count what local admission saves).
	s, err := redisstore.NewFromClient(client, redisstore.WithLocalAdmission(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	raw := rawClient(t, srv.URL())
	ctx := context.Background()
	t0 := storetest.T0
	g := store.GateKey{Tenant: "acme", Scope: "learned"}
	learn, brk := plainLearning, store.DefaultBreaker()
	req := func(now time.Time) store.AdmitRequest {
		return store.AdmitRequest{Gate: g, Learning: learn, Breaker: brk, FirstAttempt: true, Budget: store.DefaultBudget(), Now: now}
	}
	admitOnce := func(what string, now time.Time) store.Admission {
		t.Helper()
		a, err := s.Admit(ctx, req(now))
		if err != nil {
			t.Fatal(err)
		}
		if cmds := log.take(); len(cmds) != 1 || cmds[0] != "evalsha" {
			t.Fatalf("%s: Admit sent %q, want one evalsha", what, cmds)
		}
		return a
	}
	// Load the scripts (NewFromClient does not preload).
	warm := store.GateKey{Tenant: "warm"}
	if _, err := s.Admit(ctx, store.AdmitRequest{Gate: warm, Learning: learn, Breaker: brk, Now: t0}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Complete(ctx, store.CompleteRequest{Gate: warm, Now: t0}); err != nil {
		t.Fatal(err)
	}
	log.take()
	if err := raw.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}

	// The fresh epoch: 200 attempts, each one EVALSHA, no Complete; the
	// index is written at most once in all (the gate exists already, and
	// its score has slack for minutes of calls).
	const n = 200
	var tickets []store.Ticket
	for i := range n {
		a := admitOnce("fresh epoch", t0.Add(time.Duration(i)*time.Millisecond))
		if !a.Admitted() || a.Probe || a.Ticket.ID != "" || a.Ticket.Epoch == 0 {
			t.Fatalf("Admit %d = %+v, want admitted unregistered in an epoch", i+1, a)
		}
		tickets = append(tickets, a.Ticket)
	}
	calls := commandCalls(t, raw)
	if calls["evalsha"] != n || calls["eval"] != 0 {
		t.Errorf("server ran %d EVALSHA and %d EVAL for %d Admits", calls["evalsha"], calls["eval"], n)
	}
	if calls["zadd"] > 1 {
		t.Errorf("the index was written %d times for %d Admits on one gate, want at most once", calls["zadd"], n)
	}

	// A refusal ends the epoch (one Complete); at the reopening, L = 199
	// calls pass, registered in flight; the next is held until they are
	// back (each back is one Complete); then a probe, then Held: each one
	// EVALSHA.
	reopen := t0.Add(2 * time.Second)
	if _, err := s.Complete(ctx, store.CompleteRequest{
		Gate: g, Ticket: tickets[0], Result: store.ResultRefused, Learning: learn, Breaker: brk,
		Obs: store.Observation{CloseUntil: reopen}, Now: t0.Add(time.Second),
	}); err != nil {
		t.Fatal(err)
	}
	if cmds := log.take(); len(cmds) != 1 || cmds[0] != "evalsha" {
		t.Fatalf("Complete sent %q, want one evalsha", cmds)
	}
	if a := admitOnce("closed gate", reopen.Add(-time.Millisecond)); !a.GateClosedUntil.Equal(reopen) {
		t.Fatalf("Admit on the closed gate = %+v", a)
	}
	var learned []store.Ticket
	for i := range n - 1 {
		a := admitOnce("within L", reopen.Add(time.Duration(i)*time.Microsecond))
		if !a.Admitted() || a.Probe || a.Ticket.ID == "" {
			t.Fatalf("Admit %d within L = %+v, want admitted and registered", i+1, a)
		}
		learned = append(learned, a.Ticket)
	}
	if a := admitOnce("learned calls out", reopen.Add(time.Millisecond)); !a.Held {
		t.Fatalf("Admit beyond L with the learned calls out = %+v, want held", a)
	}
	for _, tk := range learned {
		if _, err := s.Complete(ctx, store.CompleteRequest{Gate: g, Ticket: tk, Result: store.ResultAccepted, Learning: learn, Breaker: brk, Now: reopen.Add(time.Millisecond)}); err != nil {
			t.Fatal(err)
		}
		if cmds := log.take(); len(cmds) != 1 || cmds[0] != "evalsha" {
			t.Fatalf("Complete sent %q, want one evalsha", cmds)
		}
	}
	if a := admitOnce("probe", reopen.Add(time.Millisecond)); !a.Probe || a.Ticket.ID == "" {
		t.Fatalf("Admit beyond L = %+v, want the probe", a)
	}
	if a := admitOnce("held", reopen.Add(time.Millisecond)); !a.Held || a.HeldFor != redisstore.HeldPoll {
		t.Fatalf("Admit with the probe in flight = %+v, want held for %v", a, redisstore.HeldPoll)
	}

	// An open breaker: Admit answers it in one EVALSHA too.
	b := store.GateKey{Tenant: "acme", Scope: "failing"}
	one := brk
	one.MinCalls = 1
	if st, err := s.Observe(ctx, store.ObserveRequest{Gate: b, Result: store.ResultFailed, Breaker: one, Now: t0}); err != nil || st.BreakerOpenUntil.IsZero() {
		t.Fatalf("Observe = %+v, %v; want the breaker open", st, err)
	}
	log.take()
	a, err := s.Admit(ctx, store.AdmitRequest{Gate: b, Learning: learn, Breaker: one, Now: t0.Add(time.Second)})
	if err != nil || a.BreakerOpenUntil.IsZero() {
		t.Fatalf("Admit on an open breaker = %+v, %v", a, err)
	}
	if cmds := log.take(); len(cmds) != 1 || cmds[0] != "evalsha" {
		t.Fatalf("Admit on an open breaker sent %q, want one evalsha", cmds)
	}
}

// TestEvictionDeletesKeys checks the index on the server: a tenant at the
// bound loses its soonest-to-free gate among those that hold no promise
// (here, known quotas with calls left and breaker counts), all of whose
// keys are deleted, and the index holds at most the bound.
func TestEvictionDeletesKeys(t *testing.T) {
	s, srv := newStore(t, redisstore.WithMaxGatesPerTenant(4))
	c := rawClient(t, srv.URL())
	ctx := context.Background()
	t0 := storetest.T0
	for i := range 4 {
		g := store.GateKey{Tenant: "acme", Scope: fmt.Sprintf("h%d", i), Credential: "c:1"}
		if _, err := s.Observe(ctx, store.ObserveRequest{
			Gate: g, Obs: store.Observation{HasQuota: true, Remaining: 5, Reset: t0.Add(time.Duration(i+1) * time.Minute)},
			Result: store.ResultRefused, Breaker: store.DefaultBreaker(), Now: t0,
		}); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"q", "s"} {
		if n := c.Exists(ctx, "rb:v1:{t:acme}:"+k+":h0:c%3A1").Val(); n != 1 {
			t.Fatalf("no %s key for the first gate", k)
		}
	}
	members := c.ZRange(ctx, "rb:v1:{t:acme}:i", 0, -1).Val()
	if len(members) != 4 || members[0] != "h0:c%3A1" {
		t.Fatalf("index = %q, want the 4 gates, h0 first", members)
	}
	if _, err := s.Observe(ctx, store.ObserveRequest{Gate: store.GateKey{Tenant: "acme", Scope: "new"}, Obs: store.Observation{CloseUntil: t0.Add(time.Hour)}, Now: t0}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"q", "s"} {
		if n := c.Exists(ctx, "rb:v1:{t:acme}:"+k+":h0:c%3A1").Val(); n != 0 {
			t.Errorf("the evicted gate's %s key is still there", k)
		}
		if n := c.Exists(ctx, "rb:v1:{t:acme}:"+k+":h1:c%3A1").Val(); n != 1 {
			t.Errorf("gate h1's %s key was deleted", k)
		}
	}
	if n := c.ZCard(ctx, "rb:v1:{t:acme}:i").Val(); n != 4 {
		t.Fatalf("index holds %d gates, want the bound, 4", n)
	}
}

// TestUntrackedGateWritesNothing (issue 17, defect 4): a tenant at the
// bound whose gates are all closed keeps them; the new gate's keys are
// deleted by the script that would have written them (none is left
// without a TTL), the index is unchanged, the tenant's full key says until
// when new gates are refused (the soonest reopening), and WithUntracked
// hears of it.
func TestUntrackedGateWritesNothing(t *testing.T) {
	var untracked []string
	s, srv := newStore(t, redisstore.WithMaxGatesPerTenant(4), redisstore.WithUntracked(func(tenant string) { untracked = append(untracked, tenant) }))
	c := rawClient(t, srv.URL())
	ctx := context.Background()
	t0 := storetest.T0
	for i := range 4 {
		g := store.GateKey{Tenant: "acme", Scope: fmt.Sprintf("h%d", i)}
		if _, err := s.Observe(ctx, store.ObserveRequest{Gate: g, Obs: store.Observation{CloseUntil: t0.Add(time.Duration(i+1) * time.Minute)}, Now: t0}); err != nil {
			t.Fatal(err)
		}
	}
	before := c.ZRangeWithScores(ctx, "rb:v1:{t:acme}:i", 0, -1).Val()
	g := store.GateKey{Tenant: "acme", Scope: "new"}
	if _, err := s.Observe(ctx, store.ObserveRequest{
		Gate: g, Obs: store.Observation{CloseUntil: t0.Add(time.Hour), HasQuota: true, Remaining: 0, Reset: t0.Add(time.Hour)},
		Result: store.ResultRefused, Breaker: store.DefaultBreaker(), Now: t0,
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Admit(ctx, store.AdmitRequest{Gate: g, Learning: store.LearningConfig{Enabled: true}, Breaker: store.DefaultBreaker(), Now: t0}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"g", "f", "q", "s"} {
		if n := c.Exists(ctx, "rb:v1:{t:acme}:"+k+":new:").Val(); n != 0 {
			t.Errorf("the untracked gate's %s key was written", k)
		}
	}
	if after := c.ZRangeWithScores(ctx, "rb:v1:{t:acme}:i", 0, -1).Val(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("index changed from %v to %v", before, after)
	}
	if v := c.Get(ctx, "rb:v1:{t:acme}:full").Val(); v != fmt.Sprint(t0.Add(time.Minute).UnixMicro()) {
		t.Errorf("full key = %q, want the soonest reopening, %d", v, t0.Add(time.Minute).UnixMicro())
	}
	if fmt.Sprint(untracked) != "[acme acme]" {
		t.Errorf("WithUntracked heard %q, want acme twice (Observe, Admit)", untracked)
	}
}

// TestSteadyUseKeepsKeysAlive admits on one gate with learning, the
// breaker and a retry budget on (the default policy) every 500 ms of store
// time for 20 minutes, well past the slack with which the state hash's TTL,
// the budget hash's TTL and the gate's index score are raised (cached in
// the hashes as kx and ix; see doc.go, "Expiry"). Every tenth Admit it
// checks that the keys still outlive what they hold: the state hash its
// learned quota's idle expiry plus the margin, the index score the state
// hash, and the budget hash its window plus the margin. Over the run the
// script must raise the TTLs and the index score now and then, not on
// every call, and run at most 6.5 commands per Admit (GET gate, HMGET
// quota, HMGET and HSET state, HMGET and HINCRBY budget, and the
// occasional PEXPIRE), where it ran 11 before the state writes were
// buffered.
func TestSteadyUseKeepsKeysAlive(t *testing.T) {
	s, srv := newStore(t, redisstore.WithLocalAdmission(0)) // every Admit runs the script
	c := rawClient(t, srv.URL())
	ctx := context.Background()
	g := store.GateKey{Tenant: "acme", Scope: "steady"}
	learning, breaker, budget := plainLearning, store.DefaultBreaker(), store.DefaultBudget()
	const margin = 10 * time.Second
	stateKey, indexKey, budgetKey := "rb:v1:{t:acme}:s:steady:", "rb:v1:{t:acme}:i", "rb:v1:{t:acme}:b"
	if _, err := s.Admit(ctx, store.AdmitRequest{Gate: store.GateKey{Tenant: "warm"}, Now: storetest.T0}); err != nil {
		t.Fatal(err)
	}
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	const admits = 2400 // every 500 ms for 20 minutes
	checks := 0
	for i := range admits {
		now := storetest.T0.Add(time.Duration(i) * 500 * time.Millisecond)
		a, err := s.Admit(ctx, store.AdmitRequest{
			Gate: g, FirstAttempt: true, Budget: budget, Learning: learning, Breaker: breaker, Now: now,
		})
		if err != nil || !a.Admitted() {
			t.Fatalf("Admit %d = %+v, %v", i, a, err)
		}
		if i%10 != 0 {
			continue
		}
		checks++
		// Real time barely moves during the test, so a TTL compares with
		// store-time needs directly.
		stateTTL := c.PTTL(ctx, stateKey).Val()
		if need := learning.Expiry() + margin; stateTTL < need-time.Second {
			t.Fatalf("Admit %d: state hash TTL %v, want at least %v (idle expiry and margin)", i, stateTTL, need)
		}
		need := time.Duration(budget.WindowSeconds())*time.Second + margin
		if bTTL := c.PTTL(ctx, budgetKey).Val(); bTTL < need-time.Second {
			t.Fatalf("Admit %d: budget TTL %v, want at least %v", i, bTTL, need)
		}
		score, err := c.ZScore(ctx, indexKey, "steady:").Result()
		if err != nil {
			t.Fatalf("Admit %d: the gate is not in the index: %v", i, err)
		}
		if frees := time.UnixMicro(int64(score)); frees.Before(now.Add(stateTTL)) {
			t.Fatalf("Admit %d: index score %v is before the state hash expires (%v)", i, frees, now.Add(stateTTL))
		}
	}
	calls := commandCalls(t, c)
	calls["pttl"] -= int64(2 * checks) // the test's own
	calls["zscore"] -= int64(checks)
	var inner int64
	for name, n := range calls {
		if name != "evalsha" && name != "eval" && !strings.HasPrefix(name, "config") {
			inner += n
		}
	}
	if perAdmit := float64(inner) / admits; perAdmit > 6.5 {
		t.Errorf("%.2f commands per Admit (%v), want at most 6.5", perAdmit, calls)
	}
	if calls["pexpire"] > admits/10 {
		t.Errorf("%d PEXPIRE in %d Admits: the TTLs are raised on most calls, not now and then", calls["pexpire"], admits)
	}
	if calls["zadd"] > admits/100 {
		t.Errorf("%d index writes in %d Admits: the index is written on most calls", calls["zadd"], admits)
	}
	t.Logf("%d Admits: %v", admits, calls)
}
