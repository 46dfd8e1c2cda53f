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
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/retrybroker/retrybroker/bench/baseline"
	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
	"github.com/retrybroker/retrybroker/internal/egress"
	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/server"
	"github.com/retrybroker/retrybroker/internal/store/memstore"
	"github.com/retrybroker/retrybroker/internal/tenant"
)

// StreamParams sizes the streaming scenario.
type StreamParams struct {
	// Download is the size of the single large download (1 GiB).
	Download int64
	// Concurrent downloads of ConcurrentBytes each (100 of 64 MiB).
	Concurrent      int
	ConcurrentBytes int64
	// RoundBytes is what one throughput round downloads, Rounds how many
	// rounds each variant runs (alternating).
	RoundBytes int64
	Rounds     int
	// TTFBConcurrency are the concurrency levels of the time-to-first-byte
	// measurement, TTFBCalls the calls per level and variant, made in
	// TTFBRounds rounds that alternate the variants (so that a slow spell
	// of the machine falls on both). At 64 callers a first byte waits in
	// the machine's queue, and a short round's p50 moves with where its
	// collections fall: three runs of -only stream, alternating a suite
	// with 6,000 calls in 6 rounds and one with 24,000 in 12, read the
	// broker's ratio 1.36×, 1.44×, 1.10× with the first and 1.25×, 1.18×,
	// 1.23× with the second.
	TTFBConcurrency []int
	TTFBCalls       int
	TTFBRounds      int
}

func streamParams(quick bool) StreamParams {
	if quick {
		return StreamParams{Download: 64 << 20, Concurrent: 8, ConcurrentBytes: 4 << 20, RoundBytes: 32 << 20, Rounds: 2, TTFBConcurrency: []int{1, 64}, TTFBCalls: 64, TTFBRounds: 2}
	}
	return StreamParams{Download: 1 << 30, Concurrent: 100, ConcurrentBytes: 64 << 20, RoundBytes: 256 << 20, Rounds: 6, TTFBConcurrency: []int{1, 64}, TTFBCalls: 24000, TTFBRounds: 12}
}

// StreamMemory is one memory measurement of a broker process.
type StreamMemory struct {
	Streams int
	Bytes   int64 // per stream
	// BaseRSS is the broker's resident set before, PeakRSS the highest
	// sample (every 10ms) while the downloads ran.
	BaseRSS, PeakRSS int64
	// PeakHeap is the broker's Go heap in use at the peak RSS sample.
	PeakHeap int64
	Elapsed  time.Duration
}

// Growth is PeakRSS - BaseRSS.
func (m StreamMemory) Growth() int64 { return m.PeakRSS - m.BaseRSS }

// StreamThroughput is the bytes/s of one variant over all its rounds.
type StreamThroughput struct {
	Variant string
	Bytes   int64
	Elapsed time.Duration
	Rounds  []float64 // bytes/s of each round
}

// BytesPerSecond over all rounds.
func (t StreamThroughput) BytesPerSecond() float64 {
	if t.Elapsed <= 0 {
		return 0
	}
	return float64(t.Bytes) / t.Elapsed.Seconds()
}

// StreamTTFB is time to first byte of one variant at one concurrency.
type StreamTTFB struct {
	Variant     string
	Concurrency int
	Calls       int
	P50, P99    time.Duration
}

// StreamReport is the streaming scenario's figures.
type StreamReport struct {
	Params     StreamParams
	Single     StreamMemory
	Concurrent StreamMemory
	Throughput []StreamThroughput
	TTFB       []StreamTTFB
	// Shares is the profile of the in-process TTFB rows: each handler's
	// CPU per stream outside the HTTP client.
	Shares []HandlerShare
}

// Variant names of the streaming scenario.
const (
	VarStreamForwarder = "minimal streaming forwarder"
	VarStreamBroker    = "broker ExecuteStream"
	VarStreamDirect    = "direct HTTP"
	// VarStreamBrokerProc is the broker process (the TTFB rows against
	// direct HTTP); the other TTFB rows and the throughput rows are
	// servers in the suite's own process.
	VarStreamBrokerProc = "broker ExecuteStream (process)"
)

