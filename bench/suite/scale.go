package suite

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/retrybroker/retrybroker/bench/fakeprovider"
	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
	"github.com/retrybroker/retrybroker/internal/config"
	"github.com/retrybroker/retrybroker/internal/store"
	"github.com/retrybroker/retrybroker/internal/store/redistest"
)

// ScaleParams sizes the scale scenario.
type ScaleParams struct {
	// Tenants are the configuration sizes to load.
	Tenants []int
	// RedisExecutes is the number of Execute calls counted per case.
	RedisExecutes int
}

// ConfigResult is the load of one generated configuration file.
type ConfigResult struct {
	Tenants   int
	FileBytes int
	Loads     int
	// Load is the median time of config.Load (read, parse, validate, index).
	Load time.Duration
	// Retained is the live heap the loaded configuration holds (after GC).
	Retained int64
	// Allocated is the bytes allocated by one load.
	Allocated uint64
	// Broker* describe a broker process started with --config: the time
	// from exec to its first SERVING health answer, and its memory once
	// ready (heap in use and RSS).
	BrokerStartup time.Duration
	BrokerHeap    float64
	BrokerRSS     int64
	BrokerPeakRSS int64
}

// BrokerBaseline is a broker process without --config (the dev tenant),
// for comparison with the configured ones.
type BrokerBaseline struct {
	Startup time.Duration
	Heap    float64
	RSS     int64
	PeakRSS int64
}

// RedisOpsResult counts what Execute costs in Redis, for one case on one
// topology.
type RedisOpsResult struct {
	Topology Topology
	Case     string
	Executes int
	// Attempts is the number of upstream attempts the calls made, and
	// WantAttempts the number per call the case is made of.
	Attempts     int
	WantAttempts int
	// Bound is the bound on round trips per Execute for the case
	// (the sum of its attempts' bounds), BoundWhy its reason; 0 means none.
	Bound    float64
	BoundWhy string
	// Commands is every command the masters ran (scripts' inner commands
	// included, from INFO commandstats summed over every master).
	Commands int64
	// TopLevel is the commands clients sent to the masters: from INFO
	// commandstats, every command that is not a data command (@read,
	// @write: those the broker runs only inside scripts), and every call
	// refused before it ran (rejected_calls).
	TopLevel int64
	// SentinelCommands is the commands the sentinel processed for the
	// broker (Sentinel only: INFO stats, total_commands_processed).
	SentinelCommands int64
	// RoundTrips is the request/reply exchanges: counted on the wire by a
	// loopback proxy on one server (Wire), TopLevel (+ SentinelCommands)
	// on the other topologies, where pipelined commands would count once
	// each (an upper bound).
	RoundTrips int64
	Wire       bool
	// Masters is the number of masters, MastersReached how many received
	// a top-level command.
	Masters, MastersReached int
	// ByCommand breaks Commands down, TopByCommand TopLevel.
	ByCommand    map[string]int64
	TopByCommand map[string]int64
}

// PerExecute returns commands and round trips per Execute call.
func (r RedisOpsResult) PerExecute() (float64, float64) {
	if r.Executes == 0 {
		return 0, 0
	}
	return float64(r.Commands) / float64(r.Executes), float64(r.RoundTrips) / float64(r.Executes)
}

// TopLevelPerExecute returns top-level commands per Execute call.
func (r RedisOpsResult) TopLevelPerExecute() float64 {
	if r.Executes == 0 {
		return 0
	}
	return float64(r.TopLevel+r.SentinelCommands) / float64(r.Executes)
}

// HowCounted says how RoundTrips was counted.
func (r RedisOpsResult) HowCounted() string {
	switch {
	case r.Wire:
		return "on the wire (proxy)"
	case r.Topology == TopoSentinel:
		return "top-level commands: master + sentinel"
	}
	return "top-level commands, every master"
}

