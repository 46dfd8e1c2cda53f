package broker_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/retrybroker/retrybroker/clients/go/broker"
	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
)

// fakeService answers every RPC with fn; it is for errors and metadata
// that an honest broker cannot be made to produce on demand.
type fakeService struct {
	rbv1.UnimplementedBrokerServiceServer
	mu       sync.Mutex
	lastMD   metadata.MD
	deadline time.Time
	lastReq  any
	err      error
}

func (f *fakeService) record(ctx context.Context, req any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastMD, _ = metadata.FromIncomingContext(ctx)
	f.deadline, _ = ctx.Deadline()
	f.lastReq = req
	return f.err
}

func (f *fakeService) Execute(ctx context.Context, req *rbv1.ExecuteRequest) (*rbv1.ExecuteResponse, error) {
	if err := f.record(ctx, req); err != nil {
		return nil, err
	}
	return &rbv1.ExecuteResponse{Outcome: rbv1.Outcome_OUTCOME_SUCCESS, Response: &rbv1.HttpResponse{StatusCode: 200}}, nil
}

func (f *fakeService) ExecuteStream(req *rbv1.ExecuteRequest, st grpc.ServerStreamingServer[rbv1.ExecuteStreamResponse]) error {
	if err := f.record(st.Context(), req); err != nil {
		return err
	}
	return st.Send(&rbv1.ExecuteStreamResponse{Event: &rbv1.ExecuteStreamResponse_End{End: &rbv1.StreamEnd{
		Outcome: rbv1.Outcome_OUTCOME_GATE_CLOSED, BodyEnd: rbv1.BodyEnd_BODY_END_NO_RESPONSE,
	}}})
}

func (f *fakeService) ClassifyResponse(ctx context.Context, req *rbv1.ClassifyResponseRequest) (*rbv1.ClassifyResponseResponse, error) {
	if err := f.record(ctx, req); err != nil {
		return nil, err
	}
	return &rbv1.ClassifyResponseResponse{Decision: &rbv1.Decision{Action: rbv1.Action_ACTION_DO_NOT_RETRY, Reason: rbv1.Reason_REASON_SUCCESS}}, nil
}

// fakeServer serves svc and counts every RPC that reaches the server.
type fakeServer struct {
	svc   *fakeService
	calls atomic.Int32
	lis   net.Listener
	gs    *grpc.Server
}

func startFake(t *testing.T, lis net.Listener, svc *fakeService) *fakeServer {
	t.Helper()
	f := &fakeServer{svc: svc, lis: lis}
	f.gs = grpc.NewServer(grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		f.calls.Add(1)
		return h(ctx, req)
	}), grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		f.calls.Add(1)
		return h(srv, ss)
	}))
	rbv1.RegisterBrokerServiceServer(f.gs, svc)
	done := make(chan struct{})
	go func() { defer close(done); _ = f.gs.Serve(lis) }()
	t.Cleanup(func() { f.gs.Stop(); <-done })
	return f
}

