package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/internal/store"
	"github.com/retrybroker/retrybroker/internal/store/memstore"
	"github.com/retrybroker/retrybroker/internal/store/redisstore"
	"github.com/retrybroker/retrybroker/internal/store/redistest"
)

// TestFallbackStartWaitsForVerification: a starting Fallback holds calls
// until its first verification passes, serves none from local state, and
// is healthy after; a call whose ctx ends first fails with ErrUnavailable.
func TestFallbackStartWaitsForVerification(t *testing.T) {
	p := &verifying{Store: memstore.New()}
	p.set(causeErr(store.CauseUnreachable), nil)
	local := memstore.New()
	f := store.NewFallback(p, local, store.WithStartWait(10*time.Second), store.WithProbeBackoff(time.Millisecond, 10*time.Millisecond))
	t.Cleanup(func() { _ = f.Close() })
	if h := f.Health(); !h.Starting || h.Degraded {
		t.Fatalf("health at start %+v, want starting", h)
	}
	// A call whose ctx ends before the verification does: unavailable.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, err := f.Admit(ctx, store.AdmitRequest{Gate: gate, Now: t0})
	cancel()
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Admit while starting = %v, want ErrUnavailable", err)
	}
	waitHealth(t, f, 2*time.Second, "starting with the check's cause", func(h store.Health) bool { return h.Cause == store.CauseUnreachable })
	// A call that waits: served by the primary once it verifies.
	done := make(chan store.Admission, 1)
	go func() {
		a, err := f.Admit(context.Background(), store.AdmitRequest{Gate: gate, Now: t0})
		if err != nil {
			t.Error(err)
		}
		done <- a
	}()
	time.Sleep(20 * time.Millisecond)
	select {
	case <-done:
		t.Fatal("a call was served before the first verification passed")
	default:
	}
	p.set(nil, nil)
	select {
	case a := <-done:
		if a.Ticket.ID != "" && a.Ticket.ID[0] != 'p' {
			t.Fatalf("served with ticket %q, want the primary's", a.Ticket.ID)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the call still waits after the verification passed")
	}
	<-f.Started()
	if h := f.Health(); h.Starting || h.Degraded || h.Cause != store.CauseNone {
		t.Fatalf("health after start %+v, want healthy", h)
	}
	// Nothing went to local state: it knows no gate.
	if st, err := local.GateState(context.Background(), gate, t0); err != nil || !st.ClosedUntil.IsZero() {
		t.Fatalf("local state %+v %v", st, err)
	}
}

// TestFallbackStartEnds: the start ends degraded when its wait passes with
// Redis unreachable, and at once on a misconfiguration; calls then go to
// local state, as after a failed call. Close ends a start in progress.
func TestFallbackStartEnds(t *testing.T) {
	t.Run("wait passes", func(t *testing.T) {
		p := &verifying{Store: memstore.New()}
		p.set(causeErr(store.CauseUnreachable), nil)
		const wait = 200 * time.Millisecond
		f := store.NewFallback(p, memstore.New(), store.WithStartWait(wait), store.WithProbeBackoff(time.Millisecond, 10*time.Millisecond))
		t.Cleanup(func() { _ = f.Close() })
		start := time.Now()
		a, err := f.Admit(context.Background(), store.AdmitRequest{Gate: gate, Now: t0})
		if took := time.Since(start); took < wait-10*time.Millisecond || took > wait+slack {
			t.Fatalf("Admit waited %v, want the start wait %v", took, wait)
		}
		if err != nil || !a.Admitted() {
			t.Fatalf("Admit after the start wait = %+v, %v; want served locally", a, err)
		}
		if h := f.Health(); !h.Degraded || h.Starting || h.Cause != store.CauseUnreachable {
			t.Fatalf("health %+v, want degraded, unreachable", h)
		}
	})
	t.Run("misconfigured", func(t *testing.T) {
		p := &verifying{Store: memstore.New()}
		p.set(causeErr(store.CauseNoPerm), nil)
		f := store.NewFallback(p, memstore.New(), store.WithStartWait(time.Minute))
		t.Cleanup(func() { _ = f.Close() })
		select {
		case <-f.Started():
		case <-time.After(5 * time.Second):
			t.Fatal("a start with a misconfiguration waits")
		}
		if h := f.Health(); !h.Degraded || h.Cause != store.CauseNoPerm {
			t.Fatalf("health %+v, want degraded, noperm", h)
		}
	})
	t.Run("closed", func(t *testing.T) {
		p := &verifying{Store: memstore.New()}
		p.set(causeErr(store.CauseUnreachable), nil)
		f := store.NewFallback(p, memstore.New(), store.WithStartWait(time.Minute))
		errc := make(chan error, 1)
		go func() {
			_, err := f.Admit(context.Background(), store.AdmitRequest{Gate: gate, Now: t0})
			errc <- err
		}()
		time.Sleep(20 * time.Millisecond)
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-errc:
			if !errors.Is(err, store.ErrClosed) {
				t.Fatalf("Admit during a closed start = %v, want ErrClosed", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Close left a call waiting for the start")
		}
	})
}

// TestFallbackStartOnRealRedis: four Fallbacks over one real redis-server,
// made at the same moment with a start wait, all end their start healthy
// (before, their verifications collided on shared reserved keys).
func TestFallbackStartOnRealRedis(t *testing.T) {
	srv := redistest.StartServer(t)
	fs := make([]*store.Fallback, 4)
	for i := range fs {
		rs, err := redisstore.New(context.Background(), srv.URL())
		if err != nil {
			t.Fatal(err)
		}
		fs[i] = store.NewFallback(rs, memstore.New(), store.WithStartWait(5*time.Second))
		t.Cleanup(func() { _ = fs[i].Close() })
	}
	for i, f := range fs {
		select {
		case <-f.Started():
		case <-time.After(10 * time.Second):
			t.Fatalf("replica %d still starting", i)
		}
		if h := f.Health(); h.Degraded {
			t.Errorf("replica %d started degraded: %+v", i, h)
		}
	}
}