// tenantsYAML returns a configuration with n tenants, in the shape of
// internal/config's own 100k-tenant benchmark: each tenant has one API key
// and uses the shared policies, and one in a hundred also defines a policy
// of its own.
func tenantsYAML(n int) []byte {
	var b strings.Builder
	b.Grow(n * 160)
	b.WriteString(`version: 1
host_providers:
  api.github.example.com: github
policies:
  standard:
    max_retries: 3
    backoff: {base: 1s, factor: 2, cap: 30s}
  bulk:
    max_retries: 5
    max_delay: 5m
    pacing: {rate: 10, burst: 20}
tenants:
`)
	for i := range n {
		h := sha256.Sum256(fmt.Appendf(nil, "key-%d", i))
		fmt.Fprintf(&b, "  - id: tenant-%06d\n    api_key_sha256: [%s]\n", i, hex.EncodeToString(h[:]))
		if i%100 == 0 {
			b.WriteString("    policies:\n      default: standard\n      bulk: bulk\n      own: {extends: standard, max_retries: 1, allow_destinations: [10.0.0.0/8]}\n")
		} else {
			b.WriteString("    policies: {default: standard, bulk: bulk}\n")
		}
	}
	return []byte(b.String())
}

// brokerMemory starts a broker (with a --config file, or none), waits for
// it to be ready and settle, and reports its startup time and memory.
func (s *suite) brokerMemory(ctx context.Context, configPath string) (BrokerBaseline, error) {
	b, err := startBroker(ctx, s.brokerBin, brokerOptions{metrics: true, config: configPath})
	if err != nil {
		return BrokerBaseline{}, err
	}
	defer b.stop(5 * time.Second)
	time.Sleep(time.Second)
	m, err := s.sample(b)
	if err != nil {
		return BrokerBaseline{}, err
	}
	peak, err := b.peakRSSBytes()
	if err != nil {
		return BrokerBaseline{}, err
	}
	return BrokerBaseline{Startup: b.startup, Heap: m.HeapInuse, RSS: m.RSS, PeakRSS: peak}, nil
}

// configRun generates and loads configurations of each size, in this
// process (config.Load) and in a broker process (--config).
func (s *suite) configRun(ctx context.Context, p ScaleParams) ([]ConfigResult, *BrokerBaseline, error) {
	var out []ConfigResult
	var base *BrokerBaseline
	bb, err := s.brokerMemory(ctx, "")
	if err != nil {
		return nil, nil, fmt.Errorf("broker without --config: %w", err)
	}
	base = &bb
	s.logf("config: broker without --config: ready in %v, heap %s, RSS %s (peak %s)", bb.Startup, fmtBytes(bb.Heap), fmtBytes(float64(bb.RSS)), fmtBytes(float64(bb.PeakRSS)))
	for _, n := range p.Tenants {
		if ctx.Err() != nil {
			return out, base, ctx.Err()
		}
		data := tenantsYAML(n)
		path := filepath.Join(s.tmp, fmt.Sprintf("tenants-%d.yaml", n))
		err := os.WriteFile(path, data, 0o600)
		if err != nil {
			return out, base, err
		}
		r := ConfigResult{Tenants: n, FileBytes: len(data)}
		// Repeat small loads more, for a stable median, within ~2 s.
		loads := 3
		switch {
		case n <= 10:
			loads = 50
		case n <= 10_000:
			loads = 10
		}
		var times []time.Duration
		for range loads {
			t0 := time.Now()
			d, err := config.Load(path)
			el := time.Since(t0)
			if err != nil {
				return out, base, fmt.Errorf("%d tenants: %w", n, err)
			}
			if d.Len() != n {
				return out, base, fmt.Errorf("%d tenants: loaded %d", n, d.Len())
			}
			times = append(times, el)
		}
		// Memory: keep several copies alive for small files, so that the
		// difference stands above the GC's noise.
		copies := max(1, min(100, 100_000/max(n, 1)))
		var before, after runtime.MemStats
		runtime.GC()
		runtime.GC() // a second cycle also empties sync.Pool victim caches
		runtime.ReadMemStats(&before)
		kept := make([]*config.Directory, copies)
		for i := range kept {
			if kept[i], err = config.Load(path); err != nil {
				return out, base, err
			}
		}
		runtime.ReadMemStats(&after)
		r.Allocated = (after.TotalAlloc - before.TotalAlloc) / uint64(copies)
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&after)
		r.Retained = (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / int64(copies)
		runtime.KeepAlive(kept)
		slices.Sort(times)
		r.Loads, r.Load = loads, times[len(times)/2]
		bm, err := s.brokerMemory(ctx, path)
		if err != nil {
			return out, base, fmt.Errorf("broker with %d tenants: %w", n, err)
		}
		r.BrokerStartup, r.BrokerHeap, r.BrokerRSS, r.BrokerPeakRSS = bm.Startup, bm.Heap, bm.RSS, bm.PeakRSS
		_ = os.Remove(path)
		s.logf("config: %d tenants (%d bytes): load %v (median of %d), retained %d B (%.0f B/tenant); broker ready in %v, heap %s, RSS %s (peak %s)",
			n, r.FileBytes, r.Load, loads, r.Retained, float64(r.Retained)/float64(n), r.BrokerStartup, fmtBytes(r.BrokerHeap), fmtBytes(float64(r.BrokerRSS)), fmtBytes(float64(r.BrokerPeakRSS)))
		out = append(out, r)
	}
	return out, base, nil
}

