package suite_test

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/bench/suite"
)

// repoRoot is the module root, two levels above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// brokerBin returns $BROKER_BIN (absolute, or relative to the repository
// root, as for the clients' tests) or builds ./cmd/broker.
func brokerBin(t *testing.T, root string) string {
	t.Helper()
	if p := os.Getenv("BROKER_BIN"); p != "" {
		if !filepath.IsAbs(p) {
			p = filepath.Join(root, p)
		}
		return p
	}
	bin := filepath.Join(t.TempDir(), "broker")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/broker")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/broker: %v\n%s", err, out)
	}
	return bin
}

// TestQuickRun runs the whole suite in quick mode and checks that it
// produces its tables, the document and the charts. It asserts no
// performance figure: the machine may be busy.
func TestQuickRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs broker and redis-server processes (a single server, a 3-master cluster, a sentinel) for about a minute")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server not found on PATH: run make redis (or apt-get install -y redis-server)")
	}
	root := repoRoot(t)
	bin := brokerBin(t, root)
	out := t.TempDir()
	doc := filepath.Join(out, "benchmarks.md")
	charts := filepath.Join(out, "benchmarks")
	var log bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	rep, err := suite.Run(ctx, suite.Options{
		Quick: true, BrokerBin: bin, ModuleRoot: root, DocPath: doc, ChartDir: charts,
		Command: "go run ./bench/cmd/benchsuite -quick", Log: &log,
	})
	t.Logf("quick run: %v", time.Since(start))
	if err != nil {
		t.Fatalf("run: %v\n%s", err, log.String())
	}
	if len(rep.Errors) > 0 {
		t.Fatalf("scenario errors: %q\n%s", rep.Errors, log.String())
	}

	sz := suite.Params(true)
	qp, op, pp, sp := sz.Quota, sz.Overhead, sz.Parked, sz.Scale
	if len(rep.QuotaRes) != len(qp.Cases) {
		t.Errorf("quota rows: %d, want %d", len(rep.QuotaRes), len(qp.Cases))
	}
	for i, q := range rep.QuotaRes {
		if q.Calls == 0 || q.Stats.Accepted == 0 {
			t.Errorf("quota %s/%s: no calls reached the provider: %+v", q.Style, q.Label(), q)
		}
		if want := qp.Cases[i].Callers; want != 0 && q.Callers != want {
			t.Errorf("quota %s/%s: %d callers, want %d", q.Style, q.Label(), q.Callers, want)
		}
		if len(q.Stats.Windows) != qp.Windows || len(q.Later().Windows) != qp.Windows-1 {
			t.Errorf("quota %s/%s: %d windows, %d after the first", q.Style, q.Label(), len(q.Stats.Windows), len(q.Later().Windows))
		}
	}
	hp := sz.Herd
	if len(rep.HerdRes) != len(hp.Cases) || len(rep.RollingRes) != len(hp.Rolling) {
		t.Errorf("herd rows: %d, rolling rows: %d; want %d, %d", len(rep.HerdRes), len(rep.RollingRes), len(hp.Cases), len(hp.Rolling))
	}
	for _, h := range append(append([]suite.HerdResult(nil), rep.HerdRes...), rep.RollingRes...) {
		if h.Calls == 0 || h.Stats.Accepted == 0 || len(h.Stats.Windows) != hp.Windows || h.Callers != hp.Callers {
			t.Errorf("herd %s: nothing measured: %+v", h.Label(), h)
		}
		// Every broker call is held some time (at least the first
		// window's queue), and every one is counted in one window.
		if h.Setup != suite.HerdRetryableHTTP && h.HeldFirst.Calls+h.HeldLater.Calls != h.Calls {
			t.Errorf("herd %s: %d calls, %d hold times", h.Label(), h.Calls, h.HeldFirst.Calls+h.HeldLater.Calls)
		}
	}
	for _, h := range rep.RollingRes {
		if rs := h.Restart; rs == nil || rs.Err != "" || rs.Exited <= 0 || rs.Ready <= 0 {
			t.Errorf("rolling %s: replica 0 not restarted: %+v", h.Label(), h.Restart)
		}
	}
	if len(rep.OutageRes) != len(sz.Outage.Setups) {
		t.Errorf("outage setups: %d, want %d", len(rep.OutageRes), len(sz.Outage.Setups))
	}
	for _, o := range rep.OutageRes {
		// The upstream is down for a while in every setup: some call
		// reaches it then, and the load goes on after the recovery.
		if o.Calls == 0 || o.Stats.During == 0 || len(o.Bins) == 0 {
			t.Errorf("outage %s: nothing measured: %+v", o.Setup, o)
		}
	}
	// Five variants at every level, and the control's two at one caller.
	want := len(op.Concurrency) * 5
	if slices.Contains(op.Concurrency, 1) {
		want += 2
	}
	if len(rep.OverRes) != want {
		t.Errorf("overhead results: %d, want %d", len(rep.OverRes), want)
	}
	if _, ok := rep.ThroughputRatio(suite.VarControlB, suite.VarControlA, 1); !ok {
		t.Errorf("no control ratio at one caller")
	}
	for _, o := range rep.OverRes {
		if o.Calls == 0 || o.P50 <= 0 {
			t.Errorf("overhead %s at %d: no calls measured", o.Variant, o.Concurrency)
		}
	}
	if len(rep.Parked) != len(pp.Calls) {
		t.Errorf("parked results: %d, want %d", len(rep.Parked), len(pp.Calls))
	}
	if len(rep.Config) != len(sp.Tenants) || len(rep.RedisOps) != 4*len(suite.Topologies) {
		t.Errorf("scale results: %d config, %d redis", len(rep.Config), len(rep.RedisOps))
	}
	topos := map[suite.Topology]int{}
	for _, r := range rep.RedisOps {
		topos[r.Topology]++
		// Every case makes the attempts it is made of, runs at least one
		// script per attempt on exactly one master, and sends at least
		// one top-level command per attempt; but the plain case on the
		// default broker, whose local admission must save most of them
		// (its gate, warmed past slow start, is plain before counting
		// starts: what it still sends is the counts' flushes, if one
		// falls in the count, on one master at most).
		switch {
		case r.Case == suite.PlainCase:
			if r.RoundTrips >= int64(r.Attempts) || r.MastersReached > 1 {
				t.Errorf("redis ops %s %q: local admission saved no round trip: %+v", r.Topology, r.Case, r)
			}
		case r.Commands < int64(r.Attempts) || r.RoundTrips < int64(r.Attempts) || r.TopLevel < int64(r.Attempts) || r.MastersReached != 1:
			t.Errorf("redis ops %s %q: not counted: %+v", r.Topology, r.Case, r)
		}
		if r.Attempts != r.WantAttempts*r.Executes || r.Bound == 0 {
			t.Errorf("redis ops %s %q: %d attempts for %d calls (want %d each), bound %v", r.Topology, r.Case, r.Attempts, r.Executes, r.WantAttempts, r.Bound)
		}
		if want := map[suite.Topology]int{suite.TopoSingle: 1, suite.TopoCluster: 3, suite.TopoSentinel: 1}[r.Topology]; r.Masters != want {
			t.Errorf("redis ops %s: %d masters, want %d", r.Topology, r.Masters, want)
		}
		if r.Wire != (r.Topology == suite.TopoSingle) {
			t.Errorf("redis ops %s: counted on the wire %v", r.Topology, r.Wire)
		}
	}
	for _, topo := range suite.Topologies {
		if topos[topo] != 4 {
			t.Errorf("redis ops on %s: %d cases, want 4", topo, topos[topo])
		}
	}
	if st := rep.Stream; st == nil || st.Single.PeakRSS == 0 || st.Concurrent.Streams == 0 || len(st.TTFB) != 8 || len(st.Throughput) != 3 {
		t.Errorf("stream results: %+v", rep.Stream)
	} else {
		if _, ok := st.ThroughputRatio(); !ok {
			t.Error("stream throughput ratio not measured")
		}
		if _, ok := st.ThroughputShare(suite.VarStreamBroker, suite.VarStreamDirect); !ok {
			t.Error("stream throughput share of direct HTTP not measured")
		}
		for _, c := range st.Params.TTFBConcurrency {
			if _, ok := st.TTFBRatio(suite.VarStreamBroker, suite.VarStreamForwarder, c); !ok {
				t.Errorf("TTFB against the forwarder not measured at concurrency %d", c)
			}
		}
	}

	checkCredentials(t, rep)
	checkTasks(t, rep)

	md := rep.Markdown()
	for _, want := range []string{
		"### Targets", "| target | measured | met |",
		"### Broker-held credentials", "| aws_sigv4, PUT 1.0 KiB |", "Execute with header credential (value_file), GET ≥ 97% of Execute without, concurrency 16",
		"### Quota citizenship", "| style | row |", "| github | a |", "| github | b |", "| retry-after | b |", "| retry-after | c | 3 brokers, shared Redis | 100 |",
		"### Outage", "| a | – |", "| broker, no breaker | `breaker: {disabled: true}` |", "| broker, breaker | `breaker: {",
		"outage: with the breaker, the first success comes",
		"### Overhead", "broker ClassifyResponse", "minimal forwarder", "the control, two identical servers",
		"| retry-after | d-cluster | 3 brokers, 3-master Redis Cluster, a different seed node each | 4 |",
		"retry-after row d-cluster (3 brokers, 3-master Redis Cluster, a different seed node each), 4 callers, after the first window: 0 early sends",
		"### Herd: more callers than quota, all at once", "| github | a | short |", "| github | 1 broker | long |", "### Herd: side by side", "### Rolling restart", "| retry-after | rolling restart | short |",
		"github, 1 broker, long deadlines, first window: ≤ 1 refused", "retry-after, rolling restart, short deadlines: 0 broker-caused failed RPCs",
		"retry-after, rolling restart, short deadlines: the restarted replica reports SharedState SERVING within 3 s of its start",
		"### Parked calls", "### Scale", "round trips / Execute",
		"| one server | 1 attempt: plain 200 (reports nothing) |", "| 3-master cluster | 1 attempt: 200 with GitHub quota headers |", "| master + replica + sentinel | 2 attempts: 503 Retry-After: 0, then plain 200 |",
		"Redis 3-master cluster, 1 attempt: plain 200 (reports nothing): ≤ 1 round trip per Execute",
		"### Streaming", "minimal streaming forwarder", "time to first byte", "ExecuteStream / direct HTTP, the physical limit",
		"ExecuteStream time to first byte p50 ≤ 1.2× the forwarder's, concurrency 1",
		"### Deferred calls (tasks)", "| dispatch, 300 tasks due at once |", "tasks (SQLite): dispatch lag p99 ≤ 100 ms after the gate reopens",
		"| PostgreSQL | failover: 200 tasks created on two replicas, one killed (SIGKILL) after",
		"tasks (PostgreSQL): two replicas, one killed (SIGKILL) while dispatching: every one of 200 tasks sent and SUCCEEDED, each send with its task's Idempotency-Key",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	data, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# Benchmarks", "## Machine", "go run ./bench/cmd/benchsuite -quick", "## Targets", "## 1. Quota citizenship", "## 2. Outage", "## 5. Scale", "## 7. A herd", "## 8. Broker-held credentials", "## 9. Deferred calls (tasks)", "benchmarks/herd-refusals-github.png", "benchmarks/" + suite.ChartGoodput, "benchmarks/" + suite.ChartOutage} {
		if !bytes.Contains(data, []byte(want)) {
			t.Errorf("%s lacks %q", doc, want)
		}
	}
	for _, name := range []string{"herd-refusals-github.png", "herd-refusals-retry-after.png", suite.ChartGoodput, suite.ChartWaste, suite.ChartOutage, suite.ChartLatencyClassify, suite.ChartLatencyExecute, suite.ChartRatio} {
		f, err := os.Open(filepath.Join(charts, name))
		if err != nil {
			t.Error(err)
			continue
		}
		cfg, err := png.DecodeConfig(f)
		_ = f.Close()
		if err != nil || cfg.Width < 100 || cfg.Height < 100 {
			t.Errorf("%s: not a chart (%v, %dx%d)", name, err, cfg.Width, cfg.Height)
		}
	}
}

