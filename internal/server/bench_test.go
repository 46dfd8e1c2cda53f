package server_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/retrybroker/retrybroker/bench/baseline"
	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
	"github.com/retrybroker/retrybroker/internal/egress"
	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/metrics"
	"github.com/retrybroker/retrybroker/internal/server"
	"github.com/retrybroker/retrybroker/internal/store"
	"github.com/retrybroker/retrybroker/internal/store/memstore"
	"github.com/retrybroker/retrybroker/internal/store/redisstore"
	"github.com/retrybroker/retrybroker/internal/store/redistest"
	"github.com/retrybroker/retrybroker/internal/tenant"
)

// benchServe serves svc on loopback behind the broker's gRPC server (with
// extra server options appended, if any) and returns a client of it.
func benchServe(b *testing.B, svc rbv1.BrokerServiceServer, extra ...grpc.ServerOption) rbv1.BrokerServiceClient {
	b.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	gs, _ := server.NewGRPCServer(svc, server.GRPCConfig{Logger: quiet, ExtraOptions: extra})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = gs.Serve(lis) }()
	b.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	return rbv1.NewBrokerServiceClient(conn)
}

// benchBroker returns the broker's service for the Execute benchmarks (the
// dev tenant calling loopback, a memory store, the egress clients with the
// broker's defaults, the runner wired as cmd/broker wires it: a tracer
// that records nothing, the trace context propagator, the metrics
// observer, the default body budget) and the plain HTTP client of their
// baselines.
func benchBroker(b *testing.B) (rbv1.BrokerServiceServer, *http.Client) {
	b.Helper()
	dev, err := tenant.Dev([]string{"127.0.0.1/32"})
	if err != nil {
		b.Fatal(err)
	}
	st := memstore.New()
	b.Cleanup(func() { _ = st.Close() })
	tr := egress.NewClients(egress.ClientConfig{}) // the broker's defaults
	b.Cleanup(tr.CloseIdleConnections)
	runner := engine.NewRunner(st,
		engine.WithTracer(noop.NewTracerProvider().Tracer("bench")),
		engine.WithPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})),
		engine.WithObserver(metrics.New()),
		engine.WithBodyBudget(engine.DefaultBodyBudget),
	)
	exec := &server.Executor{Runner: runner, Clients: tr}
	plain := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	return server.New(server.WithDefaultTenant(dev), server.WithExecutor(exec)), plain
}

// BenchmarkClassifyResponseGRPC compares ClassifyResponse with an empty
// unary handler behind the same server options, in one run. Report the
// ratio of ns/op: empty / broker is the broker's share of throughput.
func BenchmarkClassifyResponseGRPC(b *testing.B) {
	req := baseline.ClassifyRequest()
	dev, _ := tenant.Dev(nil)
	for _, c := range []struct {
		name string
		svc  rbv1.BrokerServiceServer
	}{
		{"empty-handler", baseline.EmptyService{}},
		{"broker", server.New(server.WithDefaultTenant(dev))},
	} {
		client := benchServe(b, c.svc)
		// One caller, one call at a time: the suite's c=1 row.
		b.Run(c.name+"/c=1", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := client.ClassifyResponse(context.Background(), req); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(benchParallelism)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := client.ClassifyResponse(context.Background(), req); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkExecuteGRPC compares Execute (a 200 on the first attempt) with
// a minimal forwarder and with direct HTTP to the same local upstream.
func BenchmarkExecuteGRPC(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	defer up.Close()
	broker, plain := benchBroker(b)
	req := &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Method: "GET", Url: up.URL + "/v1/items"}}
	b.Run("direct-http", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(benchParallelism)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				resp, err := plain.Get(up.URL + "/v1/items")
				if err != nil {
					b.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
		})
	})
	for _, c := range []struct {
		name string
		svc  rbv1.BrokerServiceServer
	}{
		{"minimal-forwarder", baseline.Forwarder{Client: plain}},
		{"broker", broker},
	} {
		client := benchServe(b, c.svc)
		// One caller, one call at a time: the suite's c=1 row, where the
		// ratio is latency, not CPU.
		b.Run(c.name+"/c=1", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				resp, err := client.Execute(context.Background(), req)
				if err != nil || resp.GetResponse().GetStatusCode() != 200 {
					b.Fatalf("execute: %v %v", err, resp.GetOutcome())
				}
			}
		})
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(benchParallelism)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := client.Execute(context.Background(), req)
					if err != nil || resp.GetResponse().GetStatusCode() != 200 {
						b.Errorf("execute: %v %v", err, resp.GetOutcome())
						return
					}
				}
			})
		})
	}
}

