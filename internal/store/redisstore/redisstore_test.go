package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
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
	redis.SetLogger(quiet{}) // misconfiguration tests make go-redis log every failed dial
	code := m.Run()
	if err := closeTopologies(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

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

// TestSuite runs the store suite with local admission on (waiting until
// it works, so that plain gates are admitted without a round trip) and off
// (every Admit a round trip): the same semantics either way.
func TestSuite(t *testing.T) {
	url := redistest.Start(t) // one server; each subtest gets its own key prefix
	var n atomic.Int64
	for _, mode := range []struct {
		name string
		ttl  time.Duration
	}{{"local", redisstore.DefaultLocalAdmissionTTL}, {"remote", 0}} {
		t.Run(mode.name, func(t *testing.T) {
			storetest.Run(t, func(t *testing.T) store.Store {
				s, err := redisstore.New(context.Background(), url, redisstore.WithLocalAdmission(mode.ttl),
					redisstore.WithKeyPrefix(fmt.Sprintf("suite%d:", n.Add(1))), redisstore.WithRedisOptions(patient))
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				t.Cleanup(func() { _ = s.Close() })
				ready(t, s)
				return s
			})
		})
	}
}

// ready waits (at most 10 s) until s admits locally, when that is on.
func ready(t *testing.T, s *redisstore.Store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.LocalAdmissionReady(ctx); err != nil {
		t.Fatal(err)
	}
}

func rawClient(t testing.TB, url string) *redis.Client {
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

	// A known quota, so that Admit registers attempts in flight.
	if _, err := s.Observe(ctx, store.ObserveRequest{Gate: g, Obs: store.Observation{HasQuota: true, Remaining: 10, Reset: t0.Add(90 * time.Second)}, Now: t0}); err != nil {
		t.Fatal(err)
	}
	a, err := s.Admit(ctx, store.AdmitRequest{
		Gate: g, PaceHost: "api.github.com", Pace: store.PaceConfig{Rate: 2, Burst: 1},
		FirstAttempt: true, Budget: budget, Now: t0,
	})
	if err != nil || !a.Admitted() || a.Ticket.ID == "" {
		t.Fatalf("Admit = %+v, %v; want registered", a, err)
	}
	if a, err := s.Admit(ctx, store.AdmitRequest{Gate: g, Now: t0}); err != nil || a.Ticket.ID == "" { // stays in flight
		t.Fatalf("Admit = %+v, %v; want registered", a, err)
	}
	// A gate without a known quota: admitted, nothing registered, no
	// in-flight key (a ":f:" key for it would show below as unexpected).
	if a, err := s.Admit(ctx, store.AdmitRequest{
		Gate: store.GateKey{Tenant: "acme", Scope: "noquota"}, FirstAttempt: true, Budget: budget, Now: t0,
	}); err != nil || !a.Admitted() || a.Ticket.ID != "" {
		t.Fatalf("Admit without a known quota = %+v, %v; want admitted with an empty ticket", a, err)
	}
	if _, err := s.Complete(ctx, store.CompleteRequest{
		Gate: g, Ticket: a.Ticket, SpendRetry: true, Budget: budget, Now: t0,
		Obs: store.Observation{CloseUntil: t0.Add(30 * time.Second)},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Observe(ctx, store.ObserveRequest{Gate: g, Obs: store.Observation{HasQuota: true, Remaining: 10, Reset: t0.Add(90 * time.Second)}, Now: t0}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GateState(ctx, g, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Observe(ctx, store.ObserveRequest{Gate: store.GateKey{Tenant: "globex", Scope: "jira"}, Obs: store.Observation{HasQuota: true, Remaining: 0, Reset: t0.Add(time.Minute)}, Now: t0}); err != nil {
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
		"rb:v1:{t:acme}:b":                {5 * time.Second, 20 * time.Second},                      // window + margin + a window (raised once a window)
		"rb:v1:{t:acme}:q:github:ab12":    {90 * time.Second, 100 * time.Second},                    // reset + margin
		"rb:v1:{t:globex}:g:jira:":        {time.Minute, time.Minute + 10*time.Second},
		"rb:v1:{t:globex}:q:jira:":        {time.Minute, time.Minute + 10*time.Second},
		"rb:v1:{t:acme}:i":                {2*time.Minute + 10*time.Second, 3 * time.Minute}, // latest gate + margin + slack
		"rb:v1:{t:globex}:i":              {time.Minute + 10*time.Second, 2 * time.Minute},
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
	reset := t0.Add(time.Minute)

	// With a known quota, two calls in flight on A, one on B; B's response
	// says 2 left: the two others will use them, so the gate closes for
	// both replicas.
	if _, err := a.Observe(ctx, store.ObserveRequest{Gate: g, Obs: store.Observation{HasQuota: true, Remaining: 100, Reset: reset}, Now: t0}); err != nil {
		t.Fatal(err)
	}
	var tickets []store.Ticket
	for _, s := range []*redisstore.Store{a, a, b} {
		adm, err := s.Admit(ctx, store.AdmitRequest{Gate: g, Now: t0})
		if err != nil || !adm.Admitted() || adm.Ticket.ID == "" {
			t.Fatalf("Admit = %+v, %v; want registered", adm, err)
		}
		tickets = append(tickets, adm.Ticket)
	}
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
	if _, err := a.Observe(ctx, store.ObserveRequest{Gate: g, Obs: store.Observation{HasQuota: true, Remaining: 3, Reset: reset}, Now: t0}); err != nil {
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
		if until, err := s.GateState(ctx, g, t0); err != nil || !until.ClosedUntil.Equal(reset) {
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
	if _, err := s.Observe(ctx, store.ObserveRequest{Gate: g, Obs: store.Observation{HasQuota: true, Remaining: 1 << 62, Reset: reset}, Now: t0}); err != nil {
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
	if _, err := s.Observe(ctx, store.ObserveRequest{Gate: g, Obs: store.Observation{HasQuota: true, Remaining: 7, Reset: now}, Now: now}); err != nil {
		t.Fatal(err)
	}
	if n := c.Exists(ctx, key).Val(); n != 0 {
		t.Fatal("quota key still there after a response said the window reset")
	}
}

// cmdLog is a go-redis hook that records the commands a client sends.
type cmdLog struct {
	mu    sync.Mutex
	names []string
}

func (l *cmdLog) DialHook(next redis.DialHook) redis.DialHook { return next }

func (l *cmdLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		l.add(cmd)
		return next(ctx, cmd)
	}
}

func (l *cmdLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			l.add(cmd)
		}
		return next(ctx, cmds)
	}
}

func (l *cmdLog) add(cmd redis.Cmder) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.names = append(l.names, strings.ToLower(cmd.Name()))
}

// take returns the commands recorded since the last take.
func (l *cmdLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.names
	l.names = nil
	return n
}

// commandCalls returns the server's call count of each command (INFO
// commandstats), commands run by scripts included.
func commandCalls(t *testing.T, c *redis.Client) map[string]int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]int64{}
	for line := range strings.SplitSeq(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		for field := range strings.SplitSeq(rest, ",") {
			if v, ok := strings.CutPrefix(field, "calls="); ok {
				var n int64
				if _, err := fmt.Sscan(v, &n); err != nil {
					t.Fatalf("commandstats line %q: %v", line, err)
				}
				calls[strings.TrimPrefix(name, "cmdstat_")] = n
			}
		}
	}
	return calls
}

// TestAdmitOneRoundTrip counts the commands each Admit sends (a client
// hook) and runs on the server (INFO commandstats): one EVALSHA, whether
// the gate has a known quota or not, is closed or pace-denies; the script
// writes the in-flight set (ZADD) only with a known quota. An attempt on a
// gate without a known quota thus costs one round trip when the caller
// skips Complete; Complete, when needed, is one more EVALSHA.
func TestAdmitOneRoundTrip(t *testing.T) {
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
	s, err := redisstore.NewFromClient(client, redisstore.WithLocalAdmission(0)) // every Admit a round trip
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	raw := rawClient(t, srv.URL())
	ctx := context.Background()
	t0 := storetest.T0
	reset := t0.Add(time.Hour)
	free := store.GateKey{Tenant: "acme", Scope: "free"}
	known := store.GateKey{Tenant: "acme", Scope: "known"}
	closed := store.GateKey{Tenant: "acme", Scope: "closed"}
	budget := store.DefaultBudget()

	// Load the scripts (NewFromClient does not preload: the first call of
	// each falls back to EVAL once) and set up the gates.
	if _, err := s.Admit(ctx, store.AdmitRequest{Gate: free, Now: t0}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Observe(ctx, store.ObserveRequest{Gate: known, Obs: store.Observation{HasQuota: true, Remaining: 1000, Reset: reset}, Now: t0}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Observe(ctx, store.ObserveRequest{Gate: closed, Obs: store.Observation{CloseUntil: reset}, Now: t0}); err != nil {
		t.Fatal(err)
	}
	slow := store.PaceConfig{Rate: 1e-3, Burst: 1} // one an hour (the longest interval)
	if a, err := s.Admit(ctx, store.AdmitRequest{Gate: free, PaceHost: "slow", Pace: slow, Now: t0}); err != nil || !a.Admitted() {
		t.Fatalf("Admit = %+v, %v", a, err)
	}
	log.take()
	if err := raw.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}

	const n = 20
	const (
		admitted = iota
		registered
		gateClosed
		paceDenied
	)
	check := func(what string, g store.GateKey, host string, pace store.PaceConfig, want int, wantZADD int64) {
		t.Helper()
		before := commandCalls(t, raw)
		for i := range n {
			a, err := s.Admit(ctx, store.AdmitRequest{
				Gate: g, PaceHost: host, Pace: pace, FirstAttempt: true, Budget: budget, Now: t0.Add(time.Duration(i) * time.Millisecond),
			})
			if err != nil {
				t.Fatal(err)
			}
			var ok bool
			switch want {
			case admitted:
				ok = a.Admitted() && a.Ticket.ID == ""
			case registered:
				ok = a.Admitted() && a.Ticket.ID != ""
			case gateClosed:
				ok = !a.GateClosedUntil.IsZero() && a.Ticket.ID == ""
			case paceDenied:
				ok = a.PaceDenied && a.Ticket.ID == ""
			}
			if !ok {
				t.Fatalf("%s: Admit %d = %+v", what, i+1, a)
			}
			if cmds := log.take(); len(cmds) != 1 || cmds[0] != "evalsha" {
				t.Fatalf("%s: Admit %d sent %q, want one evalsha", what, i+1, cmds)
			}
		}
		after := commandCalls(t, raw)
		if d := after["evalsha"] - before["evalsha"]; d != n {
			t.Errorf("%s: the server ran %d EVALSHA for %d Admits", what, d, n)
		}
		if d := after["eval"] - before["eval"]; d != 0 {
			t.Errorf("%s: the server ran %d EVAL", what, d)
		}
		if d := after["zadd"] - before["zadd"]; d != wantZADD {
			t.Errorf("%s: the scripts ran %d ZADD for %d Admits, want %d", what, d, n, wantZADD)
		}
	}
	fast := store.PaceConfig{Rate: 1e6, Burst: 100}
	check("no known quota", free, "h1", store.PaceConfig{}, admitted, 0)
	check("no known quota, paced", free, "h2", fast, admitted, 0)
	check("known quota", known, "h3", fast, registered, n)
	check("closed gate", closed, "h4", fast, gateClosed, 0)
	check("pace denied", known, "slow", slow, paceDenied, 0)
	if k := raw.Exists(ctx, "rb:v1:{t:acme}:f:free:", "rb:v1:{t:acme}:f:closed:").Val(); k != 0 {
		t.Fatalf("%d in-flight keys written for gates without a known quota", k)
	}
	if k := raw.Exists(ctx, "rb:v1:{t:acme}:f:known:").Val(); k != 1 {
		t.Fatal("no in-flight key for the gate with a known quota")
	}

	// Complete, with or without a ticket, is one EVALSHA too.
	for _, tk := range []store.Ticket{{}, {ID: "no-such-ticket"}} {
		if _, err := s.Complete(ctx, store.CompleteRequest{
			Gate: free, Ticket: tk, SpendRetry: true, Budget: budget, Now: t0,
			Obs: store.Observation{HasQuota: true, Remaining: 5, Reset: reset},
		}); err != nil {
			t.Fatal(err)
		}
		if cmds := log.take(); len(cmds) != 1 || cmds[0] != "evalsha" {
			t.Fatalf("Complete(%q) sent %q, want one evalsha", tk.ID, cmds)
		}
	}
	// An empty-ticket Complete wrote no in-flight key; its quota made the
	// gate's known, so the next Admit registers.
	if k := raw.Exists(ctx, "rb:v1:{t:acme}:f:free:").Val(); k != 0 {
		t.Fatal("an empty-ticket Complete wrote an in-flight key")
	}
	if a, err := s.Admit(ctx, store.AdmitRequest{Gate: free, Now: t0.Add(time.Second)}); err != nil || a.Ticket.ID == "" {
		t.Fatalf("Admit after a quota observation = %+v, %v; want registered", a, err)
	}
}
