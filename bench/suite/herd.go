package suite

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/retrybroker/retrybroker/bench/fakeprovider"
	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
)

// HerdParams sizes the herd scenario (issue 18): more callers than quota,
// all starting at the same instant, against one provider, for several
// windows; and the rolling restart, the same load on 3 replicas sharing
// one Redis while one of them is stopped and started again.
type HerdParams struct {
	// Callers is the number of callers, all starting at window 0's start.
	Callers int
	// Quota is the provider's quota per window, Window its length (whole
	// seconds), Windows the number of measured windows.
	Quota   int
	Window  time.Duration
	Windows int
	// ShortDeadline is each call's deadline in the short-deadline mode.
	ShortDeadline time.Duration
	// MaxCallsPerCaller bounds each caller's loop besides time.
	MaxCallsPerCaller int
	// Cases are the herd rows, in order; Rolling the rolling-restart rows.
	Cases   []HerdCase
	Rolling []HerdCase
	// StopAt is when, from window 0's start, the rolling restart sends
	// SIGTERM to replica 0; it is started again on the same address as
	// soon as it has exited.
	StopAt time.Duration
	// Poll is the period of the suite's readiness probe of each replica
	// (health "" and retrybroker.v1.SharedState), which routes the callers.
	Poll time.Duration
}

// HerdSetup is how the callers of a herd row reach the provider.
type HerdSetup string

// Setups of the herd scenario.
const (
	// HerdRetryableHTTP: every caller has its own go-retryablehttp default
	// client and calls the provider directly.
	HerdRetryableHTTP HerdSetup = "a"
	// HerdOneBroker: Execute through one broker (memory store).
	HerdOneBroker HerdSetup = "1 broker"
	// HerdRedis3: Execute through 3 replicas on one redis-server, caller i
	// on replica i mod 3.
	HerdRedis3 HerdSetup = "3 replicas, Redis"
	// HerdRolling: as HerdRedis3, while replica 0 is stopped (SIGTERM) and
	// started again mid-run.
	HerdRolling HerdSetup = "rolling restart"
)

// Describe returns the setup's long name.
func (s HerdSetup) Describe() string {
	switch s {
	case HerdRetryableHTTP:
		return "callers retry themselves (go-retryablehttp defaults)"
	case HerdOneBroker:
		return "1 broker, memory store"
	case HerdRedis3:
		return "3 replicas on one redis-server"
	case HerdRolling:
		return "3 replicas on one redis-server, replica 0 restarted mid-run"
	}
	return string(s)
}

// Deadline is how long each call of a herd row may last.
type Deadline string

// Deadline modes.
const (
	// DeadlineLong: each call's deadline is the end of the run, so the
	// broker may hold it; the caller calls again as soon as a call ends
	// (after the broker's retry_after, when it gives one).
	DeadlineLong Deadline = "long"
	// DeadlineShort: each call has HerdParams.ShortDeadline; a caller told
	// a retry_after sleeps exactly that long and comes back.
	DeadlineShort Deadline = "short"
)

// HerdCase is one row: a provider style, a setup and a deadline mode.
type HerdCase struct {
	Style    fakeprovider.Style
	Setup    HerdSetup
	Deadline Deadline
}

// Label names the row, e.g. "github, 1 broker, short deadlines".
func (c HerdCase) Label() string {
	return fmt.Sprintf("%s, %s, %s deadlines", c.Style, c.Setup, c.Deadline)
}

// HoldStats summarises the time calls were held: from the call's start at
// the caller to its first send (the first Attempt's start_time in the
// ExecuteResponse), or to its end for a call that was never sent.
type HoldStats struct {
	Calls         int
	P50, P99, Max time.Duration
}

func holdStats(d []time.Duration) HoldStats {
	if len(d) == 0 {
		return HoldStats{}
	}
	s := slices.Clone(d)
	slices.Sort(s)
	q := func(p float64) time.Duration { return s[min(len(s)-1, int(p*float64(len(s))))] }
	return HoldStats{Calls: len(s), P50: q(0.50), P99: q(0.99), Max: s[len(s)-1]}
}