// BenchmarkExecuteStore compares Execute with the memory store and with the
// Redis store (a real redis-server, through the same Fallback the broker
// uses) in one run. Each Execute is one attempt here: Admit + Complete.
func BenchmarkExecuteStore(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	defer up.Close()
	dev, _ := tenant.Dev([]string{"127.0.0.1/32"})
	url := redistest.Start(b)
	rtLocal, rtRemote := &roundTrips{}, &roundTrips{}
	local := redisBench(b, url, rtLocal) // the default: plain gates admitted locally
	remote := redisBench(b, url, rtRemote, redisstore.WithLocalAdmission(0))
	stores := []struct {
		name string
		st   store.Store
		rt   *roundTrips
	}{
		{"memory", memstore.New(), nil},
		{"redis", store.NewFallback(local, memstore.New()), rtLocal},
		{"redis_every_admit_a_round_trip", store.NewFallback(remote, memstore.New()), rtRemote},
	}
	req := &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Method: "GET", Url: up.URL + "/v1/items"}}
	for _, s := range stores {
		defer s.st.Close()
		b.Run(s.name, func(b *testing.B) {
			tr := egress.NewClients(egress.ClientConfig{}) // the broker's defaults
			defer tr.CloseIdleConnections()
			exec := &server.Executor{Runner: engine.NewRunner(s.st), Clients: tr}
			client := benchServe(b, server.New(server.WithDefaultTenant(dev), server.WithExecutor(exec)))
			b.ReportAllocs()
			b.SetParallelism(benchParallelism)
			var before int64
			if s.rt != nil {
				before = s.rt.n.Load()
			}
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := client.Execute(context.Background(), req)
					if err != nil || resp.GetOutcome() != rbv1.Outcome_OUTCOME_SUCCESS {
						b.Errorf("execute: %v %v", err, resp.GetOutcome())
						return
					}
				}
			})
			if s.rt != nil {
				b.ReportMetric(float64(s.rt.n.Load()-before)/float64(b.N), "redis-roundtrips/op")
			}
			if fb, ok := s.st.(*store.Fallback); ok && fb.Degraded() {
				b.Fatal("the Redis store degraded during the benchmark: the figure would be the memory store's")
			}
		})
	}
}

// roundTrips is a go-redis hook that counts round trips: one per command
// or pipeline sent.
type roundTrips struct{ n atomic.Int64 }

func (c *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmds)
	}
}

// redisBench returns a Redis store on url, with the broker's client
// settings, counting its round trips in rt; with local admission on, it
// waits until that works.
func redisBench(b *testing.B, url string, rt *roundTrips, opts ...redisstore.Option) *redisstore.Store {
	b.Helper()
	rs, err := redisstore.New(context.Background(), url, opts...)
	if err != nil {
		b.Fatal(err)
	}
	rs.AddHook(rt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rs.LocalAdmissionReady(ctx); err != nil {
		b.Fatal(err)
	}
	return rs
}

// benchParallelism is goroutines per GOMAXPROCS in the parallel benchmarks.
var benchParallelism = func() int {
	if n, err := strconv.Atoi(os.Getenv("BENCH_PARALLELISM")); err == nil && n > 0 {
		return n
	}
	return 8
}()

// BenchmarkExecuteStreamFirstByte compares an ExecuteStream of a small body
// (head, one chunk, end) with the minimal streaming forwarder behind the
// same server options, in one run: the stream's time to first byte, which
// the body does not hide.
func BenchmarkExecuteStreamFirstByte(b *testing.B) {
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: first\n\n")
	}))
	var conns atomic.Int64 // upstream connections: a stream that does not reuse its connection costs a dial
	up.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	up.Start()
	defer up.Close()
	broker, plain := benchBroker(b)
	req := &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Method: "GET", Url: up.URL + "/first"}}
	for _, c := range []struct {
		name string
		svc  rbv1.BrokerServiceServer
	}{
		{"minimal-forwarder", baseline.StreamForwarder{Client: plain}},
		{"broker", broker},
	} {
		client := benchServe(b, c.svc)
		b.Run(c.name+"/c=1", func(b *testing.B) {
			b.ReportAllocs()
			var first time.Duration
			before := conns.Load()
			for b.Loop() {
				d, err := firstByte(client, req)
				if err != nil {
					b.Fatal(err)
				}
				first += d
			}
			b.ReportMetric(float64(first.Nanoseconds())/float64(b.N), "ns-to-first-byte/op")
			b.ReportMetric(float64(conns.Load()-before)/float64(b.N), "dials/op")
		})
		// 32 callers per GOMAXPROCS: the suite's c=64 row on two cores.
		b.Run(c.name+"/c=64", func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(32)
			var first atomic.Int64
			var mu sync.Mutex
			var all []time.Duration
			before := conns.Load()
			b.RunParallel(func(pb *testing.PB) {
				var mine []time.Duration
				defer func() { mu.Lock(); all = append(all, mine...); mu.Unlock() }()
				for pb.Next() {
					d, err := firstByte(client, req)
					if err != nil {
						b.Error(err)
						return
					}
					first.Add(int64(d))
					mine = append(mine, d)
				}
			})
			b.ReportMetric(float64(first.Load())/float64(b.N), "ns-to-first-byte/op")
			b.ReportMetric(float64(median(all)), "p50-ns-to-first-byte")
			b.ReportMetric(float64(conns.Load()-before)/float64(b.N), "dials/op")
		})
	}
}

