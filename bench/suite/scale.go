package suite

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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

// RedisOpsResult counts what Execute costs in Redis.
type RedisOpsResult struct {
	Case     string
	Executes int
	// Commands is every command Redis ran (scripts' inner commands
	// included, from INFO commandstats), RoundTrips the request/reply
	// exchanges on the wire (counted by a loopback proxy).
	Commands   int64
	RoundTrips int64
	// ByCommand breaks Commands down.
	ByCommand map[string]int64
	// Attempts is the number of upstream attempts the calls made.
	Attempts int
}

// PerExecute returns commands and round trips per Execute call.
func (r RedisOpsResult) PerExecute() (float64, float64) {
	if r.Executes == 0 {
		return 0, 0
	}
	return float64(r.Commands) / float64(r.Executes), float64(r.RoundTrips) / float64(r.Executes)
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

// redisOpsRun counts Redis commands and round trips per Execute through a
// broker with --redis, in two cases: one attempt (200 with GitHub quota
// headers), and two attempts (503 Retry-After: 0, then 200).
func (s *suite) redisOpsRun(ctx context.Context, p ScaleParams) ([]RedisOpsResult, error) {
	rs, err := s.redis(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := rs.command("FLUSHALL"); err != nil {
		return nil, err
	}
	proxy, err := startRoundTripProxy(rs.addr)
	if err != nil {
		return nil, err
	}
	defer proxy.close()
	b, err := startBroker(ctx, s.brokerBin, brokerOptions{redisURL: "redis://" + proxy.addr() + "/0"})
	if err != nil {
		return nil, err
	}
	defer b.stop(5 * time.Second)
	cl, conn, err := brokerClient(b.addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()

	// Upstreams: a GitHub-style provider with a quota that never runs out,
	// and a server answering each path 503 Retry-After: 0 once, then 200.
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

	// The retry case stays within the default retry budget (10 retries a
	// second over 10 s, plus 20% of requests): at most 60 retries.
	cases := []struct {
		name     string
		provider string
		calls    int
		url      func(i int) string
	}{
		{"1 attempt: 200 with GitHub quota headers", "github", p.RedisExecutes, func(int) string { return prov.URL() + "/repos/octo/hello" }},
		{"2 attempts: 503 Retry-After: 0, then 200", "", min(p.RedisExecutes, 50), func(i int) string { return fmt.Sprintf("%s/job/%d", once.url, i) }},
	}
	var out []RedisOpsResult
	for ci, c := range cases {
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
		base := ci * 1_000_000
		for i := range 5 { // warm-up: connections, script cache
			if _, err := exec(base + 900_000 + i); err != nil {
				return out, fmt.Errorf("%s: warm-up: %w", c.name, err)
			}
		}
		before, err := rs.commandStats()
		if err != nil {
			return out, err
		}
		rt0 := proxy.count()
		r := RedisOpsResult{Case: c.name, ByCommand: map[string]int64{}}
		for i := range c.calls {
			n, err := exec(base + i)
			if err != nil {
				return out, fmt.Errorf("%s: %w", c.name, err)
			}
			r.Executes++
			r.Attempts += n
		}
		r.RoundTrips = proxy.count() - rt0
		after, err := rs.commandStats()
		if err != nil {
			return out, err
		}
		for k, v := range after {
			if k == "info" { // our own INFO commandstats
				continue
			}
			if d := v - before[k]; d > 0 {
				r.ByCommand[k] = d
				r.Commands += d
			}
		}
		cpe, rpe := r.PerExecute()
		s.logf("redis: %s: %.2f commands and %.2f round trips per Execute (%d attempts for %d calls) %v", c.name, cpe, rpe, r.Attempts, r.Executes, r.ByCommand)
		out = append(out, r)
	}
	return out, nil
}

// once503 answers each path 503 Retry-After: 0 the first time, then 200.
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
