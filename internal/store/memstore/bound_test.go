package memstore_test

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/internal/store"
	"github.com/retrybroker/retrybroker/internal/store/memstore"
	"github.com/retrybroker/retrybroker/internal/store/storetest"
)

// distinctGates is how many distinct gates the heap test writes: the
// figure of issue #9 (1.29 million hosts in a minute), rounded.
const distinctGates = 1_000_000

// maxHeap is the heap the store may hold after distinctGates gates.
const maxHeap = 64 << 20

// observeDistinct writes n distinct gates of one tenant through Observe,
// each closed for ten minutes and with a breaker count (as ClassifyResponse
// with a url does for every host it sees), 60 s of request time in all.
func observeDistinct(tb testing.TB, s *memstore.Store, n int) {
	tb.Helper()
	ctx := context.Background()
	step := time.Minute / time.Duration(n)
	breaker := store.DefaultBreaker()
	for i := range n {
		now := storetest.T0.Add(time.Duration(i) * step)
		_, err := s.Observe(ctx, store.ObserveRequest{
			Gate:   store.GateKey{Tenant: "acme", Scope: "h" + strconv.Itoa(i) + ".example"},
			Obs:    store.Observation{CloseUntil: now.Add(10 * time.Minute)},
			Result: store.ResultRefused, Breaker: breaker, Now: now,
		})
		if err != nil {
			tb.Fatal(err)
		}
	}
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// TestHeapBoundedByGateBound writes a million distinct gates for one tenant
// and checks that the store keeps at most the bound of them, in at most
// 64 MiB of heap (the whole test binary's heap in use, store included).
func TestHeapBoundedByGateBound(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a million gates")
	}
	s := memstore.New()
	defer s.Close()
	observeDistinct(t, s, distinctGates)
	if n := s.Gates("acme"); n > memstore.DefaultMaxGatesPerTenant {
		t.Fatalf("tenant holds %d gates, bound %d", n, memstore.DefaultMaxGatesPerTenant)
	}
	heap := heapInUse()
	t.Logf("heap in use after %d distinct gates: %.1f MiB (%d gates kept)", distinctGates, float64(heap)/(1<<20), s.Gates("acme"))
	if heap > maxHeap {
		t.Fatalf("heap in use %d MiB after %d distinct gates, want at most %d MiB", heap>>20, distinctGates, maxHeap>>20)
	}
	runtime.KeepAlive(s)
}

// BenchmarkObserveDistinctGates measures Observe on a new gate each time for
// one tenant, past the gate bound (so evictions are part of the cost), and
// reports the heap in use after the run and after a million gates.
func BenchmarkObserveDistinctGates(b *testing.B) {
	s := memstore.New()
	defer s.Close()
	ctx := context.Background()
	breaker := store.DefaultBreaker()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		now := storetest.T0.Add(time.Duration(i) * time.Microsecond)
		if _, err := s.Observe(ctx, store.ObserveRequest{
			Gate:   store.GateKey{Tenant: "acme", Scope: "h" + strconv.Itoa(i) + ".example"},
			Obs:    store.Observation{CloseUntil: now.Add(10 * time.Minute)},
			Result: store.ResultRefused, Breaker: breaker, Now: now,
		}); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.StopTimer()
	b.ReportMetric(float64(heapInUse())/(1<<20), "heapMiB")
	m := memstore.New()
	defer m.Close()
	observeDistinct(b, m, distinctGates)
	b.ReportMetric(float64(heapInUse())/(1<<20), "heapMiB/1Mgates")
	runtime.KeepAlive(m)
}

