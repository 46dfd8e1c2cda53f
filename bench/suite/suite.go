// Package suite is the retry broker's benchmark suite: it measures, in one
// run on one machine, how much of a provider's quota the broker spends on
// calls that will be refused (against callers retrying on their own), how
// many calls reach an upstream during an outage (go-retryablehttp callers,
// a broker without and with its failure breaker), and what it costs to go
// through it (against an empty gRPC handler, a minimal forwarder and direct
// HTTP), plus parked-call memory, scale figures, streaming
// (ExecuteStream memory, throughput and time to first byte) and the cost of
// broker-held credentials (Execute with each kind against the same broker
// without one, bench/suite/credentials.go).
//
// The brokers of the quota and outage scenarios run with --config files the
// suite writes (bench/suite/brokerconfig.go) and checks first with
// `broker config check`: a broker that refuses one fails its rows loudly.
//
// The shared-state rows run on one redis-server and on a 3-master Redis
// Cluster, and the Redis operations are counted on one server, that
// cluster and a master with a replica and a sentinel; the cluster and the
// Sentinel processes come from internal/store/redistest.
//
// Every process and every request stays on 127.0.0.1, and every request
// loop is bounded in count and time. Every redis-server and broker process
// is stopped by its pid within a bounded time, and on Linux is also killed
// by the kernel if the suite's process dies first (Pdeathsig). Run it with
//
//	go run ./bench/cmd/benchsuite
//
// which prints a markdown table and writes docs/benchmarks.md and the PNG
// charts in docs/benchmarks/.
package suite

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/retrybroker/retrybroker/bench/fakeprovider"
	"github.com/retrybroker/retrybroker/internal/store/redistest"
)

// Options configure a run.
type Options struct {
	// Quick runs a short smoke version of every scenario (seconds, not
	// minutes). Its numbers are not meant to be quoted.
	Quick bool
	// BrokerBin is the broker binary; empty builds ./cmd/broker of the
	// module at ModuleRoot into a temporary directory.
	BrokerBin string
	// ModuleRoot is the repository root (for building the broker and for
	// relative output paths); empty means the current directory.
	ModuleRoot string
	// RedisServer is the redis-server binary of the single server; empty
	// looks it up on PATH. The cluster and Sentinel nodes always use the
	// one on PATH (internal/store/redistest).
	RedisServer string
	// DocPath is the markdown report to write (e.g. docs/benchmarks.md);
	// empty writes none.
	DocPath string
	// ChartDir is where PNG charts go (e.g. docs/benchmarks); empty draws none.
	ChartDir string
	// Command is the command line to print as "reproduce with".
	Command string
	// Log receives progress lines; nil discards them.
	Log io.Writer
	// TraceDir, when set, receives one CSV file per quota row with every
	// arrival at the fake provider (for investigations).
	TraceDir string
	// Styles, when not empty, limits the quota, herd and rolling
	// scenarios to these styles.
	Styles []string
	// OverheadConcurrency, when not empty, replaces the overhead
	// scenario's concurrency levels (investigations of one level).
	OverheadConcurrency []int
	// TTFBScale, when above 1, multiplies the stream scenario's
	// time-to-first-byte calls and rounds (investigations of its noise).
	TTFBScale int
	// OneCallerScale, when above 0, replaces the overhead scenario's
	// one-caller scale (OverheadParams.OneCallerScale; 4 in a full run).
	OneCallerScale int
	// ManyCallerScale, when above 0, replaces the overhead scenario's
	// scale of the levels above one caller (OverheadParams.ManyCallerScale;
	// 4 in a full run).
	ManyCallerScale int
	// BodyBudget, when above 0, replaces the overhead scenario's in-process
	// body budget (OverheadParams.BodyBudget; investigations only).
	BodyBudget int64
	// Only, when not empty, limits the run to these scenarios: "quota",
	// "herd", "rolling", "outage", "overhead", "parked", "scale", "stream", "credentials", "tasks".
	Only []string
}