// checkCredentials checks the credentials scenario's rows: every row
// measured both variants without errors, and the token endpoint answered
// one request per broker process (the OAuth2 row measured the cached path).
func checkCredentials(t *testing.T, rep *suite.Report) {
	t.Helper()
	cr := rep.Credentials
	if cr == nil {
		t.Fatal("no credentials results")
	}
	if len(cr.Rows) != 5 || cr.Params.Concurrency != 16 {
		t.Errorf("credentials: %d rows at concurrency %d, want 5 at 16", len(cr.Rows), cr.Params.Concurrency)
	}
	targets := 0
	for _, r := range cr.Rows {
		if r.Without.Calls == 0 || r.With.Calls == 0 || r.Without.Errors+r.With.Errors > 0 {
			t.Errorf("credentials row %q: %d/%d calls, %d/%d errors", r.Name, r.Without.Calls, r.With.Calls, r.Without.Errors, r.With.Errors)
		}
		if _, ok := r.Share(); !ok {
			t.Errorf("credentials row %q: no share", r.Name)
		}
		if r.Target > 0 {
			targets++
		}
	}
	if targets != 3 {
		t.Errorf("credentials: %d rows with a target, want 3 (header, oauth2, sigv4)", targets)
	}
	if cr.Brokers != 1 || cr.TokenRequests != 1 {
		t.Errorf("credentials: %d token requests for %d brokers, want 1 for 1", cr.TokenRequests, cr.Brokers)
	}
}