// RestartInfo is what the rolling restart did to replica 0.
type RestartInfo struct {
	// StoppedAt is when SIGTERM was sent, from window 0's start; Exited
	// how long the replica took to exit.
	StoppedAt, Exited time.Duration
	// NewCalls counts the calls the callers sent to the new process.
	NewCalls int64
	// Ready is the time from the new process's start to its health ""
	// and SharedState both answering SERVING (polled every 20 ms on a
	// connection of its own: startBroker); SharedServing the first
	// SharedState SERVING seen by the callers' readiness probe, from the
	// same start (-1 when never), later by the reconnection's backoff.
	Ready, SharedServing time.Duration
	// Err is a failure to restart ("" when it came back).
	Err string
}

// HerdResult is one measured row.
type HerdResult struct {
	HerdCase
	Callers int
	Stats   fakeprovider.Stats
	// Calls are the logical calls (Execute or retryablehttp.Do), Outcomes
	// how they ended.
	Calls    int
	Outcomes map[string]int
	// Held are the hold times of the calls that started in the first
	// window, and of those that started later (broker rows only).
	HeldFirst, HeldLater HoldStats
	// Unsent counts calls that ended without being sent.
	Unsent int
	// HeldUnsent counts calls held at least heldFor that then ended
	// unsent (the broker gave up on them: gate closed past their
	// deadline, deadline too short, ...), the calls held at the run's end
	// left out; HeldUnsentMax is the longest such hold and
	// HeldUnsentExample describes that call. Reported, not judged.
	HeldUnsent        int
	HeldUnsentMax     time.Duration
	HeldUnsentExample string
	// HeldPast counts calls held to their deadline: no answer before it,
	// or an answer without a send with less than heldFor left, so that no
	// time was left to send them. HeldPastExample describes one. The
	// calls of long-deadline rows held when the run (their deadline)
	// ended are HeldAtEnd instead.
	HeldPast        int
	HeldPastExample string
	// HeldAtEnd counts long-deadline calls still held when the run ended
	// (their deadline): reported, not judged (but see Starved).
	HeldAtEnd int
	// Starved counts calls held through more reopenings (window starts)
	// than a broker that releases its held calls in arrival order needs:
	// ⌈C / Q⌉, since at most C calls are queued and Q go at each. A call
	// still held at the run's end counts the reopenings until then.
	// StarvedExample describes the longest.
	Starved        int
	StarvedMax     time.Duration
	StarvedExample string
	// Failed counts RPCs that failed with a gRPC error not caused by the
	// caller's own deadline (broker-caused: UNAVAILABLE, ...), by code.
	Failed map[string]int
	// Drained counts calls a stopping replica ended with
	// OUTCOME_SHUTTING_DOWN (the caller goes to another replica at once).
	Drained int
	// SharedNotServing counts readiness probes that saw
	// retrybroker.v1.SharedState NOT_SERVING on a replica after that
	// replica (process) had reported SERVING.
	SharedNotServing int
	// SharedNotServingBy breaks SharedNotServing down by replica.
	SharedNotServingBy []int
	// Warnings counts the brokers' warning and error log lines by
	// message (msg=...), over every process of the row.
	Warnings map[string]int
	// Load is the 1-minute load average (/proc/loadavg) at the row's
	// end, and Late the most a call's answer came after its deadline at
	// the caller: both say how busy the machine was (a caller's deadline
	// fires late only when the suite's own process could not run).
	Load float64
	Late time.Duration
	// Restart is set for rolling rows.
	Restart *RestartInfo
	Err     string
}

// FailedRPCs is the number of broker-caused failed RPCs.
func (r HerdResult) FailedRPCs() int {
	n := 0
	for _, v := range r.Failed {
		n += v
	}
	return n
}

// Later is the statistics of the windows after the first.
func (r HerdResult) Later() fakeprovider.Stats { return r.Stats.From(1) }

// First is the first window's statistics.
func (r HerdResult) First() fakeprovider.WindowStats {
	if len(r.Stats.Windows) == 0 {
		return fakeprovider.WindowStats{}
	}
	return r.Stats.Windows[0]
}