// PlainRemoteCase is the plain-200 case on a broker with local admission
// off; PlainCase the same on the default broker (local admission on).
const (
	PlainCase       = "1 attempt: plain 200 (reports nothing)"
	PlainRemoteCase = "1 attempt: plain 200, local admission off (--redis-local-admission 0)"
)

// redisCase is one case of the Redis operations table.
type redisCase struct {
	name     string
	provider string
	calls    int
	attempts int
	bound    float64
	why      string
	url      func(i int) string
	// remote runs the case on a broker with local admission off
	// (--redis-local-admission 0): every Admit a round trip. The other
	// cases run on the default (local admission on).
	remote bool
	// steady warms the gate up past its first window's slow start
	// (store.SlowStartShare × store.SlowStartMax calls, uncounted), so that
	// the case counts a gate in steady use: during slow start each attempt
	// is registered, a second round trip (docs/shared-state.md, "The first
	// window").
	steady bool
}

// redisOpsRun counts Redis commands and round trips per Execute through a
// broker on each topology (one server, the 3-master cluster, a master with
// a replica and a sentinel), in four cases: one attempt whose 200 carries
// GitHub quota headers, one attempt whose plain 200 reports nothing (with
// local admission on, the default, and off), and two attempts (503
// Retry-After: 0, then a plain 200). A topology that fails is reported in
// the error; the others still run.
func (s *suite) redisOpsRun(ctx context.Context, p ScaleParams) ([]RedisOpsResult, error) {
	// Upstreams: a GitHub-style provider with a quota that never runs out,
	// and a server answering /plain/ 200 with no header of note, and each
	// other path 503 Retry-After: 0 once, then 200.
	prov, err := fakeprovider.Start(fakeprovider.Config{
		Style: fakeprovider.GitHub, Quota: 1 << 30, Window: time.Hour,
		Start: time.Now().Truncate(time.Second),
	})
	if err != nil {
		return nil, err
	}
	defer prov.Close()
	once, err := startOnce503()
	if err != nil {
		return nil, err
	}
	defer once.close()
	var out []RedisOpsResult
	var errs []error
	for ti, topo := range Topologies {
		if ctx.Err() != nil {
			break
		}
		// The retry case stays within the default retry budget (10 retries a
		// second over 10 s, plus 20% of requests): at most 60 retries.
		base := ti * 10_000_000
		cases := []redisCase{
			{
				"1 attempt: 200 with GitHub quota headers", "github", p.RedisExecutes, 1, 2, "one attempt whose response carries quota: ≤ 2",
				func(int) string { return prov.URL() + "/repos/octo/hello" }, false, false,
			},
			{
				PlainCase, "", p.RedisExecutes, 1, 1, "one attempt whose response reports nothing: ≤ 1",
				func(i int) string { return fmt.Sprintf("%s/plain/%d", once.url, base+i) }, false, true,
			},
			{
				"2 attempts: 503 Retry-After: 0, then plain 200", "", min(p.RedisExecutes, 50), 2, 3, "a 503 with a hint (≤ 2, as a response that carries quota) and a plain 200 (≤ 1): ≤ 3",
				func(i int) string { return fmt.Sprintf("%s/job/%d", once.url, base+i) }, false, false,
			},
			{
				PlainRemoteCase, "", p.RedisExecutes, 1, 1, "one attempt whose response reports nothing: ≤ 1",
				func(i int) string { return fmt.Sprintf("%s/plain/%d", once.url, base+500_000+i) }, true, true,
			},
		}
		res, err := s.redisOpsOn(ctx, topo, cases, base)
		out = append(out, res...)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", topo, err))
		}
	}
	return out, errors.Join(errs...)
}

