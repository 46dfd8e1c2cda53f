package server_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/retrybroker/retrybroker/bench/baseline"
	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
)

// unaryStamps are the times (Unix ns) of the last call's steps, written by
// the server's goroutines and read by the caller once the call returned.
type unaryStamps struct{ handler, wrote, firstByte, returned atomic.Int64 }

// BenchmarkExecuteGRPCPhases splits one caller's Execute (the suite's
// one-caller row) into its steps, for the minimal forwarder and the
// broker, each behind the broker's gRPC server and against the same
// loopback upstream, and reports the median of each step in µs:
//   - in: the caller's send to the handler's start (an interceptor
//     appended to the server's chain);
//   - pre: the handler's start to the upstream request written
//     (httptrace WroteRequest): the broker's validation, policy,
//     admission and attempt set-up;
//   - to-up and up-resp: to the upstream's handler, and from it to the
//     response's first byte;
//   - post: the first byte to the handler's return (body, assessment,
//     store, metrics, the answer's conversion);
//   - out: the handler's return to the caller holding the answer
//     (encoding, the wire, decoding).
//
// The interceptor and the trace hooks cost both variants alike. The steps
// in which both run the same code (in, to-up) show how far the machine
// drifts between the two variants' runs, so the pair runs in both orders:
// run one order alone (-test.bench 'BenchmarkExecuteGRPCPhases/broker-first')
// to keep the other out of its process.
func BenchmarkExecuteGRPCPhases(b *testing.B) {
	var upAt atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		upAt.Store(time.Now().UnixNano())
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	defer up.Close()
	broker, plain := benchBroker(b)
	req := &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Method: "GET", Url: up.URL + "/v1/items"}}
	type served struct {
		name   string
		st     *unaryStamps
		client rbv1.BrokerServiceClient
	}
	serve := func(name string, svc rbv1.BrokerServiceServer) served {
		st := &unaryStamps{}
		return served{name, st, benchServe(b, svc, grpc.ChainUnaryInterceptor(stampInterceptor(st)))}
	}
	fwd, brk := serve("minimal-forwarder", baseline.Forwarder{Client: plain}), serve("broker", broker)
	for _, order := range []struct {
		name string
		vs   []served
	}{{"forwarder-first", []served{fwd, brk}}, {"broker-first", []served{brk, fwd}}} {
		for _, v := range order.vs {
			b.Run(order.name+"/"+v.name+"/c=1", func(b *testing.B) {
				var in, pre, toUp, upResp, post, out []float64
				for b.Loop() {
					t0 := time.Now().UnixNano()
					resp, err := v.client.Execute(context.Background(), req)
					t6 := time.Now().UnixNano()
					if err != nil || resp.GetResponse().GetStatusCode() != 200 {
						b.Fatalf("execute: %v %v", err, resp.GetOutcome())
					}
					t1, t2, t3, t4, t5 := v.st.handler.Load(), v.st.wrote.Load(), upAt.Load(), v.st.firstByte.Load(), v.st.returned.Load()
					in, pre, toUp = append(in, float64(t1-t0)), append(pre, float64(t2-t1)), append(toUp, float64(t3-t2))
					upResp, post, out = append(upResp, float64(t4-t3)), append(post, float64(t5-t4)), append(out, float64(t6-t5))
				}
				for _, m := range []struct {
					unit string
					xs   []float64
				}{{"in-µs", in}, {"pre-µs", pre}, {"to-up-µs", toUp}, {"up-resp-µs", upResp}, {"post-µs", post}, {"out-µs", out}} {
					slices.Sort(m.xs)
					b.ReportMetric(m.xs[len(m.xs)/2]/1e3, m.unit)
				}
			})
		}
	}
}

// stampInterceptor stamps the handler's start and return into st, and
// traces the upstream request's write and first byte into it.
func stampInterceptor(st *unaryStamps) grpc.UnaryServerInterceptor {
	trace := &httptrace.ClientTrace{
		WroteRequest:         func(httptrace.WroteRequestInfo) { st.wrote.Store(time.Now().UnixNano()) },
		GotFirstResponseByte: func() { st.firstByte.Store(time.Now().UnixNano()) },
	}
	return func(ctx context.Context, r any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		st.handler.Store(time.Now().UnixNano())
		resp, err := h(httptrace.WithClientTrace(ctx, trace), r)
		st.returned.Store(time.Now().UnixNano())
		return resp, err
	}
}
