package suite

import (
	"context"
	"fmt"
	"io"
	"net/http"
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

// OutageParams sizes the outage scenario: an upstream that answers 200
// for Warmup, 503 with no hint for Outage, then 200 again, observed for
// Recovery, under an open-loop load of Rate new calls per second.
type OutageParams struct {
	// Rate is the number of new calls per second, evenly spaced, whatever
	// happens to the calls already made (a service receiving requests).
	Rate float64
	// Warmup is the healthy time before the outage.
	Warmup time.Duration
	// Outage is how long the upstream answers 503 with no hint.
	Outage time.Duration
	// Recovery is how long the run goes on after the outage.
	Recovery time.Duration
	// OpenFor is breaker.open_for in the configuration of the broker with
	// a breaker (its other breaker options are the defaults, written out).
	OpenFor time.Duration
	// CallTimeout is each call's deadline (the end of the run cuts it
	// shorter).
	CallTimeout time.Duration
	// Bin is the width of the time bins of the arrivals chart.
	Bin time.Duration
	// Setups lists the setups to run, in order.
	Setups []OutageSetup
}

// OutageSetup is a way of calling the failing upstream.
type OutageSetup string

// Setups of the outage scenario.
const (
	// OutageRetryableHTTP: each call is a go-retryablehttp Do with the
	// default client (RetryMax 4, backoff 1 s .. 30 s), sent directly.
	OutageRetryableHTTP OutageSetup = "a"
	// OutageNoBreaker: each call is an Execute through one broker whose
	// policy says breaker: {disabled: true}.
	OutageNoBreaker OutageSetup = "broker, no breaker"
	// OutageBreaker: each call is an Execute through one broker with the
	// breaker on, open_for = OutageParams.OpenFor.
	OutageBreaker OutageSetup = "broker, breaker"
)

// Describe returns the setup's long name.
func (o OutageSetup) Describe() string {
	switch o {
	case OutageRetryableHTTP:
		return "callers retry themselves (go-retryablehttp defaults)"
	case OutageNoBreaker:
		return "1 broker, breaker: {disabled: true}"
	case OutageBreaker:
		return "1 broker, breaker on"
	}
	return string(o)
}

// outageBreakerConfig is the breaker of the OutageBreaker setup: the
// documented defaults, written out, with open_for from p.
func outageBreakerConfig(p OutageParams) string {
	return fmt.Sprintf("breaker: {min_calls: 20, failure_ratio: 0.5, window: 30s, open_for: %s, max_open: 2m}", p.OpenFor)
}

// OutageResult is one measured setup.
type OutageResult struct {
	Setup OutageSetup
	// Config is the broker policy's breaker line ("" for setup a).
	Config string
	// Stats is what the upstream saw (Arrivals dropped; see Bins).
	Stats fakeprovider.OutageStats
	// Bins counts the arrivals in each Bin-wide interval from the start
	// of the warm-up.
	Bins []int
	// Calls are the calls the load started; Outcomes how they ended.
	Calls    int
	Outcomes map[string]int
	// CallerRecovery is the time from the recovery to the first call that
	// ended with a 200 at the caller; negative when none did.
	CallerRecovery time.Duration
	// LongestQuiet is the longest time during the outage in which no call
	// reached the upstream (the load never stops, so only a broker holding
	// its calls makes it long).
	LongestQuiet time.Duration
	Err          string
}

// outageRun runs every setup of the scenario side by side, each with its
// own upstream (and broker), on one clock: every setup is prepared first,
// then all start together. The load is light (tens to hundreds of calls
// per second in all), so running them together changes no count, and the
// three share one time axis.
func (s *suite) outageRun(ctx context.Context, p OutageParams) []OutageResult {
	out := make([]OutageResult, len(p.Setups))
	var prepared sync.WaitGroup
	prepared.Add(len(p.Setups))
	gate := make(chan struct{})
	var start time.Time
	go func() {
		prepared.Wait()
		start = time.Now().Add(300 * time.Millisecond)
		close(gate)
	}()
	var wg sync.WaitGroup
	for i, setup := range p.Setups {
		s.logf("outage: %s (%s)", setup, setup.Describe())
		wg.Go(func() {
			arrive := sync.OnceValue(func() time.Time { prepared.Done(); <-gate; return start })
			defer arrive() // a setup that failed early still lets the others go
			r, err := s.outageSetup(ctx, p, setup, arrive)
			if err != nil {
				r.Err = err.Error()
				s.logf("outage: %s: %v", setup, err)
			} else {
				d, _ := r.Stats.RecoveryDelay()
				s.logf("outage: %s: upstream saw %d before, %d during, %d after the outage; longest quiet %v; first success %v after the recovery (callers: %v); %d calls, outcomes %v",
					setup, r.Stats.Before, r.Stats.During, r.Stats.After, r.LongestQuiet, d, r.CallerRecovery, r.Calls, r.Outcomes)
			}
			out[i] = r
		})
	}
	wg.Wait()
	return out
}

// outageSetup runs one setup: the broker (if any) starts first; then
// arrive returns the common start, at which the warm-up of the setup's
// own upstream begins, and the load starts; it stops at the end of the
// recovery, when every call still running is cancelled.
func (s *suite) outageSetup(ctx context.Context, p OutageParams, setup OutageSetup, arrive func() time.Time) (OutageResult, error) {
	res := OutageResult{Setup: setup, Outcomes: map[string]int{}, CallerRecovery: -1}
	var clients []rbv1.BrokerServiceClient
	var brokers []*broker
	switch setup {
	case OutageNoBreaker, OutageBreaker:
		res.Config = "breaker: {disabled: true}"
		if setup == OutageBreaker {
			res.Config = outageBreakerConfig(p)
		}
		path, err := s.writeBrokerConfig(ctx, brokerConfig{Name: "outage-" + strings.ReplaceAll(strings.TrimPrefix(string(setup), "broker, "), " ", "-"), Policy: []string{res.Config}})
		if err != nil {
			return res, err
		}
		b, err := startBroker(ctx, s.brokerBin, brokerOptions{config: path})
		if err != nil {
			return res, err
		}
		defer b.stop(5 * time.Second)
		brokers = append(brokers, b)
		// Two connections: the parked calls of a long open breaker stay
		// well below a connection's stream limit.
		for range 2 {
			cl, conn, err := tenantClient(b.addr)
			if err != nil {
				return res, err
			}
			defer conn.Close()
			conn.Connect()
			clients = append(clients, cl)
		}
	case OutageRetryableHTTP:
	default:
		return res, fmt.Errorf("unknown outage setup %q", setup)
	}

	start := arrive()
	down := start.Add(p.Warmup)
	up := down.Add(p.Outage)
	end := up.Add(p.Recovery)
	srv, err := fakeprovider.StartOutage(fakeprovider.OutageConfig{DownFrom: down, DownUntil: up})
	if err != nil {
		return res, err
	}
	defer srv.Close()
	url := srv.URL() + "/v1/orders"

	var rc *retryablehttp.Client
	if setup == OutageRetryableHTTP {
		rc = retryablehttp.NewClient()
		rc.Logger = nil
		if tr, ok := rc.HTTPClient.Transport.(*http.Transport); ok {
			tr.Proxy = nil
			defer tr.CloseIdleConnections()
		}
	}
	// Every call ends by the end of the run; the context is the backstop.
	rctx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	var mu sync.Mutex
	firstOK := time.Time{}
	record := func(outcome string, ok bool) {
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		res.Outcomes[outcome]++
		if ok && !now.Before(up) && (firstOK.IsZero() || now.Before(firstOK)) {
			firstOK = now
		}
	}
	var wg sync.WaitGroup
	interval := time.Duration(float64(time.Second) / p.Rate)
	for n := 0; ; n++ {
		at := start.Add(time.Duration(n) * interval)
		if !at.Before(end) || !sleepUntil(rctx, at) {
			break
		}
		res.Calls++
		wg.Go(func() {
			cctx, ccancel := context.WithTimeout(rctx, p.CallTimeout)
			defer ccancel()
			var outcome string
			var ok bool
			if rc != nil {
				outcome, ok = retryableCall(cctx, rc, url)
			} else {
				outcome, ok = brokerCall(cctx, clients[n%len(clients)], url)
			}
			if outcome == outcomeDeadline && rctx.Err() != nil {
				outcome = "stopped at the end"
			}
			record(outcome, ok)
		})
	}
	wg.Wait()
	res.Stats = srv.Stats()
	if err := exitedDuring(brokers); err != nil {
		return res, err
	}
	if !firstOK.IsZero() {
		res.CallerRecovery = firstOK.Sub(up)
	}
	res.Bins = binArrivals(res.Stats.Arrivals, start, p.Bin, int(end.Sub(start)/p.Bin))
	res.LongestQuiet = longestQuiet(res.Stats.Arrivals, down, up)
	res.Stats.Arrivals = nil
	return res, nil
}

// outcomeDeadline names a call that ended with its context.
const outcomeDeadline = "deadline exceeded"

// retryableCall makes one go-retryablehttp call and names its outcome.
func retryableCall(ctx context.Context, c *retryablehttp.Client, url string) (string, bool) {
	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "error", false
	}
	resp, err := c.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return outcomeDeadline, false
		}
		return "gave up", false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return fmt.Sprintf("http %d", resp.StatusCode), resp.StatusCode == http.StatusOK
}