// Report is everything a run measured.
type Report struct {
	Quick    bool
	Machine  Machine
	Started  time.Time
	Elapsed  time.Duration
	Command  string
	Quota    QuotaParams
	QuotaRes []QuotaResult
	// Outage and OutageRes are the outage scenario.
	Outage    OutageParams
	OutageRes []OutageResult
	Overhead  OverheadParams
	OverRes   []OverheadResult
	// OverShares is the profile of the Execute rows: the handlers' CPU per
	// call outside the HTTP client (overheadRun).
	OverShares []HandlerShare
	Parked     []ParkedResult
	Config     []ConfigResult
	// BrokerBase is a broker without --config, beside Config's brokers.
	BrokerBase *BrokerBaseline
	RedisOps   []RedisOpsResult
	// Stream is the streaming scenario (ExecuteStream memory, throughput,
	// time to first byte); nil when it did not run.
	Stream *StreamReport
	// Credentials is issue 19's overhead rows (broker-held credentials);
	// nil when the scenario did not run.
	Credentials *CredentialsReport
	// Tasks is issue 20's rows (deferred calls on SQLite); nil when the
	// scenario did not run.
	Tasks *TasksReport
	// Herd, HerdRes and RollingRes are the herd scenario (issue 18) and
	// its rolling restart.
	Herd       HerdParams
	HerdRes    []HerdResult
	RollingRes []HerdResult
	// Errors are scenario failures; the rest of the report stands.
	Errors []string
}

type suite struct {
	opts      Options
	brokerBin string
	tmp       string
	log       io.Writer
	logMu     sync.Mutex

	redisOnce sync.Once
	redisSrv  *redisServer
	redisErr  error

	clusterOnce sync.Once
	clusterSrv  *redistest.Cluster
	clusterErr  error
}

func (s *suite) logf(format string, args ...any) {
	if s.log == nil {
		return
	}
	s.logMu.Lock()
	defer s.logMu.Unlock()
	fmt.Fprintf(s.log, "%s  "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
}

// redis starts the suite's redis-server on first use.
func (s *suite) redis(ctx context.Context) (*redisServer, error) {
	s.redisOnce.Do(func() {
		dir := filepath.Join(s.tmp, "redis")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			s.redisErr = err
			return
		}
		s.redisSrv, s.redisErr = startRedis(ctx, s.opts.RedisServer, dir)
	})
	return s.redisSrv, s.redisErr
}

// Sizes are the sizes of every scenario of a run.
type Sizes struct {
	Quota    QuotaParams
	Outage   OutageParams
	Overhead OverheadParams
	Parked   ParkedParams
	Scale    ScaleParams
	Herd     HerdParams
}

// HerdCallers is the number of callers of the quota rows that show the
// herd effect (beside the rows with QuotaParams.Callers).
const HerdCallers = 100

// ClusterStyles are the provider styles whose quota rows also run on the
// Redis Cluster in a full run: one that announces its quota on every answer
// (GitHub) and one that announces nothing until it refuses (Retry-After).
// Jira and Azure behave as these two do on one Redis server; running them
// on the cluster too would take make bench beyond its 10 minutes.
var ClusterStyles = []fakeprovider.Style{fakeprovider.GitHub, fakeprovider.RetryAfter}

// clusterCases are the cluster's rows of style st in a full run: c-cluster
// and d-cluster at QuotaParams.Callers, and c-cluster with the herd.
func clusterCases(st fakeprovider.Style) []QuotaCase {
	if !slices.Contains(ClusterStyles, st) {
		return nil
	}
	out := []QuotaCase{{Style: st, Row: RowClusterShared}, {Style: st, Row: RowClusterSeeds}}
	if st == fakeprovider.RetryAfter {
		out = append(out, QuotaCase{Style: st, Row: RowClusterShared, Callers: HerdCallers})
	}
	return out
}