// herdRun runs cases one after the other (rolling rows too: the setup
// says which).
func (s *suite) herdRun(ctx context.Context, p HerdParams, cases []HerdCase, name string) []HerdResult {
	var out []HerdResult
	var cfgPath string
	var cfgErr error
	for _, c := range cases {
		if c.Setup != HerdRetryableHTTP {
			if cfgPath, cfgErr = s.writeBrokerConfig(ctx, quotaBrokerConfig); cfgErr != nil {
				s.logf("%s: %v", name, cfgErr)
			}
			break
		}
	}
	for _, c := range cases {
		if ctx.Err() != nil {
			break
		}
		s.logf("%s: %s (%s), %d callers", name, c.Label(), c.Setup.Describe(), p.Callers)
		t0 := time.Now()
		var r HerdResult
		var err error
		if c.Setup != HerdRetryableHTTP && cfgErr != nil {
			r, err = HerdResult{HerdCase: c, Callers: p.Callers}, cfgErr
		} else {
			r, err = s.herdCase(ctx, p, c, cfgPath)
		}
		if err != nil {
			r.Err = err.Error()
			s.logf("%s: %s: %v", name, c.Label(), err)
		} else {
			l := r.Later()
			s.logf("%s: %s: first window refused %d, early %d; later: goodput %.1f%%, refused per window %s, early %d; held p50/p99 %v/%v (later %v/%v); held to the deadline %d, at the end %d, held then unsent %d, starved %d; failed RPCs %v, drained %d, SharedState NOT_SERVING %v; load %.1f, late %v; outcomes %v (%v)",
				name, c.Label(), r.First().Refused, r.First().Early, 100*l.Goodput(), refusedList(r.Stats), l.Early,
				r.HeldFirst.P50, r.HeldFirst.P99, r.HeldLater.P50, r.HeldLater.P99, r.HeldPast, r.HeldAtEnd, r.HeldUnsent, r.Starved, r.Failed, r.Drained, r.SharedNotServingBy, r.Load, r.Late, r.Outcomes, time.Since(t0).Round(100*time.Millisecond))
		}
		out = append(out, r)
	}
	return out
}

// herdRecorder collects the calls of a row.
type herdRecorder struct {
	mu     sync.Mutex
	start  time.Time
	window time.Duration
	// reopenings is the most reopenings a call may be held through (⌈C/Q⌉).
	reopenings int
	// short is the calls' deadline (0: the end of the run, end).
	short time.Duration
	end   time.Time
	res   *HerdResult
	first []time.Duration
	later []time.Duration
}

func (h *herdRecorder) outcome(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.res.Outcomes[name]++
}

