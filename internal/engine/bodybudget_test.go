package engine_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/internal/engine"
)

// budgetObserver signals each call that starts waiting for room in the
// body budget.
type budgetObserver struct {
	engine.NopObserver
	waiting chan struct{}
}

func (o *budgetObserver) Waiting(cause string, d int) {
	if cause == "budget" && d > 0 {
		o.waiting <- struct{}{}
	}
}

// budgetUpstream answers /hold only once release is closed (signalling
// held when the request arrived), and every path with body; it records the
// paths it saw.
type budgetUpstream struct {
	*httptest.Server
	held    chan struct{}
	release chan struct{}
	mu      sync.Mutex
	paths   []string
}

func newBudgetUpstream(t *testing.T, body string) *budgetUpstream {
	u := &budgetUpstream{held: make(chan struct{}, 1), release: make(chan struct{})}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.paths = append(u.paths, r.URL.Path)
		flaky := 0
		for _, p := range u.paths {
			if p == "/flaky" {
				flaky++
			}
		}
		u.mu.Unlock()
		switch {
		case r.URL.Path == "/hold":
			u.held <- struct{}{}
			<-u.release
		case r.URL.Path == "/flaky" && flaky == 1:
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *budgetUpstream) saw() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return strings.Join(u.paths, ",")
}

// TestBodyBudgetRefusesOnlyBeforeSending (issue 17, defect 2): the bodies
// buffered by all Execute calls are bounded by the runner's budget. A call
// reserves its max_response_body before its first attempt; a call that
// cannot get room waits within its deadline, then is refused, and a call
// larger than the whole budget is refused at once: in every case before
// anything was sent. A returned body keeps its room until nothing
// references it.
func TestBodyBudgetRefusesOnlyBeforeSending(t *testing.T) {
	const budget = 1 << 20
	body := strings.Repeat("b", 100<<10) // tracked: kept in the budget while referenced
	up := newBudgetUpstream(t, body)
	obs := &budgetObserver{waiting: make(chan struct{}, 8)}
	r := engine.NewRunner(nil, engine.WithClock(engine.NewFakeClock(time.Unix(1e9, 0))), engine.WithObserver(obs), engine.WithBodyBudget(budget))
	pol := engine.DefaultPolicy()
	pol.MaxResponseBody = 768 << 10 // one call at a time
	call := func(path string, mut func(*engine.Policy)) *engine.Call {
		p := pol
		if mut != nil {
			mut(&p)
		}
		return newCall(t, up.URL+path, http.MethodGet, &p, "")
	}

	// A holds 768 KiB while its upstream answers.
	type outcome struct {
		res *engine.Result
		err error
	}
	aDone := make(chan outcome, 1)
	go func() {
		res, err := r.Run(t.Context(), call("/hold", nil))
		aDone <- outcome{res, err}
	}()
	<-up.held

	// Larger than the whole budget: refused at once.
	_, err := r.Run(t.Context(), call("/huge", func(p *engine.Policy) { p.MaxResponseBody = 2 << 20 }))
	var be *engine.BudgetError
	if !errors.As(err, &be) || be.Waited || be.Need != 2<<20 {
		t.Fatalf("call larger than the budget: %v, want a *BudgetError at once", err)
	}

	// No room within the policy's total timeout: waits, then refused.
	_, err = r.Run(t.Context(), call("/late", func(p *engine.Policy) { p.TotalTimeout = 50 * time.Millisecond }))
	if !errors.As(err, &be) || !be.Waited {
		t.Fatalf("call without room until its deadline: %v, want a *BudgetError after waiting", err)
	}
	<-obs.waiting

	// The caller cancels while waiting: canceled, nothing sent.
	ctx, cancel := context.WithCancel(t.Context())
	cDone := make(chan outcome, 1)
	go func() {
		res, err := r.Run(ctx, call("/canceled", nil))
		cDone <- outcome{res, err}
	}()
	<-obs.waiting
	cancel()
	if c := <-cDone; !errors.Is(c.err, context.Canceled) || c.res.Outcome != engine.OutcomeCanceled || len(c.res.Attempts) != 0 {
		t.Fatalf("canceled while waiting: %v, %+v", c.err, c.res)
	}

	// A call that waits gets room when A ends, within its deadline.
	eDone := make(chan outcome, 1)
	go func() {
		res, err := r.Run(t.Context(), call("/waits", nil))
		eDone <- outcome{res, err}
	}()
	<-obs.waiting
	close(up.release)
	a := <-aDone
	if a.err != nil || a.res.Outcome != engine.OutcomeSuccess || len(a.res.Response.Body) != len(body) {
		t.Fatalf("A: %v, %+v", a.err, a.res)
	}
	// A's body is still referenced: its room is still held, so E waits on.
	select {
	case e := <-eDone:
		t.Fatalf("E ran while A's body was still referenced: %v", e.err)
	default:
	}
	runtime.KeepAlive(a.res.Response.Body)
	a = outcome{}
	e := <-eDone
	if e.err != nil || e.res.Outcome != engine.OutcomeSuccess {
		t.Fatalf("E after waiting: %v, %+v", e.err, e.res)
	}
	if got := up.saw(); got != "/hold,/waits" {
		t.Errorf("upstream saw %q, want /hold,/waits: a refused call sent nothing", got)
	}
	_ = a
}

// TestBodyBudgetFreeWhileWaitingToRetry: a call waiting out a backoff holds
// no room for its response (else a failing provider's retries would hold
// the budget from every other call); it takes the room again before its
// retry.
func TestBodyBudgetFreeWhileWaitingToRetry(t *testing.T) {
	up := newBudgetUpstream(t, "ok")
	// A manual clock: the backoff's timer fires only when the test
	// advances it, once the other call has gone.
	clock := engine.NewManualClock(time.Unix(1e9, 0))
	r := engine.NewRunner(nil, engine.WithClock(clock), engine.WithRand(maxRand{}), engine.WithBodyBudget(1<<20))
	pol := engine.DefaultPolicy()
	pol.MaxResponseBody = 768 << 10 // one call at a time
	done := make(chan error, 1)
	var res *engine.Result
	go func() {
		var err error
		res, err = r.Run(t.Context(), newCall(t, up.URL+"/flaky", http.MethodGet, &pol, ""))
		done <- err
	}()
	// The 503's backoff: its timer is armed.
	for deadline := time.Now().Add(10 * time.Second); clock.Timers() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first call never waited for its retry")
		}
	}
	short := pol
	short.TotalTimeout = 5 * time.Second // bounds the failure on a budget held through waits
	other, err := r.Run(t.Context(), newCall(t, up.URL+"/other", http.MethodGet, &short, ""))
	if err != nil || other.Outcome != engine.OutcomeSuccess {
		t.Fatalf("a call while another waits to retry: %v, %+v", err, other)
	}
	clock.Advance(time.Minute) // the backoff ends
	if err := <-done; err != nil || res.Outcome != engine.OutcomeSuccess || len(res.Attempts) != 2 {
		t.Fatalf("the retried call: %v, %+v", err, res)
	}
	if got := up.saw(); got != "/flaky,/other,/flaky" {
		t.Errorf("upstream saw %q", got)
	}
}
