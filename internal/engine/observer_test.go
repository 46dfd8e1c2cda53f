package engine_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/providers"
	"github.com/retrybroker/retrybroker/internal/store"
	"github.com/retrybroker/retrybroker/internal/store/memstore"
)

// callEvent is one CallDone.
type callEvent struct {
	rpc      string
	outcome  engine.Outcome
	attempts int
	d        time.Duration
}

// recordingObserver records the observer events of calls, gates, store
// round trips and streams.
type recordingObserver struct {
	engine.NopObserver
	mu                sync.Mutex
	calls             []callEvent
	closures          []string // source=hold
	trips             map[string]int
	held              int
	open, maxOpen     int
	bytes             int
	ends              []engine.BodyEnd
	negativeRoundTrip bool
}

func newRecordingObserver() *recordingObserver {
	return &recordingObserver{trips: map[string]int{}}
}

func (o *recordingObserver) CallDone(rpc string, outcome engine.Outcome, attempts int, d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, callEvent{rpc, outcome, attempts, d})
}

func (o *recordingObserver) StoreRoundTrip(op string, d time.Duration, failed bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.trips[op+"/"+strconv.FormatBool(failed)]++
	if d < 0 {
		o.negativeRoundTrip = true
	}
}

func (o *recordingObserver) GateClosed(source string, hold time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closures = append(o.closures, source+"="+hold.String())
}

func (o *recordingObserver) GateHeld() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.held++
}

func (o *recordingObserver) StreamOpen(delta int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.open += delta
	o.maxOpen = max(o.maxOpen, o.open)
}

func (o *recordingObserver) StreamBytes(n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.bytes += n
}

func (o *recordingObserver) StreamEnd(end engine.BodyEnd) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ends = append(o.ends, end)
}

// TestObserverCallDoneOnceWithOutcomeAndAttempts: a call retried on a 503's
// 3s hint reports, once, its outcome, its two attempts and its duration on
// the runner's clock with the wait included; the 503 closed its gate for
// the hint's 3s; every store call was observed as a round trip.
func TestObserverCallDoneOnceWithOutcomeAndAttempts(t *testing.T) {
	up := newUpstream(t, reply{status: 503, kv: []string{"Retry-After", "3"}}, reply{status: 200})
	clock := engine.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)) // whole seconds: the store keeps microseconds
	obs := newRecordingObserver()
	r := engine.NewRunner(memstore.New(), engine.WithClock(clock), engine.WithObserver(obs))
	res, err := r.Run(t.Context(), newCall(t, up.URL, "GET", mustPolicy(t, nil), ""))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != engine.OutcomeSuccess || len(res.Attempts) != 2 {
		t.Fatalf("outcome %s after %d attempts", res.Outcome, len(res.Attempts))
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	want := callEvent{"execute", engine.OutcomeSuccess, 2, 3 * time.Second}
	if len(obs.calls) != 1 || obs.calls[0] != want {
		t.Fatalf("CallDone %+v, want once %+v", obs.calls, want)
	}
	if len(obs.closures) != 1 || obs.closures[0] != "hint=3s" {
		t.Fatalf("gate closures %v, want [hint=3s]", obs.closures)
	}
	if obs.trips["admit/false"] != 2 || obs.trips["complete/false"] < 1 || obs.negativeRoundTrip {
		t.Fatalf("store round trips %v (negative %v), want 2 admits and a complete", obs.trips, obs.negativeRoundTrip)
	}
	if obs.ends != nil || obs.maxOpen != 0 {
		t.Fatalf("an Execute call reported stream events: ends %v open %d", obs.ends, obs.maxOpen)
	}
}