// redisOpsOn runs the cases through one broker on topo.
func (s *suite) redisOpsOn(ctx context.Context, topo Topology, cases []redisCase, base int) ([]RedisOpsResult, error) {
	var masters []string
	var sentinel string
	var o brokerOptions
	var proxy *roundTripProxy
	switch topo {
	case TopoSingle:
		rs, err := s.redis(ctx)
		if err != nil {
			return nil, err
		}
		if _, err := rs.command("FLUSHALL"); err != nil {
			return nil, err
		}
		if proxy, err = startRoundTripProxy(rs.addr); err != nil {
			return nil, err
		}
		defer proxy.close()
		masters, o.redisURL = []string{rs.addr}, "redis://"+proxy.addr()+"/0"
	case TopoCluster:
		cl, err := s.cluster(ctx)
		if err != nil {
			return nil, err
		}
		if masters = cl.Masters(ctx); len(masters) != clusterMasters {
			return nil, fmt.Errorf("%d masters answer, want %d", len(masters), clusterMasters)
		}
		if err := flushAll(masters); err != nil {
			return nil, err
		}
		o.redisCluster = cl.Seeds()
	case TopoSentinel:
		dir := filepath.Join(s.tmp, "sentinel")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		t0 := time.Now()
		sn, err := redistest.NewSentinel(dir)
		if err != nil {
			return nil, err
		}
		defer func() {
			if err := sn.Close(); err != nil {
				s.logf("redis sentinel: stop: %v", err)
			}
		}()
		s.logf("redis sentinel: master %s, replica %s, sentinel %s ready in %v (pids %v)", sn.MasterAddr(), sn.ReplicaAddr(), sn.Addr(), time.Since(t0), sn.Pids())
		masters, sentinel, o.redisSentinel = []string{sn.MasterAddr()}, sn.Addr(), sn.Flag()
	default:
		return nil, fmt.Errorf("unknown topology %q", topo)
	}
	data, err := dataCommands(masters[0])
	if err != nil {
		return nil, err
	}
	o.metrics = true
	// The replica's health check (a PING every 500 ms, calls or none) is
	// off here: the table counts what Executes cost, not what an idle
	// replica spends (2 round trips a second).
	o.healthInterval = "0"
	// One broker at a time (a second broker's subscription would count
	// too): the default one, then, for the remote cases, one with local
	// admission off.
	var b *broker
	var cl rbv1.BrokerServiceClient
	var conn *grpc.ClientConn
	var exitErrs []error // a broker that exited before it was stopped
	remote := false
	stopBroker := func() {
		if b != nil {
			exitErrs = append(exitErrs, exitedDuring([]*broker{b}))
			_ = conn.Close()
			b.stop(5 * time.Second)
			b = nil
		}
	}
	defer stopBroker()
	var out []RedisOpsResult
	for ci, c := range cases {
		if b == nil || c.remote != remote {
			stopBroker()
			remote, o.localAdmission = c.remote, ""
			if remote {
				o.localAdmission = "0"
			}
			var err error
			if b, err = startBroker(ctx, s.brokerBin, o); err != nil {
				return out, err
			}
			if cl, conn, err = brokerClient(b.addr); err != nil {
				return out, err
			}
		}
		exec := func(i int) (int, error) {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			resp, err := cl.Execute(cctx, &rbv1.ExecuteRequest{
				Request: &rbv1.HttpRequest{Method: "GET", Url: c.url(i)}, Provider: c.provider,
			}, grpc.WaitForReady(true))
			if err != nil {
				return 0, err
			}
			if resp.GetResponse().GetStatusCode() != 200 {
				return 0, fmt.Errorf("status %d outcome %v", resp.GetResponse().GetStatusCode(), resp.GetOutcome())
			}
			return len(resp.GetAttempts()), nil
		}
		first := (ci + 1) * 1_000_000
		warm := 5 // warm-up: connections, script cache
		if c.steady {
			warm = store.SlowStartShare * store.SlowStartMax
		}
		for i := range warm {
			if _, err := exec(first + 900_000 + i); err != nil {
				return out, fmt.Errorf("%s: warm-up: %w", c.name, err)
			}
		}
		health0, err := storeHealth(b)
		if err != nil {
			return out, err
		}
		before, err := snapshot(masters)
		if err != nil {
			return out, err
		}
		var sent0 int64
		if sentinel != "" {
			if sent0, err = sentinelCommands(sentinel); err != nil {
				return out, err
			}
		}
		var rt0 int64
		if proxy != nil {
			rt0 = proxy.count()
		}
		r := RedisOpsResult{
			Topology: topo, Case: c.name, WantAttempts: c.attempts, Bound: c.bound, BoundWhy: c.why,
			Masters: len(masters), Wire: proxy != nil,
		}
		for i := range c.calls {
			n, err := exec(first + i)
			if err != nil {
				return out, fmt.Errorf("%s: %w", c.name, err)
			}
			r.Executes++
			r.Attempts += n
		}
		if proxy != nil {
			r.RoundTrips = proxy.count() - rt0
		}
		after, err := snapshot(masters)
		if err != nil {
			return out, err
		}
		if sentinel != "" {
			sent1, err := sentinelCommands(sentinel)
			if err != nil {
				return out, err
			}
			r.SentinelCommands = max(0, sent1-sent0-1) // our first INFO counts too
		}
		if err := stayedShared(b, health0); err != nil {
			return out, fmt.Errorf("%s: %w", c.name, err)
		}
		d := diffStats(before, after, data, ignoredCommands(topo))
		r.Commands, r.TopLevel, r.MastersReached, r.ByCommand, r.TopByCommand = d.Total, d.TopLevel, d.Reached, d.Commands, d.TopCommands
		if proxy == nil {
			r.RoundTrips = r.TopLevel + r.SentinelCommands
		}
		cpe, rpe := r.PerExecute()
		s.logf("redis %s: %s: %.2f commands, %.2f top-level commands and %.2f round trips per Execute (%d attempts for %d calls; %d of %d masters reached, sentinel %d) %v",
			topo, c.name, cpe, r.TopLevelPerExecute(), rpe, r.Attempts, r.Executes, r.MastersReached, r.Masters, r.SentinelCommands, r.ByCommand)
		out = append(out, r)
	}
	stopBroker()
	return out, errors.Join(exitErrs...)
}

