package deploy_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
	"github.com/retrybroker/retrybroker/internal/store/redistest"
)

const (
	rulesFile     = "prometheus/retrybroker-alerts.yaml"
	rulesTestFile = "prometheus/retrybroker-alerts.test.yaml"
	dashboardFile = "grafana/retrybroker.json"
)

// expr is a PromQL expression and where it comes from.
type expr struct{ where, promql string }

// ruleFile is the part of a Prometheus rule file the tests read.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func ruleExprs(t *testing.T) (exprs []expr, alerts []string) {
	t.Helper()
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	if err := yaml.Unmarshal(b, &rf); err != nil {
		t.Fatal(err)
	}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, expr{"rule " + r.Alert + r.Record, r.Expr})
			if r.Alert != "" {
				alerts = append(alerts, r.Alert)
			}
		}
	}
	return exprs, alerts
}

// dashboard is the part of a Grafana dashboard the tests read.
type dashboard struct {
	Panels []struct {
		Title   string `json:"title"`
		Type    string `json:"type"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// grafanaVars are the dashboard's variables and the values that stand in
// for them when its expressions are parsed.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h", "$job", ".*")

func panelExprs(t *testing.T) []expr {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	var out []expr
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out = append(out, expr{"panel " + p.Title, grafanaVars.Replace(tg.Expr)})
		}
	}
	if len(out) < 10 {
		t.Fatalf("dashboard has only %d expressions", len(out))
	}
	return out
}

// metricName matches the metric names an expression may use: the broker's
// own (retrybroker_*) and the Go and process collectors'.
var metricName = regexp.MustCompile(`\b(retrybroker|process|go)_[a-zA-Z0-9_]+\b`)

// namesIn returns the metric names an expression uses. Every expression
// must use at least one.
func namesIn(t *testing.T, e expr) []string {
	t.Helper()
	names := metricName.FindAllString(e.promql, -1)
	if len(names) == 0 {
		t.Errorf("%s: no metric name in %q", e.where, e.promql)
	}
	return names
}

// TestAlertRules runs promtool check rules and promtool test rules, and
// checks that every alert has a test that fires it, a test where it stays
// silent, and a runbook entry in docs/operations.md.
func TestAlertRules(t *testing.T) {
	promtool := tool(t, "promtool")
	run(t, promtool, "check", "rules", rulesFile)
	run(t, promtool, "test", "rules", rulesTestFile)

	_, alerts := ruleExprs(t)
	if len(alerts) < 6 {
		t.Fatalf("only %d alerts", len(alerts))
	}
	b, err := os.ReadFile(rulesTestFile)
	if err != nil {
		t.Fatal(err)
	}
	var tf struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string           `yaml:"alertname"`
				ExpAlerts []map[string]any `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	if err := yaml.Unmarshal(b, &tf); err != nil {
		t.Fatal(err)
	}
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, tc := range tf.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				silent[a.Alertname] = true
			}
		}
	}
	ops, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range alerts {
		if !fires[a] || !silent[a] {
			t.Errorf("%s: a test where it fires %v, where it stays silent %v", a, fires[a], silent[a])
		}
		if !strings.Contains(string(ops), "\n#### "+a+"\n") {
			t.Errorf("%s has no runbook entry (#### %s) in docs/operations.md", a, a)
		}
	}
}

// TestPanelExpressionsParse writes every dashboard expression into a rule
// file as a recording rule and lets promtool, Prometheus' own parser,
// check it.
func TestPanelExpressionsParse(t *testing.T) {
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, e := range panelExprs(t) {
		q, err := json.Marshal(e.promql) // a JSON string is a YAML string
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "      - record: dashboard:panel_%d\n        expr: %s\n", i, q)
	}
	f := filepath.Join(t.TempDir(), "dashboard-rules.yaml")
	if err := os.WriteFile(f, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	run(t, tool(t, "promtool"), "check", "rules", f)
}

