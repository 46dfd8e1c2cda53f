package engine_test

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/store"
	"github.com/retrybroker/retrybroker/internal/store/memstore"
)

// TestGateClosedByHintBlocksOtherCalls: a 429 with a long hint closes the
// gate; a later call to the same host returns at once without reaching the
// upstream when the reopening does not fit, and waits when it does.
func TestGateClosedByHintBlocksOtherCalls(t *testing.T) {
	up := newUpstream(t, reply{status: 429, kv: []string{"Retry-After", "120"}}, reply{status: 200})
	clock := engine.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	st := memstore.New()
	defer st.Close()
	f := newFixture(t, clock, st)
	p := mustPolicy(t, nil)
	res, err := f.runner.Run(t.Context(), newCall(t, up.URL, "GET", p, ""))
	if err != nil || res.Outcome != engine.OutcomeHintExceedsMaxDelay {
		t.Fatalf("first call: %v %v", err, res.Outcome)
	}
	clock.Advance(10 * time.Second)
	res, err = f.runner.Run(t.Context(), newCall(t, up.URL, "GET", p, ""))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != engine.OutcomeGateClosed || res.RetryAfter != 110*time.Second || len(res.Attempts) != 0 {
		t.Fatalf("second call outcome %s retry_after %v attempts %d", res.Outcome, res.RetryAfter, len(res.Attempts))
	}
	if up.count() != 1 {
		t.Fatalf("upstream saw %d calls; the closed gate must spend none", up.count())
	}
	// A policy willing to wait 5 minutes waits for the gate, then sends.
	patient := mustPolicy(t, func(p *engine.Policy) { p.MaxDelay = 5 * time.Minute; p.TotalTimeout = 10 * time.Minute })
	res, err = f.runner.Run(t.Context(), newCall(t, up.URL, "GET", patient, ""))
	if err != nil || res.Outcome != engine.OutcomeSuccess {
		t.Fatalf("patient call: %v %v", err, res.Outcome)
	}
	if res.Attempts[0].Waited != 110*time.Second {
		t.Fatalf("waited %v for the gate, want 110s", res.Attempts[0].Waited)
	}
	// Another tenant is not affected by tenant t1's gate.
	up2 := newUpstream(t, reply{status: 200})
	c := newCall(t, up2.URL, "GET", p, "")
	c.Tenant = "t2"
	if res, err := f.runner.Run(t.Context(), c); err != nil || res.Outcome != engine.OutcomeSuccess {
		t.Fatalf("other tenant: %v %v", err, res.Outcome)
	}
}

// TestQuotaClosesGateBeforeRefusal: a successful GitHub response reporting
// remaining 0 closes the gate until the reset, before any refusal.
func TestQuotaClosesGateBeforeRefusal(t *testing.T) {
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	reset := strconv.FormatInt(start.Add(40*time.Second).Unix(), 10)
	up := newUpstream(t, reply{status: 200, kv: []string{"x-ratelimit-remaining", "0", "x-ratelimit-reset", reset}})
	clock := engine.NewFakeClock(start)
	st := memstore.New()
	defer st.Close()
	f := newFixture(t, clock, st)
	p := mustPolicy(t, func(p *engine.Policy) { p.MaxDelay = 10 * time.Second })
	if res, err := f.runner.Run(t.Context(), newCall(t, up.URL, "GET", p, "github")); err != nil || res.Outcome != engine.OutcomeSuccess {
		t.Fatalf("first: %v %v", err, res.Outcome)
	}
	res, err := f.runner.Run(t.Context(), newCall(t, up.URL, "GET", p, "github"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != engine.OutcomeGateClosed || res.RetryAfter != 40*time.Second || up.count() != 1 {
		t.Fatalf("outcome %s retry_after %v upstream %d", res.Outcome, res.RetryAfter, up.count())
	}
}

func TestRetryBudgetSkipsRetries(t *testing.T) {
	up := newUpstream(t, reply{status: 503})
	clock := engine.NewFakeClock(time.Now())
	st := memstore.New()
	defer st.Close()
	f := newFixture(t, clock, st)
	p := mustPolicy(t, func(p *engine.Policy) {
		p.Budget = store.BudgetConfig{Ratio: 0, FloorPerSecond: 0.2, Window: 10 * time.Second} // 2 retries per window
	})
	c := newCall(t, up.URL, "GET", p, "")
	res, err := f.runner.Run(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != engine.OutcomeRetryBudgetExhausted || len(res.Attempts) != 3 {
		t.Fatalf("outcome %s after %d attempts, want budget exhausted after 3", res.Outcome, len(res.Attempts))
	}
	// The next call still sends its first attempt, but no retry.
	res, err = f.runner.Run(t.Context(), c)
	if err != nil || len(res.Attempts) != 1 || res.Outcome != engine.OutcomeRetryBudgetExhausted {
		t.Fatalf("second call: %v, %d attempts, %s", err, len(res.Attempts), res.Outcome)
	}
}

func TestPacingWaitsOrRefuses(t *testing.T) {
	up := newUpstream(t, reply{status: 200})
	clock := engine.NewFakeClock(time.Now())
	st := memstore.New()
	defer st.Close()
	f := newFixture(t, clock, st)
	p := mustPolicy(t, func(p *engine.Policy) {
		p.TotalTimeout = 3 * time.Second
		p.Pace = store.PaceConfig{Rate: 1, Burst: 1}
	})
	c := newCall(t, up.URL, "GET", p, "")
	for i := range 3 {
		res, err := f.runner.Run(t.Context(), c)
		if err != nil || res.Outcome != engine.OutcomeSuccess {
			t.Fatalf("call %d: %v %v", i+1, err, res.Outcome)
		}
	}
	if s := clock.Sleeps(); len(s) != 2 || s[0] != time.Second || s[1] != time.Second {
		t.Fatalf("pacing sleeps %v, want [1s 1s]", s)
	}
	// Burst the bucket with a total timeout too short for the next slot.
	short := mustPolicy(t, func(p *engine.Policy) {
		p.TotalTimeout = 500 * time.Millisecond
		p.Pace = store.PaceConfig{Rate: 1, Burst: 1}
	})
	c2 := newCall(t, up.URL, "GET", short, "")
	_, err := f.runner.Run(t.Context(), c2)
	var pe *engine.PacingError
	if !errors.As(err, &pe) || pe.Wait <= 0 {
		t.Fatalf("err = %v, want *PacingError with a wait", err)
	}
}
