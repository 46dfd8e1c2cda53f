package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/internal/engine"
)

func TestMetricsExposition(t *testing.T) {
	m := New()
	m.InFlight(1)
	m.Waiting("hint", 1)
	m.AttemptDone(503, engine.TransportNone, engine.Decision{Action: engine.ActionRetry, Reason: engine.ReasonServerHint, Delay: 2 * time.Second, HintSource: "retry-after"})
	m.AttemptDone(0, engine.TransportConnectionReset, engine.Decision{Action: engine.ActionRetry, Reason: engine.ReasonBackoff, Delay: time.Second})
	m.AttemptDone(200, engine.TransportNone, engine.Decision{Action: engine.ActionDoNotRetry, Reason: engine.ReasonSuccess})
	m.SetStoreDegraded(true)
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`retrybroker_attempts_total{action="retry",reason="REASON_SERVER_HINT",status_class="5xx"} 1`,
		`retrybroker_attempts_total{action="retry",reason="REASON_BACKOFF",status_class="transport"} 1`,
		`retrybroker_attempts_total{action="do_not_retry",reason="REASON_SUCCESS",status_class="2xx"} 1`,
		`retrybroker_retries_total 2`,
		`retrybroker_hints_total{source="retry-after"} 1`,
		`retrybroker_retry_delay_seconds_count{source="hint"} 1`,
		`retrybroker_calls_in_flight 1`,
		`retrybroker_calls_waiting{cause="hint"} 1`,
		`retrybroker_store_degraded 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
