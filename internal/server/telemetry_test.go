package server_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
	"github.com/retrybroker/retrybroker/internal/server"
	"github.com/retrybroker/retrybroker/internal/tenant"
)

func serve(t *testing.T, svc rbv1.BrokerServiceServer, cfg server.GRPCConfig) rbv1.BrokerServiceClient {
	t.Helper()
	gs, _ := server.NewGRPCServer(svc, cfg)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return rbv1.NewBrokerServiceClient(conn)
}

func TestClassifySpanCarriesDecision(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	dev, _ := tenant.Dev(nil)
	client := serve(t, server.New(server.WithDefaultTenant(dev)), server.GRPCConfig{TracerProvider: tp})
	_, err := client.ClassifyResponse(t.Context(), &rbv1.ClassifyResponseRequest{
		StatusCode: 429, Headers: []*rbv1.HttpHeader{{Name: "Retry-After", Value: "5"}, {Name: "Authorization", Value: "Bearer sekrit"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	// The server span ends just after the response is sent: wait for it.
	var spans []sdktrace.ReadOnlySpan
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if spans = rec.Ended(); hasSpanSuffix(spans, "/ClassifyResponse") {
			break
		}
	}
	var found bool
	for _, s := range spans {
		if !strings.HasSuffix(s.Name(), "/ClassifyResponse") {
			continue
		}
		found = true
		attrs := map[string]string{}
		for _, kv := range s.Attributes() {
			attrs[string(kv.Key)] = kv.Value.String()
			if strings.Contains(kv.Value.String(), "sekrit") {
				t.Errorf("secret on span attribute %s", kv.Key)
			}
		}
		want := map[string]string{
			"retrybroker.decision.action":      "retry",
			"retrybroker.decision.reason":      "REASON_SERVER_HINT",
			"retrybroker.decision.delay_ms":    "5000",
			"retrybroker.decision.hint_source": "retry-after",
			"retrybroker.provider":             "retry-after",
		}
		for k, v := range want {
			if attrs[k] != v {
				t.Errorf("span attribute %s = %q, want %q", k, attrs[k], v)
			}
		}
	}
	if !found {
		t.Fatalf("no ClassifyResponse span among %d spans", len(spans))
	}
}

type panicky struct {
	rbv1.UnimplementedBrokerServiceServer
}

func (panicky) ClassifyResponse(context.Context, *rbv1.ClassifyResponseRequest) (*rbv1.ClassifyResponseResponse, error) {
	panic("boom: secret internals")
}

func TestRecoveryAnswersInternalWithoutStack(t *testing.T) {
	var logs bytes.Buffer
	client := serve(t, panicky{}, server.GRPCConfig{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	_, err := client.ClassifyResponse(t.Context(), &rbv1.ClassifyResponseRequest{})
	st, _ := status.FromError(err)
	if st.Code() != codes.Internal {
		t.Fatalf("code = %s, want Internal", st.Code())
	}
	if st.Message() != "internal error" || strings.Contains(st.Message(), "goroutine") || strings.Contains(st.Message(), "boom") {
		t.Fatalf("message leaks internals: %q", st.Message())
	}
	if !strings.Contains(logs.String(), "panic") {
		t.Fatalf("panic not logged: %s", logs.String())
	}
}

func hasSpanSuffix(spans []sdktrace.ReadOnlySpan, suffix string) bool {
	for _, s := range spans {
		if strings.HasSuffix(s.Name(), suffix) {
			return true
		}
	}
	return false
}
