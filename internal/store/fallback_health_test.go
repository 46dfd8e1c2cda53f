package store_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/internal/store"
	"github.com/retrybroker/retrybroker/internal/store/memstore"
	"github.com/retrybroker/retrybroker/internal/store/redisstore"
	"github.com/retrybroker/retrybroker/internal/store/redistest"
)

// waitHealth polls f's health until cond holds, at most within; it returns
// how long that took.
func waitHealth(t *testing.T, f *store.Fallback, within time.Duration, what string, cond func(store.Health) bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond(f.Health()) {
		if time.Since(start) > within {
			t.Fatalf("not %s within %v: health %+v", what, within, f.Health())
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

// TestFallbackIdleNoticesRedisGone: with no call at all, a Fallback over a
// real redis-server degrades within 2 s of the server being killed (by
// its pid), and is healthy again once the server is back and verified.
// Before, only a failed call degraded it: an idle replica reported its
// shared state in use through any outage.
func TestFallbackIdleNoticesRedisGone(t *testing.T) {
	srv := redistest.StartServer(t)
	rs, err := redisstore.New(context.Background(), srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	var verified atomic.Int64
	f := store.NewFallback(countVerify{rs, &verified}, memstore.New())
	t.Cleanup(func() { _ = f.Close() })
	// Idle and healthy (the checks pass), then at any phase of the check.
	time.Sleep(2*store.DefaultHealthInterval + rand.N(store.DefaultHealthInterval))
	if h := f.Health(); h.Degraded {
		t.Fatalf("degraded while redis-server runs: %+v", h)
	}

	srv.Stop() // SIGKILL by pid
	took := waitHealth(t, f, 2*time.Second, "degraded", func(h store.Health) bool { return h.Degraded })
	if h := f.Health(); h.Cause != store.CauseUnreachable {
		t.Fatalf("degraded with cause %q, want unreachable: %+v", h.Cause, h)
	}
	t.Logf("degraded %v after the kill, with no call", took)

	before := verified.Load()
	srv.Restart()
	took = waitHealth(t, f, 5*time.Second, "healthy", func(h store.Health) bool { return !h.Degraded })
	if verified.Load() == before {
		t.Fatal("healthy again without a verification")
	}
	t.Logf("healthy %v after the restart", took)
}

// TestFallbackIdleNoticesRedisHung: the same with a redis-server that
// hangs (SIGSTOP) instead of refusing: two pings time out, each bounded by
// the primary timeout.
func TestFallbackIdleNoticesRedisHung(t *testing.T) {
	srv := redistest.StartServer(t)
	rs, err := redisstore.New(context.Background(), srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	f := store.NewFallback(rs, memstore.New())
	t.Cleanup(func() { _ = f.Close() })
	time.Sleep(2*store.DefaultHealthInterval + rand.N(store.DefaultHealthInterval))
	if h := f.Health(); h.Degraded {
		t.Fatalf("degraded while redis-server runs: %+v", h)
	}
	srv.Pause()
	took := waitHealth(t, f, 2*time.Second, "degraded", func(h store.Health) bool { return h.Degraded })
	t.Logf("degraded %v after the pause, with no call", took)
	srv.Resume()
	waitHealth(t, f, 5*time.Second, "healthy", func(h store.Health) bool { return !h.Degraded })
}

// countVerify counts the verifications of a Redis store.
type countVerify struct {
	*redisstore.Store
	n *atomic.Int64
}

func (c countVerify) Verify(ctx context.Context) error {
	err := c.Store.Verify(ctx)
	if err == nil {
		c.n.Add(1)
	}
	return err
}

// TestFallbackIdleCheckRespectsFlapDamping: a primary that keeps failing
// its health check right after each recovery is held back by the
// hold-down, as one that fails calls is.
func TestFallbackIdleCheckRespectsFlapDamping(t *testing.T) {
	p := &pinging{verifying: verifying{Store: memstore.New()}}
	p.pingErr.Store(errPing)
	const probeMax = 100 * time.Millisecond
	f := store.NewFallback(p, memstore.New(), store.WithHealthInterval(5*time.Millisecond),
		store.WithProbeBackoff(time.Millisecond, probeMax), store.WithFlapDamping(time.Hour, time.Second))
	t.Cleanup(func() { _ = f.Close() })
	tr := watch(f)
	tr.wait(t, true, 2*time.Second)  // the check fails: degraded
	tr.wait(t, false, 2*time.Second) // Verify passes: back (no flap yet)
	tr.wait(t, true, 2*time.Second)  // the check fails again at once: a flap
	start := time.Now()
	tr.wait(t, false, 5*time.Second)
	if d := time.Since(start); d < probeMax {
		t.Fatalf("recovery after a flap took %v, want the hold-down of at least %v", d, probeMax)
	}
}

var errPing = errors.New("ping: connection refused")

// pinging is a verifying primary that is a Pinger too.
type pinging struct {
	verifying
	pingErr atomic.Value // error
	pings   atomic.Int64
}

func (p *pinging) Ping(context.Context) error {
	p.pings.Add(1)
	if err, _ := p.pingErr.Load().(error); err != nil {
		return err
	}
	return nil
}

// TestFallbackIdleCheckConfirms: one failed health check is confirmed by a
// second before the Fallback degrades; a passing check changes nothing;
// and WithHealthInterval(-1) turns the check off.
func TestFallbackIdleCheckConfirms(t *testing.T) {
	t.Run("one slow answer", func(t *testing.T) {
		p := &flaky{Store: memstore.New()}
		f := store.NewFallback(p, memstore.New(), store.WithHealthInterval(2*time.Millisecond))
		t.Cleanup(func() { _ = f.Close() })
		for p.n.Load() < 100 {
			time.Sleep(5 * time.Millisecond)
		}
		if f.Degraded() {
			t.Fatal("degraded after single failed checks, each followed by a passing one")
		}
	})
	t.Run("off", func(t *testing.T) {
		p := &pinging{verifying: verifying{Store: memstore.New()}}
		p.pingErr.Store(errPing)
		f := store.NewFallback(p, memstore.New(), store.WithHealthInterval(-1))
		time.Sleep(3 * store.DefaultHealthInterval)
		if p.pings.Load() != 0 || f.Degraded() {
			t.Fatalf("%d pings, degraded %v with the check off", p.pings.Load(), f.Degraded())
		}
		_ = f.Close()
	})
}

// flaky is a Pinger whose every other ping fails.
type flaky struct {
	*memstore.Store
	n atomic.Int64
}

func (p *flaky) Ping(context.Context) error {
	if p.n.Add(1)%2 == 1 {
		return errPing
	}
	return nil
}
