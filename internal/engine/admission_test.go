package engine_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/store"
	"github.com/retrybroker/retrybroker/internal/store/memstore"
)

// callIndex keys a test call's number in its context, for orderStore.
type callIndex struct{}

// ask is one Admit an orderStore answered: the call's number and the clock.
type ask struct {
	call int
	now  time.Time
}

// orderStore is a store for admission-order tests: its gate is closed
// until reopen; from then on it admits up to quota calls, recording their
// numbers in order, and holds the others (HeldFor a minute), so that only
// the test's clock or a completion here wakes them. The order logic under
// test is the engine's: the store only counts. Everything else is a
// memory store's.
type orderStore struct {
	store.Store
	mu      sync.Mutex
	reopen  time.Time
	quota   int
	heldFor time.Duration
	closeTo time.Time // when set, the gate re-closes until closeTo at its reopening
	// stall, when set, makes an Admit at or after the reopening wait until
	// it is closed (a slow store), after counting its ask.
	stall    chan struct{}
	asks     []ask
	admitted []int
}

func newOrderStore(t *testing.T, reopen time.Time, quota int) *orderStore {
	mem := memstore.New()
	t.Cleanup(func() { _ = mem.Close() })
	return &orderStore{Store: mem, reopen: reopen, quota: quota, heldFor: time.Minute}
}

func (s *orderStore) Admit(ctx context.Context, req store.AdmitRequest) (store.Admission, error) {
	i, _ := ctx.Value(callIndex{}).(int)
	s.mu.Lock()
	if s.stall != nil && !req.Now.Before(s.reopen) {
		stall := s.stall
		s.asks = append(s.asks, ask{i, req.Now})
		s.mu.Unlock()
		<-stall
		s.mu.Lock()
		s.asks = s.asks[:len(s.asks)-1] // counted once, below
	}
	defer s.mu.Unlock()
	s.asks = append(s.asks, ask{i, req.Now})
	if !s.closeTo.IsZero() && !req.Now.Before(s.reopen) {
		s.reopen, s.closeTo = s.closeTo, time.Time{}
	}
	if req.Now.Before(s.reopen) {
		return store.Admission{GateClosedUntil: s.reopen}, nil
	}
	if len(s.admitted) < s.quota {
		s.admitted = append(s.admitted, i)
		return store.Admission{}, nil
	}
	return store.Admission{Held: true, HeldFor: s.heldFor}, nil
}

func (s *orderStore) Complete(context.Context, store.CompleteRequest) (store.CompleteResult, error) {
	return store.CompleteResult{RetryAllowed: true}, nil
}

func (s *orderStore) counts() (asks, admitted int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.asks), len(s.admitted)
}

func (s *orderStore) setQuota(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.quota = n
}

// waitObserver counts the calls parked in a wait.
type waitObserver struct {
	engine.NopObserver
	waiting atomic.Int64
}

func (o *waitObserver) Waiting(_ string, delta int) { o.waiting.Add(int64(delta)) }

// queueFixture runs calls through one runner on a manual clock.
type queueFixture struct {
	t      *testing.T
	clock  *engine.FakeClock
	st     *orderStore
	obs    *waitObserver
	runner *engine.Runner
	url    string
	wg     sync.WaitGroup
	mu     sync.Mutex
	done   map[int]*engine.Result
	ends   map[int]time.Time // the clock when each call ended
}

func newQueueFixture(t *testing.T, st *orderStore, clock *engine.FakeClock) *queueFixture {
	up := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(up.Close)
	obs := &waitObserver{}
	f := &queueFixture{
		t: t, clock: clock, st: st, obs: obs, url: up.URL,
		runner: engine.NewRunner(st, engine.WithClock(clock), engine.WithObserver(obs)),
		done:   map[int]*engine.Result{}, ends: map[int]time.Time{},
	}
	t.Cleanup(f.wg.Wait)
	return f
}

// start runs call i with policy p under ctx.
func (f *queueFixture) start(ctx context.Context, i int, p *engine.Policy) {
	c := newCall(f.t, f.url, "GET", p, "")
	f.wg.Go(func() {
		res, err := f.runner.Run(context.WithValue(ctx, callIndex{}, i), c)
		if err != nil && ctx.Err() == nil {
			f.t.Errorf("call %d: %v", i, err)
		}
		f.mu.Lock()
		f.done[i], f.ends[i] = res, f.clock.Now()
		f.mu.Unlock()
	})
}