// TestBoundPerTenant checks the bound's bookkeeping: many tenants each keep
// up to the bound, and the sweep forgets every kind of state once it
// expired.
func TestBoundPerTenant(t *testing.T) {
	s := memstore.New(memstore.WithMaxGatesPerTenant(100))
	defer s.Close()
	ctx := context.Background()
	t0 := storetest.T0
	for tenant := range 5 {
		for i := range 250 {
			g := store.GateKey{Tenant: fmt.Sprint(tenant), Scope: fmt.Sprint(i)}
			if _, err := s.Observe(ctx, store.ObserveRequest{Gate: g, Obs: store.Observation{CloseUntil: t0.Add(time.Minute)}, Now: t0}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for tenant := range 5 {
		if n := s.Gates(fmt.Sprint(tenant)); n < 90 || n > 100 {
			t.Fatalf("tenant %d holds %d gates, want the bound (100) less at most a batch", tenant, n)
		}
	}
	// Learned quotas, breakers and probes: swept once expired.
	g := store.GateKey{Tenant: "x", Scope: "learned"}
	learn := store.LearningConfig{Enabled: true, IdleExpiry: time.Minute}
	if _, err := s.Admit(ctx, store.AdmitRequest{Gate: g, Learning: learn, Breaker: store.DefaultBreaker(), Now: t0}); err != nil {
		t.Fatal(err)
	}
	if s.Gates("x") != 1 {
		t.Fatal("a learning Admit kept no gate")
	}
	// The gates of tenants 0-4 reopen after a minute; the learned state
	// after its idle minute; the breaker's counts after its 30 s window.
	if _, err := s.GateState(ctx, g, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Observe(ctx, store.ObserveRequest{Gate: store.GateKey{Tenant: "y"}, Now: t0.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if n := s.Len(); n != 0 {
		t.Fatalf("Len = %d after everything expired, want 0", n)
	}
}

// TestUntrackedIsReported (issue 17, defect 4): a tenant at the bound with
// every gate closed keeps them all; each new gate is refused (reported to
// WithUntracked, in O(1) until the soonest reopening), and the tenant
// never holds more than the bound.
func TestUntrackedIsReported(t *testing.T) {
	var untracked []string
	s := memstore.New(memstore.WithMaxGatesPerTenant(32), memstore.WithUntracked(func(tenant string) { untracked = append(untracked, tenant) }))
	defer s.Close()
	ctx := context.Background()
	t0 := storetest.T0
	observe := func(scope string, until, now time.Time) {
		t.Helper()
		if _, err := s.Observe(ctx, store.ObserveRequest{Gate: store.GateKey{Tenant: "acme", Scope: scope}, Obs: store.Observation{CloseUntil: until}, Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 32 {
		observe(fmt.Sprint(i), t0.Add(time.Duration(i+1)*time.Minute), t0)
	}
	for i := range 100 {
		observe(fmt.Sprint("flood-", i), t0.Add(2*time.Hour), t0)
	}
	if len(untracked) != 100 || untracked[0] != "acme" {
		t.Fatalf("WithUntracked heard %d calls, want 100 (acme)", len(untracked))
	}
	if n := s.Gates("acme"); n != 32 {
		t.Fatalf("tenant holds %d gates, want the bound, 32", n)
	}
	// At T0+2.5 min, gates 0 and 1 reopened, with a batch (2) of them the
	// trim makes room for two gates again.
	untracked = nil
	for i := range 3 {
		observe(fmt.Sprint("later-", i), t0.Add(2*time.Hour), t0.Add(150*time.Second))
	}
	if len(untracked) != 1 || s.Gates("acme") != 32 {
		t.Fatalf("at T0+2.5min: %d untracked of 3, %d gates; want 1 and 32", len(untracked), s.Gates("acme"))
	}
}

// BenchmarkObserveDistinctSoftGates is BenchmarkObserveDistinctGates with
// soft gates (a known quota with calls left, no close): past the bound
// every new gate needs room, made by evicting 1/16 of the bound at a time.
func BenchmarkObserveDistinctSoftGates(b *testing.B) {
	s := memstore.New()
	defer s.Close()
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		now := storetest.T0.Add(time.Duration(i) * time.Microsecond)
		if _, err := s.Observe(ctx, store.ObserveRequest{
			Gate: store.GateKey{Tenant: "acme", Scope: "h" + strconv.Itoa(i) + ".example"},
			Obs:  store.Observation{HasQuota: true, Remaining: 100, Reset: now.Add(10 * time.Minute)},
			Now:  now,
		}); err != nil {
			b.Fatal(err)
		}
		i++
	}
	if n := s.Gates("acme"); n > memstore.DefaultMaxGatesPerTenant {
		b.Fatalf("tenant holds %d gates", n)
	}
}
