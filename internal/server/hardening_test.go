package server_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/server"
	"github.com/retrybroker/retrybroker/internal/store"
	"github.com/retrybroker/retrybroker/internal/tenant"
)

// rawBytes is a request or response message as bytes, sent and received
// unchanged by rawClientCodec: the tests below send what no well-behaved
// client would.
type rawBytes []byte

type rawClientCodec struct{}

func (rawClientCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*rawBytes))}, nil
}

func (rawClientCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*rawBytes) = data.Materialize()
	return nil
}

func (rawClientCodec) Name() string { return "proto" }

// serveRaw serves svc under cfg on loopback and returns a connection.
func serveRaw(t *testing.T, svc rbv1.BrokerServiceServer, cfg server.GRPCConfig) *grpc.ClientConn {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	gs, _ := server.NewGRPCServer(svc, cfg)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(1<<30), grpc.MaxCallRecvMsgSize(1<<30)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func invokeRaw(ctx context.Context, conn *grpc.ClientConn, method string, msg []byte) error {
	in, out := rawBytes(msg), rawBytes(nil)
	return conn.Invoke(ctx, method, &in, &out, grpc.ForceCodecV2(rawClientCodec{}))
}

// emptyHeaders encodes n empty HttpHeader entries as field num: the cheapest
// wire bytes that cost the most to decode.
func emptyHeaders(num protowire.Number, n int) []byte {
	b := make([]byte, 0, 2*n)
	for range n {
		b = protowire.AppendTag(b, num, protowire.BytesType)
		b = protowire.AppendVarint(b, 0)
	}
	return b
}

// TestUnauthenticatedMessagesAreNeverDecoded (issue #9, defect 3): 10 MiB
// ClassifyResponse requests made of empty header entries, sent without a
// key, are refused when their headers arrive. Decoded, each would cost
// about 400 MiB; the tap refuses them first, so the server allocates a
// small fraction of one message.
func TestUnauthenticatedMessagesAreNeverDecoded(t *testing.T) {
	refuse := func(ctx context.Context) (context.Context, error) {
		return ctx, status.Error(codes.Unauthenticated, "missing credentials")
	}
	conn := serveRaw(t, server.New(), server.GRPCConfig{Auth: refuse})
	msg := emptyHeaders(5, 5<<20) // 10 MiB
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var wg sync.WaitGroup
	codesSeen := make([]codes.Code, 4)
	for i := range codesSeen {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codesSeen[i] = status.Code(invokeRaw(t.Context(), conn, rbv1.BrokerService_ClassifyResponse_FullMethodName, msg))
		}()
	}
	wg.Wait()
	runtime.ReadMemStats(&after)
	for i, c := range codesSeen {
		if c != codes.Unauthenticated {
			t.Errorf("call %d answered %s, want UNAUTHENTICATED", i, c)
		}
	}
	// Decoding one message alone would allocate ~400 MiB; the client side
	// of this test frames the four messages (~40 MiB).
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 128<<20 {
		t.Errorf("the process allocated %d MiB for 4 refused calls; identity must be checked before decoding", grew>>20)
	}
}

