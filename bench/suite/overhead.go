package suite

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc"

	"github.com/retrybroker/retrybroker/bench/baseline"
	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
	"github.com/retrybroker/retrybroker/internal/egress"
	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/metrics"
	"github.com/retrybroker/retrybroker/internal/server"
	"github.com/retrybroker/retrybroker/internal/store/memstore"
	"github.com/retrybroker/retrybroker/internal/tenant"
)

// OverheadParams sizes the overhead scenario.
type OverheadParams struct {
	// Concurrency levels: callers calling in a closed loop.
	Concurrency []int
	// Rounds per variant and level; variants alternate round by round
	// (A B, then B A, ...) so that machine noise hits them alike.
	Rounds int
	// Round is the length of one measured round.
	Round time.Duration
	// MaxCallsPerRound bounds a round besides its length.
	MaxCallsPerRound int
	// OneCallerSplit splits the rounds at one caller: Rounds*OneCallerSplit
	// rounds of Round/OneCallerSplit (0 or 1: no split). A round's end
	// costs one call there, so short rounds measure the same thing, and
	// adjacent short rounds meet the same machine: on a shared machine
	// the one-caller rows' per-round ratios move by a fifth from round to
	// round, and twenty of them gave a median that moved by several points
	// between runs even when both variants were the empty handler.
	OneCallerSplit int
	// OneCallerScale, when above 1, multiplies the number of one-caller
	// rounds (not their length): the median of more per-round ratios
	// moves less from run to run. A full run uses 4 (400 rounds of 30 ms
	// per variant): with 100, fourteen runs read Execute's one-caller
	// ratio at 87.3-93.4%, a range that decides a 90% target by chance;
	// with 400, four runs read it at 88.0-88.5% (docs/architecture.md).
	OneCallerScale int
	// ManyCallerScale, when above 1, multiplies the number of rounds at
	// every level above one caller (not their length). A full run uses 4
	// (80 rounds of 150 ms per variant): at 16 and 256 callers a round's
	// ratio spreads over an interquartile range of 8 to 20 points on
	// this machine, so the median of 20 moved by several points between
	// runs (Execute at 256 callers read 77-89% in nine runs at stop 42,
	// on two heads that measured alike); with 80 its standard error is
	// about half. Each run logs the spread (min, quartiles, max).
	ManyCallerScale int
	// BodyBudget is the in-process broker's body budget (0:
	// engine.DefaultBodyBudget, as cmd/broker's --max-buffered-bytes).
	// Investigations only: at 256 callers the default queues all but
	// DefaultBodyBudget/DefaultMaxResponseBody of them.
	BodyBudget int64
}

// bodyBudget is the in-process broker's body budget under p.
func (p OverheadParams) bodyBudget() int64 {
	if p.BodyBudget > 0 {
		return p.BodyBudget
	}
	return engine.DefaultBodyBudget
}

// rounds is the number and length of the rounds at concurrency c.
func (p OverheadParams) rounds(c int) (int, time.Duration) {
	if c == 1 {
		n, d := p.Rounds, p.Round
		if p.OneCallerSplit > 1 {
			n, d = n*p.OneCallerSplit, d/time.Duration(p.OneCallerSplit)
		}
		return n * max(p.OneCallerScale, 1), d
	}
	return p.Rounds * max(p.ManyCallerScale, 1), p.Round
}

// OverheadResult is one variant at one concurrency.
type OverheadResult struct {
	// Group is "classify" or "execute"; Variant the server measured.
	Group       string
	Variant     string
	Concurrency int
	Calls       int
	Errors      int
	Elapsed     time.Duration
	// Throughput is calls per second over all rounds; P50 and P99 are
	// per-call latencies over all rounds.
	Throughput float64
	P50, P99   time.Duration
	// P90 and Mean are logged, not reported: at one caller the latency
	// has a slow mode (calls that wake the other core, or meet a
	// collection) that p50 does not show and the throughput does.
	P90, Mean time.Duration
	// RoundThroughput is the throughput of each measured round, in order:
	// round r of every variant of a group ran back to back.
	RoundThroughput []float64
	// UpstreamConns is the number of connections the upstream accepted
	// during this variant's measured rounds (0 when every call reused a
	// pooled connection).
	UpstreamConns int64
}