// brokerCall makes one Execute and names its outcome.
func brokerCall(ctx context.Context, cl rbv1.BrokerServiceClient, url string) (string, bool) {
	resp, err := cl.Execute(ctx, &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Method: http.MethodGet, Url: url}}, grpc.WaitForReady(true))
	if err != nil {
		if ctx.Err() != nil || status.Code(err) == codes.DeadlineExceeded {
			return outcomeDeadline, false
		}
		return "grpc " + status.Code(err).String(), false
	}
	return outcomeName(resp.GetOutcome()), resp.GetResponse().GetStatusCode() == http.StatusOK
}

// binArrivals counts the arrivals in n bins of width w from start;
// arrivals outside them are left out.
func binArrivals(at []time.Time, start time.Time, w time.Duration, n int) []int {
	bins := make([]int, max(n, 0))
	for _, t := range at {
		if k := int(t.Sub(start) / w); t.Sub(start) >= 0 && k < len(bins) {
			bins[k]++
		}
	}
	return bins
}

// longestQuiet returns the longest part of [from, to) without an arrival;
// at is in arrival order.
func longestQuiet(at []time.Time, from, to time.Time) time.Duration {
	longest, last := time.Duration(0), from
	for _, t := range at {
		if t.Before(from) {
			continue
		}
		if !t.Before(to) {
			break
		}
		longest, last = max(longest, t.Sub(last)), t
	}
	return max(longest, to.Sub(last))
}

