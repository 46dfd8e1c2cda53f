package suite

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/retrybroker/retrybroker/bench/fakeprovider"
	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
)

// QuotaParams sizes the quota-citizenship scenario.
type QuotaParams struct {
	// Callers is the number of concurrent callers (C) of a case that
	// sets none.
	Callers int
	// Quota is the provider's quota per window (Q).
	Quota int
	// Window is the window length (W, whole seconds).
	Window time.Duration
	// Windows is the number of measured windows.
	Windows int
	// MaxCallsPerCaller bounds each caller's loop besides time.
	MaxCallsPerCaller int
	// Cases lists the (style, row) pairs to run, in order.
	Cases []QuotaCase
}

// QuotaCase is one row of the scenario: a provider style, a way of
// calling it, and how many callers call.
type QuotaCase struct {
	Style fakeprovider.Style
	Row   Row
	// Callers is the number of concurrent callers; zero means
	// QuotaParams.Callers.
	Callers int
}

// callers returns the case's number of callers under p.
func (c QuotaCase) callers(p QuotaParams) int {
	if c.Callers > 0 {
		return c.Callers
	}
	return p.Callers
}

// Row is how the callers reach the provider.
type Row string

// Rows of the quota-citizenship scenario.
const (
	RowRetryableHTTP Row = "a"
	RowOneBroker     Row = "b"
	RowRedis3        Row = "c"
	RowMemory3       Row = "d"
	// RowClusterShared is row c on the suite's 3-master Redis Cluster:
	// every broker has every node as a seed.
	RowClusterShared Row = "c-cluster"
	// RowClusterSeeds is the cluster's row d: as RowClusterShared, but
	// each broker has a different single node as its seed.
	RowClusterSeeds Row = "d-cluster"
)

// Rows lists every row, in the order of the tables.
var Rows = []Row{RowRetryableHTTP, RowOneBroker, RowRedis3, RowMemory3, RowClusterShared, RowClusterSeeds}

// Describe returns the row's long name.
func (r Row) Describe() string {
	switch r {
	case RowRetryableHTTP:
		return "callers retry themselves (go-retryablehttp defaults)"
	case RowOneBroker:
		return "1 broker"
	case RowRedis3:
		return "3 brokers, shared Redis"
	case RowMemory3:
		return "3 brokers, memory store each"
	case RowClusterShared:
		return "3 brokers, 3-master Redis Cluster"
	case RowClusterSeeds:
		return "3 brokers, 3-master Redis Cluster, a different seed node each"
	}
	return string(r)
}

// QuotaResult is one measured row.
type QuotaResult struct {
	// QuotaCase is the case, with Callers always set.
	QuotaCase
	Stats fakeprovider.Stats
	// Calls are the logical calls the callers made (retryablehttp.Do or
	// Execute), Outcomes how they ended.
	Calls    int
	Outcomes map[string]int
	// CallerWaits counts the times a broker caller waited retry_after.
	CallerWaits int
	// Errors counts gRPC errors (broker rows) or give-ups (row a: retries
	// exhausted), both included in Outcomes too.
	Errors int
	Err    string
}

// Goodput is accepted calls / (Q × windows).
func (r QuotaResult) Goodput() float64 { return r.Stats.Goodput() }

// Waste is refused calls per window.
func (r QuotaResult) Waste() float64 { return r.Stats.RefusedPerWindow() }

// Later is the statistics of the windows after the first: in the first
// window nothing can be known of the quota before the first answer, so a
// broker that learns the quota from refusals is judged on the later ones.
func (r QuotaResult) Later() fakeprovider.Stats { return r.Stats.From(1) }

// First is the first window's statistics, or the zero value when the
// run had no window.
func (r QuotaResult) First() fakeprovider.WindowStats {
	if len(r.Stats.Windows) == 0 {
		return fakeprovider.WindowStats{}
	}
	return r.Stats.Windows[0]
}

// Label names the row with its callers, e.g. "b, 100 callers".
func (c QuotaCase) Label() string { return fmt.Sprintf("%s, %d callers", c.Row, c.Callers) }

