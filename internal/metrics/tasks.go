package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/retrybroker/retrybroker/internal/tasks"
)

// taskMetrics are the deferred calls' collectors (tasks.Observer).
type taskMetrics struct {
	byState    *prometheus.GaugeVec
	oldestDue  prometheus.Gauge
	lag        prometheus.Histogram
	dispatches *prometheus.CounterVec
	callbacks  *prometheus.CounterVec
}

func newTaskMetrics() *taskMetrics {
	m := &taskMetrics{
		byState: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "retrybroker_tasks",
			Help: "Stored tasks by tenant and state (scheduled, waiting, running, succeeded, failed, cancelled), read from the task storage every 15 s.",
		}, []string{"tenant", "state"}),
		oldestDue: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "retrybroker_tasks_oldest_due_seconds",
			Help: "Age of the oldest task that is due (SCHEDULED or WAITING past its next_run_time) and not yet dispatched; 0 when none is. Read every 15 s.",
		}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "retrybroker_task_dispatch_lag_seconds",
			Help:    "Time from a task becoming due (its next_run_time) to its dispatch starting.",
			Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300},
		}),
		dispatches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retrybroker_task_dispatches_total",
			Help: "Task dispatches ended, by outcome (the engine's: success, gate_closed, not_retryable, ...; pacing, store_unavailable, error: a refused destination or an invalid stored request; interrupted: the broker stopped).",
		}, []string{"outcome"}),
		callbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retrybroker_task_callbacks_total",
			Help: "Tries of task callbacks, by result (delivered; retry: failed, tried again later; failed: given up; refused: the destination guard refused the URL).",
		}, []string{"result"}),
	}
	for _, r := range []string{"delivered", "retry", "failed", "refused"} {
		m.callbacks.WithLabelValues(r)
	}
	return m
}

func (m *taskMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.byState, m.oldestDue, m.lag, m.dispatches, m.callbacks}
}

// TaskDispatchStarted implements tasks.Observer.
func (m *Metrics) TaskDispatchStarted(lag time.Duration) {
	m.tasks.lag.Observe(max(lag, 0).Seconds())
}

// TaskDispatchDone implements tasks.Observer.
func (m *Metrics) TaskDispatchDone(outcome string) { m.tasks.dispatches.WithLabelValues(outcome).Inc() }

// TaskCallbackDone implements tasks.Observer.
func (m *Metrics) TaskCallbackDone(result string) { m.tasks.callbacks.WithLabelValues(result).Inc() }

// TaskStats implements tasks.Observer.
func (m *Metrics) TaskStats(counts []tasks.StateCount, oldestDue time.Duration) {
	for _, c := range counts {
		m.tasks.byState.WithLabelValues(c.Tenant, c.State.String()).Set(float64(c.Count))
	}
	m.tasks.oldestDue.Set(oldestDue.Seconds())
}

var _ tasks.Observer = (*Metrics)(nil)
