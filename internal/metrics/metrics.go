// Package metrics exports the broker's Prometheus metrics: calls by
// outcome, attempts per call and call durations, attempts, retries, retry
// delays, hints, probes, gate closures and holds, calls in flight and
// parked, streams, store round trips and the state of the shared store
// (degraded, the cause, state changes).
package metrics

import (
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/store"
)

// Metrics implements engine.Observer with Prometheus collectors.
type Metrics struct {
	attempts  *prometheus.CounterVec
	retries   prometheus.Counter
	delays    *prometheus.HistogramVec
	hints     *prometheus.CounterVec
	inFlight  prometheus.Gauge
	waiting   *prometheus.GaugeVec
	degraded  prometheus.Gauge
	probes    *prometheus.CounterVec
	storeErrs *prometheus.CounterVec
	breakers  *prometheus.CounterVec
	problem   *prometheus.GaugeVec
	changes   prometheus.Counter
	// Calls, gates, store round trips and streams (the operations
	// dashboard's panels).
	calls        *prometheus.CounterVec
	callAttempts *prometheus.HistogramVec
	callTime     *prometheus.HistogramVec
	closures     *prometheus.CounterVec
	holdTime     *prometheus.HistogramVec
	held         prometheus.Counter
	trips        *prometheus.CounterVec
	tripTime     *prometheus.HistogramVec
	streamsOpen  prometheus.Gauge
	streamBytes  prometheus.Counter
	streamEnds   *prometheus.CounterVec
	// Resolved series of the per-call events (no label hashing per call):
	// by rpc (0 execute, 1 stream) and outcome, and by store op.
	callBy     [2][]prometheus.Counter
	attBy      [2]prometheus.Observer
	timeBy     [2]prometheus.Observer
	tripsBy    [len(storeOps)]tripSeries
	registry   *prometheus.Registry
	statusText [6]string
	// storeDegraded is the last state SetStoreHealth reported.
	storeDegraded atomic.Bool
}