// BenchmarkExecuteStreamPhases says where one caller's first byte goes:
// the broker and the minimal streaming forwarder, called in turn on the
// same upstream, each handler's stream wrapped to time its sends. It
// reports medians (ns) from the call: the handler starting, the head, the
// first chunk and the end handed to gRPC, and the first byte at the
// client; "fwd-" is the forwarder, "brk-" the broker.
func BenchmarkExecuteStreamPhases(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: first\n\n")
	}))
	defer up.Close()
	broker, plain := benchBroker(b)
	req := &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Method: "GET", Url: up.URL + "/first"}}
	variants := []*phaseTimer{
		{name: "fwd", svc: baseline.StreamForwarder{Client: plain}},
		{name: "brk", svc: broker},
	}
	clients := make([]rbv1.BrokerServiceClient, len(variants))
	for i, v := range variants {
		clients[i] = benchServe(b, v)
		for range 100 { // warm-up: connections, pools, the gate's first window
			if _, err := firstByte(clients[i], req); err != nil {
				b.Fatal(err)
			}
		}
		v.phases = [4][]time.Duration{}
	}
	firsts := make([][]time.Duration, len(variants))
	for b.Loop() {
		for i, v := range variants {
			v.t0 = time.Now()
			d, err := firstByte(clients[i], req)
			if err != nil {
				b.Fatal(err)
			}
			firsts[i] = append(firsts[i], d)
		}
	}
	for i, v := range variants {
		for k, name := range []string{"start", "head", "chunk", "end"} {
			if len(v.phases[k]) != len(firsts[i]) {
				b.Fatalf("%s: %d %s times for %d streams", v.name, len(v.phases[k]), name, len(firsts[i]))
			}
			b.ReportMetric(float64(median(v.phases[k])), v.name+"-"+name+"-ns")
		}
		b.ReportMetric(float64(median(firsts[i])), v.name+"-first-byte-ns")
	}
}

// phaseTimer is a streaming service whose ExecuteStream records, for one
// caller at a time, when the handler started and when it sent its head,
// first chunk and end, from t0 (set by the caller before each call).
type phaseTimer struct {
	rbv1.UnimplementedBrokerServiceServer
	name   string
	svc    rbv1.BrokerServiceServer
	t0     time.Time
	phases [4][]time.Duration // start, head, chunk, end
}

func (p *phaseTimer) ExecuteStream(req *rbv1.ExecuteRequest, st grpc.ServerStreamingServer[rbv1.ExecuteStreamResponse]) error {
	p.phases[0] = append(p.phases[0], time.Since(p.t0))
	return p.svc.ExecuteStream(req, &phaseStream{ServerStreamingServer: st, p: p})
}

// phaseStream times the first three sends of one stream.
type phaseStream struct {
	grpc.ServerStreamingServer[rbv1.ExecuteStreamResponse]
	p *phaseTimer
	n int
}

func (s *phaseStream) Send(m *rbv1.ExecuteStreamResponse) error {
	if s.n < 3 {
		s.p.phases[1+s.n] = append(s.p.phases[1+s.n], time.Since(s.p.t0))
	}
	s.n++
	return s.ServerStreamingServer.Send(m)
}

func median(x []time.Duration) time.Duration {
	if len(x) == 0 {
		return 0
	}
	slices.Sort(x)
	return x[len(x)/2]
}