// storeHealth reads the broker's retrybroker_store_degraded and
// retrybroker_store_state_changes_total.
func storeHealth(b *broker) ([2]float64, error) {
	m, err := b.metrics()
	if err != nil {
		return [2]float64{}, fmt.Errorf("broker metrics: %w", err)
	}
	return [2]float64{m["retrybroker_store_degraded"], m["retrybroker_store_state_changes_total"]}, nil
}

// stayedShared returns an error when the broker is degraded or changed its
// store state since it reported before: a broker that left shared state
// served calls on local state, and its Redis counts would be wrong.
func stayedShared(b *broker, before [2]float64) error {
	now, err := storeHealth(b)
	if err != nil {
		return err
	}
	if before[0] != 0 || now[0] != 0 || now[1] != before[1] {
		return fmt.Errorf("the broker left shared state during the case (store degraded %v then %v, state changes %v then %v): its counts are not the broker's on Redis", before[0], now[0], before[1], now[1])
	}
	return nil
}

// once503 answers each path 503 Retry-After: 0 the first time, then 200;
// paths under /plain/ are answered 200 at once. No answer carries a
// rate-limit header.
type once503 struct {
	srv  *http.Server
	url  string
	mu   sync.Mutex
	seen map[string]bool
}

func startOnce503() (*once503, error) {
	lis, err := net.Listen("tcp", net.JoinHostPort(loopback, "0"))
	if err != nil {
		return nil, err
	}
	o := &once503{url: "http://" + lis.Addr().String(), seen: map[string]bool{}}
	o.srv = &http.Server{Handler: o, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = o.srv.Serve(lis) }()
	return o, nil
}

func (o *once503) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/plain/") {
		_, _ = io.WriteString(w, `{"ok":true}`)
		return
	}
	o.mu.Lock()
	first := !o.seen[r.URL.Path]
	o.seen[r.URL.Path] = true
	o.mu.Unlock()
	if first {
		w.Header().Set("Retry-After", "0")
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	_, _ = io.WriteString(w, `{"ok":true}`)
}

func (o *once503) close() { _ = o.srv.Close() }