// New registers the broker's collectors (and the Go and process
// collectors) on a new registry.
func New() *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retrybroker_attempts_total",
			Help: "Upstream attempts by status class (1xx..5xx, or transport) and the decision taken after them.",
		}, []string{"status_class", "action", "reason"}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "retrybroker_retries_total",
			Help: "Retries decided (each is followed by a wait and another attempt).",
		}),
		delays: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "retrybroker_retry_delay_seconds",
			Help:    "Delays before retries, by source (hint or backoff).",
			Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60},
		}, []string{"source"}),
		hints: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retrybroker_hints_total",
			Help: "Valid server hints seen, by the header (or body field) that carried them.",
		}, []string{"source"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "retrybroker_calls_in_flight",
			Help: "Execute calls in progress.",
		}),
		waiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "retrybroker_calls_waiting",
			Help: "Execute calls parked in a wait, by cause (backoff, hint, cooldown, pacing).",
		}, []string{"cause"}),
		degraded: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "retrybroker_store_degraded",
			Help: "1 while the shared store is unreachable and the broker serves on local state.",
		}),
		probes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retrybroker_probes_total",
			Help: "Attempts sent as the single unproven call of a learning gate or a half-open breaker, by what they showed (accepted, refused, failed, none).",
		}, []string{"result"}),
		breakers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retrybroker_breaker_transitions_total",
			Help: "Changes of the gates' failure breakers: opened (failures reached the ratio), reopened (the half-open probe failed), closed (the probe was answered).",
		}, []string{"to"}),
		storeErrs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retrybroker_store_errors_total",
			Help: "Store operations that failed while the call went on without them (a fail-closed policy's outage, a store closing), by operation.",
		}, []string{"op"}),
		problem: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "retrybroker_store_problem",
			Help: "1 for the cause that keeps the broker off the shared store (unreachable, wrongpass, noperm, oom, readonly, moved, ...), 0 for every other cause.",
		}, []string{"cause"}),
		changes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "retrybroker_store_state_changes_total",
			Help: "Changes between shared state and local state (degraded); a fast rise means the shared store flaps.",
		}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retrybroker_calls_total",
			Help: "Execute and ExecuteStream calls ended, by rpc (execute, stream) and final outcome (success, not_retryable, attempts_exhausted, ...; unspecified: ended with an error before any outcome).",
		}, []string{"rpc", "outcome"}),
		callAttempts: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "retrybroker_call_attempts",
			Help:    "Attempts sent per call, by rpc (execute, stream).",
			Buckets: []float64{1, 2, 3, 4, 5, 8, 10, 16},
		}, []string{"rpc"}),
		callTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "retrybroker_call_duration_seconds",
			Help:    "Whole calls, waits (and a streamed body) included, by rpc (execute, stream).",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120},
		}, []string{"rpc"}),
		closures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retrybroker_gate_closures_total",
			Help: "Responses that closed their gate, by source (hint: a retry hint; quota: a reported quota used up).",
		}, []string{"source"}),
		holdTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "retrybroker_gate_hold_seconds",
			Help:    "How long a response's closure keeps its gate closed (as the store answered, bounded by max_gate), by source (hint, quota).",
			Buckets: []float64{0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 21600, 86400},
		}, []string{"source"}),
		held: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "retrybroker_gate_holds_total",
			Help: "Attempts the store held because their gate admits no more unproven calls: its learned quota for the epoch is used and its probe is in flight (or its half-open breaker's probe is).",
		}),
		trips: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retrybroker_store_round_trips_total",
			Help: "Store calls the engine made, by op (admit, complete, observe) and result (ok, error).",
		}, []string{"op", "result"}),
		tripTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "retrybroker_store_round_trip_seconds",
			Help:    "Latency of the engine's store calls in real time, by op (admit, complete, observe).",
			Buckets: []float64{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1},
		}, []string{"op"}),
		streamsOpen: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "retrybroker_streams_open",
			Help: "Streamed bodies in progress (head sent to the caller, body not ended).",
		}),
		streamBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "retrybroker_stream_bytes_total",
			Help: "Body bytes ExecuteStream calls gave their callers.",
		}),
		streamEnds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retrybroker_stream_ends_total",
			Help: "ExecuteStream calls ended, by how the body ended (complete, no_response, upstream_error, idle_timeout, size_limit, timeout, canceled, shutting_down).",
		}, []string{"reason"}),
		statusText: [6]string{"transport", "1xx", "2xx", "3xx", "4xx", "5xx"},
	}
	for _, c := range store.Causes() {
		m.problem.WithLabelValues(string(c)).Set(0) // every series exists from the start
	}
	// Every bounded series exists from the start, so rates and alerts see
	// a zero before the first event.
	for i, rpc := range []string{rpcExecute, rpcStream} {
		for _, o := range engine.Outcomes() {
			m.callBy[i] = append(m.callBy[i], m.calls.WithLabelValues(rpc, o.String()))
		}
		m.attBy[i] = m.callAttempts.WithLabelValues(rpc)
		m.timeBy[i] = m.callTime.WithLabelValues(rpc)
	}
	for i, op := range storeOps {
		m.tripsBy[i] = tripSeries{m.trips.WithLabelValues(op, "ok"), m.trips.WithLabelValues(op, "error"), m.tripTime.WithLabelValues(op)}
	}
	for _, src := range []string{"hint", "quota"} {
		m.closures.WithLabelValues(src)
		m.holdTime.WithLabelValues(src)
	}
	for _, e := range engine.BodyEnds()[1:] { // not unspecified: Stream never reports it
		m.streamEnds.WithLabelValues(e.String())
	}
	m.registry.MustRegister(m.attempts, m.retries, m.delays, m.hints, m.inFlight, m.waiting, m.degraded, m.probes, m.storeErrs, m.breakers, m.problem, m.changes,
		m.calls, m.callAttempts, m.callTime, m.closures, m.holdTime, m.held, m.trips, m.tripTime, m.streamsOpen, m.streamBytes, m.streamEnds,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Registerer lets other packages add their collectors.
func (m *Metrics) Registerer() prometheus.Registerer { return m.registry }

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry})
}

// AttemptDone counts an attempt and the decision taken after it.
func (m *Metrics) AttemptDone(status int, _ engine.TransportError, d engine.Decision) {
	class := m.statusText[0]
	if c := status / 100; c >= 1 && c <= 5 {
		class = m.statusText[c]
	} else if status != 0 {
		class = strconv.Itoa(c) + "xx"
	}
	m.attempts.WithLabelValues(class, d.Action.String(), d.Reason.String()).Inc()
	if d.HintSource != "" {
		m.hints.WithLabelValues(d.HintSource).Inc()
	}
	if d.Action == engine.ActionRetry {
		m.retries.Inc()
		src := "backoff"
		if d.Reason == engine.ReasonServerHint {
			src = "hint"
		}
		m.delays.WithLabelValues(src).Observe(d.Delay.Seconds())
	}
}

// The rpc label values of CallDone.
const (
	rpcExecute = "execute"
	rpcStream  = "stream"
)

// storeOps are the op label values of StoreRoundTrip, as the engine names them.
var storeOps = [...]string{"admit", "complete", "observe"}

// tripSeries are one store op's series.
type tripSeries struct {
	ok, failed prometheus.Counter
	latency    prometheus.Observer
}

// CallDone counts an ended call by rpc and outcome, and observes its
// attempts and duration. An rpc other than "stream" counts as "execute"
// (the engine names only these two: the labels stay bounded).
func (m *Metrics) CallDone(rpc string, outcome engine.Outcome, attempts int, d time.Duration) {
	i := 0
	if rpc == rpcStream {
		i = 1
	}
	if int(outcome) >= 0 && int(outcome) < len(m.callBy[i]) {
		m.callBy[i][outcome].Inc()
	} else {
		m.calls.WithLabelValues([...]string{rpcExecute, rpcStream}[i], outcome.String()).Inc()
	}
	m.attBy[i].Observe(float64(attempts))
	m.timeBy[i].Observe(d.Seconds())
}

