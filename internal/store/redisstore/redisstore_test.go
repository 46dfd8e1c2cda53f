package redisstore_test

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
	"github.com/retrybroker/retrybroker/internal/store/redisstore"
	"github.com/retrybroker/retrybroker/internal/store/redistest"
	"github.com/retrybroker/retrybroker/internal/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newStore starts a real redis-server for t and returns a store on it.
func newStore(t *testing.T, opts ...redisstore.Option) (*redisstore.Store, *redistest.Server) {
	t.Helper()
	srv := redistest.StartServer(t)
	s, err := redisstore.New(context.Background(), srv.URL(), append([]redisstore.Option{redisstore.WithRedisOptions(patient)}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, srv
}

// patient gives test clients long timeouts: these tests check behaviour,
// and a loaded CI machine can take more than the production defaults to
// accept a loopback connection.
func patient(o *redis.Options) {
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.PoolTimeout = 5*time.Second, 5*time.Second, 5*time.Second, 5*time.Second
}

func TestSuite(t *testing.T) {
	url := redistest.Start(t) // one server; each subtest gets its own key prefix
	var n atomic.Int64
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := redisstore.New(context.Background(), url,
			redisstore.WithKeyPrefix(fmt.Sprintf("suite%d:", n.Add(1))), redisstore.WithRedisOptions(patient))
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

func rawClient(t *testing.T, url string) *redis.Client {
	t.Helper()
	o, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestEveryKeyExpires runs every kind of write, then scans the whole server:
// every key must have a TTL, and each TTL must match what the key holds.
func TestEveryKeyExpires(t *testing.T) {
	s, srv := newStore(t)
	ctx := context.Background()
	t0 := storetest.T0
	g := store.GateKey{Tenant: "acme", Scope: "github", Credential: "ab12"}
	budget := store.BudgetConfig{Ratio: 0.5, FloorPerSecond: 1, Window: 5 * time.Second}

	a, err := s.Admit(ctx, store.AdmitRequest{
		Gate: g, PaceHost: "api.github.com", Pace: store.PaceConfig{Rate: 2, Burst: 1},
		FirstAttempt: true, Budget: budget, Now: t0,
	})
	if err != nil || !a.Admitted() {
		t.Fatalf("Admit = %+v, %v", a, err)
	}
	if _, err := s.Admit(ctx, store.AdmitRequest{Gate: g, Now: t0}); err != nil { // stays in flight
		t.Fatal(err)
	}
	if _, err := s.Complete(ctx, store.CompleteRequest{
		Gate: g, Ticket: a.Ticket, SpendRetry: true, Budget: budget, Now: t0,
		Obs: store.Observation{CloseUntil: t0.Add(30 * time.Second)},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Observe(ctx, g, store.Observation{HasQuota: true, Remaining: 10, Reset: t0.Add(90 * time.Second)}, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GateState(ctx, g, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Observe(ctx, store.GateKey{Tenant: "globex", Scope: "jira"},
		store.Observation{HasQuota: true, Remaining: 0, Reset: t0.Add(time.Minute)}, t0); err != nil {
		t.Fatal(err)
	}

	c := rawClient(t, srv.URL())
	keys, err := c.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct{ min, max time.Duration }{
		"rb:v1:{t:acme}:g:github:ab12":    {30 * time.Second, 40 * time.Second},                     // until + margin
		"rb:v1:{t:acme}:f:github:ab12":    {store.DefaultTicketTTL, 2*time.Minute + 10*time.Second}, // ticket TTL + margin
		"rb:v1:{t:acme}:p:api.github.com": {400 * time.Millisecond, 500 * time.Millisecond},         // until the TAT
		"rb:v1:{t:acme}:b":                {5 * time.Second, 15 * time.Second},                      // window + margin
		"rb:v1:{t:acme}:q:github:ab12":    {90 * time.Second, 100 * time.Second},                    // reset + margin
		"rb:v1:{t:globex}:g:jira:":        {time.Minute, time.Minute + 10*time.Second},
		"rb:v1:{t:globex}:q:jira:":        {time.Minute, time.Minute + 10*time.Second},
	}
	if len(keys) != len(want) {
		t.Errorf("keys = %q, want %d keys", keys, len(want))
	}
	for _, k := range keys {
		ttl, err := c.PTTL(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if ttl <= 0 {
			t.Errorf("key %q has no TTL (%v)", k, ttl)
			continue
		}
		w, ok := want[k]
		if !ok {
			t.Errorf("unexpected key %q", k)
			continue
		}
		if ttl < w.min-time.Second || ttl > w.max {
			t.Errorf("key %q: TTL %v, want within [%v, %v]", k, ttl, w.min, w.max)
		}
	}
}

// TestNewWithRedisDown checks that New succeeds with no server, and that
// operations then fail fast with ErrUnavailable.
func TestNewWithRedisDown(t *testing.T) {
	srv := redistest.StartServer(t)
	url := srv.URL()
	srv.Stop() // a port where nothing listens
	start := time.Now()
	s, err := redisstore.New(context.Background(), url)
	if err != nil {
		t.Fatalf("New with Redis down: %v", err)
	}
	defer s.Close()
	_, err = s.Admit(context.Background(), store.AdmitRequest{Gate: store.GateKey{Tenant: "acme"}, Now: storetest.T0})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Admit with Redis down: err = %v, want ErrUnavailable", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("New and Admit with Redis down took %v", took)
	}
	if err := s.Ping(context.Background()); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Ping with Redis down: %v", err)
	}

	// The caller's deadline bounds a call even when the client's own
	// timeouts are longer.
	srv.Restart()
	srv.Pause()
	defer srv.Resume()
	slow, err := redisstore.New(context.Background(), url, redisstore.WithRedisOptions(patient))
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start = time.Now()
	_, err = slow.GateState(ctx, store.GateKey{Tenant: "acme"}, storetest.T0)
	if !errors.Is(err, store.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("GateState on a hung Redis: err = %v, want ErrUnavailable and DeadlineExceeded", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("GateState with a 100ms deadline took %v", took)
	}
}

func TestNewRejectsBadInput(t *testing.T) {
	for _, url := range []string{
		"http://user:s3cret@localhost:6379",
		"redis://user:s3cret@localhost:port/0",
		"redis://user:s3cret@localhost:6379/notadb",
		"::not a url s3cret",
	} {
		s, err := redisstore.New(context.Background(), url)
		if err == nil {
			_ = s.Close()
			t.Errorf("New(%q) succeeded", url)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("New(%q) error leaks the password: %v", url, err)
		}
	}
	if _, err := redisstore.New(context.Background(), "redis://localhost:6379", redisstore.WithKeyPrefix("a{b}:")); err == nil {
		t.Error("New accepted a key prefix with a hash tag")
	}
}

// TestScriptCacheFlush checks that a server that lost its script cache
// (restart, SCRIPT FLUSH, failover) keeps working.
func TestScriptCacheFlush(t *testing.T) {
	s, srv := newStore(t)
	ctx := context.Background()
	g := store.GateKey{Tenant: "acme"}
	if _, err := s.Admit(ctx, store.AdmitRequest{Gate: g, Now: storetest.T0}); err != nil {
		t.Fatal(err)
	}
	if err := rawClient(t, srv.URL()).ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Admit(ctx, store.AdmitRequest{Gate: g, Now: storetest.T0}); err != nil {
		t.Fatalf("Admit after SCRIPT FLUSH: %v", err)
	}
	if _, err := s.Complete(ctx, store.CompleteRequest{Gate: g, Now: storetest.T0}); err != nil {
		t.Fatalf("Complete after SCRIPT FLUSH: %v", err)
	}
}

func TestClose(t *testing.T) {
	s, _ := newStore(t)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := s.Admit(context.Background(), store.AdmitRequest{Now: storetest.T0}); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Admit after Close: err = %v, want ErrClosed", err)
	}
}

// TestReplicasShareState runs two stores (two broker replicas) on one
// server: in-flight counts, gates, pacing and budgets are shared, and
// concurrent calls from both stay exact.
func TestReplicasShareState(t *testing.T) {
	a, srv := newStore(t)
	b, err := redisstore.New(context.Background(), srv.URL(), redisstore.WithRedisOptions(patient))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	ctx := context.Background()
	t0 := storetest.T0
	g := store.GateKey{Tenant: "acme", Scope: "github"}

	// Two calls in flight on A, one on B; B's response says 2 left: the
	// two others will use them, so the gate closes for both replicas.
	var tickets []store.Ticket
	for _, s := range []*redisstore.Store{a, a, b} {
		adm, err := s.Admit(ctx, store.AdmitRequest{Gate: g, Now: t0})
		if err != nil || !adm.Admitted() {
			t.Fatalf("Admit = %+v, %v", adm, err)
		}
		tickets = append(tickets, adm.Ticket)
	}
	reset := t0.Add(time.Minute)
	r, err := b.Complete(ctx, store.CompleteRequest{
		Gate: g, Ticket: tickets[2], Now: t0,
		Obs: store.Observation{HasQuota: true, Remaining: 2, Reset: reset},
	})
	if err != nil || !r.GateClosedUntil.Equal(reset) {
		t.Fatalf("Complete on B = %+v, %v; want the gate closed until the reset", r, err)
	}
	if adm, err := a.Admit(ctx, store.AdmitRequest{Gate: g, Now: t0.Add(time.Second)}); err != nil || !adm.GateClosedUntil.Equal(reset) {
		t.Fatalf("Admit on A = %+v, %v; want the gate B closed", adm, err)
	}

	// Pacing and budgets: concurrent calls from both replicas.
	const workers = 20
	var admitted, allowed atomic.Int64
	var wg sync.WaitGroup
	budget := store.BudgetConfig{FloorPerSecond: 1, Window: 5 * time.Second}
	for i := range workers {
		s := []*redisstore.Store{a, b}[i%2]
		wg.Go(func() {
			adm, err := s.Admit(ctx, store.AdmitRequest{
				Gate:     store.GateKey{Tenant: "acme", Scope: "x"},
				PaceHost: "h", Pace: store.PaceConfig{Rate: 1, Burst: 3}, Now: t0,
			})
			if err != nil {
				t.Error(err)
				return
			}
			if adm.Admitted() {
				admitted.Add(1)
			}
			r, err := s.Complete(ctx, store.CompleteRequest{Gate: g, SpendRetry: true, Budget: budget, Now: t0})
			if err != nil {
				t.Error(err)
				return
			}
			if r.RetryAllowed {
				allowed.Add(1)
			}
		})
	}
	wg.Wait()
	if admitted.Load() != 3 || allowed.Load() != 5 {
		t.Fatalf("admitted %d (want the burst, 3), allowed %d retries (want the floor, 5) across two replicas", admitted.Load(), allowed.Load())
	}
}

// TestReplicasShareQuota checks that the known quota and the calls in
// flight that use it are shared by replicas.
func TestReplicasShareQuota(t *testing.T) {
	a, srv := newStore(t)
	b, err := redisstore.New(context.Background(), srv.URL(), redisstore.WithRedisOptions(patient))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	ctx := context.Background()
	t0 := storetest.T0
	g := store.GateKey{Tenant: "acme", Scope: "github"}
	reset := t0.Add(time.Minute)
	if _, err := a.Observe(ctx, g, store.Observation{HasQuota: true, Remaining: 3, Reset: reset}, t0); err != nil {
		t.Fatal(err)
	}
	for i, s := range []*redisstore.Store{b, a, b} {
		if adm, err := s.Admit(ctx, store.AdmitRequest{Gate: g, Now: t0}); err != nil || !adm.Admitted() {
			t.Fatalf("Admit %d = %+v, %v", i+1, adm, err)
		}
	}
	for _, s := range []*redisstore.Store{a, b} {
		if adm, err := s.Admit(ctx, store.AdmitRequest{Gate: g, Now: t0}); err != nil || !adm.GateClosedUntil.Equal(reset) {
			t.Fatalf("Admit 4 = %+v, %v; want closed by the shared quota", adm, err)
		}
		if until, err := s.GateState(ctx, g, t0); err != nil || !until.Equal(reset) {
			t.Fatalf("GateState = %v, %v", until, err)
		}
	}
}

// TestQuotaKey checks the quota hash: written with a TTL until the reset
// plus the margin, deleted when a response says the window reset, and a
// huge remaining count kept exact enough.
func TestQuotaKey(t *testing.T) {
	s, srv := newStore(t)
	c := rawClient(t, srv.URL())
	ctx := context.Background()
	t0 := storetest.T0
	g := store.GateKey{Tenant: "acme", Scope: "github"}
	const key = "rb:v1:{t:acme}:q:github:"
	reset := t0.Add(time.Minute)
	if _, err := s.Observe(ctx, g, store.Observation{HasQuota: true, Remaining: 1 << 62, Reset: reset}, t0); err != nil {
		t.Fatal(err)
	}
	if ttl := c.PTTL(ctx, key).Val(); ttl < time.Minute || ttl > time.Minute+10*time.Second {
		t.Fatalf("quota key TTL = %v, want the window plus the margin", ttl)
	}
	if r := c.HGet(ctx, key, "r").Val(); r != "4503599627370496" {
		t.Fatalf("remaining stored as %q, want 2^52", r)
	}
	if adm, err := s.Admit(ctx, store.AdmitRequest{Gate: g, Now: t0}); err != nil || !adm.Admitted() {
		t.Fatalf("Admit with a huge remaining count = %+v, %v", adm, err)
	}
	// Still within the window, the provider says it reset.
	now := reset.Add(-500 * time.Millisecond)
	if _, err := s.Observe(ctx, g, store.Observation{HasQuota: true, Remaining: 7, Reset: now}, now); err != nil {
		t.Fatal(err)
	}
	if n := c.Exists(ctx, key).Val(); n != 0 {
		t.Fatal("quota key still there after a response said the window reset")
	}
}