// Params returns the scenario sizes for a full or a quick run.
func Params(quick bool) Sizes {
	outageSetups := []OutageSetup{OutageRetryableHTTP, OutageNoBreaker, OutageBreaker}
	if quick {
		return Sizes{
			Quota: QuotaParams{
				Callers: 4, Quota: 10, Window: time.Second, Windows: 2, MaxCallsPerCaller: 2000,
				Cases: []QuotaCase{
					{Style: fakeprovider.GitHub, Row: RowRetryableHTTP},
					{Style: fakeprovider.GitHub, Row: RowOneBroker},
					{Style: fakeprovider.GitHub, Row: RowRedis3},
					{Style: fakeprovider.GitHub, Row: RowMemory3},
					{Style: fakeprovider.Azure, Row: RowOneBroker},
					{Style: fakeprovider.Jira, Row: RowOneBroker},
					{Style: fakeprovider.RetryAfter, Row: RowOneBroker},
					{Style: fakeprovider.RetryAfter, Row: RowRedis3, Callers: HerdCallers},
					// One row on the cluster, so that its code runs (the
					// scale scenario runs the cluster with every seed).
					{Style: fakeprovider.RetryAfter, Row: RowClusterSeeds},
				},
			},
			Outage: OutageParams{
				Rate: 40, Warmup: 300 * time.Millisecond, Outage: 2 * time.Second, Recovery: 3 * time.Second, OpenFor: time.Second,
				CallTimeout: 10 * time.Second, Bin: 250 * time.Millisecond, Setups: outageSetups,
			},
			Overhead: OverheadParams{Concurrency: []int{1, 16}, Rounds: 2, Round: 60 * time.Millisecond, MaxCallsPerRound: 20_000},
			Parked:   ParkedParams{Calls: []int{200}, Conns: 2, Hold: 2 * time.Second, Settle: 300 * time.Millisecond},
			Scale:    ScaleParams{Tenants: []int{1, 1000}, RedisExecutes: 20},
			Herd: HerdParams{
				Callers: 10, Quota: 5, Window: time.Second, Windows: 2, ShortDeadline: 1500 * time.Millisecond, MaxCallsPerCaller: 2000,
				Cases: []HerdCase{
					{Style: fakeprovider.GitHub, Setup: HerdRetryableHTTP, Deadline: DeadlineShort},
					{Style: fakeprovider.GitHub, Setup: HerdOneBroker, Deadline: DeadlineLong},
				},
				Rolling: []HerdCase{{Style: fakeprovider.RetryAfter, Setup: HerdRolling, Deadline: DeadlineShort}},
				StopAt:  500 * time.Millisecond, Poll: 100 * time.Millisecond,
			},
		}
	}
	var cases []QuotaCase
	for _, st := range fakeprovider.Styles {
		for _, r := range []Row{RowRetryableHTTP, RowOneBroker, RowRedis3, RowMemory3} {
			cases = append(cases, QuotaCase{Style: st, Row: r})
		}
		// The herd rows: b and c for every style, and a for retry-after
		// only, where go-retryablehttp makes a herd of its own at every
		// announced time (it honours Retry-After; elsewhere it backs off
		// as at 16 callers), to keep make bench within its time.
		herd := []Row{RowOneBroker, RowRedis3}
		if st == fakeprovider.RetryAfter {
			herd = []Row{RowRetryableHTTP, RowOneBroker, RowRedis3}
		}
		for _, r := range herd {
			cases = append(cases, QuotaCase{Style: st, Row: r, Callers: HerdCallers})
		}
		cases = append(cases, clusterCases(st)...)
	}
	openFor := 5 * time.Second
	return Sizes{
		// Three windows: the first, where nothing is known, and two after it
		// (four would add 50 s to make bench).
		Quota: QuotaParams{Callers: 16, Quota: 50, Window: 2 * time.Second, Windows: 3, MaxCallsPerCaller: 200_000, Cases: cases},
		Outage: OutageParams{
			Rate: 50, Warmup: time.Second, Outage: 10 * time.Second, Recovery: 2*openFor + time.Second, OpenFor: openFor,
			CallTimeout: 30 * time.Second, Bin: 500 * time.Millisecond, Setups: outageSetups,
		},
		Overhead: OverheadParams{Concurrency: []int{1, 16, 256}, Rounds: 20, Round: 150 * time.Millisecond, MaxCallsPerRound: 2_000_000, OneCallerSplit: 5, OneCallerScale: 4, ManyCallerScale: 4},
		Parked:   ParkedParams{Calls: []int{1000, 10_000}, Conns: 8, Hold: 0, Settle: 1500 * time.Millisecond},
		Scale:    ScaleParams{Tenants: []int{1, 1000, 100_000}, RedisExecutes: 500},
		Herd:     herdParams(),
	}
}

// herdParams is the full run's herd scenario (issue 18's shape): 100
// callers, quota 50 per 2 s, 6 windows (12 s), for github and
// retry-after, long and short deadlines; go-retryablehttp callers, 1
// broker and 3 replicas on Redis; the rolling restart of one of 3
// replicas in each style and deadline mode, replica 0 getting SIGTERM in
// the middle of window 2.
func herdParams() HerdParams {
	p := HerdParams{
		Callers: HerdCallers, Quota: 50, Window: 2 * time.Second, Windows: 6, ShortDeadline: 3 * time.Second, MaxCallsPerCaller: 200_000,
		StopAt: 5 * time.Second, Poll: 100 * time.Millisecond,
	}
	for _, st := range []fakeprovider.Style{fakeprovider.GitHub, fakeprovider.RetryAfter} {
		for _, dl := range []Deadline{DeadlineLong, DeadlineShort} {
			for _, setup := range []HerdSetup{HerdRetryableHTTP, HerdOneBroker, HerdRedis3} {
				p.Cases = append(p.Cases, HerdCase{Style: st, Setup: setup, Deadline: dl})
			}
			p.Rolling = append(p.Rolling, HerdCase{Style: st, Setup: HerdRolling, Deadline: dl})
		}
	}
	return p
}