func (f *queueFixture) finished() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.done)
}

func (f *queueFixture) result(i int) (*engine.Result, time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.done[i], f.ends[i]
}

// until waits (in real time, bounded) for the calls to reach cond.
func (f *queueFixture) until(what string, cond func() bool) {
	f.t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			asks, admitted := f.st.counts()
			f.t.Fatalf("%s: not reached in 20 s (%d waiting, %d finished, %d asks, %d admitted)", what, f.obs.waiting.Load(), f.finished(), asks, admitted)
		}
	}
}

func longPolicy(t *testing.T) *engine.Policy {
	return mustPolicy(t, func(p *engine.Policy) {
		p.MaxRetries = 0
		p.TotalTimeout = 10 * time.Minute
		p.MaxDelay = 10 * time.Minute
	})
}

// TestAdmissionOrderAtAGate (issue 18, items 1-2): 100 calls start on a
// gate closed until T; only the first asks the store before T, the others
// queue behind it. At T the queue's head asks, and each admitted call
// passes the turn on at once: exactly the first 50 by arrival are
// admitted, in arrival order, one store call each, and the 51st is held.
// Held again at its next poll, it keeps its place; fresh calls arriving
// meanwhile queue behind the held ones without asking the store; when the
// store admits again, everyone goes in arrival order. Before, every call
// asked the store at once and again at T (the first to reach it won), and
// a re-held call went to the back of the queue.
func TestAdmissionOrderAtAGate(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	reopen := t0.Add(10 * time.Second)
	clock := engine.NewManualClock(t0)
	st := newOrderStore(t, reopen, 50)
	f := newQueueFixture(t, st, clock)
	p := longPolicy(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	for i := range 100 {
		f.start(ctx, i, p)
		f.until("call parks", func() bool { return f.obs.waiting.Load() == int64(i+1) })
	}
	if asks, _ := st.counts(); asks != 1 {
		t.Fatalf("%d store Admits before the reopening, want 1 (the queue's head)", asks)
	}

	clock.Advance(10 * time.Second)
	// 50 admitted, then the 51st asks and is held.
	f.until("first 50 admitted", func() bool {
		asks, _ := st.counts()
		return asks == 52 && f.finished() == 50 && f.obs.waiting.Load() == 50
	})
	st.mu.Lock()
	admitted := slices.Clone(st.admitted)
	asks := slices.Clone(st.asks)
	st.mu.Unlock()
	if want := seq(0, 50); !slices.Equal(admitted, want) {
		t.Fatalf("admitted %v, want the first 50 by arrival, in order", admitted)
	}
	for _, a := range asks[1:] {
		if a.now.Before(reopen) {
			t.Fatalf("call %d asked the store at %v, before the reopening", a.call, a.now)
		}
	}
	if asks[51].call != 50 {
		t.Fatalf("call %d asked after the 50th admission, want call 50 (the next by arrival)", asks[51].call)
	}

	// The next poll: the head asks, is held again, and keeps its place.
	clock.Advance(time.Minute)
	f.until("head asks again", func() bool { a, _ := st.counts(); return a == 53 && f.obs.waiting.Load() == 50 })
	st.mu.Lock()
	again := st.asks[52].call
	st.mu.Unlock()
	if again != 50 {
		t.Fatalf("call %d asked at the poll, want call 50 (the head, kept in place)", again)
	}
	// Fresh calls queue behind the held ones: they do not ask the store.
	for i := 100; i < 110; i++ {
		f.start(ctx, i, p)
		f.until("fresh call parks", func() bool { return f.obs.waiting.Load() == int64(50+i-99) })
	}
	if a, _ := st.counts(); a != 53 {
		t.Fatalf("%d store Admits after 10 fresh calls, want 53: a fresh call asked ahead of the held ones", a)
	}

	// The store admits again: the chain runs through the queue in order.
	st.setQuota(1000)
	clock.Advance(time.Minute)
	f.until("all admitted", func() bool { return f.finished() == 110 })
	st.mu.Lock()
	admitted, n := slices.Clone(st.admitted), len(st.asks)
	st.mu.Unlock()
	if want := seq(0, 110); !slices.Equal(admitted, want) {
		t.Fatalf("admitted %v, want arrival order", admitted)
	}
	if n != 53+60 {
		t.Fatalf("%d store Admits, want %d: one per admission after the poll", n, 53+60)
	}
	for i := range 110 {
		if res, _ := f.result(i); res.Outcome != engine.OutcomeSuccess {
			t.Fatalf("call %d: %s", i, res.Outcome)
		}
	}
}

func seq(from, to int) []int {
	s := make([]int, 0, to-from)
	for i := from; i < to; i++ {
		s = append(s, i)
	}
	return s
}

// TestParkedCallsHaveNoGoroutineOfTheirOwn (issue 18, item 3): 1,000
// calls held on a gate wait without a goroutine per wait: at most one
// goroutine per call (the caller's), and only the head asks the store.
// Before, every held wait started one more to turn its wake channel into a
// cancel.
func TestParkedCallsHaveNoGoroutineOfTheirOwn(t *testing.T) {
	const n = 1000
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clock := engine.NewManualClock(t0)
	st := newOrderStore(t, t0, 0) // open, but holds every call
	f := newQueueFixture(t, st, clock)
	p := longPolicy(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	base := runtime.NumGoroutine()
	for i := range n {
		f.start(ctx, i, p)
	}
	f.until("calls park", func() bool { return f.obs.waiting.Load() == n })
	got := runtime.NumGoroutine() - base
	t.Logf("%d calls parked: %d goroutines more than before; %d store Admits; %d timers", n, got, len(st.asks), clock.Timers())
	if got > n+5 {
		t.Fatalf("%d goroutines for %d parked calls, want at most one per call", got, n)
	}
	// One timer per parked call, for its own deadline (the head's also
	// for the gate's time): a call whose turn does not come in time
	// leaves by it. No goroutine waits on them.
	// (A call counts as waiting just before it arms its timer: wait for
	// them; f.until fails the test after 20 s.)
	f.until("every parked call arms one timer", func() bool { return clock.Timers() == n })
	if a, _ := st.counts(); a != 1 {
		t.Fatalf("%d store Admits, want 1 (only the head asks)", a)
	}
	cancel()
	f.until("calls end", func() bool { return f.finished() == n })
}

// TestQueuedCallsEndBeforeTheirDeadline (issue 18, item 2): a call waiting
// in a gate's queue is never held past the point where it could still be
// sent: when the gate's time (its reopening, or the head's next poll)
// would come at or after its deadline, it ends at once with
// OUTCOME_GATE_CLOSED and the gate's time as retry_after, before the
// deadline; a reopening time that moves past the deadline ends it then.
func TestQueuedCallsEndBeforeTheirDeadline(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	short := func(d time.Duration) *engine.Policy {
		return mustPolicy(t, func(p *engine.Policy) {
			p.MaxRetries = 0
			p.TotalTimeout = d
		})
	}
	t.Run("held: the poll passes the deadline", func(t *testing.T) {
		clock := engine.NewManualClock(t0)
		st := newOrderStore(t, t0, 0)
		st.heldFor = 100 * time.Millisecond
		f := newQueueFixture(t, st, clock)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		f.start(ctx, 0, longPolicy(t))
		f.until("head parks", func() bool { return f.obs.waiting.Load() == 1 })
		f.start(ctx, 1, short(time.Second))
		f.until("short call parks", func() bool { return f.obs.waiting.Load() == 2 })
		for step := 0; f.finished() == 0; step++ {
			if step > 20 {
				t.Fatal("the short call is still waiting after 2 s of polls")
			}
			before, _ := st.counts()
			clock.Advance(100 * time.Millisecond)
			f.until("head polls", func() bool {
				a, _ := st.counts()
				return a > before && (f.obs.waiting.Load() == 2 || f.finished() == 1)
			})
		}
		res, at := f.result(1)
		if res == nil {
			t.Fatal("the long call ended instead of the short one")
		}
		if res.Outcome != engine.OutcomeGateClosed || !res.HasRetryAfter || res.RetryAfter <= 0 || res.RetryAfter > 100*time.Millisecond {
			t.Fatalf("short call: %s, retry_after %v (%v); want gate_closed with the next poll", res.Outcome, res.RetryAfter, res.HasRetryAfter)
		}
		if !at.Before(t0.Add(time.Second)) {
			t.Fatalf("short call ended at %v, not before its deadline %v", at, t0.Add(time.Second))
		}
		cancel()
	})
	t.Run("closed: a fresh call whose deadline is before the reopening", func(t *testing.T) {
		clock := engine.NewManualClock(t0)
		st := newOrderStore(t, t0.Add(10*time.Second), 100)
		f := newQueueFixture(t, st, clock)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		f.start(ctx, 0, longPolicy(t))
		f.until("head parks", func() bool { return f.obs.waiting.Load() == 1 })
		f.start(ctx, 1, short(5*time.Second))
		f.until("short call ends", func() bool { return f.finished() == 1 })
		res, _ := f.result(1)
		if res.Outcome != engine.OutcomeGateClosed || res.RetryAfter != 10*time.Second {
			t.Fatalf("short call: %s, retry_after %v; want gate_closed with the reopening (10 s)", res.Outcome, res.RetryAfter)
		}
		if a, _ := st.counts(); a != 1 {
			t.Fatalf("%d store Admits, want 1", a)
		}
		cancel()
	})
	t.Run("closed: the turn does not come before the deadline", func(t *testing.T) {
		// At the reopening the head asks a store that does not answer
		// (the calls ahead asking one by one, on a loaded store): a call
		// queued behind it leaves at its deadline less the answer reserve
		// (5% of its 5 s: 250 ms), with the gate's time (now) as
		// retry_after, without asking; before, it waited in the queue
		// until its caller's deadline cut it, and its caller learned
		// nothing.
		clock := engine.NewManualClock(t0)
		st := newOrderStore(t, t0.Add(4*time.Second), 100)
		st.stall = make(chan struct{})
		f := newQueueFixture(t, st, clock)
		release := sync.OnceFunc(func() { close(st.stall) })
		t.Cleanup(release) // before the fixture's wait for its calls
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		f.start(ctx, 0, longPolicy(t))
		f.until("head parks", func() bool { return f.obs.waiting.Load() == 1 })
		began := time.Now()
		f.start(ctx, 1, short(5*time.Second))
		f.until("short call parks", func() bool { return f.obs.waiting.Load() == 2 })
		clock.Advance(4 * time.Second)
		f.until("the head asks", func() bool { a, _ := st.counts(); return a == 2 })
		clock.Advance(700 * time.Millisecond) // t0+4.7s: before the reserve
		clock.Advance(100 * time.Millisecond) // t0+4.8s: in it
		f.until("short call ends", func() bool { return f.finished() == 1 })
		res, at := f.result(1)
		if res == nil || res.Outcome != engine.OutcomeGateClosed || !res.HasRetryAfter || res.RetryAfter != 0 || len(res.Attempts) != 0 {
			t.Fatalf("short call: %+v; want gate_closed, retry_after 0, no attempt", res)
		}
		if !at.Equal(t0.Add(4800 * time.Millisecond)) {
			t.Fatalf("short call ended at %v, want at t0+4.8s (its deadline less 250 ms has passed)", at)
		}
		if real := time.Since(began); real >= 5*time.Second {
			t.Fatalf("short call ended after %s of real time: its real total timeout, not the reserve, ended it", real)
		}
		release()
		f.until("head ends", func() bool { return f.finished() == 2 })
		if res, _ := f.result(0); res.Outcome != engine.OutcomeSuccess {
			t.Fatalf("head: %s", res.Outcome)
		}
		if a, _ := st.counts(); a != 2 {
			t.Fatalf("%d store Admits, want 2 (the head's): the short call must not ask", a)
		}
		cancel()
	})
	t.Run("closed: the gate re-closes past the deadline", func(t *testing.T) {
		clock := engine.NewManualClock(t0)
		st := newOrderStore(t, t0.Add(time.Second), 100)
		st.closeTo = t0.Add(5 * time.Second) // at the reopening, the store says: closed again until t0+5s
		f := newQueueFixture(t, st, clock)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		f.start(ctx, 0, longPolicy(t))
		f.until("head parks", func() bool { return f.obs.waiting.Load() == 1 })
		f.start(ctx, 1, short(3*time.Second))
		f.until("short call parks", func() bool { return f.obs.waiting.Load() == 2 })
		clock.Advance(time.Second)
		f.until("short call ends", func() bool { return f.finished() == 1 })
		res, at := f.result(1)
		if res == nil || res.Outcome != engine.OutcomeGateClosed || res.RetryAfter != 4*time.Second {
			t.Fatalf("short call: %+v; want gate_closed with the new reopening (4 s)", res)
		}
		if !at.Equal(t0.Add(time.Second)) {
			t.Fatalf("short call ended at %v, want at once (%v)", at, t0.Add(time.Second))
		}
		cancel()
	})
}

// TestDrainEndsQueuedCallsAtOnce (issue 17, defect 8): when the drain
// begins, calls parked on a gate (the queue's head waiting for the
// reopening, calls queued behind it, calls held) end at once with
// OUTCOME_SHUTTING_DOWN and the gate's time as retry_after, even though
// the gate reopens long before the drain deadline. Before, waits that
// ended before the deadline went on, so a gate that kept re-closing held
// the shutdown until its deadline.
func TestDrainEndsQueuedCallsAtOnce(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clock := engine.NewManualClock(t0)
	st := newOrderStore(t, t0.Add(time.Second), 100)
	f := newQueueFixture(t, st, clock)
	p := longPolicy(t)
	for i := range 10 {
		f.start(t.Context(), i, p)
		f.until("call parks", func() bool { return f.obs.waiting.Load() == int64(i+1) })
	}
	f.runner.Drain(time.Now().Add(15 * time.Second))
	f.until("parked calls end", func() bool { return f.finished() == 10 })
	for i := range 10 {
		res, _ := f.result(i)
		if res.Outcome != engine.OutcomeShuttingDown || !res.HasRetryAfter || res.RetryAfter != time.Second || len(res.Attempts) != 0 {
			t.Fatalf("call %d: %s, retry_after %v (%v), %d attempts; want shutting_down with the gate's 1 s", i, res.Outcome, res.RetryAfter, res.HasRetryAfter, len(res.Attempts))
		}
	}
	if a, _ := st.counts(); a != 1 {
		t.Fatalf("%d store Admits, want 1", a)
	}
}

// TestReopeningIsNoHerd (issue 18, item 1): 100 calls started at once on a
// closed gate: at the reopening the store is asked 51 times (50 admitted
// in a chain, then the 51st held), not once per waiting call, and never
// before the gate's time but by the calls that found no queue yet.
func TestReopeningIsNoHerd(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	reopen := t0.Add(10 * time.Second)
	clock := engine.NewManualClock(t0)
	st := newOrderStore(t, reopen, 50)
	f := newQueueFixture(t, st, clock)
	p := longPolicy(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	for i := range 100 {
		f.start(ctx, i, p)
	}
	f.until("calls park", func() bool { return f.obs.waiting.Load() == 100 })
	before, _ := st.counts()
	clock.Advance(10 * time.Second)
	f.until("50 admitted", func() bool {
		asks, _ := st.counts()
		return asks == before+51 && f.finished() == 50 && f.obs.waiting.Load() == 50
	})
	t.Logf("%d store Admits before the reopening (calls that found no queue yet), 51 at it", before)
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, a := range st.asks[before:] {
		if a.now.Before(reopen) {
			t.Fatalf("call %d asked at %v, before the reopening", a.call, a.now)
		}
	}
}

// TestDrainEndsAShortWaitAtOnce (issue 17, defect 8): a call parked in a
// hint wait that would end long before the drain deadline ends at once
// when the drain begins, with what was left of the wait as retry_after: it
// has nothing in flight. Before, it waited on, sent again, and could be
// parked again (a re-closing gate held the shutdown until its deadline).
func TestDrainEndsAShortWaitAtOnce(t *testing.T) {
	up := newUpstream(t, reply{status: 503, kv: []string{"Retry-After", "2"}})
	clock := engine.NewManualClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	obs := &waitObserver{}
	runner := engine.NewRunner(nil, engine.WithClock(clock), engine.WithObserver(obs))
	done := make(chan *engine.Result, 1)
	go func() {
		res, err := runner.Run(t.Context(), newCall(t, up.URL, "GET", mustPolicy(t, nil), ""))
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	waitFor(t, func() bool { return obs.waiting.Load() == 1 })
	clock.Advance(500 * time.Millisecond)
	runner.Drain(time.Now().Add(15 * time.Second))
	select {
	case res := <-done:
		if res.Outcome != engine.OutcomeShuttingDown || len(res.Attempts) != 1 || !res.HasRetryAfter || res.RetryAfter != 1500*time.Millisecond {
			t.Fatalf("outcome %s, %d attempts, retry_after %v (%v); want shutting_down after 1 attempt with 1.5 s left", res.Outcome, len(res.Attempts), res.RetryAfter, res.HasRetryAfter)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the parked call did not end when the drain began")
	}
	if up.count() != 1 {
		t.Fatalf("%d sends, want 1", up.count())
	}
}

// recordingStore records, for a real store, which calls (by the number in
// their context) it admitted, in order.
type recordingStore struct {
	store.Store
	mu       sync.Mutex
	admitted []int
	asks     int
}

func (s *recordingStore) Admit(ctx context.Context, req store.AdmitRequest) (store.Admission, error) {
	adm, err := s.Store.Admit(ctx, req)
	if i, ok := ctx.Value(callIndex{}).(int); ok {
		s.mu.Lock()
		s.asks++
		if err == nil && adm.Admitted() {
			s.admitted = append(s.admitted, i)
		}
		s.mu.Unlock()
	}
	return adm, err
}

// TestAdmissionOrderWithALearnedQuota (issue 18, item 1): the same rule
// over the memory store's learning: a gate refused after 50 accepted calls
// learned L = 50 and is closed until T. 100 calls queued on it: at T the
// first 50 by arrival are admitted, in arrival order, and the 51st is held
// (the probe waits for the 50 to be back); none is admitted before T.
func TestAdmissionOrderWithALearnedQuota(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	reopen := t0.Add(10 * time.Second)
	mem := memstore.New()
	t.Cleanup(func() { _ = mem.Close() })
	p := mustPolicy(t, func(p *engine.Policy) {
		p.MaxRetries = 0
		p.TotalTimeout = 10 * time.Minute
		p.MaxDelay = 10 * time.Minute
		// The first-window rule (a scout) is the store's, tested there:
		// this test teaches L with a fresh epoch that admits every call.
		p.Learning = store.LearningConfig{Enabled: true, FirstWindowOff: true}
	})
	release := make(chan struct{})
	var releaseOnce sync.Once
	up := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select { // the admitted calls stay out until the test has looked
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(up.Close)
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	// Teach L = 50: a fresh epoch of 51 calls, the first refused with a
	// hint until reopen.
	gate := store.GateKey{Tenant: "t1", Scope: engine.GateScope("", hostOf(up.URL))}
	var tickets []store.Ticket
	for i := range 51 {
		adm, err := mem.Admit(t.Context(), store.AdmitRequest{Gate: gate, Learning: p.Learning, Now: t0.Add(time.Duration(i) * time.Millisecond)})
		if err != nil || !adm.Admitted() {
			t.Fatalf("teaching call %d: %+v, %v", i, adm, err)
		}
		tickets = append(tickets, adm.Ticket)
	}
	if _, err := mem.Complete(t.Context(), store.CompleteRequest{
		Gate: gate, Ticket: tickets[0], Result: store.ResultRefused, Obs: store.Observation{CloseUntil: reopen},
		Learning: p.Learning, MaxGate: p.MaxGate, Now: t0.Add(100 * time.Millisecond),
	}); err != nil {
		t.Fatal(err)
	}

	clock := engine.NewManualClock(t0.Add(time.Second))
	st := &recordingStore{Store: mem}
	obs := &waitObserver{}
	f := &queueFixture{
		t: t, clock: clock, obs: obs, url: up.URL,
		runner: engine.NewRunner(st, engine.WithClock(clock), engine.WithObserver(obs)),
		done:   map[int]*engine.Result{}, ends: map[int]time.Time{},
	}
	t.Cleanup(f.wg.Wait)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	for i := range 100 {
		f.start(ctx, i, p)
		for deadline := time.Now().Add(20 * time.Second); obs.waiting.Load() != int64(i+1); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("call %d did not park", i)
			}
		}
	}
	st.mu.Lock()
	if st.asks != 1 || len(st.admitted) != 0 {
		t.Fatalf("before the reopening: %d store Admits, %d admitted; want 1 and 0", st.asks, len(st.admitted))
	}
	st.mu.Unlock()
	clock.Advance(9 * time.Second)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(time.Millisecond) {
		st.mu.Lock()
		asks := st.asks
		st.mu.Unlock()
		if asks == 52 && obs.waiting.Load() == 50 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the reopening: %d store Admits, %d waiting; want 52 and 50", asks, obs.waiting.Load())
		}
	}
	st.mu.Lock()
	admitted := slices.Clone(st.admitted)
	st.mu.Unlock()
	if !slices.Equal(admitted, seq(0, 50)) {
		t.Fatalf("admitted %v, want the first 50 by arrival, in order", admitted)
	}
	cancel()
	releaseOnce.Do(func() { close(release) })
	for deadline := time.Now().Add(20 * time.Second); f.finished() < 100; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 100 calls ended", f.finished())
		}
	}
}
