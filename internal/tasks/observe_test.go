package tasks_test

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/store/memstore"
	"github.com/retrybroker/retrybroker/internal/tasks"
)

// TestDispatchSpanLinksToCreateAcrossRestart: a task created in a span
// (the CreateTask call's) by one store and dispatched by another store on
// the same file, with another tracer provider (a restarted broker), runs
// in a new root span task.dispatch that links to the create span; the
// engine's attempt span is its child.
func TestDispatchSpanLinksToCreateAcrossRestart(t *testing.T) {
	up := newUpstream(t, reply{status: 200})
	path := filepath.Join(t.TempDir(), "tasks.db")
	p := policy(t, nil)

	createTP := sdktrace.NewTracerProvider()
	cctx, createSpan := createTP.Tracer("test").Start(t.Context(), "CreateTask")
	first, err := tasks.OpenSQLite(t.Context(), path, engine.NewRunner(memstore.New()), prepareWith(t, p))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := first.Create(cctx, tasks.NewTask{Tenant: "a", ID: "tr", NotBefore: time.Now().Add(500 * time.Millisecond), Request: request(t, "GET", up.URL)}); err != nil {
		t.Fatal(err)
	}
	createSpan.End()
	if err := first.Close(t.Context()); err != nil {
		t.Fatal(err)
	}

	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	s, err := tasks.OpenSQLite(t.Context(), path, engine.NewRunner(memstore.New(), engine.WithTracer(tp.Tracer("engine"))), prepareWith(t, p),
		tasks.WithPollInterval(50*time.Millisecond), tasks.WithTracer(tp.Tracer("tasks")))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Close(ctx)
	})
	if done := waitFor(t, s, "a", "tr", final); done.State != tasks.StateSucceeded {
		t.Fatalf("task %s", done.State)
	}
	var dispatch, attempt sdktrace.ReadOnlySpan
	for deadline := time.Now().Add(10 * time.Second); dispatch == nil || attempt == nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("spans: dispatch %v, attempt %v", dispatch, attempt)
		}
		for _, sp := range rec.Ended() {
			switch sp.Name() {
			case "task.dispatch":
				dispatch = sp
			case "GET":
				attempt = sp
			}
		}
	}
	want := createSpan.SpanContext()
	if dispatch.Parent().IsValid() || dispatch.SpanContext().TraceID() == want.TraceID() {
		t.Fatalf("task.dispatch is not a new root: parent %v, trace %s", dispatch.Parent(), dispatch.SpanContext().TraceID())
	}
	links := dispatch.Links()
	if len(links) != 1 || links[0].SpanContext.TraceID() != want.TraceID() || links[0].SpanContext.SpanID() != want.SpanID() {
		t.Fatalf("task.dispatch links %+v, want the create span %s/%s", links, want.TraceID(), want.SpanID())
	}
	if attempt.Parent().SpanID() != dispatch.SpanContext().SpanID() || attempt.SpanContext().TraceID() != dispatch.SpanContext().TraceID() {
		t.Fatalf("the attempt span's parent is %s, want task.dispatch %s", attempt.Parent().SpanID(), dispatch.SpanContext().SpanID())
	}
}

// recordingObserver keeps what the store reports.
type recordingObserver struct {
	mu         sync.Mutex
	lags       []time.Duration
	dispatches []string
	callbacks  []string
	counts     []tasks.StateCount
	oldest     time.Duration
	stats      int
}

func (o *recordingObserver) TaskDispatchStarted(lag time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lags = append(o.lags, lag)
}

func (o *recordingObserver) TaskDispatchDone(outcome string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.dispatches = append(o.dispatches, outcome)
}

func (o *recordingObserver) TaskCallbackDone(result string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.callbacks = append(o.callbacks, result)
}

func (o *recordingObserver) TaskStats(counts []tasks.StateCount, oldest time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.counts, o.oldest = counts, oldest
	o.stats++
}