// bufClient connects to a fake served on a bufconn listener.
func bufClient(t *testing.T, svc *fakeService, opts ...broker.Option) (*broker.Client, *fakeServer) {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	f := startFake(t, lis, svc)
	dialer := grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) })
	c, err := broker.New("passthrough:///fake", append([]broker.Option{broker.WithInsecure(), broker.WithDialOptions(dialer)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, f
}

func getReq(t *testing.T) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "https://api.example.com/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// retryServiceConfig would make grpc-go retry UNAVAILABLE 5 times if
// retries were enabled.
const retryServiceConfig = `{"methodConfig": [{
  "name": [{"service": "retrybroker.v1.BrokerService"}],
  "retryPolicy": {"maxAttempts": 5, "initialBackoff": "0.01s", "maxBackoff": "0.01s",
                  "backoffMultiplier": 1, "retryableStatusCodes": ["UNAVAILABLE"]}}]}`

// TestOneExecuteIsOneRPC: the client never retries an RPC, even when it
// fails with UNAVAILABLE and a retry service config asks for retries. The
// broker already retries; two layers would multiply the sends.
func TestOneExecuteIsOneRPC(t *testing.T) {
	svc := &fakeService{err: status.Error(codes.Unavailable, "broker restarting")}
	c, f := bufClient(t, svc, broker.WithDialOptions(grpc.WithDefaultServiceConfig(retryServiceConfig)))
	_, _, err := c.Execute(t.Context(), getReq(t))
	if !broker.IsUnavailable(err) {
		t.Fatalf("err = %v, want UNAVAILABLE", err)
	}
	if n := f.calls.Load(); n != 1 {
		t.Fatalf("one Execute made %d RPCs, want 1", n)
	}
	_, err = c.Classify(t.Context(), &http.Response{StatusCode: 503})
	if !broker.IsUnavailable(err) || f.calls.Load() != 2 {
		t.Fatalf("Classify: err %v, %d RPCs in all, want 2", err, f.calls.Load())
	}
	// The same through the RoundTripper.
	hc := &http.Client{Transport: c.RoundTripper()}
	if _, err := hc.Get("https://api.example.com/"); !broker.IsUnavailable(err) || f.calls.Load() != 3 {
		t.Fatalf("RoundTripper: err %v, %d RPCs in all, want 3", err, f.calls.Load())
	}
}

func TestErrorMapping(t *testing.T) {
	bad, _ := status.New(codes.InvalidArgument, "invalid request: request.url: required").WithDetails(&errdetails.BadRequest{
		FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: "request.url", Description: "required"}},
	})
	paced, _ := status.New(codes.ResourceExhausted, "pacing cannot admit the call").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(90 * time.Second)})
	tests := []struct {
		name  string
		err   error
		check func(error) bool
		text  string
	}{
		{"unauthenticated", status.Error(codes.Unauthenticated, "missing credentials"), broker.IsUnauthenticated, "authentication failed (UNAUTHENTICATED): missing credentials"},
		{"permission denied", status.Error(codes.PermissionDenied, "destination refused"), broker.IsPermissionDenied, "permission denied (PERMISSION_DENIED)"},
		{"invalid argument", bad.Err(), broker.IsInvalidArgument, "invalid request (INVALID_ARGUMENT)"},
		{"unknown policy", status.Error(codes.FailedPrecondition, `unknown policy "x"`), broker.IsUnknownPolicy, "FAILED_PRECONDITION"},
		{"rate limited", paced.Err(), broker.IsRateLimited, "retry in 1m30s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := bufClient(t, &fakeService{err: tt.err})
			_, _, err := c.Execute(t.Context(), getReq(t))
			var be *broker.Error
			if !errors.As(err, &be) || !tt.check(err) {
				t.Fatalf("err = %T %v", err, err)
			}
			if !strings.Contains(err.Error(), tt.text) {
				t.Fatalf("error text %q lacks %q", err, tt.text)
			}
			if status.Code(err) != status.Code(tt.err) {
				t.Fatalf("status.Code = %s, want %s", status.Code(err), status.Code(tt.err))
			}
			// Wrapped errors still match.
			if !tt.check(errors.Join(errors.New("context"), err)) {
				t.Fatal("helper does not see through wrapping")
			}
		})
	}
	c, _ := bufClient(t, &fakeService{err: bad.Err()})
	_, _, err := c.Execute(t.Context(), getReq(t))
	var be *broker.Error
	if !errors.As(err, &be) || len(be.FieldViolations) != 1 || be.FieldViolations[0] != (broker.FieldViolation{Field: "request.url", Description: "required"}) {
		t.Fatalf("field violations %+v", be)
	}
	c, _ = bufClient(t, &fakeService{err: paced.Err()})
	_, _, err = c.Execute(t.Context(), getReq(t))
	if !errors.As(err, &be) || !be.HasRetryDelay || be.RetryDelay != 90*time.Second {
		t.Fatalf("retry delay %+v", be)
	}
}

