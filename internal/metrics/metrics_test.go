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

// scrape returns m's exposition.
func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, err := io.ReadAll(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

func TestCallGateStoreAndStreamMetrics(t *testing.T) {
	m := New()
	m.CallDone("execute", engine.OutcomeSuccess, 1, 20*time.Millisecond)
	m.CallDone("execute", engine.OutcomeAttemptsExhausted, 3, 2*time.Second)
	m.CallDone("stream", engine.OutcomeNotRetryable, 2, 90*time.Second)
	m.CallDone("something-else", engine.OutcomeGateClosed, 0, 0) // counted as execute: labels stay bounded
	m.GateClosed("hint", 30*time.Second)
	m.GateClosed("quota", 2*time.Hour)
	m.GateHeld()
	m.GateHeld()
	m.StoreRoundTrip("admit", 300*time.Microsecond, false)
	m.StoreRoundTrip("complete", 2*time.Millisecond, true)
	m.StreamOpen(1)
	m.StreamOpen(1)
	m.StreamOpen(-1)
	m.StreamBytes(100)
	m.StreamBytes(23)
	m.StreamEnd(engine.BodyEndIdleTimeout)
	body := scrape(t, m)
	for _, want := range []string{
		`retrybroker_calls_total{outcome="success",rpc="execute"} 1`,
		`retrybroker_calls_total{outcome="attempts_exhausted",rpc="execute"} 1`,
		`retrybroker_calls_total{outcome="not_retryable",rpc="stream"} 1`,
		`retrybroker_calls_total{outcome="gate_closed",rpc="execute"} 1`,
		`retrybroker_calls_total{outcome="success",rpc="stream"} 0`, // every series exists from the start
		`retrybroker_call_attempts_bucket{rpc="execute",le="1"} 2`,
		`retrybroker_call_attempts_bucket{rpc="execute",le="3"} 3`,
		`retrybroker_call_attempts_sum{rpc="execute"} 4`,
		`retrybroker_call_attempts_bucket{rpc="stream",le="1"} 0`,
		`retrybroker_call_attempts_bucket{rpc="stream",le="2"} 1`,
		`retrybroker_call_attempts_bucket{rpc="execute",le="16"} 3`,
		`retrybroker_call_duration_seconds_bucket{rpc="execute",le="0.025"} 2`,
		`retrybroker_call_duration_seconds_sum{rpc="stream"} 90`,
		`retrybroker_gate_closures_total{source="hint"} 1`,
		`retrybroker_gate_closures_total{source="quota"} 1`,
		`retrybroker_gate_hold_seconds_bucket{source="hint",le="30"} 1`,
		`retrybroker_gate_hold_seconds_bucket{source="hint",le="10"} 0`,
		`retrybroker_gate_hold_seconds_sum{source="quota"} 7200`,
		`retrybroker_gate_holds_total 2`,
		`retrybroker_store_round_trips_total{op="admit",result="ok"} 1`,
		`retrybroker_store_round_trips_total{op="complete",result="error"} 1`,
		`retrybroker_store_round_trips_total{op="observe",result="ok"} 0`,
		`retrybroker_store_round_trip_seconds_bucket{op="admit",le="0.0005"} 1`,
		`retrybroker_store_round_trip_seconds_bucket{op="admit",le="0.00025"} 0`,
		`retrybroker_store_round_trip_seconds_count{op="complete"} 1`,
		`retrybroker_streams_open 1`,
		`retrybroker_stream_bytes_total 123`,
		`retrybroker_stream_ends_total{reason="idle_timeout"} 1`,
		`retrybroker_stream_ends_total{reason="complete"} 0`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("metrics lack %s", want)
		}
	}
	for _, bad := range []string{`rpc="something-else"`, `reason="unspecified"`} {
		if strings.Contains(body, bad) {
			t.Errorf("metrics have %s", bad)
		}
	}
}