// call records one broker call that started at start and ended at end;
// sent says whether it reached the provider (first is its first send),
// past whether it was held to its deadline, atEnd whether it was still
// held when the run (its deadline) ended; why describes it.
func (h *herdRecorder) call(start, end, first time.Time, sent bool, outcome string, past, atEnd bool, why string) {
	held := end.Sub(start)
	if sent {
		held = max(0, first.Sub(start))
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.res.Calls++
	h.res.Outcomes[outcome]++
	if start.Sub(h.start) < h.window {
		h.first = append(h.first, held)
	} else {
		h.later = append(h.later, held)
	}
	if !sent {
		h.res.Unsent++
	}
	if dl := h.deadline(start); end.After(dl) {
		h.res.Late = max(h.res.Late, end.Sub(dl))
	}
	if n := h.reopeningsIn(start, start.Add(held)); n > h.reopenings {
		h.res.Starved++
		if held > h.res.StarvedMax {
			state := "then sent"
			if !sent {
				state = "then " + outcome + ", unsent"
			}
			h.res.StarvedMax = held
			h.res.StarvedExample = fmt.Sprintf("a call started %v into the run was held %v, through %d reopenings, %s", start.Sub(h.start).Round(time.Millisecond), held.Round(time.Millisecond), n, state)
		}
	}
	switch {
	case atEnd:
		h.res.HeldAtEnd++
		return
	case past:
		h.res.HeldPast++
		if h.res.HeldPastExample == "" {
			h.res.HeldPastExample = why
		}
	}
	if !sent && held >= heldFor {
		h.res.HeldUnsent++
		if held > h.res.HeldUnsentMax {
			h.res.HeldUnsentMax, h.res.HeldUnsentExample = held, why
		}
	}
}

// deadline is the deadline of a call that started at start.
func (h *herdRecorder) deadline(start time.Time) time.Time {
	if h.short > 0 {
		return start.Add(h.short)
	}
	return h.end
}

// reopeningsIn counts the window starts in (from, to].
func (h *herdRecorder) reopeningsIn(from, to time.Time) int {
	n := 0
	for k := 1; ; k++ {
		t := h.start.Add(time.Duration(k) * h.window)
		if t.After(to) {
			return n
		}
		if t.After(from) {
			n++
		}
	}
}

// herdCase runs one row: brokers first (if any), then the provider with
// window 0 starting on the next whole second at least 200 ms away, the
// callers all at that instant; for a rolling row, replica 0 is stopped at
// StopAt and started again on its address.
func (s *suite) herdCase(ctx context.Context, p HerdParams, c HerdCase, cfgPath string) (HerdResult, error) {
	res := HerdResult{HerdCase: c, Callers: p.Callers, Outcomes: map[string]int{}, Failed: map[string]int{}}
	var rs *replicaSet
	switch c.Setup {
	case HerdOneBroker, HerdRedis3, HerdRolling:
		n, o := 1, brokerOptions{config: cfgPath}
		if c.Setup != HerdOneBroker {
			n = 3
			red, err := s.redis(ctx)
			if err != nil {
				return res, err
			}
			if _, err := red.command("FLUSHALL"); err != nil {
				return res, fmt.Errorf("redis FLUSHALL: %w", err)
			}
			o.redisURL = red.URL()
		}
		brokers, err := s.startBrokers(ctx, n, func(int) brokerOptions { return o })
		rs = &replicaSet{brokers: brokers, opts: o, bin: s.brokerBin, poll: p.Poll}
		defer func() { rs.close() }()
		if err != nil {
			return res, err
		}
		if err := rs.connect(); err != nil {
			return res, err
		}
	case HerdRetryableHTTP:
	default:
		return res, fmt.Errorf("unknown herd setup %q", c.Setup)
	}

	ready := time.Now().Add(200 * time.Millisecond)
	start := ready.Truncate(time.Second)
	if start.Before(ready) {
		start = start.Add(time.Second)
	}
	prov, err := fakeprovider.Start(fakeprovider.Config{Style: c.Style, Quota: p.Quota, Window: p.Window, Windows: p.Windows, Start: start, MaxArrivals: 200_000})
	if err != nil {
		return res, err
	}
	defer prov.Close()
	end := prov.End()
	url := prov.URL() + "/repos/octo/hello/issues"
	rec := &herdRecorder{start: start, window: p.Window, res: &res, reopenings: (p.Callers + p.Quota - 1) / p.Quota, end: end}
	if c.Deadline == DeadlineShort {
		rec.short = p.ShortDeadline
	}

	// Every loop stops at end (a short call started before it may last
	// ShortDeadline more); the context is a backstop.
	rctx, cancel := context.WithDeadline(ctx, end.Add(p.ShortDeadline+5*time.Second))
	defer cancel()
	var restartDone chan struct{}
	if c.Setup == HerdRolling {
		restartDone = make(chan struct{})
		go func() {
			defer close(restartDone)
			res.Restart = rs.restart(rctx, 0, start, start.Add(p.StopAt), s.logf)
		}()
	}
	var wg sync.WaitGroup
	for i := range p.Callers {
		wg.Go(func() {
			if !sleepUntil(rctx, start) {
				return
			}
			if c.Setup == HerdRetryableHTTP {
				herdRetryableCaller(rctx, url, end, c.Deadline, p, rec)
				return
			}
			herdBrokerCaller(rctx, rs, i%len(rs.brokers), url, string(c.Style), end, c.Deadline, p, rec)
		})
	}
	wg.Wait()
	if restartDone != nil {
		<-restartDone
		if res.Restart != nil && res.Restart.Err == "" {
			res.Restart.SharedServing = rs.sharedServing(0)
			res.Restart.NewCalls = rs.newCalls.Load()
		}
	}
	s.logf("herd: callers done %v after the end", time.Since(end).Round(time.Millisecond))
	res.Stats = prov.Stats()
	res.HeldFirst, res.HeldLater = holdStats(rec.first), holdStats(rec.later)
	res.Load = loadAverage()
	if rs != nil {
		res.SharedNotServing = int(rs.sharedNotServing.Load())
		res.SharedNotServingBy = rs.notServingBy()
		res.Warnings = rs.warnings()
		if err := exitedDuring(rs.current()); err != nil {
			return res, err
		}
		if res.Restart != nil && res.Restart.Err != "" {
			return res, errors.New("rolling restart: " + res.Restart.Err)
		}
	}
	return res, nil
}

// herdRetryableCaller is row a: its own go-retryablehttp default client,
// each call (Do) with the end of the run (long) or ShortDeadline (short)
// as its deadline; the next call starts as soon as one ends.
func herdRetryableCaller(ctx context.Context, url string, end time.Time, mode Deadline, p HerdParams, rec *herdRecorder) {
	cl := retryablehttp.NewClient()
	cl.Logger = nil
	if tr, ok := cl.HTTPClient.Transport.(*http.Transport); ok {
		tr.Proxy = nil
		defer tr.CloseIdleConnections()
	}
	for n := 0; n < p.MaxCallsPerCaller && time.Now().Before(end); n++ {
		dl := end
		if mode == DeadlineShort {
			dl = time.Now().Add(p.ShortDeadline)
		}
		cctx, cancel := context.WithDeadline(ctx, dl)
		req, err := retryablehttp.NewRequestWithContext(cctx, http.MethodGet, url, nil)
		if err != nil {
			cancel()
			rec.outcome("error")
			return
		}
		resp, err := cl.Do(req)
		switch {
		case err != nil && !time.Now().Before(end):
			rec.outcome("stopped at the end")
		case err != nil && cctx.Err() != nil:
			rec.outcome("deadline exceeded")
		case err != nil:
			rec.outcome("gave up")
		default:
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			rec.outcome(fmt.Sprintf("http %d", resp.StatusCode))
		}
		cancel()
		rec.mu.Lock()
		rec.res.Calls++
		rec.mu.Unlock()
	}
}

// heldFor is the hold from which an unsent call counts as held: below it,
// the broker answered at once.
const heldFor = 100 * time.Millisecond

// herdBrokerCaller is a broker row's caller: Execute on its replica (home,
// or the next ready one; see replicaSet.pick), never retrying by itself.
// A retry_after is slept exactly (capped at the end of the run); a failed
// RPC or a drained call sends the caller to another replica at once.
func herdBrokerCaller(ctx context.Context, rs *replicaSet, home int, url, provider string, end time.Time, mode Deadline, p HerdParams, rec *herdRecorder) {
	req := &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Method: http.MethodGet, Url: url}, Provider: provider}
	for n := 0; n < p.MaxCallsPerCaller && time.Now().Before(end); n++ {
		i, cl := rs.pick(home)
		start := time.Now()
		dl := end
		if mode == DeadlineShort {
			dl = start.Add(p.ShortDeadline)
		}
		cctx, cancel := context.WithDeadline(ctx, dl)
		resp, err := cl.Execute(cctx, req)
		cancel()
		done := time.Now()
		into := start.Sub(rec.start).Round(time.Millisecond)
		if err != nil {
			code := status.Code(err)
			switch {
			case mode == DeadlineLong && (cctx.Err() != nil || code == codes.DeadlineExceeded) && dl.Sub(done) < heldFor:
				// The run's end is this call's deadline: it was still held.
				rec.call(start, done, time.Time{}, false, "stopped at the end", false, true, "")
				return
			case cctx.Err() != nil || code == codes.DeadlineExceeded && dl.Sub(done) < heldFor:
				rec.call(start, done, time.Time{}, false, "deadline exceeded", true, false,
					fmt.Sprintf("a call started %v into the run got no answer within its %v deadline", into, dl.Sub(start).Round(time.Millisecond)))
				continue
			}
			rec.mu.Lock()
			rec.res.Failed[code.String()]++
			rec.mu.Unlock()
			rec.call(start, done, time.Time{}, false, "grpc "+code.String(), false, false, "")
			rs.suspect(i)
			continue
		}
		out := resp.GetOutcome()
		at := resp.GetAttempts()
		sent := len(at) > 0
		var first time.Time
		if sent {
			first = at[0].GetStartTime().AsTime()
		}
		ra := resp.GetRetryAfter().AsDuration()
		if out == rbv1.Outcome_OUTCOME_SHUTTING_DOWN {
			rec.mu.Lock()
			rec.res.Drained++
			rec.mu.Unlock()
			rec.call(start, done, first, sent, outcomeName(out), false, false, "")
			rs.suspect(i)
			continue
		}
		left := dl.Sub(done)
		toDeadline := !sent && left < heldFor
		if toDeadline && mode == DeadlineLong {
			// Answered unsent at the run's end, its deadline: still held then.
			rec.call(start, done, first, sent, outcomeName(out), false, true, "")
			return
		}
		rec.call(start, done, first, sent, outcomeName(out), toDeadline, false,
			fmt.Sprintf("a call started %v into the run, held %v, then %s with retry_after %v, %v before its deadline", into,
				done.Sub(start).Round(time.Millisecond), outcomeName(out), ra.Round(time.Millisecond), left.Round(time.Millisecond)))
		if ra > 0 && !sleepUntil(ctx, minTime(time.Now().Add(ra), end)) {
			return
		}
	}
}