// firstByte makes one ExecuteStream of req, reads it to its end and
// returns the time from the call to its first chunk.
func firstByte(client rbv1.BrokerServiceClient, req *rbv1.ExecuteRequest) (time.Duration, error) {
	t0 := time.Now()
	s, err := client.ExecuteStream(context.Background(), req)
	if err != nil {
		return 0, err
	}
	var d time.Duration
	for d == 0 {
		m, err := s.Recv()
		if err != nil {
			return 0, err
		}
		if m.GetChunk() != nil {
			d = time.Since(t0)
		}
	}
	for {
		if _, err := s.Recv(); err != nil {
			if !errors.Is(err, io.EOF) {
				return 0, err
			}
			return d, nil
		}
	}
}

// executeHandler is an Execute handler a benchmark calls directly.
type executeHandler struct {
	name string
	svc  rbv1.BrokerServiceServer
}

// executeHandlers are the minimal forwarder's Execute handler and the
// broker's, and a request to a loopback upstream that answers a small JSON
// body (stopped when b ends).
func executeHandlers(b *testing.B) (*rbv1.ExecuteRequest, []executeHandler) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	b.Cleanup(up.Close)
	broker, plain := benchBroker(b)
	req := &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Method: "GET", Url: up.URL + "/v1/items"}}
	return req, []executeHandler{
		{"minimal-forwarder", baseline.Forwarder{Client: plain}},
		{"broker", broker},
	}
}

// BenchmarkExecuteHandler calls the broker's Execute handler and the
// minimal forwarder's directly, without gRPC, one call at a time, against
// the same loopback upstream: the difference of their ns/op and allocs/op
// is the broker's own work per call (validation, policy, admission,
// context, span, classification, store, metrics, conversion), which lies
// on the critical path of the suite's one-caller row. Each call gets a
// context of its own that can be canceled, as gRPC gives every call (with
// context.Background net/http skips its cancellation work, which would
// flatter the forwarder).
func BenchmarkExecuteHandler(b *testing.B) {
	req, handlers := executeHandlers(b)
	for _, c := range handlers {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ctx, cancel := context.WithCancel(context.Background())
				resp, err := c.svc.Execute(ctx, req)
				cancel()
				if err != nil || resp.GetResponse().GetStatusCode() != 200 {
					b.Fatalf("execute: %v %v", err, resp.GetOutcome())
				}
			}
		})
	}
}

// BenchmarkExecuteAnswerDecode decodes, as a caller's gRPC client does, the
// answer the broker's Execute gives and the one the minimal forwarder gives
// for the same upstream response: the broker's carries the attempt record
// (its number, start, duration, decision, wait), which the suite's caller,
// in the suite's own process, pays for at every call.
func BenchmarkExecuteAnswerDecode(b *testing.B) {
	req, handlers := executeHandlers(b)
	for _, c := range handlers {
		resp, err := c.svc.Execute(b.Context(), req)
		if err != nil {
			b.Fatal(err)
		}
		data, err := proto.Marshal(resp)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var m rbv1.ExecuteResponse
				if err := proto.Unmarshal(data, &m); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(data)), "answer-bytes")
		})
	}
}

// busyForwarder is the minimal forwarder with extra CPU work on the call's
// path: it spins for busy before it forwards.
type busyForwarder struct {
	baseline.Forwarder
	busy time.Duration
}

func (f busyForwarder) Execute(ctx context.Context, req *rbv1.ExecuteRequest) (*rbv1.ExecuteResponse, error) {
	for t0 := time.Now(); time.Since(t0) < f.busy; {
	}
	return f.Forwarder.Execute(ctx, req)
}

// BenchmarkForwarderBusyWork prices a microsecond of handler CPU at one
// caller: the minimal forwarder, called directly as BenchmarkExecuteHandler
// calls it, spins 0, 5 and 10 µs before each forward. The difference of
// ns/op against busy=0s is what that much CPU on the call's path costs in
// latency; more than the CPU itself means that the other core's threads
// (the upstream's, net/http's read loop) went idle meanwhile, and waking
// them costs more than a busy core (docs/architecture.md, "What Execute's
// one-caller gap is made of").
func BenchmarkForwarderBusyWork(b *testing.B) {
	req, handlers := executeHandlers(b)
	fwd := handlers[0].svc.(baseline.Forwarder)
	for _, busy := range []time.Duration{0, 5 * time.Microsecond, 10 * time.Microsecond} {
		svc := busyForwarder{Forwarder: fwd, busy: busy}
		b.Run("busy="+busy.String(), func(b *testing.B) {
			for b.Loop() {
				ctx, cancel := context.WithCancel(context.Background())
				resp, err := svc.Execute(ctx, req)
				cancel()
				if err != nil || resp.GetResponse().GetStatusCode() != 200 {
					b.Fatalf("execute: %v", err)
				}
			}
		})
	}
}