// Run runs the suite and writes the report and charts. It returns the
// report even when some scenarios failed (their errors are in it); the
// error is non-nil when the run could not start or the outputs could not
// be written.
func Run(ctx context.Context, o Options) (*Report, error) {
	root := o.ModuleRoot
	if root == "" {
		root = "."
	}
	tmp, err := os.MkdirTemp("", "benchsuite")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	s := &suite{opts: o, tmp: tmp, log: o.Log, brokerBin: o.BrokerBin}
	defer func() {
		if s.redisSrv != nil {
			s.redisSrv.stop(2 * time.Second)
		}
		s.closeCluster()
	}()
	rep := &Report{Quick: o.Quick, Machine: machineInfo(root), Started: time.Now(), Command: o.Command}
	built := s.brokerBin == ""
	if built {
		s.logf("building the broker (go build ./cmd/broker)")
		s.brokerBin, err = buildBroker(ctx, root, tmp)
		if err != nil {
			return nil, err
		}
	}
	rep.Machine.Broker = brokerProvenance(s.brokerBin, built, rep.Machine.Commit)
	if err := checkNames(o); err != nil {
		return nil, err
	}
	sz := Params(o.Quick)
	if len(o.OverheadConcurrency) > 0 {
		sz.Overhead.Concurrency = o.OverheadConcurrency
	}
	if o.OneCallerScale > 0 {
		sz.Overhead.OneCallerScale = o.OneCallerScale
	}
	if o.ManyCallerScale > 0 {
		sz.Overhead.ManyCallerScale = o.ManyCallerScale
	}
	if o.BodyBudget > 0 {
		sz.Overhead.BodyBudget = o.BodyBudget
	}
	qp, op, pp, sp, up := sz.Quota, sz.Overhead, sz.Parked, sz.Scale, sz.Outage
	if len(o.Styles) > 0 {
		var keep []QuotaCase
		for _, c := range qp.Cases {
			for _, st := range o.Styles {
				if string(c.Style) == st {
					keep = append(keep, c)
				}
			}
		}
		qp.Cases = keep
	}
	rep.Quota, rep.Overhead, rep.Outage, rep.Herd = qp, op, up, sz.Herd
	want := func(name string) bool {
		if len(o.Only) == 0 {
			return true
		}
		for _, n := range o.Only {
			if n == name {
				return true
			}
		}
		return false
	}
	// Configuration load runs first: it measures this process's heap,
	// which is quietest before the other scenarios have run.
	if want("scale") {
		cr, base, err := s.configRun(ctx, sp)
		rep.Config, rep.BrokerBase = cr, base
		if err != nil {
			rep.Errors = append(rep.Errors, "config load: "+err.Error())
		}
	}
	if want("quota") && ctx.Err() == nil {
		rep.QuotaRes = s.quotaRun(ctx, qp)
		for _, r := range rep.QuotaRes {
			if r.Err != "" {
				rep.Errors = append(rep.Errors, fmt.Sprintf("quota %s/%s: %s", r.Style, r.Row, r.Err))
			}
		}
	}
	if want("herd") && ctx.Err() == nil {
		rep.HerdRes = s.herdRun(ctx, sz.Herd, filterHerd(sz.Herd.Cases, o.Styles), "herd")
		for _, r := range rep.HerdRes {
			if r.Err != "" {
				rep.Errors = append(rep.Errors, fmt.Sprintf("herd %s: %s", r.Label(), r.Err))
			}
		}
	}
	if want("rolling") && ctx.Err() == nil {
		rep.RollingRes = s.herdRun(ctx, sz.Herd, filterHerd(sz.Herd.Rolling, o.Styles), "rolling")
		for _, r := range rep.RollingRes {
			if r.Err != "" {
				rep.Errors = append(rep.Errors, fmt.Sprintf("rolling %s: %s", r.Label(), r.Err))
			}
		}
	}
	if want("outage") && ctx.Err() == nil {
		rep.OutageRes = s.outageRun(ctx, up)
		for _, r := range rep.OutageRes {
			if r.Err != "" {
				rep.Errors = append(rep.Errors, fmt.Sprintf("outage %s: %s", r.Setup, r.Err))
			}
		}
	}
	if want("overhead") && ctx.Err() == nil {
		res, shares, err := s.overheadRun(ctx, op)
		rep.OverRes, rep.OverShares = res, shares
		if err != nil {
			rep.Errors = append(rep.Errors, "overhead: "+err.Error())
		}
	}
	if want("parked") && ctx.Err() == nil {
		res, err := s.parkedRun(ctx, pp)
		rep.Parked = res
		if err != nil {
			rep.Errors = append(rep.Errors, "parked: "+err.Error())
		}
	}
	if want("stream") && ctx.Err() == nil {
		stp := streamParams(o.Quick)
		if o.TTFBScale > 1 {
			stp.TTFBCalls *= o.TTFBScale
			stp.TTFBRounds *= o.TTFBScale
		}
		res, err := s.streamRun(ctx, stp)
		rep.Stream = res
		if err != nil {
			rep.Errors = append(rep.Errors, "stream: "+err.Error())
		}
	}
	if want("credentials") && ctx.Err() == nil {
		res, err := s.credentialsRun(ctx, credentialsParams(o.Quick))
		rep.Credentials = res
		if err != nil {
			rep.Errors = append(rep.Errors, "credentials: "+err.Error())
		}
	}
	if want("tasks") && ctx.Err() == nil {
		res, err := s.tasksRun(ctx, tasksParams(o.Quick))
		rep.Tasks = res
		if err != nil {
			rep.Errors = append(rep.Errors, "tasks: "+err.Error())
		}
	}
	if want("scale") && ctx.Err() == nil {
		rr, err := s.redisOpsRun(ctx, sp)
		rep.RedisOps = rr
		if err != nil {
			rep.Errors = append(rep.Errors, "redis ops: "+err.Error())
		}
	}
	if err := ctx.Err(); err != nil {
		rep.Errors = append(rep.Errors, "interrupted: "+err.Error())
	}
	rep.Elapsed = time.Since(rep.Started)

	var werr error
	if o.ChartDir != "" {
		if err := os.MkdirAll(o.ChartDir, 0o755); err != nil {
			werr = errors.Join(werr, err)
		} else if err := drawCharts(rep, o.ChartDir); err != nil {
			werr = errors.Join(werr, fmt.Errorf("charts: %w", err))
		}
	}
	if o.DocPath != "" {
		if err := os.MkdirAll(filepath.Dir(o.DocPath), 0o755); err != nil {
			werr = errors.Join(werr, err)
		} else if err := os.WriteFile(o.DocPath, []byte(rep.Document(chartLinks(o))), 0o644); err != nil {
			werr = errors.Join(werr, err)
		}
	}
	return rep, werr
}