func TestDeadlinePropagates(t *testing.T) {
	svc := &fakeService{}
	c, _ := bufClient(t, svc)
	ctx, cancel := context.WithTimeout(t.Context(), 7*time.Second)
	defer cancel()
	want, _ := ctx.Deadline()
	if _, _, err := c.Execute(ctx, getReq(t)); err != nil {
		t.Fatal(err)
	}
	svc.mu.Lock()
	got := svc.deadline
	svc.mu.Unlock()
	if got.IsZero() || got.Sub(want).Abs() > time.Second {
		t.Fatalf("server deadline %v, want about %v", got, want)
	}
	// An expired context is DEADLINE_EXCEEDED and matches context.DeadlineExceeded.
	ctx, cancel = context.WithTimeout(t.Context(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	_, _, err := c.Execute(ctx, getReq(t))
	if !errors.Is(err, context.DeadlineExceeded) || status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("err = %v", err)
	}
}

func TestAPIKeyMetadata(t *testing.T) {
	svc := &fakeService{}
	c, _ := bufClient(t, svc, broker.WithAPIKey("s3cret"))
	if _, err := c.Classify(t.Context(), &http.Response{StatusCode: 200}); err != nil {
		t.Fatal(err)
	}
	svc.mu.Lock()
	auth := svc.lastMD.Get("authorization")
	svc.mu.Unlock()
	if len(auth) != 1 || auth[0] != "Bearer s3cret" {
		t.Fatalf("authorization metadata %q", auth)
	}
}

// TestAPIKeyOverLoopbackPlaintext: plaintext is allowed to a loopback
// broker (the dev setup) without WithInsecure.
func TestAPIKeyOverLoopbackPlaintext(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	svc := &fakeService{}
	startFake(t, lis, svc)
	c, err := broker.New(lis.Addr().String(), broker.WithAPIKey("dev-key"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Classify(t.Context(), &http.Response{StatusCode: 200}); err != nil {
		t.Fatal(err)
	}
	svc.mu.Lock()
	auth := svc.lastMD.Get("authorization")
	svc.mu.Unlock()
	if len(auth) != 1 || auth[0] != "Bearer dev-key" {
		t.Fatalf("authorization metadata %q", auth)
	}
}

// TestAPIKeyNeverInPlaintextToRemote: over an insecure connection to a
// target that is not loopback, the key is not sent unless WithInsecure
// says so.
func TestAPIKeyNeverInPlaintextToRemote(t *testing.T) {
	lis := bufconn.Listen(1 << 20)
	svc := &fakeService{}
	f := startFake(t, lis, svc)
	conn, err := grpc.NewClient("passthrough:///broker.example.com:443",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDisableRetry())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c, err := broker.New("", broker.WithConn(conn), broker.WithAPIKey("s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Classify(t.Context(), &http.Response{StatusCode: 200})
	if err == nil || f.calls.Load() != 0 {
		t.Fatalf("err %v, %d calls reached the server; the key must not go out in plaintext", err, f.calls.Load())
	}
	c, err = broker.New("", broker.WithConn(conn), broker.WithAPIKey("s3cret"), broker.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Classify(t.Context(), &http.Response{StatusCode: 200}); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if conn.GetState().String() == "SHUTDOWN" {
		t.Fatal("Close closed a connection given with WithConn")
	}
}

func TestNewRejectsContradictions(t *testing.T) {
	for name, opts := range map[string][]broker.Option{
		"tls and insecure": {broker.WithTLS(nil), broker.WithInsecure()},
		"empty key":        {broker.WithAPIKey("")},
		"body limit":       {broker.WithMaxRequestBody(0)},
	} {
		if _, err := broker.New("127.0.0.1:1", opts...); err == nil {
			t.Errorf("%s: New accepted it", name)
		}
	}
}

// TestNoResponseErrorNamesCredentialCause: a call whose broker-held
// credential could not be had says why in its error.
func TestNoResponseErrorNamesCredentialCause(t *testing.T) {
	res := &broker.Result{Outcome: broker.OutcomeCredentialsUnavailable, Attempts: []broker.Attempt{{Number: 1, ErrorMessage: "credential api unavailable: token endpoint answered 503"}}}
	err := &broker.NoResponseError{Outcome: res.Outcome, Result: res}
	if got := err.Error(); got != "broker: no response after 1 attempt(s) (OUTCOME_CREDENTIALS_UNAVAILABLE): credential api unavailable: token endpoint answered 503" {
		t.Fatalf("error %q", got)
	}
}
