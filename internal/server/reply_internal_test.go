package server

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
	"github.com/retrybroker/retrybroker/internal/egress"
	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/store/memstore"
	"github.com/retrybroker/retrybroker/internal/tenant"
)

// executeHandlerFixture is a Service with an executor against a loopback
// upstream, and the Execute handler the gRPC server would call, with a
// request to feed it as gRPC would (raw bytes).
func executeHandlerFixture(t *testing.T) (func(any, context.Context, func(any) error, grpc.UnaryServerInterceptor) (any, error), *Service, func(any) error) {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-A", "1")
		_, _ = io.WriteString(w, "hello")
	}))
	t.Cleanup(up.Close)
	dev, err := tenant.Dev([]string{"127.0.0.1/32"})
	if err != nil {
		t.Fatal(err)
	}
	st := memstore.New()
	t.Cleanup(func() { _ = st.Close() })
	clients := egress.NewClients(egress.ClientConfig{})
	t.Cleanup(clients.CloseIdleConnections)
	svc := New(WithDefaultTenant(dev), WithExecutor(&Executor{Runner: engine.NewRunner(st), Clients: clients}))
	in, err := proto.Marshal(&rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: up.URL + "/x"}})
	if err != nil {
		t.Fatal(err)
	}
	dec := func(v any) error {
		v.(*rawMessage).buf = mem.SliceBuffer(in)
		return nil
	}
	h := executeHandler(svc, func(context.Context) int { return MaxRecvMsgSize })
	return h, svc, dec
}

// The broker's Execute handler answers with the encoding of exactly what
// the interceptors saw, sent once; an interceptor's own answer goes out
// as it is.
func TestExecuteHandlerEncodesWhatTheInterceptorsSaw(t *testing.T) {
	h, svc, dec := executeHandlerFixture(t)

	var seen proto.Message
	pass := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
		resp, err := next(ctx, req)
		if err == nil {
			seen = proto.Clone(resp.(*rbv1.ExecuteResponse)) // the block is given back once encoded
		}
		return resp, err
	}
	reply, err := h(svc, t.Context(), dec, pass)
	if err != nil {
		t.Fatal(err)
	}
	enc, ok := reply.(*encodedReply)
	if !ok {
		t.Fatalf("reply %T, want an encoded reply", reply)
	}
	codec := newRawCodec()
	data, err := codec.Marshal(enc)
	if err != nil {
		t.Fatal(err)
	}
	var got rbv1.ExecuteResponse
	if err := proto.Unmarshal(data.Materialize(), &got); err != nil {
		t.Fatal(err)
	}
	data.Free()
	if !proto.Equal(&got, seen) || string(got.GetResponse().GetBody()) != "hello" || len(got.GetAttempts()) != 1 {
		t.Fatalf("sent %v, the interceptors saw %v", &got, seen)
	}
	if _, err := codec.Marshal(enc); err == nil {
		t.Fatal("an encoded reply was marshalled twice")
	}

	own := &rbv1.ExecuteResponse{Provider: "interceptor's"}
	replace := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
		if _, err := next(ctx, req); err != nil {
			return nil, err
		}
		return own, nil
	}
	reply, err = h(svc, t.Context(), dec, replace)
	if err != nil || reply != any(own) {
		t.Fatalf("reply %v (%v), want the interceptor's own", reply, err)
	}
}