// loadAverage returns the 1-minute load average, or -1 where
// /proc/loadavg cannot be read.
func loadAverage() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// replicaSet is the brokers of a row, as the callers see them: one gRPC
// connection each (tenant key, fast reconnection), and a readiness flag
// that the suite's probe sets from the health service every Poll, as a
// load balancer's readiness probe would.
type replicaSet struct {
	bin  string
	opts brokerOptions
	poll time.Duration

	mu      sync.Mutex
	brokers []*broker
	clients []rbv1.BrokerServiceClient
	conns   []io.Closer
	ready   []atomic.Bool
	// since is, per replica, when its current process started.
	since []time.Time
	// shared is, per replica, whether the current process has reported
	// SharedState SERVING; sharedAt when it first did (from since).
	shared   []bool
	sharedAt []time.Duration

	sharedNotServing atomic.Int64
	// renewed is the replica that was restarted (-1: none yet), and
	// newCalls the calls sent to its new process.
	renewed  atomic.Int64
	newCalls atomic.Int64
	// notServing counts, per replica, the probes that saw SharedState
	// NOT_SERVING after SERVING; all is every process of the row.
	notServing []int
	all        []*broker
	stopProbes chan struct{}
	probes     sync.WaitGroup
}

// connect dials every replica and starts the readiness probes.
func (rs *replicaSet) connect() error {
	n := len(rs.brokers)
	rs.clients = make([]rbv1.BrokerServiceClient, n)
	rs.ready = make([]atomic.Bool, n)
	rs.since = make([]time.Time, n)
	rs.shared = make([]bool, n)
	rs.sharedAt = make([]time.Duration, n)
	rs.notServing = make([]int, n)
	rs.all = slices.Clone(rs.brokers)
	rs.stopProbes = make(chan struct{})
	rs.renewed.Store(-1)
	for i, b := range rs.brokers {
		cl, conn, err := tenantClient(b.addr, grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 500 * time.Millisecond},
			MinConnectTimeout: time.Second,
		}))
		if err != nil {
			return err
		}
		conn.Connect()
		rs.clients[i] = cl
		rs.conns = append(rs.conns, conn)
		rs.ready[i].Store(true)
		rs.since[i] = time.Now().Add(-b.startup)
		rs.shared[i] = true
		rs.probes.Add(1)
		go rs.probe(i, healthpb.NewHealthClient(conn))
	}
	return nil
}