// Scenarios lists the scenario names Options.Only accepts, in run order.
// "stream" is the streaming scenario, added on main beside these (its own
// files); it is listed here so that naming it is never refused.
var Scenarios = []string{"scale", "quota", "herd", "rolling", "outage", "overhead", "parked", "stream", "credentials", "tasks"}

// filterHerd keeps the cases of the styles named (all when none is).
func filterHerd(cases []HerdCase, styles []string) []HerdCase {
	if len(styles) == 0 {
		return cases
	}
	var out []HerdCase
	for _, c := range cases {
		if slices.Contains(styles, string(c.Style)) {
			out = append(out, c)
		}
	}
	return out
}

// checkNames refuses unknown scenario and style names, so that a typo
// does not silently run nothing.
func checkNames(o Options) error {
	for _, n := range o.Only {
		if !slices.Contains(Scenarios, n) {
			return fmt.Errorf("unknown scenario %q (known: %s)", n, strings.Join(Scenarios, ", "))
		}
	}
	for _, st := range o.Styles {
		if !slices.Contains(fakeprovider.Styles, fakeprovider.Style(st)) {
			return fmt.Errorf("unknown provider style %q (known: %v)", st, fakeprovider.Styles)
		}
	}
	return nil
}

// chartLinks returns the chart directory relative to the document, for links.
func chartLinks(o Options) string {
	if o.ChartDir == "" || o.DocPath == "" {
		return ""
	}
	rel, err := filepath.Rel(filepath.Dir(o.DocPath), o.ChartDir)
	if err != nil {
		return ""
	}
	return filepath.ToSlash(rel)
}
