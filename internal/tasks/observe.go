package tasks

import (
	"context"
	"net/url"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Observer is told what the tasks do, for metrics. Its methods must be
// quick and safe for concurrent use.
type Observer interface {
	// TaskDispatchStarted reports a dispatch starting lag after its task
	// became due (its next_run_time; negative when it started early).
	TaskDispatchStarted(lag time.Duration)
	// TaskDispatchDone reports how a dispatch ended: the engine outcome's
	// name ("success", "gate_closed", ...), "pacing", "store_unavailable",
	// "error" (a refused destination, an invalid stored request) or
	// "interrupted" (the broker stopped; the task runs again).
	TaskDispatchDone(outcome string)
	// TaskCallbackDone reports one try of a callback: "delivered",
	// "retry" (failed, tried again later), "failed" (given up) or
	// "refused" (the destination guard refused the URL; given up).
	TaskCallbackDone(result string)
	// TaskStats reports the stored tasks, read every stats interval: the
	// count of each tenant's tasks in each state (every state of a tenant
	// that has or had tasks, zero included), and the age of the oldest
	// task that is due and not yet dispatched (0 when none is).
	TaskStats(counts []StateCount, oldestDue time.Duration)
}

// StateCount is how many of a tenant's tasks are in a state.
type StateCount struct {
	Tenant string
	State  State
	Count  int
}

// NopObserver ignores everything.
type NopObserver struct{}

// TaskDispatchStarted implements Observer.
func (NopObserver) TaskDispatchStarted(time.Duration) {}

// TaskDispatchDone implements Observer.
func (NopObserver) TaskDispatchDone(string) {}

// TaskCallbackDone implements Observer.
func (NopObserver) TaskCallbackDone(string) {}

// TaskStats implements Observer.
func (NopObserver) TaskStats([]StateCount, time.Duration) {}

// Stats reads the counts of the stored tasks by tenant and state, and the
// age at now of the oldest SCHEDULED or WAITING task whose next_run_time
// has passed (0 when none has).
func (s *RiverStore) Stats(ctx context.Context) ([]StateCount, time.Duration, error) {
	rows, err := s.db.QueryContext(ctx, s.sql(`SELECT tenant, state, COUNT(*) FROM retrybroker_task GROUP BY tenant, state`))
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	var out []StateCount
	for rows.Next() {
		var c StateCount
		if err := rows.Scan(&c.Tenant, &c.State, &c.Count); err != nil {
			return nil, 0, err
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	now := s.clock.Now()
	var oldest *int64
	if err := s.db.QueryRowContext(ctx, s.sql(`SELECT MIN(next_run_time) FROM retrybroker_task WHERE state IN (?, ?) AND next_run_time <= ?`),
		StateScheduled, StateWaiting, nano(now)).Scan(&oldest); err != nil {
		return nil, 0, err
	}
	var age time.Duration
	if oldest != nil {
		age = max(now.Sub(unnano(*oldest)), 0)
	}
	return out, age, nil
}

// watchStats reads Stats every stats interval (and once at once) until
// Close, telling the observer; every state of every tenant seen since the
// start is reported, so a state that empties reads 0.
func (s *RiverStore) watchStats(ctx context.Context) {
	defer close(s.statsDone)
	seen := map[string]bool{}
	t := time.NewTicker(s.statsEvery)
	defer t.Stop()
	for {
		s.reportStats(ctx, seen)
		select {
		case <-s.statsStop:
			return
		case <-t.C:
		}
	}
}

func (s *RiverStore) reportStats(ctx context.Context, seen map[string]bool) {
	ctx, cancel := context.WithTimeout(ctx, s.statsEvery)
	defer cancel()
	counts, age, err := s.Stats(ctx)
	if err != nil {
		s.logger.WarnContext(ctx, "tasks: read task counts", "error", err)
		return
	}
	type key struct {
		tenant string
		state  State
	}
	got := make(map[key]int, len(counts))
	for _, c := range counts {
		seen[c.Tenant] = true
		got[key{c.Tenant, c.State}] = c.Count
	}
	out := make([]StateCount, 0, len(seen)*int(StateCancelled))
	for tenant := range seen {
		for st := StateScheduled; st <= StateCancelled; st++ {
			out = append(out, StateCount{Tenant: tenant, State: st, Count: got[key{tenant, st}]})
		}
	}
	s.obs.TaskStats(out, age)
}

// traceContextOf returns the W3C traceparent and tracestate of ctx's span
// ("" when it has none), stored with a task at creation.
func traceContextOf(ctx context.Context) (parent, state string) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return "", ""
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c["traceparent"], c["tracestate"]
}

// Span attributes of task.dispatch and task.callback.
const (
	attrTaskID     = attribute.Key("retrybroker.task.id")
	attrTenant     = attribute.Key("retrybroker.tenant")
	attrDispatch   = attribute.Key("retrybroker.task.dispatch")
	attrTaskState  = attribute.Key("retrybroker.task.state")
	attrTaskResult = attribute.Key("retrybroker.task.outcome")
	attrCbTry      = attribute.Key("retrybroker.task.callback.try")
	attrCbResult   = attribute.Key("retrybroker.task.callback.result")
	attrMethod     = attribute.Key("http.request.method")
	attrServerAddr = attribute.Key("server.address")
	attrServerPort = attribute.Key("server.port")
	attrStatus     = attribute.Key("http.response.status_code")
)

// createLink links a span to the CreateTask call's span whose W3C context
// is stored in r; with none stored it adds nothing.
func createLink(r *row) trace.SpanStartOption {
	if r.traceParent == "" {
		return trace.WithLinks()
	}
	c := propagation.MapCarrier{"traceparent": r.traceParent, "tracestate": r.traceState}
	if sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), c)); sc.IsValid() {
		return trace.WithLinks(trace.Link{SpanContext: sc})
	}
	return trace.WithLinks()
}