// ThroughputRatio is the broker's bytes/s over the forwarder's: the median
// of the per-round ratios (the variants ran back to back).
func (r *StreamReport) ThroughputRatio() (float64, bool) {
	return r.ThroughputShare(VarStreamBroker, VarStreamForwarder)
}

// TTFBRatio is variant's p50 time to first byte over base's at
// concurrency c.
func (r *StreamReport) TTFBRatio(variant, base string, c int) (float64, bool) {
	var v, b time.Duration
	for _, t := range r.TTFB {
		if t.Concurrency != c {
			continue
		}
		switch t.Variant {
		case variant:
			v = t.P50
		case base:
			b = t.P50
		}
	}
	if v <= 0 || b <= 0 {
		return 0, false
	}
	return float64(v) / float64(b), true
}

// ThroughputShare is variant's bytes/s over base's: the median of the
// per-round ratios (the variants ran back to back).
func (r *StreamReport) ThroughputShare(variant, base string) (float64, bool) {
	var b, f *StreamThroughput
	for i := range r.Throughput {
		switch r.Throughput[i].Variant {
		case variant:
			b = &r.Throughput[i]
		case base:
			f = &r.Throughput[i]
		}
	}
	if b == nil || f == nil {
		return 0, false
	}
	ratios := roundRatios(b.Rounds, f.Rounds)
	if len(ratios) == 0 {
		return 0, false
	}
	return median(ratios), true
}

// streamUpstream serves /bytes?n=N (N bytes with a Content-Length) and
// /first (a small body sent at once).
func startStreamUpstream() (string, func(), error) {
	block := make([]byte, 1<<20)
	for i := range block {
		block[i] = byte(i * 7)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/bytes", func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
		if err != nil || n < 0 {
			http.Error(w, "bad n", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		for n > 0 {
			k := min(n, int64(len(block)))
			if _, err := w.Write(block[:k]); err != nil {
				return
			}
			n -= k
		}
	})
	mux.HandleFunc("/first", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: first\n\n")
	})
	lis, err := net.Listen("tcp", net.JoinHostPort(loopback, "0"))
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(lis) }()
	return "http://" + lis.Addr().String(), func() { _ = srv.Close() }, nil
}

// streamKey is the API key of the streaming scenario's tenant.
const streamKey = "bench-stream-key"

// streamConfig is a configuration with one tenant and two policies that may
// call 127.0.0.1: each policy allows 64 streams at once (the default
// stream.max_concurrent), so 100 concurrent downloads use both, and the
// tenant's own limit (tenants[].stream.max_concurrent, by default the
// largest of its policies') is raised to the two policies' sum.
func streamConfig() []byte {
	h := sha256.Sum256([]byte(streamKey))
	return fmt.Appendf(nil, `version: 1
tenants:
  - id: bench
    api_key_sha256: [%s]
    stream: {max_concurrent: 128}
    default_policy: a
    policies:
      a: {allow_destinations: ["127.0.0.1/32"]}
      b: {allow_destinations: ["127.0.0.1/32"]}
`, hex.EncodeToString(h[:]))
}

// drainStream reads an ExecuteStream call to its end and returns the body
// bytes and the time its first chunk arrived; the end must say complete.
func drainStream(ctx context.Context, cl rbv1.BrokerServiceClient, req *rbv1.ExecuteRequest) (int64, time.Time, error) {
	st, err := cl.ExecuteStream(ctx, req)
	if err != nil {
		return 0, time.Time{}, err
	}
	var n int64
	var first time.Time
	for {
		m, err := st.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return n, first, errors.New("stream closed without end")
			}
			return n, first, err
		}
		switch ev := m.GetEvent().(type) {
		case *rbv1.ExecuteStreamResponse_Chunk:
			if first.IsZero() {
				first = time.Now()
			}
			n += int64(len(ev.Chunk))
		case *rbv1.ExecuteStreamResponse_End:
			if !ev.End.GetBodyComplete() {
				return n, first, fmt.Errorf("body incomplete: %s %s", ev.End.GetBodyEnd(), ev.End.GetErrorMessage())
			}
			return n, first, nil
		}
	}
}