// TestObserverQuotaClosure: a 200 that reports its quota used up (GitHub's
// x-ratelimit-remaining 0) closes its gate until the reset, reported as a
// "quota" closure; a call that then finds the gate closed past its
// max_delay ends gate_closed without an attempt, reported once.
func TestObserverQuotaClosure(t *testing.T) {
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	up := newUpstream(t, reply{status: 200, kv: []string{"x-ratelimit-remaining", "0", "x-ratelimit-reset", strconv.FormatInt(start.Add(time.Hour).Unix(), 10)}})
	clock := engine.NewFakeClock(start)
	obs := newRecordingObserver()
	r := engine.NewRunner(memstore.New(), engine.WithClock(clock), engine.WithObserver(obs))
	p := mustPolicy(t, nil)
	for range 2 {
		if _, err := r.Run(t.Context(), newCall(t, up.URL, "GET", p, "github")); err != nil {
			t.Fatal(err)
		}
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if len(obs.closures) != 1 || obs.closures[0] != "quota=1h0m0s" {
		t.Fatalf("gate closures %v, want [quota=1h0m0s]", obs.closures)
	}
	if len(obs.calls) != 2 || obs.calls[0] != (callEvent{"execute", engine.OutcomeSuccess, 1, 0}) ||
		obs.calls[1] != (callEvent{"execute", engine.OutcomeGateClosed, 0, 0}) {
		t.Fatalf("CallDone %+v", obs.calls)
	}
}

// TestObserverStream: a streamed body reports one open stream while it
// flows, its bytes, how it ended, and the call once as "stream".
func TestObserverStream(t *testing.T) {
	body := strings.Repeat("x", 100_000)
	up := newUpstream(t, reply{status: 200, body: body})
	clock := engine.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)) // whole seconds: the store keeps microseconds
	obs := newRecordingObserver()
	r := engine.NewRunner(nil, engine.WithClock(clock), engine.WithObserver(obs))
	res, err := r.Stream(t.Context(), streamCall(t, up.URL, nil), &recordingSink{})
	if err != nil || res.BodyEnd != engine.BodyEndComplete {
		t.Fatalf("end %s: %v", res.BodyEnd, err)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.maxOpen != 1 || obs.open != 0 {
		t.Errorf("streams open peaked at %d and ended at %d, want 1 and 0", obs.maxOpen, obs.open)
	}
	if obs.bytes != len(body) {
		t.Errorf("stream bytes %d, want %d", obs.bytes, len(body))
	}
	if len(obs.ends) != 1 || obs.ends[0] != engine.BodyEndComplete {
		t.Errorf("stream ends %v, want [complete]", obs.ends)
	}
	if len(obs.calls) != 1 || obs.calls[0] != (callEvent{"stream", engine.OutcomeSuccess, 1, 0}) {
		t.Errorf("CallDone %+v", obs.calls)
	}
}

// TestObserverClassifyClosure: ClassifyResponse with a destination records
// a 429's hint through Observe: one observe round trip and a "hint"
// closure.
func TestObserverClassifyClosure(t *testing.T) {
	clock := engine.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)) // whole seconds: the store keeps microseconds
	obs := newRecordingObserver()
	r := engine.NewRunner(memstore.New(), engine.WithClock(clock), engine.WithObserver(obs))
	p := mustPolicy(t, nil)
	_, err := r.Classifier().Classify(t.Context(), &engine.Classification{
		Policy: p, Reader: p.ReaderFor(""),
		Input:       engine.Input{Attempt: 1, Response: &providers.Response{Status: 429, Header: http.Header{"Retry-After": {"20"}}}},
		Destination: &engine.Destination{Tenant: "t1", Host: "api.example.test"},
	})
	if err != nil {
		t.Fatal(err)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.trips["observe/false"] != 1 || len(obs.closures) != 1 || obs.closures[0] != "hint=20s" {
		t.Fatalf("round trips %v closures %v", obs.trips, obs.closures)
	}
}

// heldStore is a memory store whose Admit holds the first held attempts
// (as a gate whose learned quota is used does) and whose Complete fails.
type heldStore struct {
	store.Store
	mu   sync.Mutex
	held int
}

func (s *heldStore) Admit(ctx context.Context, req store.AdmitRequest) (store.Admission, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held > 0 {
		s.held--
		return store.Admission{Held: true, HeldFor: 50 * time.Millisecond}, nil
	}
	return s.Store.Admit(ctx, req)
}

func (s *heldStore) Complete(context.Context, store.CompleteRequest) (store.CompleteResult, error) {
	return store.CompleteResult{}, errors.New("complete refused")
}

// TestObserverGateHeldAndFailedRoundTrip: each held admission is reported
// (GateHeld) and each Admit is a round trip; a Complete that fails is a
// failed round trip; the call still ends once, with its two attempts and
// the two held polls and the hint's wait in its duration.
func TestObserverGateHeldAndFailedRoundTrip(t *testing.T) {
	up := newUpstream(t, reply{status: 503, kv: []string{"Retry-After", "1"}}, reply{status: 200}) // the hint makes a Complete needed
	mem := memstore.New()
	t.Cleanup(func() { _ = mem.Close() })
	st := &heldStore{Store: mem, held: 2}
	clock := engine.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	obs := newRecordingObserver()
	r := engine.NewRunner(st, engine.WithClock(clock), engine.WithObserver(obs))
	p := mustPolicy(t, nil)
	res, err := r.Run(t.Context(), newCall(t, up.URL, "GET", p, ""))
	if err != nil {
		t.Fatal(err)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.held != 2 {
		t.Errorf("GateHeld %d times, want 2", obs.held)
	}
	if obs.trips["admit/false"] != 4 || obs.trips["complete/true"] < 1 || obs.trips["complete/false"] != 0 {
		t.Errorf("round trips %v, want 4 admits and only failed completes", obs.trips)
	}
	want := callEvent{"execute", engine.OutcomeSuccess, 2, time.Second + 100*time.Millisecond}
	if res.Outcome != engine.OutcomeSuccess || len(obs.calls) != 1 || obs.calls[0] != want {
		t.Errorf("outcome %s, CallDone %+v, want once %+v", res.Outcome, obs.calls, want)
	}
}