// StoreRoundTrip counts a store call by op and result and observes its
// latency.
func (m *Metrics) StoreRoundTrip(op string, d time.Duration, failed bool) {
	for i, o := range storeOps {
		if o == op {
			c := m.tripsBy[i].ok
			if failed {
				c = m.tripsBy[i].failed
			}
			c.Inc()
			m.tripsBy[i].latency.Observe(d.Seconds())
			return
		}
	}
	result := "ok"
	if failed {
		result = "error"
	}
	m.trips.WithLabelValues(op, result).Inc()
	m.tripTime.WithLabelValues(op).Observe(d.Seconds())
}

// GateClosed counts a response that closed its gate and observes how long
// the gate holds.
func (m *Metrics) GateClosed(source string, hold time.Duration) {
	m.closures.WithLabelValues(source).Inc()
	m.holdTime.WithLabelValues(source).Observe(hold.Seconds())
}

// GateHeld counts an attempt held by its gate's learned quota or
// half-open breaker.
func (m *Metrics) GateHeld() { m.held.Inc() }

// StreamOpen tracks streamed bodies in progress.
func (m *Metrics) StreamOpen(delta int) { m.streamsOpen.Add(float64(delta)) }

// StreamBytes counts body bytes given to stream callers.
func (m *Metrics) StreamBytes(n int) { m.streamBytes.Add(float64(n)) }

// StreamEnd counts an ended ExecuteStream call by how its body ended.
func (m *Metrics) StreamEnd(end engine.BodyEnd) { m.streamEnds.WithLabelValues(end.String()).Inc() }

// BreakerChange counts a breaker transition.
func (m *Metrics) BreakerChange(c store.BreakerChange) { m.breakers.WithLabelValues(c.String()).Inc() }

// StoreError counts a store operation the call went on without.
func (m *Metrics) StoreError(op string) { m.storeErrs.WithLabelValues(op).Inc() }

// Probe counts a probe and what it showed.
func (m *Metrics) Probe(result store.Result) { m.probes.WithLabelValues(result.String()).Inc() }

// Waiting tracks calls parked in a wait.
func (m *Metrics) Waiting(cause string, delta int) {
	m.waiting.WithLabelValues(cause).Add(float64(delta))
}

// InFlight tracks Execute calls in progress.
func (m *Metrics) InFlight(delta int) { m.inFlight.Add(float64(delta)) }

// LocalAdmission is what a Redis store's local admission did so far.
type LocalAdmission struct {
	Admitted, Flushed, Dropped int64
	Live                       bool
}

// WatchLocalAdmission exports a Redis store's local admission, read from
// stats at every scrape: attempts admitted without a round trip, count
// writes, counts lost, and whether it is working (its invalidation
// subscription is confirmed).
func (m *Metrics) WatchLocalAdmission(stats func() LocalAdmission) {
	counter := func(name, help string, v func(LocalAdmission) int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(v(stats())) })
	}
	m.registry.MustRegister(
		counter("retrybroker_store_local_admissions_total",
			"Attempts a replica admitted on a plain gate without a Redis round trip (--redis-local-admission).",
			func(s LocalAdmission) int64 { return s.Admitted }),
		counter("retrybroker_store_local_flushes_total",
			"Writes of locally admitted attempts' counts to Redis (one per gate and learning epoch, or tenant budget).",
			func(s LocalAdmission) int64 { return s.Flushed }),
		counter("retrybroker_store_local_dropped_total",
			"Counts of locally admitted attempts lost to a failed write (learning and the breaker see fewer attempts).",
			func(s LocalAdmission) int64 { return s.Dropped }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "retrybroker_store_local_admission_live",
			Help: "1 while local admission works (its invalidation subscription is confirmed), 0 while every attempt asks Redis.",
		}, func() float64 {
			if stats().Live {
				return 1
			}
			return 0
		}),
	)
}

// SetStoreDegraded reports whether the shared store is unreachable.
func (m *Metrics) SetStoreDegraded(degraded bool) {
	if degraded {
		m.degraded.Set(1)
	} else {
		m.degraded.Set(0)
	}
}

// SetStoreHealth reports the shared store's state: the degraded gauge, one
// problem series per cause (1 for h.Cause while degraded, 0 for the
// others), and a state change when h.Degraded differs from the last state
// reported.
func (m *Metrics) SetStoreHealth(h store.Health) {
	was := m.storeDegraded.Swap(h.Degraded)
	if was != h.Degraded {
		m.changes.Inc()
	}
	m.SetStoreDegraded(h.Degraded)
	for _, c := range store.Causes() {
		v := 0.0
		if h.Degraded && c == h.Cause {
			v = 1
		}
		m.problem.WithLabelValues(string(c)).Set(v)
	}
}