// streamRun measures the broker's memory while streaming (a broker
// process), its throughput against a minimal streaming forwarder (both
// in this process, alternating rounds), and time to first byte through a
// broker process against direct HTTP.
func (s *suite) streamRun(ctx context.Context, p StreamParams) (*StreamReport, error) {
	rep := &StreamReport{Params: p}
	upURL, stopUp, err := startStreamUpstream()
	if err != nil {
		return nil, err
	}
	defer stopUp()

	cfgPath := filepath.Join(s.tmp, "stream.yaml")
	if err := os.WriteFile(cfgPath, streamConfig(), 0o600); err != nil {
		return nil, err
	}
	b, err := startBroker(ctx, s.brokerBin, brokerOptions{config: cfgPath, metrics: true})
	if err != nil {
		return nil, err
	}
	defer b.stop(5 * time.Second)
	cl, conn, err := brokerClient(b.addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	authed := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+streamKey)
	get := func(n int64, policy string) *rbv1.ExecuteRequest {
		return &rbv1.ExecuteRequest{Policy: policy, Request: &rbv1.HttpRequest{Method: "GET", Url: fmt.Sprintf("%s/bytes?n=%d", upURL, n)}}
	}
	// Warm up: connections, pools, the first allocations of a stream.
	for range 4 {
		if _, _, err := drainStream(authed, cl, get(4<<20, "a")); err != nil {
			return nil, fmt.Errorf("warm-up stream: %w", err)
		}
	}
	measure := func(streams int, each int64) (StreamMemory, error) {
		m := StreamMemory{Streams: streams, Bytes: each}
		time.Sleep(300 * time.Millisecond) // let the warm-up's garbage settle
		base, err := b.rssBytes()
		if err != nil {
			return m, err
		}
		m.BaseRSS, m.PeakRSS = base, base
		done := make(chan struct{})
		var sampler sync.WaitGroup
		sampler.Go(func() {
			t := time.NewTicker(10 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-done:
					return
				case <-t.C:
					if v, err := b.rssBytes(); err == nil && v > m.PeakRSS {
						m.PeakRSS = v
						if mm, err := b.metrics(); err == nil {
							m.PeakHeap = int64(mm["go_memstats_heap_inuse_bytes"])
						}
					}
				}
			}
		})
		start := time.Now()
		var wg sync.WaitGroup
		errs := make([]error, streams)
		for i := range streams {
			policy := "a"
			if i%2 == 1 {
				policy = "b"
			}
			wg.Go(func() {
				n, _, err := drainStream(authed, cl, get(each, policy))
				if err == nil && n != each {
					err = fmt.Errorf("streamed %d bytes, want %d", n, each)
				}
				errs[i] = err
			})
		}
		wg.Wait()
		m.Elapsed = time.Since(start)
		close(done)
		sampler.Wait()
		return m, errors.Join(errs...)
	}
	s.logf("stream: one %s download through a broker process", fmtBytes(float64(p.Download)))
	if rep.Single, err = measure(1, p.Download); err != nil {
		return rep, fmt.Errorf("single download: %w", err)
	}
	s.logf("stream: RSS growth %s (%s in %v)", fmtBytes(float64(rep.Single.Growth())), fmtBytes(float64(p.Download)), rep.Single.Elapsed.Round(time.Millisecond))
	s.logf("stream: %d concurrent %s downloads", p.Concurrent, fmtBytes(float64(p.ConcurrentBytes)))
	if rep.Concurrent, err = measure(p.Concurrent, p.ConcurrentBytes); err != nil {
		return rep, fmt.Errorf("concurrent downloads: %w", err)
	}
	s.logf("stream: RSS growth %s (Go heap in use at the peak: %s)", fmtBytes(float64(rep.Concurrent.Growth())), fmtBytes(float64(rep.Concurrent.PeakHeap)))

	// Time to first byte: through the broker process, and direct HTTP.
	plainTr := &http.Transport{Proxy: nil, MaxIdleConns: 256, MaxIdleConnsPerHost: 128, IdleConnTimeout: time.Minute}
	defer plainTr.CloseIdleConnections()
	plain := &http.Client{Transport: plainTr}
	firstReq := &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Method: "GET", Url: upURL + "/first"}}
	ttfbVariants := []ttfbVariant{
		streamTTFB(authed, VarStreamBrokerProc, cl, firstReq),
		{VarStreamDirect, func() (time.Duration, error) {
			t0 := time.Now()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, upURL+"/first", nil)
			if err != nil {
				return 0, err
			}
			resp, err := plain.Do(req)
			if err != nil {
				return 0, err
			}
			defer resp.Body.Close()
			var one [1]byte
			if _, err := io.ReadFull(resp.Body, one[:]); err != nil {
				return 0, err
			}
			d := time.Since(t0)
			_, _ = io.Copy(io.Discard, resp.Body)
			return d, nil
		}},
	}
	ttfb := func(variants []ttfbVariant) error {
		rounds := max(p.TTFBRounds, 1)
		for _, c := range p.TTFBConcurrency {
			lats := make([][]time.Duration, len(variants))
			for r := range rounds {
				for k := range variants {
					i := k
					if r%2 == 1 {
						i = len(variants) - 1 - k
					}
					lat, err := closedLoop(c, p.TTFBCalls/rounds, variants[i].call)
					if err != nil {
						return fmt.Errorf("ttfb %s at %d: %w", variants[i].name, c, err)
					}
					lats[i] = append(lats[i], lat...)
				}
			}
			for i, v := range variants {
				lat := lats[i]
				slices.Sort(lat)
				t := StreamTTFB{Variant: v.name, Concurrency: c, Calls: len(lat), P50: percentile(lat, 0.5), P99: percentile(lat, 0.99)}
				s.logf("stream: TTFB %-32s c=%-3d p50 %v p99 %v", v.name, c, t.P50, t.P99)
				rep.TTFB = append(rep.TTFB, t)
			}
		}
		return nil
	}
	if err := ttfb(ttfbVariants); err != nil {
		return rep, err
	}

	// Throughput: the broker and the minimal forwarder in this process, on
	// the same upstream, alternating rounds.
	dev, err := tenant.Dev([]string{"127.0.0.1/32"})
	if err != nil {
		return rep, err
	}
	st := memstore.New()
	defer st.Close()
	clients := egress.NewClients(egress.ClientConfig{})
	defer clients.CloseIdleConnections()
	runner := inprocRunner(st, engine.DefaultBodyBudget) // as cmd/broker wires it, body budget included
	variants := []struct {
		name string
		svc  rbv1.BrokerServiceServer
	}{
		{VarStreamForwarder, baseline.StreamForwarder{Client: plain}},
		{VarStreamBroker, server.New(server.WithDefaultTenant(dev), server.WithExecutor(&server.Executor{Runner: runner, Clients: clients}))},
	}
	rep.Throughput = make([]StreamThroughput, len(variants))
	servers := make([]*inproc, len(variants))
	for i, v := range variants {
		sv, err := serveInproc(v.svc)
		if err != nil {
			return rep, err
		}
		defer sv.close()
		servers[i] = sv
		rep.Throughput[i].Variant = v.name
		if _, _, err := drainStream(ctx, sv.cl, get(8<<20, "")); err != nil { // warm-up
			return rep, fmt.Errorf("%s warm-up: %w", v.name, err)
		}
	}
	// Direct HTTP is the physical limit: the same body read straight from
	// the upstream, into the same chunk size, with no gRPC.
	rep.Throughput = append(rep.Throughput, StreamThroughput{Variant: VarStreamDirect})
	directBuf := make([]byte, baseline.StreamChunkSize)
	direct := func(n int64) (int64, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/bytes?n=%d", upURL, n), nil)
		if err != nil {
			return 0, err
		}
		resp, err := plain.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		return io.CopyBuffer(io.Discard, struct{ io.Reader }{resp.Body}, directBuf)
	}
	if _, err := direct(8 << 20); err != nil { // warm-up
		return rep, fmt.Errorf("direct warm-up: %w", err)
	}
	round := func(i int) (int64, error) {
		if i == len(variants) {
			return direct(p.RoundBytes)
		}
		n, _, err := drainStream(ctx, servers[i].cl, get(p.RoundBytes, ""))
		return n, err
	}
	s.logf("stream: throughput, %d rounds of %s per variant", p.Rounds, fmtBytes(float64(p.RoundBytes)))
	for r := range p.Rounds {
		for k := range rep.Throughput {
			i := k
			if r%2 == 1 {
				i = len(rep.Throughput) - 1 - k
			}
			t0 := time.Now()
			n, err := round(i)
			el := time.Since(t0)
			if err != nil {
				return rep, fmt.Errorf("%s round %d: %w", rep.Throughput[i].Variant, r, err)
			}
			t := &rep.Throughput[i]
			t.Bytes += n
			t.Elapsed += el
			t.Rounds = append(t.Rounds, float64(n)/el.Seconds())
		}
	}
	for _, t := range rep.Throughput {
		s.logf("stream: %-28s %s/s", t.Variant, fmtBytes(t.BytesPerSecond()))
	}

	// Time to first byte, side by side: the broker and the forwarder, both
	// in this process, on the same upstream, profiled as the overhead
	// scenario's Execute rows are (HandlerShare).
	inproc := []ttfbVariant{
		streamTTFB(ctx, VarStreamForwarder, servers[0].cl, firstReq),
		streamTTFB(ctx, VarStreamBroker, servers[1].cl, firstReq),
	}
	if err := ttfb(inproc); err != nil {
		return rep, err
	}
	// The profile has a pass of its own, long enough for its 10 ms
	// samples to say something per stream; its times are not reported.
	calls := p.TTFBCalls
	capture := startCPUCapture()
	for _, c := range p.TTFBConcurrency {
		for _, v := range inproc {
			if _, err := closedLoop(c, calls, v.call); err != nil {
				_, _ = capture.stop()
				return rep, fmt.Errorf("ttfb profile %s at %d: %w", v.name, c, err)
			}
		}
	}
	prof, perr := capture.stop()
	if perr != nil {
		s.logf("stream: %v", perr)
		return rep, nil
	}
	calls *= len(p.TTFBConcurrency)
	_, brokerStream := server.ProfileFuncs()
	rep.Shares = handlerShares(prof, []HandlerShare{
		{Variant: VarStreamBroker, Handler: brokerStream, Calls: calls},
		{Variant: VarStreamForwarder, Handler: server.FuncName(baseline.StreamForwarder.ExecuteStream), Calls: calls},
	}, 8)
	for _, h := range rep.Shares {
		s.logf("stream: profile: %s", shareText(h))
	}
	return rep, nil
}

// ttfbVariant is one way to get a first byte, timed by call.
type ttfbVariant struct {
	name string
	call func() (time.Duration, error)
}

// streamTTFB times req's ExecuteStream through cl under ctx, from the call
// to its first chunk.
func streamTTFB(ctx context.Context, name string, cl rbv1.BrokerServiceClient, req *rbv1.ExecuteRequest) ttfbVariant {
	return ttfbVariant{name, func() (time.Duration, error) {
		t0 := time.Now()
		_, first, err := drainStream(ctx, cl, req)
		return first.Sub(t0), err
	}}
}

// closedLoop makes calls calls of fn from c goroutines and returns their
// durations.
func closedLoop(c, calls int, fn func() (time.Duration, error)) ([]time.Duration, error) {
	var left atomic.Int64
	left.Store(int64(calls))
	var mu sync.Mutex
	var out []time.Duration
	var firstErr error
	var wg sync.WaitGroup
	for range c {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				d, err := fn()
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				if err == nil {
					out = append(out, d)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return out, firstErr
}
