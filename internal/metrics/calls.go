package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/retrybroker/retrybroker/internal/engine"
)

// opsMetrics are the metrics of calls (by outcome, attempts per call,
// duration), gate closures and holds, store round trips and streams: what
// the operations dashboard and alerts (deploy/) read.
type opsMetrics struct {
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
	callBy  [2][]prometheus.Counter
	attBy   [2]prometheus.Observer
	timeBy  [2]prometheus.Observer
	tripsBy [len(storeOps)]tripSeries
}

// newOpsMetrics returns the collectors with every bounded series created,
// so that rates and alerts see a zero before the first event.
func newOpsMetrics() *opsMetrics {
	m := &opsMetrics{
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
	}
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
	return m
}

// collectors returns the collectors to register.
func (m *opsMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{
		m.calls, m.callAttempts, m.callTime, m.closures, m.holdTime, m.held,
		m.trips, m.tripTime, m.streamsOpen, m.streamBytes, m.streamEnds,
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
	if int(outcome) >= 0 && int(outcome) < len(m.ops.callBy[i]) {
		m.ops.callBy[i][outcome].Inc()
	} else {
		m.ops.calls.WithLabelValues([...]string{rpcExecute, rpcStream}[i], outcome.String()).Inc()
	}
	m.ops.attBy[i].Observe(float64(attempts))
	m.ops.timeBy[i].Observe(d.Seconds())
}

// StoreRoundTrip counts a store call by op and result and observes its
// latency.
func (m *Metrics) StoreRoundTrip(op string, d time.Duration, failed bool) {
	for i, o := range storeOps {
		if o == op {
			c := m.ops.tripsBy[i].ok
			if failed {
				c = m.ops.tripsBy[i].failed
			}
			c.Inc()
			m.ops.tripsBy[i].latency.Observe(d.Seconds())
			return
		}
	}
	result := "ok"
	if failed {
		result = "error"
	}
	m.ops.trips.WithLabelValues(op, result).Inc()
	m.ops.tripTime.WithLabelValues(op).Observe(d.Seconds())
}

// GateClosed counts a response that closed its gate and observes how long
// the gate holds.
func (m *Metrics) GateClosed(source string, hold time.Duration) {
	m.ops.closures.WithLabelValues(source).Inc()
	m.ops.holdTime.WithLabelValues(source).Observe(hold.Seconds())
}

// GateHeld counts an attempt held by its gate's learned quota or
// half-open breaker.
func (m *Metrics) GateHeld() { m.ops.held.Inc() }

// StreamOpen tracks streamed bodies in progress.
func (m *Metrics) StreamOpen(delta int) { m.ops.streamsOpen.Add(float64(delta)) }

// StreamBytes counts body bytes given to stream callers.
func (m *Metrics) StreamBytes(n int) { m.ops.streamBytes.Add(float64(n)) }

// StreamEnd counts an ended ExecuteStream call by how its body ended.
func (m *Metrics) StreamEnd(end engine.BodyEnd) { m.ops.streamEnds.WithLabelValues(end.String()).Inc() }