// TestRequestsBoundedPerRPC: each RPC accepts what it may legitimately
// carry. A ClassifyResponse over its limit is refused before decoding; a
// message of nothing but header entries is refused by counting them on the
// wire; malformed messages answer INVALID_ARGUMENT, never INTERNAL.
func TestRequestsBoundedPerRPC(t *testing.T) {
	dev, err := tenant.Dev(nil)
	if err != nil {
		t.Fatal(err)
	}
	conn := serveRaw(t, server.New(server.WithDefaultTenant(dev)), server.GRPCConfig{})
	ctx := t.Context()
	classify := rbv1.BrokerService_ClassifyResponse_FullMethodName
	over, err := proto.Marshal(&rbv1.ClassifyResponseRequest{StatusCode: 503, Body: make([]byte, server.MaxClassifyMessage)})
	if err != nil {
		t.Fatal(err)
	}
	invalidUTF8 := protowire.AppendString(nil, "\xff\xfe") // field 0 is invalid too; use method (3)
	invalidUTF8 = append(protowire.AppendTag(nil, 3, protowire.BytesType), invalidUTF8...)
	for _, tc := range []struct {
		name   string
		method string
		msg    []byte
		want   codes.Code
		text   string
	}{
		{"classify over its limit", classify, over, codes.ResourceExhausted, "too large"},
		{"100k empty headers", classify, emptyHeaders(5, 100_000), codes.InvalidArgument, "too many headers"},
		{"100k empty request headers", classify, emptyHeaders(10, 100_000), codes.InvalidArgument, "too many headers"},
		{"invalid UTF-8 method", classify, invalidUTF8, codes.InvalidArgument, "not a valid"},
		{"truncated varint", classify, []byte{0x20, 0xff}, codes.InvalidArgument, "not a valid"},
		{"execute truncated", rbv1.BrokerService_Execute_FullMethodName, []byte{0x0a, 0x10, 0x01}, codes.InvalidArgument, "not a valid"},
		{
			"execute nested headers", rbv1.BrokerService_Execute_FullMethodName,
			append(protowire.AppendTag(nil, 1, protowire.BytesType), protowire.AppendBytes(nil, emptyHeaders(3, 1000))...),
			codes.InvalidArgument, "too many headers",
		},
		{
			"create task doubly nested headers", rbv1.BrokerService_CreateTask_FullMethodName,
			append(protowire.AppendTag(nil, 1, protowire.BytesType), protowire.AppendBytes(nil,
				append(protowire.AppendTag(nil, 1, protowire.BytesType), protowire.AppendBytes(nil, emptyHeaders(3, 1000))...))...),
			codes.InvalidArgument, "too many headers",
		},
		{
			"get task over its limit", rbv1.BrokerService_GetTask_FullMethodName,
			protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), strings.Repeat("a", server.MaxTaskRefMessage)),
			codes.ResourceExhausted, "too large",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := invokeRaw(ctx, conn, tc.method, tc.msg)
			st := status.Convert(err)
			if st.Code() != tc.want || !strings.Contains(st.Message(), tc.text) {
				t.Fatalf("got %s %q, want %s containing %q", st.Code(), st.Message(), tc.want, tc.text)
			}
		})
	}
	// The stream RPC decodes the same way.
	stream, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, rbv1.BrokerService_ExecuteStream_FullMethodName, grpc.ForceCodecV2(rawClientCodec{}))
	if err != nil {
		t.Fatal(err)
	}
	msg := rawBytes(invalidUTF8)
	if err := stream.SendMsg(&msg); err != nil {
		t.Fatal(err)
	}
	_ = stream.CloseSend()
	var out rawBytes
	if err := stream.RecvMsg(&out); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("ExecuteStream with a malformed message: %v, want INVALID_ARGUMENT", err)
	}
}

// TestClassifyCallerClockCannotPoisonGates (issue #9, defect 1): a caller's
// `now` shapes the decision it gets back, never shared state. Before, a
// 429 with Retry-After: 1 and now in the year 9999 closed the gate until
// then.
func TestClassifyCallerClockCannotPoisonGates(t *testing.T) {
	f := startExecBroker(t, nil)
	up := newScripted(t, func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(200) })
	target := strings.Replace(up.URL, "127.0.0.1", "local.example", 1) + "/x"
	year9999 := time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
	resp, err := f.client.ClassifyResponse(t.Context(), &rbv1.ClassifyResponseRequest{
		Url: target, StatusCode: 429, Headers: []*rbv1.HttpHeader{hdr("Retry-After", "1")}, Now: timestamppb.New(year9999),
	})
	if err != nil {
		t.Fatal(err)
	}
	if d := resp.GetDecision(); d.GetAction() != rbv1.Action_ACTION_RETRY || d.GetDelay().AsDuration() != time.Second {
		t.Fatalf("decision %v, want retry in 1s", d)
	}
	host := strings.TrimPrefix(strings.TrimSuffix(target, "/x"), "http://")
	gate := store.GateKey{Tenant: tenant.DevTenantID, Scope: engine.GateScope("retry-after", host)}
	st, err := f.store.GateState(t.Context(), gate, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if until := st.ClosedUntil; until.After(time.Now().Add(2 * time.Second)) {
		t.Fatalf("gate closed until %s: the caller's clock reached shared state", until)
	}
	// Execute to the same destination goes through (after at most the
	// hinted second), instead of answering GATE_CLOSED for centuries.
	res, err := f.client.Execute(t.Context(), &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: target}})
	if err != nil {
		t.Fatal(err)
	}
	if res.GetOutcome() != rbv1.Outcome_OUTCOME_SUCCESS {
		t.Fatalf("Execute outcome %s (retry_after %v), want success", res.GetOutcome(), res.GetRetryAfter().AsDuration())
	}
}

