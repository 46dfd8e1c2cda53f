package engine_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/store"
	"github.com/retrybroker/retrybroker/internal/store/memstore"
)

func breakerPolicy(t *testing.T, mut func(*engine.Policy)) *engine.Policy {
	return mustPolicy(t, func(p *engine.Policy) {
		p.Breaker = store.BreakerConfig{Enabled: true, MinCalls: 4, FailureRatio: 0.5, Window: 30 * time.Second, OpenFor: 5 * time.Second, MaxOpen: 20 * time.Second}
		if mut != nil {
			mut(p)
		}
	})
}

// TestRunnerWaitsOnAnOpenBreakerThenProbes: four failed attempts open the
// gate's breaker; the next call waits open_for (cause "breaker"), then its
// attempt goes out as the breaker's probe. With a max_delay shorter than
// open_for, a call ends at once with OUTCOME_BREAKER_OPEN and sends nothing.
func TestRunnerWaitsOnAnOpenBreakerThenProbes(t *testing.T) {
	up := newUpstream(t, reply{status: 503})
	clock := engine.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	st := memstore.New()
	defer st.Close()
	f := newFixture(t, clock, st)
	res, err := f.runner.Run(t.Context(), newCall(t, up.URL, "GET", breakerPolicy(t, nil), ""))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != engine.OutcomeAttemptsExhausted || len(res.Attempts) != 4 || up.count() != 4 {
		t.Fatalf("first call: %s after %d attempts (%d arrivals)", res.Outcome, len(res.Attempts), up.count())
	}

	// max_delay 2s < open_for 5s: give up at once, nothing sent.
	short := breakerPolicy(t, func(p *engine.Policy) { p.MaxDelay = 2 * time.Second })
	res, err = f.runner.Run(t.Context(), newCall(t, up.URL, "GET", short, ""))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != engine.OutcomeBreakerOpen || len(res.Attempts) != 0 || up.count() != 4 {
		t.Fatalf("open breaker, short max_delay: %s after %d attempts (%d arrivals)", res.Outcome, len(res.Attempts), up.count())
	}
	if !res.HasRetryAfter || res.RetryAfter <= 0 || res.RetryAfter > 5*time.Second {
		t.Fatalf("retry_after %v (%v), want when the probe may go", res.RetryAfter, res.HasRetryAfter)
	}

	// The default max_delay lets the call wait for the probe slot.
	before := len(clock.Sleeps())
	res, err = f.runner.Run(t.Context(), newCall(t, up.URL, "GET", breakerPolicy(t, func(p *engine.Policy) { p.MaxRetries = 0 }), ""))
	if err != nil {
		t.Fatal(err)
	}
	sleeps := clock.Sleeps()[before:]
	if len(sleeps) == 0 || sleeps[0] <= 0 || sleeps[0] > 5*time.Second {
		t.Fatalf("sleeps %v, want a wait for the open breaker first", sleeps)
	}
	if len(res.Attempts) != 1 || !res.Attempts[0].Probe || up.count() != 5 {
		t.Fatalf("after the wait: %d attempts (probe %v), %d arrivals; want one probe", len(res.Attempts), len(res.Attempts) > 0 && res.Attempts[0].Probe, up.count())
	}
	// The probe failed: the breaker reopens for twice as long.
	gs, err := st.GateState(t.Context(), store.GateKey{Tenant: "t1", Scope: engine.GateScope("", hostOf(up.URL))}, clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if got := gs.BreakerOpenUntil.Sub(clock.Now()); got <= 5*time.Second || got > 10*time.Second {
		t.Fatalf("breaker reopened for %v, want the doubled open_for (10s)", got)
	}
}

// TestRunnerLearnsAndHolds: a refusal with a hint ends the gate's first
// epoch; when the gate reopens, the learned floor (the calls accepted
// before the refusal) is admitted, and the next call goes out as the probe.
func TestRunnerLearnsAndHolds(t *testing.T) {
	clock := engine.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	st := memstore.New()
	defer st.Close()
	f := newFixture(t, clock, st)
	p := mustPolicy(t, func(p *engine.Policy) {
		p.Learning = store.LearningConfig{Enabled: true}
		p.MaxRetries = 0
	})
	// Two calls accepted, then a refusal with Retry-After: 10.
	up := newUpstream(t, reply{status: 200}, reply{status: 200}, reply{status: 429, kv: []string{"Retry-After", "10"}}, reply{status: 200})
	for i := range 3 {
		if _, err := f.runner.Run(t.Context(), newCall(t, up.URL, "GET", p, "")); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
	}
	// The gate is closed for 10 s: a call waits it out, then is one of the
	// L = 2 admitted without probing.
	var probes []bool
	for i := range 3 {
		res, err := f.runner.Run(t.Context(), newCall(t, up.URL, "GET", p, ""))
		if err != nil || len(res.Attempts) != 1 {
			t.Fatalf("call %d after the refusal: %v, %d attempts", i+4, err, len(res.Attempts))
		}
		probes = append(probes, res.Attempts[0].Probe)
	}
	if probes[0] || probes[1] || !probes[2] {
		t.Fatalf("probe flags %v, want [false false true]: two learned, then one probe", probes)
	}
	if s := clock.Sleeps(); len(s) == 0 || s[0] != 10*time.Second {
		t.Fatalf("sleeps %v, want the 10 s gate first", s)
	}
}

func hostOf(rawURL string) string {
	const p = "http://"
	return rawURL[len(p):]
}

// admitCounter counts a store's Admits and has held calls check again
// only after a minute, so that only completions can wake them.
type admitCounter struct {
	store.Store
	admits atomic.Int64
}

func (c *admitCounter) Admit(ctx context.Context, req store.AdmitRequest) (store.Admission, error) {
	c.admits.Add(1)
	adm, err := c.Store.Admit(ctx, req)
	if adm.Held {
		adm.HeldFor = time.Minute
	}
	return adm, err
}

// TestHeldCallsWakeOneByOne: a learning gate whose learned quota is 0
// (its first call was refused) sends its calls one probe at a time. 200
// calls held on it wait in the gate's queue, and each probe's completion
// in this process wakes the queue's head only, not every held call: every
// call is sent, with about two store Admits per call (the head's, and the
// next head's, held while the probe is out; waking all would take about
// 200²/2), and without waiting for a poll (held calls check again only
// after a minute here).
func TestHeldCallsWakeOneByOne(t *testing.T) {
	const n = 200
	mem := memstore.New()
	defer mem.Close()
	st := &admitCounter{Store: mem}
	runner := engine.NewRunner(st, engine.WithHeldPoll(time.Minute))
	p := mustPolicy(t, func(p *engine.Policy) {
		p.Learning = store.LearningConfig{Enabled: true}
		p.MaxRetries = 0
		p.TotalTimeout = 5 * time.Minute
	})
	up := newUpstream(t, reply{status: 429, kv: []string{"Retry-After", "1"}}, reply{status: 200})
	if _, err := runner.Run(t.Context(), newCall(t, up.URL, "GET", p, "")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // the gate reopens; L = 0
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	watchdog := time.AfterFunc(30*time.Second, cancel)
	defer watchdog.Stop()
	before := st.admits.Load()
	var wg sync.WaitGroup
	var ok atomic.Int64
	for range n {
		wg.Go(func() {
			res, err := runner.Run(ctx, newCall(t, up.URL, "GET", p, ""))
			if err == nil && res.Outcome == engine.OutcomeSuccess {
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	if ok.Load() != n {
		t.Fatalf("%d of %d calls succeeded (the watchdog cancels after 30 s: held calls were not woken)", ok.Load(), n)
	}
	admits := st.admits.Load() - before
	t.Logf("%d calls, %d Admits", n, admits)
	if admits > 3*n {
		t.Fatalf("%d store Admits for %d calls, want at most %d: completions wake more than one held call", admits, n, 3*n)
	}
}