// checkTasks checks the tasks scenario's rows: every row ran to the end,
// on SQLite and on PostgreSQL, no create failed, every task due was sent
// exactly once and every citizenship task succeeded (correctness; no
// figure is judged).
func checkTasks(t *testing.T, rep *suite.Report) {
	t.Helper()
	tr := rep.Tasks
	if tr == nil {
		t.Fatal("no tasks results")
	}
	if !tr.CreateMeasured || !tr.DispatchMeasured || !tr.LagMeasured || !tr.ReopenMeasured || !tr.CitizenMeasured || tr.Store != "SQLite" {
		t.Errorf("tasks: rows that did not run to the end: %+v", tr)
	}
	if tr.CreateErrors != 0 || tr.CreateRate == 0 || tr.RSSAfter == 0 {
		t.Errorf("tasks: creation: %.0f/s, %d errors, RSS %d", tr.CreateRate, tr.CreateErrors, tr.RSSAfter)
	}
	if tr.DispatchLost+tr.LagLost+tr.ReopenLost != 0 || tr.DispatchDup != 0 || tr.DispatchRate == 0 {
		t.Errorf("tasks: lost %d/%d/%d, %d duplicate sends, %.0f/s", tr.DispatchLost, tr.LagLost, tr.ReopenLost, tr.DispatchDup, tr.DispatchRate)
	}
	if pg := tr.Postgres; pg == nil {
		t.Error("tasks: no PostgreSQL rows")
	} else if !pg.CreateMeasured || !pg.DispatchMeasured || !pg.LagMeasured || pg.CreateErrors != 0 || pg.DispatchLost+pg.LagLost != 0 || pg.DispatchDup != 0 {
		t.Errorf("tasks: PostgreSQL rows: %+v", pg)
	}
	if k := tr.Kill; k == nil {
		t.Error("tasks: no failover row")
	} else if !k.Measured || k.Sent != k.Tasks || k.Succeeded != k.Tasks || k.KeyMismatch != 0 || k.SentAtKill == 0 || k.KillToLast <= 0 {
		t.Errorf("tasks: failover row: %+v", *k)
	}
	if tr.CitizenSucceeded != tr.Params.Citizenship || tr.Citizen.Accepted < tr.Params.Citizenship {
		t.Errorf("tasks: citizenship: %d of %d succeeded, %d accepted sends", tr.CitizenSucceeded, tr.Params.Citizenship, tr.Citizen.Accepted)
	}
}