func (o *recordingObserver) snapshot() recordingObserver {
	o.mu.Lock()
	defer o.mu.Unlock()
	return recordingObserver{
		lags: slices.Clone(o.lags), dispatches: slices.Clone(o.dispatches), callbacks: slices.Clone(o.callbacks),
		counts: slices.Clone(o.counts), oldest: o.oldest, stats: o.stats,
	}
}

func countOf(counts []tasks.StateCount, tenant string, st tasks.State) int {
	for _, c := range counts {
		if c.Tenant == tenant && c.State == st {
			return c.Count
		}
	}
	return -1
}

// TestObserverSeesDispatchesCallbacksAndCounts: the observer is told of
// each dispatch's lag and outcome, of each callback try's result, and
// every stats interval of the counts by tenant and state (zeros included)
// and of the oldest due task's age.
func TestObserverSeesDispatchesCallbacksAndCounts(t *testing.T) {
	up := newUpstream(t, reply{status: 200})
	rc := newReceiver(t, 500, 200)
	p := policy(t, nil)
	obs := &recordingObserver{}
	s := openCallbacks(t, filepath.Join(t.TempDir(), "tasks.db"), guardedPrepare(t, p, loopback), callbackSecret(t, testSecret),
		tasks.WithObserver(obs), tasks.WithStatsInterval(50*time.Millisecond))
	if _, _, err := s.Create(t.Context(), tasks.NewTask{Tenant: "a", ID: "o", Request: request(t, "GET", up.URL), CallbackURL: rc.URL}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Create(t.Context(), tasks.NewTask{Tenant: "b", ID: "later", NotBefore: time.Now().Add(time.Hour), Request: request(t, "GET", up.URL)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, s, "a", "o", callbackSettled)
	var got recordingObserver
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got = obs.snapshot()
		if countOf(got.counts, "a", tasks.StateSucceeded) == 1 || time.Now().After(deadline) {
			break
		}
	}
	if len(got.lags) != 1 || got.lags[0] < 0 || got.lags[0] > 30*time.Second {
		t.Errorf("dispatch lags %v, want one, non-negative", got.lags)
	}
	if !slices.Equal(got.dispatches, []string{"success"}) {
		t.Errorf("dispatch outcomes %v, want [success]", got.dispatches)
	}
	if !slices.Equal(got.callbacks, []string{"retry", "delivered"}) {
		t.Errorf("callback results %v, want [retry delivered]", got.callbacks)
	}
	if countOf(got.counts, "a", tasks.StateSucceeded) != 1 || countOf(got.counts, "a", tasks.StateScheduled) != 0 ||
		countOf(got.counts, "b", tasks.StateScheduled) != 1 || countOf(got.counts, "b", tasks.StateFailed) != 0 {
		t.Errorf("counts %+v", got.counts)
	}
	if got.oldest != 0 {
		t.Errorf("oldest due %s with no task due", got.oldest)
	}
}

// TestStatsOldestDue: the oldest due age is measured from the earliest
// next_run_time of a SCHEDULED or WAITING task that has passed, on the
// store's clock; tasks not yet due do not count.
func TestStatsOldestDue(t *testing.T) {
	clock := engine.NewFakeClock(time.Now())
	// Not started: nothing dispatches, so the due tasks stay due.
	s, err := tasks.OpenSQLite(t.Context(), filepath.Join(t.TempDir(), "tasks.db"), engine.NewRunner(memstore.New()), prepareWith(t, policy(t, nil)), tasks.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	req := request(t, "GET", "http://127.0.0.1:1/")
	for id, nb := range map[string]time.Duration{"due": 0, "soon": 5 * time.Second, "later": time.Hour} {
		if _, _, err := s.Create(t.Context(), tasks.NewTask{Tenant: "a", ID: id, NotBefore: clock.Now().Add(nb), Request: req}); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(10 * time.Second)
	counts, oldest, err := s.Stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if oldest != 10*time.Second || countOf(counts, "a", tasks.StateScheduled) != 3 {
		t.Fatalf("oldest due %s, counts %+v; want 10s and 3 scheduled", oldest, counts)
	}
}