// TestHostileHintsBoundedByMaxGate (issue #9, defect 2): a hint of ten years
// is reported in full, but closes the gate for at most max_gate (24h).
func TestHostileHintsBoundedByMaxGate(t *testing.T) {
	f := startExecBroker(t, nil)
	for _, tc := range []struct {
		name     string
		provider string
		headers  []*rbv1.HttpHeader
	}{
		{"retry-after ten years", "", []*rbv1.HttpHeader{hdr("Retry-After", "315360000")}},
		{"github reset in 2200", "github", []*rbv1.HttpHeader{hdr("X-RateLimit-Remaining", "0"), hdr("X-RateLimit-Reset", "7258118400")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := "https://" + strings.ReplaceAll(tc.name, " ", "-") + ".example/"
			resp, err := f.client.ClassifyResponse(t.Context(), &rbv1.ClassifyResponseRequest{
				Url: url, Provider: tc.provider, StatusCode: 429, Headers: tc.headers,
			})
			if err != nil {
				t.Fatal(err)
			}
			d := resp.GetDecision()
			if d.GetAction() != rbv1.Action_ACTION_DO_NOT_RETRY || d.GetHint().AsDuration() < 365*24*time.Hour {
				t.Fatalf("decision %v: the full hint must be reported", d)
			}
			provider := tc.provider
			if provider == "" {
				provider = "retry-after"
			}
			host := strings.TrimSuffix(strings.TrimPrefix(url, "https://"), "/")
			st, err := f.store.GateState(t.Context(), store.GateKey{Tenant: tenant.DevTenantID, Scope: engine.GateScope(provider, host)}, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if st.ClosedUntil.IsZero() {
				t.Fatal("the gate did not close")
			}
			if limit := time.Now().Add(engine.DefaultMaxGate + time.Minute); st.ClosedUntil.After(limit) {
				t.Fatalf("gate closed until %s, beyond max_gate", st.ClosedUntil)
			}
		})
	}
}

// TestRefusalsDoNotRevealInternalAddresses (issue #9, smaller defects): the
// caller learns the range class; the address a name resolved to goes to the
// server log only.
func TestRefusalsDoNotRevealInternalAddresses(t *testing.T) {
	f := startExecBroker(t, nil)
	_, err := f.client.Execute(t.Context(), &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: "http://internal.example/"}})
	st := status.Convert(err)
	if st.Code() != codes.PermissionDenied {
		t.Fatalf("err = %v, want PERMISSION_DENIED", err)
	}
	if strings.Contains(st.Message(), "10.1.2.3") || !strings.Contains(st.Message(), "private") {
		t.Fatalf("message %q must name the range class and not the address", st.Message())
	}
}

// TestMalformedHeaderNamesStayOutOfTheLog: the per-call log line carries the
// status message; a header "name" holding a credential must not reach it.
func TestMalformedHeaderNamesStayOutOfTheLog(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &buf, mu: &mu}, nil))
	dev, err := tenant.Dev(nil)
	if err != nil {
		t.Fatal(err)
	}
	conn := serveRaw(t, server.New(server.WithDefaultTenant(dev)), server.GRPCConfig{Logger: logger})
	client := rbv1.NewBrokerServiceClient(conn)
	_, err = client.ClassifyResponse(t.Context(), &rbv1.ClassifyResponseRequest{
		StatusCode: 503, RequestHeaders: []*rbv1.HttpHeader{hdr("Authorization: Bearer s3cr3t-token", "x")},
	})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("err = %v", err)
	}
	// The log line is written when the call finishes; wait for it.
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		out := buf.String()
		mu.Unlock()
		if strings.Contains(out, "InvalidArgument") {
			if strings.Contains(out, "s3cr3t") {
				t.Fatalf("the log holds the secret: %s", out)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line for the call: %q", out)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestLargestPolicyBodiesFit (issue #9, defect 7): a policy may allow 64
// MiB request and response bodies; the server's own message limits must
// carry both, so no call fails with RESOURCE_EXHAUSTED after its upstream
// call was made.
func TestLargestPolicyBodiesFit(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 128 MiB")
	}
	f := startExecBroker(t, func(p *tenant.Policy) {
		p.MaxRequestBody, p.MaxResponseBody = engine.MaxBodyLimit, engine.MaxBodyLimit
	})
	body := bytes.Repeat([]byte("x"), engine.MaxBodyLimit)
	up := newScripted(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		w.Header().Set("X-Received", strconv.FormatInt(n, 10))
		_, _ = w.Write(body)
	})
	resp, err := f.client.Execute(t.Context(), &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Method: "PUT", Url: up.URL, Body: body}},
		grpc.MaxCallSendMsgSize(1<<30), grpc.MaxCallRecvMsgSize(1<<30))
	if err != nil {
		t.Fatal(err)
	}
	r := resp.GetResponse()
	if resp.GetOutcome() != rbv1.Outcome_OUTCOME_SUCCESS || len(r.GetBody()) != engine.MaxBodyLimit || r.GetBodyTruncated() {
		t.Fatalf("outcome %s, %d body bytes, truncated %v", resp.GetOutcome(), len(r.GetBody()), r.GetBodyTruncated())
	}
	for _, h := range r.GetHeaders() {
		if h.GetName() == "X-Received" && h.GetValue() != strconv.Itoa(engine.MaxBodyLimit) {
			t.Fatalf("upstream received %s bytes", h.GetValue())
		}
	}
}