// dispatchSpan starts the task.dispatch span of one dispatch of r: a new
// root (a dispatch is not part of whatever River's context holds) with a
// link to the CreateTask call's span, stored in the row, so the trace of
// the create leads to every dispatch, on any replica and after any
// restart. The engine's attempt spans are its children.
func (s *RiverStore) dispatchSpan(ctx context.Context, r *row) (context.Context, trace.Span) {
	opts := []trace.SpanStartOption{
		trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attrTaskID.String(r.ID), attrTenant.String(r.Tenant), attrDispatch.Int(r.Dispatches+1)),
		createLink(r),
	}
	return s.tracer.Start(ctx, "task.dispatch", opts...)
}

// callbackSpan starts the task.callback span of try number try of r's
// callback: like task.dispatch, a new root linked to the CreateTask
// call's span (a callback is sent after the task is final, by any
// replica). Its attributes name the task, the try and the receiver's
// host and port, never the URL's path or query, which may carry a
// receiver's token.
func (s *RiverStore) callbackSpan(ctx context.Context, r *row, try int) (context.Context, trace.Span) {
	attrs := []attribute.KeyValue{attrTaskID.String(r.ID), attrTenant.String(r.Tenant), attrCbTry.Int(try), attrMethod.String("POST")}
	if u, err := url.Parse(r.CallbackURL); err == nil && u.Host != "" {
		attrs = append(attrs, attrServerAddr.String(u.Hostname()))
		if port, err := strconv.Atoi(u.Port()); err == nil {
			attrs = append(attrs, attrServerPort.Int(port))
		}
	}
	return s.tracer.Start(ctx, "task.callback", trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...), createLink(r))
}

// callbackDone counts a callback try's result and puts it on its span,
// with an error status and the try's error (which names the receiver's
// status or the kind of transport failure, never the secret, the URL's
// query or an internal address: see tryCallback) unless it was delivered.
func (s *RiverStore) callbackDone(span trace.Span, result string, tryErr error) {
	s.obs.TaskCallbackDone(result)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attrCbResult.String(result))
	if tryErr != nil {
		span.SetStatus(codes.Error, tryErr.Error())
	}
}

// dispatchDone counts a dispatch's outcome and puts it, and the state it
// leads to, on its span.
func (s *RiverStore) dispatchDone(span trace.Span, outcome string, next State) {
	s.obs.TaskDispatchDone(outcome)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attrTaskResult.String(outcome), attrTaskState.String(next.String()))
	if next == StateFailed {
		span.SetStatus(codes.Error, outcome)
	}
}