// probe checks replica i's health every poll: ready while "" answers
// SERVING; a SharedState NOT_SERVING after the process has reported
// SERVING is counted.
func (rs *replicaSet) probe(i int, hc healthpb.HealthClient) {
	defer rs.probes.Done()
	t := time.NewTicker(rs.poll)
	defer t.Stop()
	check := func(svc string) bool {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		r, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		return err == nil && r.GetStatus() == healthpb.HealthCheckResponse_SERVING
	}
	for {
		select {
		case <-rs.stopProbes:
			return
		case <-t.C:
		}
		up := check("")
		rs.ready[i].Store(up)
		if !up {
			continue
		}
		shared := check(StoreHealthService)
		rs.mu.Lock()
		switch {
		case shared && !rs.shared[i]:
			rs.shared[i], rs.sharedAt[i] = true, time.Since(rs.since[i])
		case !shared && rs.shared[i]:
			rs.sharedNotServing.Add(1)
			rs.notServing[i]++
		}
		rs.mu.Unlock()
	}
}

// StoreHealthService is the broker's health service for shared state
// (cmd/broker.StoreHealthService).
const StoreHealthService = "retrybroker.v1.SharedState"

// pick returns the replica a caller whose home is home calls: home when
// ready, else the next ready one, else home.
func (rs *replicaSet) pick(home int) (int, rbv1.BrokerServiceClient) {
	n := len(rs.clients)
	i := home
	for k := range n {
		if j := (home + k) % n; rs.ready[j].Load() {
			i = j
			break
		}
	}
	if int64(i) == rs.renewed.Load() {
		rs.newCalls.Add(1)
	}
	return i, rs.clients[i]
}