// TestMetricsExist runs a real broker on Redis, sends calls that succeed,
// retry on a 429's hint (which closes its gate), fail with 503 until the
// breaker opens, and probe it closed again, a streamed call and a task,
// then scrapes /metrics: they must show in the call, gate, store round
// trip, stream and task metrics, and it fails if a rule or a panel names
// a metric the broker does not export.
func TestMetricsExist(t *testing.T) {
	want := map[string][]string{} // metric name -> where it is used
	rules, _ := ruleExprs(t)
	for _, e := range append(rules, panelExprs(t)...) {
		for _, n := range namesIn(t, e) {
			if !slices.Contains(want[n], e.where) {
				want[n] = append(want[n], e.where)
			}
		}
	}

	b := startBroker(t)
	var hits sync.Map // path -> *atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, _ := hits.LoadOrStore(r.URL.Path, new(atomic.Int32))
		n := v.(*atomic.Int32).Add(1)
		switch {
		case r.URL.Path == "/limited" && n == 1:
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		case r.URL.Path == "/down":
			w.WriteHeader(http.StatusServiceUnavailable)
		case r.URL.Path == "/stream":
			_, _ = io.WriteString(w, streamBody)
		}
	}))
	t.Cleanup(up.Close)

	call := func(path string) rbv1.Outcome {
		ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+apiKey), 30*time.Second)
		defer cancel()
		r, err := b.client.Execute(ctx, &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Method: "GET", Url: up.URL + path}})
		if err != nil {
			t.Fatalf("Execute %s: %v", path, err)
		}
		return r.GetOutcome()
	}
	if o := call("/ok"); o != rbv1.Outcome_OUTCOME_SUCCESS {
		t.Fatalf("/ok: %s", o)
	}
	if o := call("/limited"); o != rbv1.Outcome_OUTCOME_SUCCESS {
		t.Fatalf("/limited (429 then 200): %s", o)
	}
	// 503s without a hint until the breaker opens, then calls to /ok
	// until its half-open probe closes it.
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(b.scrape(t), `retrybroker_breaker_transitions_total{to="opened"}`) {
		if time.Now().After(deadline) {
			t.Fatalf("the breaker never opened:\n%s", b.scrape(t))
		}
		call("/down")
	}
	for !strings.Contains(b.scrape(t), `retrybroker_breaker_transitions_total{to="closed"}`) {
		if time.Now().After(deadline) {
			t.Fatalf("the breaker never closed:\n%s", b.scrape(t))
		}
		call("/ok")
		time.Sleep(200 * time.Millisecond) // the breaker's open_for passing: real time in a real process
	}

	// A streamed call, whose body completes.
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+apiKey), 30*time.Second)
	defer cancel()
	st, err := b.client.ExecuteStream(ctx, &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Method: "GET", Url: up.URL + "/stream"}})
	if err != nil {
		t.Fatalf("ExecuteStream: %v", err)
	}
	var streamed int
	for {
		m, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("ExecuteStream: %v", err)
		}
		streamed += len(m.GetChunk())
	}
	if streamed != len(streamBody) {
		t.Fatalf("streamed %d bytes, want %d", streamed, len(streamBody))
	}

	// A task, dispatched once.
	tctx, tcancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+apiKey), 60*time.Second)
	defer tcancel()
	if _, err := b.client.CreateTask(tctx, &rbv1.CreateTaskRequest{TaskId: "m", Execute: &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: up.URL + "/ok"}}}); err != nil {
		t.Fatalf("CreateTask: %v", err)
	}
	for {
		task, err := b.client.GetTask(tctx, &rbv1.GetTaskRequest{TaskId: "m"})
		if err != nil {
			t.Fatalf("GetTask: %v", err)
		}
		if task.GetState() == rbv1.TaskState_TASK_STATE_SUCCEEDED {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The task counts are read every 15 s: the task's tenant shows at the
	// next read.
	for !strings.Contains(b.scrape(t), `retrybroker_tasks{state="succeeded",tenant="ops"} 1`) {
		if tctx.Err() != nil {
			t.Fatalf("retrybroker_tasks never counted the task:\n%s", b.scrape(t))
		}
		time.Sleep(200 * time.Millisecond)
	}

	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(b.scrape(t)))
	if err != nil {
		t.Fatal(err)
	}
	// sampleValue is the value of the sample of metric name whose labels
	// include labels: a counter's or gauge's value, a histogram's
	// observation count; -1 when there is none.
	sampleValue := func(name string, labels map[string]string) float64 {
	next:
		for _, m := range fams[name].GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				return m.GetCounter().GetValue()
			case m.Gauge != nil:
				return m.GetGauge().GetValue()
			case m.Histogram != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
		return -1
	}
	// What the calls above must have moved: each call by its outcome, the
	// 429's closure of its gate, the Redis round trips, the stream.
	for _, w := range []struct {
		name   string
		labels map[string]string
		min    float64
	}{
		{"retrybroker_calls_total", map[string]string{"rpc": "execute", "outcome": "success"}, 2},
		{"retrybroker_calls_total", map[string]string{"rpc": "stream", "outcome": "success"}, 1},
		{"retrybroker_call_attempts", map[string]string{"rpc": "execute"}, 2},
		{"retrybroker_call_duration_seconds", map[string]string{"rpc": "stream"}, 1},
		{"retrybroker_gate_closures_total", map[string]string{"source": "hint"}, 1},
		{"retrybroker_gate_hold_seconds", map[string]string{"source": "hint"}, 1},
		{"retrybroker_store_round_trips_total", map[string]string{"op": "admit", "result": "ok"}, 3},
		{"retrybroker_store_round_trip_seconds", map[string]string{"op": "complete"}, 1},
		{"retrybroker_stream_ends_total", map[string]string{"reason": "complete"}, 1},
		{"retrybroker_stream_bytes_total", nil, float64(len(streamBody))},
		{"retrybroker_task_dispatches_total", map[string]string{"outcome": "success"}, 1},
		{"retrybroker_task_dispatch_lag_seconds", nil, 1},
		{"retrybroker_tasks_oldest_due_seconds", nil, 0},
	} {
		if got := sampleValue(w.name, w.labels); got < w.min {
			t.Errorf("%s %v = %v, want >= %v", w.name, w.labels, got, w.min)
		}
	}
	have := map[string]bool{}
	for name, f := range fams {
		have[name] = true
		switch f.GetType().String() {
		case "HISTOGRAM", "GAUGE_HISTOGRAM":
			have[name+"_bucket"], have[name+"_sum"], have[name+"_count"] = true, true, true
		case "SUMMARY":
			have[name+"_sum"], have[name+"_count"] = true, true
		}
	}
	var missing []string
	for n, where := range want {
		if !have[n] {
			missing = append(missing, fmt.Sprintf("%s (in %s)", n, strings.Join(where, ", ")))
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("the rules and the dashboard name metrics a live broker does not export:\n  %s", strings.Join(missing, "\n  "))
	}
	t.Logf("%d metric names checked against a live broker", len(want))
}

const apiKey = "deploy-test-key"

// streamBody is what the upstream streams on /stream.
const streamBody = "data: one\n\ndata: two\n\n"

// broker is a real broker process on loopback.
type broker struct {
	cmd         *exec.Cmd
	done        chan error
	metricsAddr string
	client      rbv1.BrokerServiceClient
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startBroker starts the broker on Redis, with task storage, and a config whose one tenant
// may call loopback and has a breaker quick to open and to close. The
// process is killed by its pid when the test ends (and by the kernel if
// the test binary dies first).
func startBroker(t *testing.T) *broker {
	t.Helper()
	redisURL := redistest.Start(t)
	sum := sha256.Sum256([]byte(apiKey))
	cfg := fmt.Sprintf(`version: 1
tenants:
  - id: ops
    api_key_sha256: [%s]
    policies:
      default:
        max_retries: 1
        max_delay: 10s
        backoff: {base: 10ms, cap: 50ms}
        breaker: {min_calls: 4, failure_ratio: 0.5, window: 30s, open_for: 1s, max_open: 2s}
        allow_destinations: ["127.0.0.1/32"]
`, hex.EncodeToString(sum[:]))
	cfgFile := filepath.Join(t.TempDir(), "broker.yaml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	addr, metricsAddr := freeAddr(t), freeAddr(t)
	b := &broker{metricsAddr: metricsAddr, done: make(chan error, 1)}
	b.cmd = exec.Command(brokerBin, "--listen", addr, "--metrics-listen", metricsAddr, "--config", cfgFile, "--redis", redisURL,
		"--tasks-sqlite", filepath.Join(t.TempDir(), "tasks.db")) // the task metrics (TasksOldestDueTooOld)
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	logs := &strings.Builder{}
	var mu sync.Mutex
	b.cmd.Stdout, b.cmd.Stderr = lockedWriter{&mu, logs}, lockedWriter{&mu, logs}
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { b.done <- b.cmd.Wait() }()
	t.Cleanup(func() {
		_ = b.cmd.Process.Kill()
		<-b.done
		if t.Failed() {
			mu.Lock()
			t.Logf("broker logs:\n%s", logs.String())
			mu.Unlock()
		}
	})
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	b.client = rbv1.NewBrokerServiceClient(conn)
	waitServing(t, healthpb.NewHealthClient(conn), b.done, 30*time.Second)
	return b
}

// waitServing waits until the overall health is SERVING, failing if the
// process exits or within passes.
func waitServing(t *testing.T, h healthpb.HealthClient, done chan error, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		r, err := h.Check(ctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil && r.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return
		}
		select {
		case err := <-done:
			done <- err
			t.Fatalf("broker exited: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker not SERVING within %v: %v %v", within, r.GetStatus(), err)
		}
	}
}

func (b *broker) scrape(t *testing.T) string {
	t.Helper()
	resp, err := http.Get("http://" + b.metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %d %v", resp.StatusCode, err)
	}
	return string(body)
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
