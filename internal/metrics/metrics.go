// Package metrics exports the broker's Prometheus metrics: attempts,
// retries, retry delays, hints, probes, calls in flight and parked, and the
// state of the shared store (degraded, the cause, state changes), and the
// broker-held credentials (token fetches and expiry, secret file reloads,
// attempts not sent for want of a credential), and the deferred calls
// (tasks by state, the oldest due task, dispatch lag, dispatches and
// callbacks).
package metrics

import (
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/retrybroker/retrybroker/internal/credential"
	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/store"
)

// Metrics implements engine.Observer with Prometheus collectors.
type Metrics struct {
	attempts   *prometheus.CounterVec
	retries    prometheus.Counter
	delays     *prometheus.HistogramVec
	hints      *prometheus.CounterVec
	inFlight   prometheus.Gauge
	waiting    *prometheus.GaugeVec
	degraded   prometheus.Gauge
	probes     *prometheus.CounterVec
	storeErrs  *prometheus.CounterVec
	breakers   *prometheus.CounterVec
	problem    *prometheus.GaugeVec
	changes    prometheus.Counter
	registry   *prometheus.Registry
	statusText [6]string
	attemptBy  sync.Map // attemptKey -> prometheus.Counter (attemptCounter)
	creds      *credentialMetrics
	// storeDegraded is the last state SetStoreHealth reported.
	storeDegraded atomic.Bool

	ops   *opsMetrics  // calls, gates, store round trips, streams (calls.go)
	tasks *taskMetrics // deferred calls (tasks.go)
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
		statusText: [6]string{"transport", "1xx", "2xx", "3xx", "4xx", "5xx"},
		creds:      newCredentialMetrics(),
	}
	for _, c := range store.Causes() {
		m.problem.WithLabelValues(string(c)).Set(0) // every series exists from the start
	}
	m.registry.MustRegister(m.creds.collectors()...)
	m.registry.MustRegister(m.attempts, m.retries, m.delays, m.hints, m.inFlight, m.waiting, m.degraded, m.probes, m.storeErrs, m.breakers, m.problem, m.changes,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.ops = newOpsMetrics()
	m.registry.MustRegister(m.ops.collectors()...)
	m.tasks = newTaskMetrics()
	m.registry.MustRegister(m.tasks.collectors()...)
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
	m.attemptCounter(status, d.Action, d.Reason).Inc()
	if d.HintSource != "" {
		m.hints.WithLabelValues(d.HintSource).Inc()
	}
	if d.Action == engine.ActionRetry {
		m.retries.Inc()
		src := "backoff"
		switch d.Reason {
		case engine.ReasonServerHint:
			src = "hint"
		case engine.ReasonCredentialRejected:
			src = "credential" // repeated at once with a renewed credential
		}
		m.delays.WithLabelValues(src).Observe(d.Delay.Seconds())
	}
}

// attemptKey names one series of retrybroker_attempts_total.
type attemptKey struct {
	class  int // status / 100; -1 for a transport failure (status 0)
	action engine.Action
	reason engine.Reason
}

// attemptCounter returns the attempts counter of an attempt's status
// class (0: a transport failure), action and reason, resolved once per
// series: a label lookup hashes three strings, which cost a measurable part
// of Execute's own share (issue 22).
func (m *Metrics) attemptCounter(status int, action engine.Action, reason engine.Reason) prometheus.Counter {
	class := status / 100
	if status == 0 {
		class = -1
	}
	k := attemptKey{class, action, reason}
	if c, ok := m.attemptBy.Load(k); ok {
		return c.(prometheus.Counter)
	}
	text := m.statusText[0]
	if class >= 1 && class <= 5 {
		text = m.statusText[class]
	} else if class >= 0 {
		text = strconv.Itoa(class) + "xx"
	}
	c, _ := m.attemptBy.LoadOrStore(k, m.attempts.WithLabelValues(text, action.String(), reason.String()))
	return c.(prometheus.Counter)
}

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

var (
	_ engine.Observer           = (*Metrics)(nil)
	_ engine.CredentialObserver = (*Metrics)(nil)
	_ credential.Observer       = (*Metrics)(nil)
)