// suspect marks replica i not ready until its probe next finds it ready
// (a caller saw it fail or drain).
func (rs *replicaSet) suspect(i int) { rs.ready[i].Store(false) }

// current returns the running brokers.
func (rs *replicaSet) current() []*broker {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return slices.Clone(rs.brokers)
}

// restart stops replica i with SIGTERM at at, waits for its exit, and
// starts a new process on the same address, which the callers' connection
// reaches again by itself. start is window 0's start.
func (rs *replicaSet) restart(ctx context.Context, i int, start, at time.Time, logf func(string, ...any)) *RestartInfo {
	info := &RestartInfo{SharedServing: -1}
	if !sleepUntil(ctx, at) {
		info.Err = "interrupted before the restart"
		return info
	}
	rs.mu.Lock()
	old := rs.brokers[i]
	rs.mu.Unlock()
	// The stopping process reports NOT_SERVING on purpose: not counted.
	rs.mu.Lock()
	rs.shared[i] = false
	rs.mu.Unlock()
	info.StoppedAt = time.Since(start)
	t0 := time.Now()
	old.stop(10 * time.Second)
	info.Exited = time.Since(t0)
	o := rs.opts
	o.listen = old.addr
	rs.mu.Lock()
	rs.since[i], rs.shared[i] = time.Now(), false
	rs.mu.Unlock()
	t1 := time.Now()
	b, err := startBroker(ctx, rs.bin, o)
	if err != nil {
		info.Err = err.Error()
		return info
	}
	info.Ready = time.Since(t1)
	rs.mu.Lock()
	rs.brokers[i] = b
	rs.all = append(rs.all, b)
	rs.mu.Unlock()
	rs.renewed.Store(int64(i))
	logf("rolling: replica %d (%s) got SIGTERM %v into the run, exited in %v, the new process (pid %d) was ready in %v",
		i, old.addr, info.StoppedAt.Round(time.Millisecond), info.Exited.Round(time.Millisecond), b.pid(), info.Ready.Round(time.Millisecond))
	return info
}

// close stops the probes, the connections and every broker.
func (rs *replicaSet) close() {
	if rs.stopProbes != nil {
		close(rs.stopProbes)
		rs.probes.Wait()
	}
	for _, c := range rs.conns {
		_ = c.Close()
	}
	stopAll(rs.current())
}

func (rs *replicaSet) notServingBy() []int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return slices.Clone(rs.notServing)
}

// warnings counts the warning and error lines of every process's log
// (the suite runs brokers with --log-level warn) by their msg.
func (rs *replicaSet) warnings() map[string]int {
	rs.mu.Lock()
	all := slices.Clone(rs.all)
	rs.mu.Unlock()
	out := map[string]int{}
	for _, b := range all {
		for _, line := range strings.Split(b.out.String(), "\n") {
			if !strings.Contains(line, "level=WARN") && !strings.Contains(line, "level=ERROR") {
				continue
			}
			msg := line
			if _, m, ok := strings.Cut(line, "msg="); ok {
				msg = m
				if strings.HasPrefix(m, "\"") {
					if j := strings.Index(m[1:], "\""); j >= 0 {
						msg = m[1 : j+1]
					}
				} else if j := strings.IndexByte(m, ' '); j >= 0 {
					msg = m[:j]
				}
			}
			out[msg]++
		}
	}
	return out
}

// sharedServing returns when replica i's current process first reported
// SharedState SERVING, from its start (-1: not yet).
func (rs *replicaSet) sharedServing(i int) time.Duration {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if !rs.shared[i] {
		return -1
	}
	return rs.sharedAt[i]
}

// refusedList formats the refusals of every window, e.g. "50 | 0, 1, 0".
func refusedList(s fakeprovider.Stats) string {
	out := ""
	for i, w := range s.Windows {
		switch i {
		case 0:
		case 1:
			out += " | "
		default:
			out += ", "
		}
		out += fmt.Sprint(w.Refused)
	}
	return out
}