// quotaRun runs every case of the scenario, one after the other.
func (s *suite) quotaRun(ctx context.Context, p QuotaParams) []QuotaResult {
	var out []QuotaResult
	// One configuration for every broker row, checked by the broker
	// binary first: a broker that refuses it fails every broker row.
	var cfgPath string
	var cfgErr error
	for _, c := range p.Cases {
		if c.Row != RowRetryableHTTP {
			if cfgPath, cfgErr = s.writeBrokerConfig(ctx, quotaBrokerConfig); cfgErr != nil {
				s.logf("quota: %v", cfgErr)
			}
			break
		}
	}
	for _, c := range p.Cases {
		if ctx.Err() != nil {
			break
		}
		c.Callers = c.callers(p)
		s.logf("quota: style %s row %s (%s), %d callers", c.Style, c.Row, c.Row.Describe(), c.Callers)
		var r QuotaResult
		var err error
		if c.Row != RowRetryableHTTP && cfgErr != nil {
			r, err = QuotaResult{QuotaCase: c}, cfgErr
		} else {
			r, err = s.quotaCase(ctx, p, c, cfgPath)
		}
		if err != nil {
			r.Err = err.Error()
			s.logf("quota: %s/%s: %v", c.Style, c.Label(), err)
		} else {
			l := r.Later()
			s.logf("quota: %s/%s: goodput %.1f%%, refused/window %.2f (max %d), early %d, outside %d; first window refused %d, early %d; later windows goodput %.1f%%, refused max %d, early %d; outcomes %v",
				c.Style, c.Label(), 100*r.Goodput(), r.Waste(), r.Stats.MaxRefusedInAWindow(), r.Stats.Early, r.Stats.Outside,
				r.First().Refused, r.First().Early, 100*l.Goodput(), l.MaxRefusedInAWindow(), l.Early, r.Outcomes)
		}
		out = append(out, r)
	}
	return out
}

// quotaCase runs one row: brokers (if any, with the configuration file
// cfgPath) start first, then the provider is created with its window 0
// starting at the next whole second, the callers start together at that
// instant and stop by themselves at the end of the last window.
func (s *suite) quotaCase(ctx context.Context, p QuotaParams, c QuotaCase, cfgPath string) (QuotaResult, error) {
	res := QuotaResult{QuotaCase: c, Outcomes: map[string]int{}}
	var clients []rbv1.BrokerServiceClient
	var brokers []*broker
	switch c.Row {
	case RowOneBroker, RowRedis3, RowMemory3, RowClusterShared, RowClusterSeeds:
		n := 1
		if c.Row != RowOneBroker {
			n = 3
		}
		base := brokerOptions{config: cfgPath}
		opts := func(int) brokerOptions { return base }
		switch c.Row {
		case RowRedis3:
			rs, err := s.redis(ctx)
			if err != nil {
				return res, err
			}
			if _, err := rs.command("FLUSHALL"); err != nil {
				return res, fmt.Errorf("redis FLUSHALL: %w", err)
			}
			base.redisURL = rs.URL()
		case RowClusterShared, RowClusterSeeds:
			cl, err := s.cluster(ctx)
			if err != nil {
				return res, fmt.Errorf("redis cluster: %w", err)
			}
			seeds := cl.Addrs()
			if err := flushAll(seeds); err != nil {
				return res, fmt.Errorf("redis cluster: %w", err)
			}
			base.redisCluster = strings.Join(seeds, ",")
			if c.Row == RowClusterSeeds {
				// Broker i reaches the cluster through node i only.
				opts = func(i int) brokerOptions {
					o := base
					o.redisCluster = seeds[i%len(seeds)]
					return o
				}
			}
		}
		t0 := time.Now()
		var err error
		brokers, err = s.startBrokers(ctx, n, opts)
		s.logf("quota: %d brokers started in %v", n, time.Since(t0))
		defer func() { t0 := time.Now(); stopAll(brokers); s.logf("quota: brokers stopped in %v", time.Since(t0)) }()
		if err != nil {
			return res, err
		}
		for _, b := range brokers {
			cl, conn, err := tenantClient(b.addr)
			if err != nil {
				return res, err
			}
			defer conn.Close()
			conn.Connect()
			clients = append(clients, cl)
		}
	case RowRetryableHTTP:
	default:
		return res, fmt.Errorf("unknown row %q", c.Row)
	}

	// Window 0 starts 200 ms from now, on a whole second for the styles
	// whose resets are whole seconds (GitHub, Jira).
	ready := time.Now().Add(200 * time.Millisecond)
	start := ready
	if c.Style == fakeprovider.GitHub || c.Style == fakeprovider.Jira {
		start = ready.Truncate(time.Second)
		if start.Before(ready) {
			start = start.Add(time.Second)
		}
	}
	prov, err := fakeprovider.Start(fakeprovider.Config{
		Style: c.Style, Quota: p.Quota, Window: p.Window, Windows: p.Windows, Start: start,
		KeepArrivals: s.opts.TraceDir != "", MaxArrivals: 200_000,
	})
	if err != nil {
		return res, err
	}
	defer prov.Close()
	end := prov.End()
	url := prov.URL() + "/repos/octo/hello/issues"

	// Every loop stops at end; the context is a backstop a little later.
	rctx, cancel := context.WithDeadline(ctx, end.Add(5*time.Second))
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range c.Callers {
		wg.Go(func() {
			var cr callerResult
			if !sleepUntil(rctx, start) {
				return
			}
			if c.Row == RowRetryableHTTP {
				cr = retryableCaller(rctx, url, end, p.MaxCallsPerCaller)
			} else {
				cr = brokerCaller(rctx, clients, i, url, string(c.Style), end, p.MaxCallsPerCaller)
			}
			mu.Lock()
			defer mu.Unlock()
			res.Calls += cr.calls
			res.CallerWaits += cr.waits
			res.Errors += cr.errors
			for k, v := range cr.outcomes {
				res.Outcomes[k] += v
			}
		})
	}
	wg.Wait()
	s.logf("quota: callers done %v after the end", time.Since(end))
	res.Stats = prov.Stats()
	if err := exitedDuring(brokers); err != nil {
		return res, err
	}
	if s.opts.TraceDir != "" {
		if err := writeArrivals(filepath.Join(s.opts.TraceDir, fmt.Sprintf("arrivals-%s-%s-%d.csv", c.Style, c.Row, c.Callers)), res.Stats); err != nil {
			s.logf("quota: trace: %v", err)
		}
		res.Stats.Arrivals = nil
	}
	return res, nil
}