// TestQuickCredentials runs the credentials scenario alone, as
// `benchsuite -only credentials` does, and checks its rows, its targets and its section of
// the document. It asserts no performance figure.
func TestQuickCredentials(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a broker process")
	}
	root := repoRoot(t)
	bin := brokerBin(t, root)
	doc := filepath.Join(t.TempDir(), "credentials.md")
	var log bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := suite.Run(ctx, suite.Options{
		Quick: true, BrokerBin: bin, ModuleRoot: root, DocPath: doc, Only: []string{"credentials"},
		Command: "go run ./bench/cmd/benchsuite -quick -only credentials", Log: &log,
	})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, log.String())
	}
	if len(rep.Errors) > 0 {
		t.Fatalf("scenario errors: %q\n%s", rep.Errors, log.String())
	}
	checkCredentials(t, rep)
	if len(rep.OverRes)+len(rep.QuotaRes) > 0 || rep.Stream != nil {
		t.Error("-only credentials ran other scenarios")
	}
	data, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"## 8. Broker-held credentials", "| header credential (value_file), GET |", "| oauth2_client_credentials, cached token, GET |",
		"| http_signature ed25519, GET |", "oauth2_client_credentials, cached token: 1 token request per broker process (1 process) | 1 | yes |",
	} {
		if !bytes.Contains(data, []byte(want)) {
			t.Errorf("%s lacks %q:\n%s", doc, want, data)
		}
	}
}