// Variant names.
const (
	VarEmpty     = "empty handler"
	VarClassify  = "broker ClassifyResponse"
	VarDirect    = "direct HTTP"
	VarForwarder = "minimal forwarder"
	VarExecute   = "broker Execute"
	// VarControlA and VarControlB are two servers of the empty handler,
	// measured against each other at one caller (the "control" group): a
	// ratio the method gives when there is nothing to find.
	VarControlA = "empty handler A"
	VarControlB = "empty handler B"
)

// inproc is a gRPC server of the suite's own process, built exactly as the
// broker builds its server (server.NewGRPCServer: interceptors, stats
// handler, limits), with a quiet logger and a no-op tracer provider.
type inproc struct {
	gs   *grpc.Server
	conn *grpc.ClientConn
	cl   rbv1.BrokerServiceClient
}

func serveInproc(svc rbv1.BrokerServiceServer) (*inproc, error) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	gs, _ := server.NewGRPCServer(svc, server.GRPCConfig{Logger: quiet, TracerProvider: noop.NewTracerProvider()})
	lis, err := net.Listen("tcp", net.JoinHostPort(loopback, "0"))
	if err != nil {
		return nil, err
	}
	go func() { _ = gs.Serve(lis) }()
	conn, err := dial(lis.Addr().String())
	if err != nil {
		gs.Stop()
		return nil, err
	}
	return &inproc{gs: gs, conn: conn, cl: rbv1.NewBrokerServiceClient(conn)}, nil
}

func (p *inproc) close() {
	_ = p.conn.Close()
	p.gs.Stop()
}

// inprocRunner is the engine of the suite's in-process broker, wired as
// cmd/broker wires it: the memory store st, the metrics observer, a body
// budget of budget bytes (cmd/broker's default unless an investigation
// sets another), and no-op tracing (no OTLP export) with the default
// trace propagators. The overhead and stream scenarios both use it, so
// their broker pays what cmd/broker's does.
func inprocRunner(st *memstore.Store, budget int64) *engine.Runner {
	return engine.NewRunner(st,
		engine.WithTracer(noop.NewTracerProvider().Tracer("bench")),
		engine.WithPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})),
		engine.WithObserver(metrics.New()),
		engine.WithBodyBudget(budget),
	)
}

// variant is one measured way of making a call.
type variant struct {
	group, name string
	call        func(ctx context.Context) error
}

