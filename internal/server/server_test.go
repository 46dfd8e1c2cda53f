package server_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/server"
	"github.com/retrybroker/retrybroker/internal/tenant"
	"github.com/retrybroker/retrybroker/internal/vectors"
)

// startBroker serves the broker on a real loopback TCP port and returns a
// client connected to it.
func startBroker(t *testing.T, opts ...server.Option) rbv1.BrokerServiceClient {
	t.Helper()
	dev, err := tenant.Dev(nil)
	if err != nil {
		t.Fatal(err)
	}
	svc := server.New(append([]server.Option{server.WithDefaultTenant(dev)}, opts...)...)
	return serveBroker(t, svc, server.GRPCConfig{})
}

// serveBroker serves svc with the broker's gRPC server built from cfg on a
// loopback listener, stopped when t ends, and returns a client of it.
func serveBroker(t *testing.T, svc rbv1.BrokerServiceServer, cfg server.GRPCConfig) rbv1.BrokerServiceClient {
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

func vectorRequest(t *testing.T, v *vectors.Vector) *rbv1.ClassifyResponseRequest {
	t.Helper()
	req := &rbv1.ClassifyResponseRequest{
		Provider:   v.Provider,
		Method:     v.Method,
		StatusCode: int32(v.Status),
		Attempt:    uint32(v.Attempt),
		Now:        timestamppb.New(v.Now),
		Body:       []byte(v.Body),
	}
	for _, kv := range v.Headers {
		req.Headers = append(req.Headers, &rbv1.HttpHeader{Name: kv[0], Value: kv[1]})
	}
	if v.TransportError != "" {
		k, ok := engine.ParseTransportError(v.TransportError)
		if !ok {
			t.Fatalf("unknown transport_error %q", v.TransportError)
		}
		req.TransportError = rbv1.TransportError(k)
	}
	return req
}

// TestConformanceVectorsOverGRPC runs every vector (the shared ones and the
// provider catalog's) through ClassifyResponse over gRPC.
func TestConformanceVectorsOverGRPC(t *testing.T) {
	client := startBroker(t)
	vs, err := vectors.LoadAll()
	if err != nil {
		t.Fatal(err)
	}
	for i := range vs {
		v := &vs[i]
		t.Run(v.Name, func(t *testing.T) {
			resp, err := client.ClassifyResponse(t.Context(), vectorRequest(t, v))
			if err != nil {
				t.Fatal(err)
			}
			d := resp.GetDecision()
			got := vectors.Got{
				Action:     map[rbv1.Action]string{rbv1.Action_ACTION_RETRY: "retry", rbv1.Action_ACTION_DO_NOT_RETRY: "do_not_retry"}[d.GetAction()],
				Delay:      d.GetDelay().AsDuration(),
				HintSource: d.GetHintSource(),
				Reason:     d.GetReason().String(),
				Hint:       d.GetHint().AsDuration(),
				HasHint:    d.GetHint() != nil,
				Rule:       d.GetRule(),
			}
			if err := v.Check(got); err != nil {
				t.Error(err)
			}
			if d.GetAction() == rbv1.Action_ACTION_RETRY && d.GetDelay() == nil {
				t.Error("retry decision without a delay field")
			}
		})
	}
}

func hdr(n, v string) *rbv1.HttpHeader { return &rbv1.HttpHeader{Name: n, Value: v} }

func manyHeaders(n int) []*rbv1.HttpHeader {
	out := make([]*rbv1.HttpHeader, n)
	for i := range out {
		out[i] = hdr("X-H", "v")
	}
	return out
}

func TestClassifyRejectsBadRequests(t *testing.T) {
	client := startBroker(t)
	ok := func() *rbv1.ClassifyResponseRequest {
		return &rbv1.ClassifyResponseRequest{Method: "GET", StatusCode: 503, Attempt: 1}
	}
	with := func(mut func(r *rbv1.ClassifyResponseRequest)) *rbv1.ClassifyResponseRequest {
		r := ok()
		mut(r)
		return r
	}
	tests := []struct {
		name  string
		req   *rbv1.ClassifyResponseRequest
		code  codes.Code
		field string
	}{
		{"unknown provider", with(func(r *rbv1.ClassifyResponseRequest) { r.Provider = "myspace" }), codes.InvalidArgument, "provider"},
		{"provider with odd case", with(func(r *rbv1.ClassifyResponseRequest) { r.Provider = "GitHub" }), codes.InvalidArgument, "provider"},
		{"status zero", with(func(r *rbv1.ClassifyResponseRequest) { r.StatusCode = 0 }), codes.InvalidArgument, "status_code"},
		{"status 99", with(func(r *rbv1.ClassifyResponseRequest) { r.StatusCode = 99 }), codes.InvalidArgument, "status_code"},
		{"status 600", with(func(r *rbv1.ClassifyResponseRequest) { r.StatusCode = 600 }), codes.InvalidArgument, "status_code"},
		{"status negative", with(func(r *rbv1.ClassifyResponseRequest) { r.StatusCode = -503 }), codes.InvalidArgument, "status_code"},
		{"status and transport error", with(func(r *rbv1.ClassifyResponseRequest) {
			r.TransportError = rbv1.TransportError_TRANSPORT_ERROR_CONNECTION_RESET
		}), codes.InvalidArgument, "status_code"},
		{"unknown transport error", with(func(r *rbv1.ClassifyResponseRequest) { r.StatusCode = 0; r.TransportError = 99 }), codes.InvalidArgument, "transport_error"},
		{"destination refused is Execute-only", with(func(r *rbv1.ClassifyResponseRequest) {
			r.StatusCode = 0
			r.TransportError = rbv1.TransportError_TRANSPORT_ERROR_DESTINATION_REFUSED
		}), codes.InvalidArgument, "transport_error"},
		{"header name with space", with(func(r *rbv1.ClassifyResponseRequest) { r.Headers = []*rbv1.HttpHeader{hdr("Retry After", "1")} }), codes.InvalidArgument, "headers[0].name"},
		{"header name with colon", with(func(r *rbv1.ClassifyResponseRequest) { r.Headers = []*rbv1.HttpHeader{hdr("Retry-After:", "1")} }), codes.InvalidArgument, "headers[0].name"},
		{"empty header name", with(func(r *rbv1.ClassifyResponseRequest) { r.Headers = []*rbv1.HttpHeader{hdr("ok", "1"), hdr("", "1")} }), codes.InvalidArgument, "headers[1].name"},
		{"non-ascii header name", with(func(r *rbv1.ClassifyResponseRequest) { r.Headers = []*rbv1.HttpHeader{hdr("Rétry", "1")} }), codes.InvalidArgument, "headers[0].name"},
		{"value with CR", with(func(r *rbv1.ClassifyResponseRequest) { r.Headers = []*rbv1.HttpHeader{hdr("Retry-After", "1\r")} }), codes.InvalidArgument, "headers[0].value"},
		{"value with LF", with(func(r *rbv1.ClassifyResponseRequest) {
			r.Headers = []*rbv1.HttpHeader{hdr("Retry-After", "1\nX-Evil: 1")}
		}), codes.InvalidArgument, "headers[0].value"},
		{"value with NUL", with(func(r *rbv1.ClassifyResponseRequest) { r.Headers = []*rbv1.HttpHeader{hdr("Retry-After", "1\x00")} }), codes.InvalidArgument, "headers[0].value"},
		{"request header with LF", with(func(r *rbv1.ClassifyResponseRequest) {
			r.RequestHeaders = []*rbv1.HttpHeader{hdr("Idempotency-Key", "a\nb")}
		}), codes.InvalidArgument, "request_headers[0].value"},
		{"too many headers", with(func(r *rbv1.ClassifyResponseRequest) { r.Headers = manyHeaders(server.MaxHeaders + 1) }), codes.InvalidArgument, "headers"},
		{"headers too large", with(func(r *rbv1.ClassifyResponseRequest) {
			r.Headers = []*rbv1.HttpHeader{hdr("X-Big", strings.Repeat("a", server.MaxHeaderBytes))}
		}), codes.InvalidArgument, "headers"},
		{"body too large", with(func(r *rbv1.ClassifyResponseRequest) { r.Body = make([]byte, server.MaxClassifyBody+1) }), codes.InvalidArgument, "body"},
		{"attempt beyond sanity", with(func(r *rbv1.ClassifyResponseRequest) { r.Attempt = engine.MaxAttemptNumber + 1 }), codes.InvalidArgument, "attempt"},
		{"attempt max uint32", with(func(r *rbv1.ClassifyResponseRequest) { r.Attempt = 1<<32 - 1 }), codes.InvalidArgument, "attempt"},
		{"method with space", with(func(r *rbv1.ClassifyResponseRequest) { r.Method = "GET /" }), codes.InvalidArgument, "method"},
		{"invalid now", with(func(r *rbv1.ClassifyResponseRequest) { r.Now = &timestamppb.Timestamp{Seconds: 1, Nanos: -1} }), codes.InvalidArgument, "now"},
		{"invalid deadline", with(func(r *rbv1.ClassifyResponseRequest) { r.Deadline = &timestamppb.Timestamp{Seconds: 1 << 62} }), codes.InvalidArgument, "deadline"},
		{"url with bad scheme", with(func(r *rbv1.ClassifyResponseRequest) { r.Url = "ftp://example.com/" }), codes.InvalidArgument, "url"},
		{"url without host", with(func(r *rbv1.ClassifyResponseRequest) { r.Url = "https:///path" }), codes.InvalidArgument, "url"},
		{"url unparsable", with(func(r *rbv1.ClassifyResponseRequest) { r.Url = "http://[::1" }), codes.InvalidArgument, "url"},
		{"url too long", with(func(r *rbv1.ClassifyResponseRequest) {
			r.Url = "https://example.com/" + strings.Repeat("a", server.MaxURLLength)
		}), codes.InvalidArgument, "url"},
		{"unknown policy", with(func(r *rbv1.ClassifyResponseRequest) { r.Policy = "nope" }), codes.FailedPrecondition, ""},
		{"control char in value", with(func(r *rbv1.ClassifyResponseRequest) { r.Headers = []*rbv1.HttpHeader{hdr("Retry-After", "1\x01")} }), codes.InvalidArgument, "headers[0].value"},
		{"DEL in value", with(func(r *rbv1.ClassifyResponseRequest) { r.Headers = []*rbv1.HttpHeader{hdr("Retry-After", "\x7f1")} }), codes.InvalidArgument, "headers[0].value"},
		{"control char in request header", with(func(r *rbv1.ClassifyResponseRequest) {
			r.RequestHeaders = []*rbv1.HttpHeader{hdr("Idempotency-Key", "k\x1f")}
		}), codes.InvalidArgument, "request_headers[0].value"},
		{"url port 0", with(func(r *rbv1.ClassifyResponseRequest) { r.Url = "https://api.example.com:0/" }), codes.InvalidArgument, "url"},
		{"url port 65536", with(func(r *rbv1.ClassifyResponseRequest) { r.Url = "https://api.example.com:65536/" }), codes.InvalidArgument, "url"},
		{"secret as a header name", with(func(r *rbv1.ClassifyResponseRequest) {
			r.RequestHeaders = []*rbv1.HttpHeader{hdr("Authorization: Bearer s3cr3t", "x")}
		}), codes.InvalidArgument, "request_headers[0].name"},
		{"secret as a provider", with(func(r *rbv1.ClassifyResponseRequest) { r.Provider = "Bearer s3cr3t" }), codes.InvalidArgument, "provider"},
	}
	if len(tests) < 20 {
		t.Fatalf("only %d bad requests", len(tests))
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := client.ClassifyResponse(t.Context(), tt.req)
			st, _ := status.FromError(err)
			if st.Code() != tt.code {
				t.Fatalf("code = %s (%q), want %s", st.Code(), st.Message(), tt.code)
			}
			if strings.Contains(st.Message(), "s3cr3t") {
				t.Fatalf("the message repeats a secret: %q", st.Message())
			}
			if tt.field == "" {
				return
			}
			var found []string
			for _, d := range st.Details() {
				if br, ok := d.(*errdetails.BadRequest); ok {
					for _, fv := range br.GetFieldViolations() {
						found = append(found, fv.GetField())
						if fv.GetField() == tt.field && fv.GetDescription() != "" {
							return
						}
					}
				}
			}
			t.Fatalf("no field violation for %q; got %v (message %q)", tt.field, found, st.Message())
		})
	}
}

func TestHealthServing(t *testing.T) {
	dev, _ := tenant.Dev(nil)
	gs, hs := server.NewGRPCServer(server.New(server.WithDefaultTenant(dev)), server.GRPCConfig{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(lis) }()
	defer gs.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	r, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: rbv1.BrokerService_ServiceDesc.ServiceName})
	if err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health = %v, %v; want SERVING", r.GetStatus(), err)
	}
	hs.Shutdown()
	r, err = hc.Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || r.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("after shutdown health = %v, %v; want NOT_SERVING", r.GetStatus(), err)
	}
}

func TestUnauthenticatedWithoutDefaultTenant(t *testing.T) {
	svc := server.New() // no dev tenant: calls need an authenticated tenant
	_, err := svc.ClassifyResponse(t.Context(), &rbv1.ClassifyResponseRequest{StatusCode: 503})
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("code = %s, want Unauthenticated", status.Code(err))
	}
}
