package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/internal/tasks"
)

// TestTaskMetrics: the task series as the store reports them: counts by
// tenant and state, the oldest due age, the dispatch lag (a negative lag
// counts as 0), dispatches by outcome and callback tries by result, whose
// four series exist from the start.
func TestTaskMetrics(t *testing.T) {
	m := New()
	scrape := func() string {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		b, _ := io.ReadAll(rec.Body)
		return string(b)
	}
	if body := scrape(); !strings.Contains(body, `retrybroker_task_callbacks_total{result="refused"} 0`) {
		t.Fatalf("the callback series do not exist from the start:\n%s", body)
	}
	m.TaskStats([]tasks.StateCount{{Tenant: "t1", State: tasks.StateWaiting, Count: 3}, {Tenant: "t1", State: tasks.StateFailed, Count: 0}}, 90*time.Second)
	m.TaskDispatchStarted(250 * time.Millisecond)
	m.TaskDispatchStarted(-time.Second)
	m.TaskDispatchDone("success")
	m.TaskDispatchDone("gate_closed")
	m.TaskCallbackDone("retry")
	m.TaskCallbackDone("delivered")
	body := scrape()
	for _, want := range []string{
		`retrybroker_tasks{state="waiting",tenant="t1"} 3`,
		`retrybroker_tasks{state="failed",tenant="t1"} 0`,
		`retrybroker_tasks_oldest_due_seconds 90`,
		`retrybroker_task_dispatch_lag_seconds_bucket{le="0.01"} 1`,
		`retrybroker_task_dispatch_lag_seconds_bucket{le="0.25"} 2`,
		`retrybroker_task_dispatch_lag_seconds_count 2`,
		`retrybroker_task_dispatches_total{outcome="success"} 1`,
		`retrybroker_task_dispatches_total{outcome="gate_closed"} 1`,
		`retrybroker_task_callbacks_total{result="retry"} 1`,
		`retrybroker_task_callbacks_total{result="delivered"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