// overheadRun measures ClassifyResponse against the empty handler, and
// Execute against the minimal forwarder and direct HTTP, at each
// concurrency, alternating the variants of a group round by round.
//
// While the Execute group runs, the suite profiles its own process and
// returns the handlers' shares of it (HandlerShare): what the broker's
// Execute and the forwarder spent per call outside the HTTP client.
func (s *suite) overheadRun(ctx context.Context, p OverheadParams) ([]OverheadResult, []HandlerShare, error) {
	// The upstream: a local HTTP server answering a small JSON body.
	upLis, err := net.Listen("tcp", net.JoinHostPort(loopback, "0"))
	if err != nil {
		return nil, nil, err
	}
	var upConns atomic.Int64
	up := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	}), ReadHeaderTimeout: 10 * time.Second, ConnState: func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			upConns.Add(1)
		}
	}}
	go func() { _ = up.Serve(upLis) }()
	defer up.Close()
	upURL := "http://" + upLis.Addr().String() + "/v1/items"

	maxConc := slices.Max(p.Concurrency)
	idle := max(64, maxConc)
	// The forwarder and direct HTTP have a transport each, as the broker
	// has its own: a shared one would keep the forwarder's connection,
	// buffers and goroutines warm during direct HTTP's rounds too.
	plainClient := func() *http.Client {
		tr := &http.Transport{Proxy: nil, MaxIdleConns: 2 * idle, MaxIdleConnsPerHost: idle, IdleConnTimeout: time.Minute}
		return &http.Client{Transport: tr}
	}
	plain, fwdClient := plainClient(), plainClient()
	defer plain.CloseIdleConnections()
	defer fwdClient.CloseIdleConnections()

	// The broker, wired as cmd/broker wires it (inprocRunner), with the
	// guarded egress transport at its default pool sizes. The baselines'
	// transport keeps as many idle connections as there are callers.
	dev, err := tenant.Dev([]string{"127.0.0.1/32"})
	if err != nil {
		return nil, nil, err
	}
	st := memstore.New()
	defer st.Close()
	clients := egress.NewClients(egress.ClientConfig{}) // cmd/broker's defaults
	defer clients.CloseIdleConnections()
	runner := inprocRunner(st, p.bodyBudget())
	exec := &server.Executor{Runner: runner, Clients: clients}

	servers := map[string]*inproc{}
	defer func() {
		for _, sv := range servers {
			sv.close()
		}
	}()
	for name, svc := range map[string]rbv1.BrokerServiceServer{
		VarEmpty:     baseline.EmptyService{},
		VarClassify:  server.New(server.WithDefaultTenant(dev)),
		VarForwarder: baseline.Forwarder{Client: fwdClient},
		VarExecute:   server.New(server.WithDefaultTenant(dev), server.WithExecutor(exec)),
		VarControlA:  baseline.EmptyService{},
		VarControlB:  baseline.EmptyService{},
	} {
		sv, err := serveInproc(svc)
		if err != nil {
			return nil, nil, err
		}
		servers[name] = sv
	}

	classifyReq := baseline.ClassifyRequest()
	classifyIn := func(group, name string) variant {
		cl := servers[name].cl
		return variant{group: group, name: name, call: func(ctx context.Context) error {
			_, err := cl.ClassifyResponse(ctx, classifyReq)
			return err
		}}
	}
	classify := func(name string) variant { return classifyIn("classify", name) }
	execReq := &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Method: "GET", Url: upURL}}
	execute := func(name string) variant {
		cl := servers[name].cl
		return variant{group: "execute", name: name, call: func(ctx context.Context) error {
			resp, err := cl.Execute(ctx, execReq)
			if err != nil {
				return err
			}
			if resp.GetResponse().GetStatusCode() != 200 {
				return fmt.Errorf("execute: status %d outcome %v", resp.GetResponse().GetStatusCode(), resp.GetOutcome())
			}
			return nil
		}}
	}
	direct := variant{group: "execute", name: VarDirect, call: func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, upURL, nil)
		if err != nil {
			return err
		}
		resp, err := plain.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("direct: status %d", resp.StatusCode)
		}
		return nil
	}}
	groups := [][]variant{
		{classify(VarEmpty), classify(VarClassify)},
		// The control runs at one caller only, where the noise is largest.
		{classifyIn("control", VarControlA), classifyIn("control", VarControlB)},
		// The broker and its baseline at the ends: the order reverses every
		// other round (A B C, C B A), so each end runs twice in a row at
		// every other boundary, as often as the other, and the middle one
		// never does. A round that follows one of the same variant starts
		// on warm caches; with the broker in the middle it read about two
		// points lower against the forwarder at one caller (docs/architecture.md).
		// Direct HTTP, a reference with no target, takes the middle.
		{execute(VarForwarder), direct, execute(VarExecute)},
	}

	var out []OverheadResult
	var errs []error
	var shares []HandlerShare
	for _, g := range groups {
		var capture *cpuCapture
		served := map[string]int{} // calls per variant while the capture ran
		if g[0].group == "execute" {
			capture = startCPUCapture()
		}
		for _, c := range p.Concurrency {
			if g[0].group == "control" && c != 1 {
				continue
			}
			if ctx.Err() != nil {
				if capture != nil {
					_, _ = capture.stop()
				}
				return out, shares, ctx.Err()
			}
			s.logf("overhead: %s at concurrency %d", g[0].group, c)
			// Warm up every variant (connections, pools, JIT-free but caches).
			for _, v := range g {
				served[v.name] += runRound(ctx, v, c, p.Round/2, p.MaxCallsPerRound).calls
			}
			acc := make([]roundAcc, len(g))
			rounds, round := p.rounds(c)
			for r := range rounds {
				for i := range g {
					j := i
					if r%2 == 1 { // reverse order every other round
						j = len(g) - 1 - i
					}
					c0 := upConns.Load()
					a := runRound(ctx, g[j], c, round, p.MaxCallsPerRound)
					a.conns = upConns.Load() - c0
					served[g[j].name] += a.calls
					acc[j].add(a)
				}
			}
			// How widely single rounds spread: what decides how many
			// rounds the median needs (docs/architecture.md).
			if q, ok := quartiles(roundRatios(acc[len(g)-1].rounds, acc[0].rounds)); ok {
				s.logf("overhead: %s / %s c=%d, per-round ratios of %d rounds: min %.1f%%, quartiles %.1f%% %.1f%% %.1f%%, max %.1f%%",
					g[len(g)-1].name, g[0].name, c, len(acc[0].rounds), 100*q[0], 100*q[1], 100*q[2], 100*q[3], 100*q[4])
			}
			for i, v := range g {
				res := acc[i].result(v, c)
				if res.Errors > 0 {
					errs = append(errs, fmt.Errorf("%s at %d: %d errors (%s)", v.name, c, res.Errors, acc[i].firstErr))
				}
				s.logf("overhead: %-24s c=%-3d %9.0f calls/s  mean %v  p50 %v  p90 %v  p99 %v  upstream conns %d", v.name, c, res.Throughput, res.Mean, res.P50, res.P90, res.P99, res.UpstreamConns)
				out = append(out, res)
			}
		}
		if capture != nil {
			prof, err := capture.stop()
			if err != nil {
				s.logf("overhead: %v", err)
				continue
			}
			brokerExecute, _ := server.ProfileFuncs()
			shares = handlerShares(prof, []HandlerShare{
				{Variant: VarExecute, Handler: brokerExecute, Calls: served[VarExecute]},
				{Variant: VarForwarder, Handler: server.FuncName(baseline.Forwarder.Execute), Calls: served[VarForwarder]},
			}, 8)
			for _, h := range shares {
				s.logf("overhead: profile: %s", shareText(h))
			}
		}
	}
	return out, shares, errors.Join(errs...)
}