// breakerHeld reports whether the breaker setup held its calls during the
// outage for at least half of open_for: no call reached the upstream for
// that long while new calls kept coming. Without it, the recovery target
// says nothing about the breaker.
func (r *Report) breakerHeld(b OutageResult) bool {
	return b.LongestQuiet >= r.Outage.OpenFor/2
}

// outageResult finds a setup of the outage scenario.
func (r *Report) outageResult(setup OutageSetup) (OutageResult, bool) {
	for _, o := range r.OutageRes {
		if o.Setup == setup && o.Err == "" {
			return o, true
		}
	}
	return OutageResult{}, false
}

// OutageShare is the calls that reached the upstream during the outage
// with setup, over those of the go-retryablehttp callers (setup a).
func (r *Report) OutageShare(setup OutageSetup) (float64, bool) {
	a, oka := r.outageResult(OutageRetryableHTTP)
	x, okx := r.outageResult(setup)
	if !oka || !okx || a.Stats.During == 0 {
		return 0, false
	}
	return float64(x.Stats.During) / float64(a.Stats.During), true
}

// outageTargets evaluates the outage targets.
func (r *Report) outageTargets() []Target {
	var out []Target
	p := r.Outage
	b, ok := r.outageResult(OutageBreaker)
	if !ok {
		return nil
	}
	if a, oka := r.outageResult(OutageRetryableHTTP); oka {
		x, _ := r.OutageShare(OutageBreaker)
		out = append(out, Target{
			fmt.Sprintf("outage: with the breaker, the upstream sees ≤ 10%% of the calls go-retryablehttp callers send it over the same %v", p.Outage),
			fmt.Sprintf("%s (%d vs %d)", pct(x), b.Stats.During, a.Stats.During), yesNo(a.Stats.During > 0 && x <= 0.10),
		})
	}
	d, got := b.Stats.RecoveryDelay()
	m := fmt.Sprintf("none within the %v observed", p.Recovery)
	if got {
		m = fmt.Sprintf("%s (open_for %v)", fmtDur(d), p.OpenFor)
	}
	met := yesNo(got && d <= 2*p.OpenFor)
	if !r.breakerHeld(b) {
		// Nothing held the calls: the upstream was called all along, so
		// the first success after the recovery says nothing of a breaker.
		m += fmt.Sprintf("; but the breaker never held the calls (at most %s without a call during the outage)", fmtDur(b.LongestQuiet))
		met = "n/a"
	}
	out = append(out, Target{fmt.Sprintf("outage: with the breaker, the first success comes ≤ 2 × open_for (%v) after the recovery", 2*p.OpenFor), m, met})
	return out
}