type callerResult struct {
	calls, waits, errors int
	outcomes             map[string]int
}

// sleepUntil sleeps until t; it reports false when ctx ends first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// retryableCaller is row a: a caller with its own go-retryablehttp client,
// default retry policy and backoff (RetryMax 4, 1 s .. 30 s, Retry-After
// honoured on 429/503). When a call ends (success, give-up or refusal) it
// makes the next one at once. Proxies are disabled (loopback only); the
// client's logger is silenced. Nothing else differs from NewClient().
func retryableCaller(ctx context.Context, url string, end time.Time, maxCalls int) callerResult {
	cl := retryablehttp.NewClient()
	cl.Logger = nil
	if tr, ok := cl.HTTPClient.Transport.(*http.Transport); ok {
		tr.Proxy = nil
		defer tr.CloseIdleConnections()
	}
	cctx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	r := callerResult{outcomes: map[string]int{}}
	for r.calls < maxCalls && time.Now().Before(end) {
		req, err := retryablehttp.NewRequestWithContext(cctx, http.MethodGet, url, nil)
		if err != nil {
			r.outcomes["error"]++
			break
		}
		r.calls++
		resp, err := cl.Do(req)
		if err != nil {
			if cctx.Err() != nil {
				r.outcomes["stopped at the end"]++
				break
			}
			r.errors++
			r.outcomes["gave up"]++
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		r.outcomes[fmt.Sprintf("http %d", resp.StatusCode)]++
	}
	return r
}

// brokerCaller is rows b, c and d (and the cluster's): each call is one Execute through the
// brokers, round robin. The caller never retries by itself; when the broker
// gives up early and says when to come back (retry_after: gate closed, hint
// above max_delay, deadline too short, budget), the caller waits that long
// before its next call. Every call's deadline is the end of the run.
func brokerCaller(ctx context.Context, clients []rbv1.BrokerServiceClient, id int, url, provider string, end time.Time, maxCalls int) callerResult {
	r := callerResult{outcomes: map[string]int{}}
	req := &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Method: http.MethodGet, Url: url}, Provider: provider}
	cctx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	for n := 0; n < maxCalls && time.Now().Before(end); n++ {
		cl := clients[(id+n)%len(clients)]
		r.calls++
		resp, err := cl.Execute(cctx, req, grpc.WaitForReady(true))
		if err != nil {
			// The server may report the deadline a moment before our timer.
			if cctx.Err() != nil || status.Code(err) == codes.DeadlineExceeded && time.Until(end) < 100*time.Millisecond {
				r.outcomes["stopped at the end"]++
				break
			}
			r.errors++
			st, _ := status.FromError(err)
			r.outcomes["grpc "+st.Code().String()]++
			wait := 50 * time.Millisecond
			if st.Code() == codes.ResourceExhausted {
				wait = 200 * time.Millisecond
			}
			if !sleepUntil(cctx, time.Now().Add(wait)) {
				break
			}
			continue
		}
		r.outcomes[outcomeName(resp.GetOutcome())]++
		if ra := resp.GetRetryAfter(); ra != nil && ra.AsDuration() > 0 {
			r.waits++
			if !sleepUntil(cctx, time.Now().Add(ra.AsDuration())) {
				break
			}
		}
	}
	return r
}