// roundAcc accumulates rounds of one variant.
type roundAcc struct {
	calls, errors int
	elapsed       time.Duration
	lat           []time.Duration
	firstErr      string
	rounds        []float64
	conns         int64 // upstream connections opened
}

func (a *roundAcc) add(b roundAcc) {
	if b.elapsed > 0 {
		a.rounds = append(a.rounds, float64(b.calls)/b.elapsed.Seconds())
	}
	a.calls += b.calls
	a.conns += b.conns
	a.errors += b.errors
	a.elapsed += b.elapsed
	a.lat = append(a.lat, b.lat...)
	if a.firstErr == "" {
		a.firstErr = b.firstErr
	}
}

func (a *roundAcc) result(v variant, c int) OverheadResult {
	r := OverheadResult{Group: v.group, Variant: v.name, Concurrency: c, Calls: a.calls, Errors: a.errors, Elapsed: a.elapsed, RoundThroughput: a.rounds, UpstreamConns: a.conns}
	if a.elapsed > 0 {
		r.Throughput = float64(a.calls) / a.elapsed.Seconds()
	}
	slices.Sort(a.lat)
	r.P50, r.P90, r.P99 = percentile(a.lat, 0.50), percentile(a.lat, 0.90), percentile(a.lat, 0.99)
	if len(a.lat) > 0 {
		var sum time.Duration
		for _, l := range a.lat {
			sum += l
		}
		r.Mean = sum / time.Duration(len(a.lat))
	}
	return r
}

// quartiles returns the minimum, the quartiles (nearest rank) and the
// maximum of xs, which it sorts; false when xs is empty.
func quartiles(xs []float64) ([5]float64, bool) {
	if len(xs) == 0 {
		return [5]float64{}, false
	}
	slices.Sort(xs)
	at := func(q float64) float64 {
		i := int(q*float64(len(xs))+0.5) - 1
		return xs[min(max(i, 0), len(xs)-1)]
	}
	return [5]float64{xs[0], at(0.25), median(xs), at(0.75), xs[len(xs)-1]}, true
}

// percentile returns the q-quantile of sorted samples (nearest rank).
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// runRound runs c callers in a closed loop for d (or maxCalls calls in
// all) and returns the calls, errors and latencies.
func runRound(ctx context.Context, v variant, c int, d time.Duration, maxCalls int) roundAcc {
	rctx, cancel := context.WithTimeout(ctx, d+10*time.Second)
	defer cancel()
	var left atomic.Int64
	left.Store(int64(maxCalls))
	var mu sync.Mutex
	var acc roundAcc
	var wg sync.WaitGroup
	start := time.Now()
	stop := start.Add(d)
	for range c {
		wg.Go(func() {
			lat := make([]time.Duration, 0, 1024)
			errs := 0
			firstErr := ""
			for left.Add(-1) >= 0 {
				t0 := time.Now()
				if !t0.Before(stop) {
					break
				}
				if err := v.call(rctx); err != nil {
					errs++
					if firstErr == "" {
						firstErr = err.Error()
					}
					if rctx.Err() != nil {
						break
					}
					continue
				}
				lat = append(lat, time.Since(t0))
			}
			mu.Lock()
			acc.lat = append(acc.lat, lat...)
			acc.calls += len(lat)
			acc.errors += errs
			if acc.firstErr == "" {
				acc.firstErr = firstErr
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	acc.elapsed = time.Since(start)
	return acc
}