// outageFindings explains the outage targets that were missed.
func (r *Report) outageFindings() []string {
	var out []string
	p := r.Outage
	b, ok := r.outageResult(OutageBreaker)
	if !ok {
		return nil
	}
	nb, oknb := r.outageResult(OutageNoBreaker)
	if x, okx := r.OutageShare(OutageBreaker); okx && x > 0.10 {
		msg := fmt.Sprintf("outage: with the breaker on, %d calls reached the upstream during the %v outage, %s of the go-retryablehttp callers'.", b.Stats.During, p.Outage, pct(x))
		if oknb && nb.Stats.During > 0 {
			ratio := float64(b.Stats.During) / float64(nb.Stats.During)
			if ratio > 0.8 {
				msg += fmt.Sprintf(" The broker without a breaker sent %d: the breaker cut %s of them, so it did not open (or opened late) in this run; %s.", nb.Stats.During, pct(1-ratio), breakerOutcomes(b))
			} else {
				msg += fmt.Sprintf(" The broker without a breaker sent %d (the breaker cut %s); the breaker needs at least min_calls = 20 calls in its window, failing at ≥ 50%% of them (the warm-up's %d successes count too), before it opens; %s.", nb.Stats.During, pct(1-ratio), b.Stats.Before, breakerOutcomes(b))
			}
		}
		out = append(out, msg)
	}
	if !r.breakerHeld(b) {
		out = append(out, fmt.Sprintf("outage: the breaker never held the calls: the upstream went at most %s without a call during the outage (open_for is %v), so the time to the first success after the recovery (%s) is not the breaker's and is not judged.",
			fmtDur(b.LongestQuiet), p.OpenFor, recoveryText(b)))
		return out
	}
	if d, got := b.Stats.RecoveryDelay(); !got || d > 2*p.OpenFor {
		if got {
			out = append(out, fmt.Sprintf("outage: with the breaker on, the first call after the recovery reached the upstream %s after it, more than 2 × open_for = %v: a failed probe doubles the open time, so a probe that failed shortly before the recovery keeps the breaker open for 2 × open_for or more.", fmtDur(d), 2*p.OpenFor))
		} else {
			out = append(out, fmt.Sprintf("outage: with the breaker on, no call reached the upstream in the %v after the recovery.", p.Recovery))
		}
	}
	return out
}

// recoveryText formats the upstream's first success after the recovery.
func recoveryText(r OutageResult) string {
	if d, ok := r.Stats.RecoveryDelay(); ok {
		return fmtDur(d)
	}
	return "none"
}

// breakerOutcomes says how many calls of a setup ended with the breaker
// open.
func breakerOutcomes(r OutageResult) string {
	return fmt.Sprintf("%d of its %d calls ended with the outcome breaker open", r.Outcomes[outcomeName(rbv1.Outcome_OUTCOME_BREAKER_OPEN)], r.Calls)
}

// OutageTable is the outage table.
func (r *Report) OutageTable() string {
	var b strings.Builder
	p := r.Outage
	fmt.Fprintf(&b, "Outage: %.0f new calls per second; the upstream answers 200 for %v, 503 with no hint for %v, then 200 (observed for %v); each call's deadline is %v.\n\n",
		p.Rate, p.Warmup, p.Outage, p.Recovery, p.CallTimeout)
	b.WriteString("| setup | broker policy | calls reaching the upstream during the outage | share of a's | longest time without a call during the outage | before | after | first success after the recovery: at the upstream | at a caller | calls | call outcomes |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, o := range r.OutageRes {
		if o.Err != "" {
			fmt.Fprintf(&b, "| %s | %s | error: %s | | | | | | | | |\n", o.Setup, orDash(code(o.Config)), o.Err)
			continue
		}
		share := "–"
		if x, ok := r.OutageShare(o.Setup); ok {
			share = pct(x)
		}
		caller := "none"
		if o.CallerRecovery >= 0 {
			caller = fmtDur(o.CallerRecovery)
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %d | %d | %s | %s | %d | %s |\n", o.Setup, orDash(code(o.Config)), o.Stats.During, share, fmtDur(o.LongestQuiet),
			o.Stats.Before, o.Stats.After, recoveryText(o), caller, o.Calls, outcomeSummary(o.Outcomes))
	}
	return b.String()
}

// code wraps s in backticks for markdown, "" stays "".
func code(s string) string {
	if s == "" {
		return ""
	}
	return "`" + s + "`"
}