func outcomeName(o rbv1.Outcome) string {
	switch o {
	case rbv1.Outcome_OUTCOME_SUCCESS:
		return "success"
	case rbv1.Outcome_OUTCOME_NOT_RETRYABLE:
		return "not retryable"
	case rbv1.Outcome_OUTCOME_ATTEMPTS_EXHAUSTED:
		return "attempts exhausted"
	case rbv1.Outcome_OUTCOME_HINT_EXCEEDS_MAX_DELAY:
		return "hint exceeds max delay"
	case rbv1.Outcome_OUTCOME_DEADLINE_TOO_SHORT:
		return "deadline too short"
	case rbv1.Outcome_OUTCOME_RETRY_BUDGET_EXHAUSTED:
		return "retry budget exhausted"
	case rbv1.Outcome_OUTCOME_GATE_CLOSED:
		return "gate closed"
	case rbv1.Outcome_OUTCOME_CANCELED:
		return "canceled"
	case rbv1.Outcome_OUTCOME_BREAKER_OPEN:
		return "breaker open"
	}
	return o.String()
}

// writeArrivals writes every arrival as CSV: offset from the start in
// milliseconds, window, accepted, early.
func writeArrivals(path string, st fakeprovider.Stats) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("offset_ms,window,accepted,early\n")
	for _, a := range st.Arrivals {
		fmt.Fprintf(&b, "%.3f,%d,%t,%t\n", float64(a.At.Sub(st.Start))/float64(time.Millisecond), a.Window, a.Accepted, a.Early)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// startBrokers starts n brokers in parallel, broker i with opts(i). It
// returns the brokers that started, also on error (the caller stops them).
func (s *suite) startBrokers(ctx context.Context, n int, opts func(i int) brokerOptions) ([]*broker, error) {
	out := make([]*broker, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { out[i], errs[i] = startBroker(ctx, s.brokerBin, opts(i)) })
	}
	wg.Wait()
	var started []*broker
	for _, b := range out {
		if b != nil {
			started = append(started, b)
		}
	}
	return started, errors.Join(errs...)
}

func stopAll(bs []*broker) {
	var wg sync.WaitGroup
	for _, b := range bs {
		wg.Go(func() { b.stop(5 * time.Second) })
	}
	wg.Wait()
}

// outcomeSummary formats outcome counts, largest first.
func outcomeSummary(m map[string]int) string {
	type kv struct {
		k string
		v int
	}
	var l []kv
	for k, v := range m {
		l = append(l, kv{k, v})
	}
	sort.Slice(l, func(i, j int) bool { return l[i].v > l[j].v || l[i].v == l[j].v && l[i].k < l[j].k })
	out := ""
	for i, e := range l {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("%s %d", e.k, e.v)
	}
	return out
}
