package server_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"runtime"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
	"github.com/retrybroker/retrybroker/internal/egress"
	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/server"
	"github.com/retrybroker/retrybroker/internal/store/memstore"
	"github.com/retrybroker/retrybroker/internal/tenant"
)

// FuzzClassifyResponse feeds arbitrary wire bytes, decoded as a request, to
// ClassifyResponse: it must never panic, and must answer either a decision
// or INVALID_ARGUMENT / FAILED_PRECONDITION.
func FuzzClassifyResponse(f *testing.F) {
	seeds := []*rbv1.ClassifyResponseRequest{
		{StatusCode: 429, Headers: []*rbv1.HttpHeader{{Name: "Retry-After", Value: "5"}}},
		{StatusCode: 403, Provider: "github", Headers: []*rbv1.HttpHeader{{Name: "x-ratelimit-remaining", Value: "0"}, {Name: "x-ratelimit-reset", Value: "1796126445"}}},
		{StatusCode: 429, Provider: "discord", Body: []byte(`{"retry_after": 1.5}`)},
		{TransportError: rbv1.TransportError_TRANSPORT_ERROR_CONNECTION_RESET, Method: "POST"},
		{StatusCode: 503, Attempt: 4000, Url: "http://[::1"},
		{StatusCode: 529, Provider: "anthropic", Policy: "x"},
	}
	for _, s := range seeds {
		b, err := proto.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	dev, err := tenant.Dev(nil)
	if err != nil {
		f.Fatal(err)
	}
	svc := server.New(server.WithDefaultTenant(dev))
	f.Fuzz(func(t *testing.T, data []byte) {
		var req rbv1.ClassifyResponseRequest
		if proto.Unmarshal(data, &req) != nil {
			return
		}
		resp, err := svc.ClassifyResponse(context.Background(), &req)
		switch status.Code(err) {
		case codes.OK:
			d := resp.GetDecision()
			if d.GetAction() == rbv1.Action_ACTION_UNSPECIFIED || d.GetReason() == rbv1.Reason_REASON_UNSPECIFIED {
				t.Fatalf("decision without action or reason: %v", d)
			}
			if d.GetAction() == rbv1.Action_ACTION_RETRY && (d.GetDelay() == nil || d.GetDelay().AsDuration() < 0) {
				t.Fatalf("retry without a valid delay: %v", d)
			}
		case codes.InvalidArgument, codes.FailedPrecondition:
		default:
			t.Fatalf("unexpected status %v", err)
		}
	})
}

// FuzzRPCBytes sends arbitrary bytes as the request message of every RPC to
// a real gRPC server (on an in-memory listener): no input may answer
// UNKNOWN or INTERNAL, and none may make the server allocate more than a
// bounded multiple of its size. Execute runs behind a dialer that refuses
// everything, so no input can reach a network.
func FuzzRPCBytes(f *testing.F) {
	seeds := []proto.Message{
		&rbv1.ClassifyResponseRequest{StatusCode: 429, Headers: []*rbv1.HttpHeader{{Name: "Retry-After", Value: "5"}}},
		&rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: "http://127.0.0.1:1/", Headers: []*rbv1.HttpHeader{{Name: "A", Value: "b"}}}},
		&rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Method: "POST", Url: "https://api.example.test/x?key=1", Body: []byte("{}")}},
	}
	for _, s := range seeds {
		b, err := proto.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x2a, 0x00, 0x2a, 0x00, 0x2a, 0x00})
	f.Add([]byte{0x1a, 0x02, 0xff, 0xfe})
	f.Add([]byte{0x0a, 0x80, 0x80, 0x80, 0x80, 0x10})
	dev, err := tenant.Dev(nil)
	if err != nil {
		f.Fatal(err)
	}
	refuse := func(context.Context, string, string) (net.Conn, error) { return nil, errors.New("fuzz: no network") }
	clients := egress.NewClients(egress.ClientConfig{DialFunc: refuse, Resolver: fakeResolver{}})
	exec := &server.Executor{Runner: engine.NewRunner(memstore.New()), Clients: clients}
	gs, _ := server.NewGRPCServer(server.New(server.WithDefaultTenant(dev), server.WithExecutor(exec)),
		server.GRPCConfig{Logger: slog.New(slog.DiscardHandler)})
	lis := bufconn.Listen(1 << 20)
	go func() { _ = gs.Serve(lis) }()
	f.Cleanup(gs.Stop)
	conn, err := grpc.NewClient("passthrough:///fuzz", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = conn.Close() })
	methods := []string{
		rbv1.BrokerService_ClassifyResponse_FullMethodName,
		rbv1.BrokerService_Execute_FullMethodName,
		rbv1.BrokerService_ExecuteStream_FullMethodName,
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, m := range methods {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			var err error
			if m == rbv1.BrokerService_ExecuteStream_FullMethodName {
				err = streamRaw(ctx, conn, m, data)
			} else {
				err = invokeRaw(ctx, conn, m, data)
			}
			cancel()
			runtime.ReadMemStats(&after)
			switch c := status.Code(err); c {
			case codes.Unknown, codes.Internal:
				t.Fatalf("%s answered %s: %v", m, c, err)
			}
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 64*uint64(len(data))+8<<20 {
				t.Fatalf("%s: %d bytes allocated for a %d-byte message", m, grew, len(data))
			}
		}
	})
}

// streamRaw sends msg as the request of a server-streaming RPC and reads
// the stream to its end, returning its final error (nil for OK).
func streamRaw(ctx context.Context, conn *grpc.ClientConn, method string, msg []byte) error {
	s, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, method, grpc.ForceCodecV2(rawClientCodec{}))
	if err != nil {
		return err
	}
	in := rawBytes(msg)
	if err := s.SendMsg(&in); err != nil {
		return err
	}
	if err := s.CloseSend(); err != nil {
		return err
	}
	for {
		var out rawBytes
		if err := s.RecvMsg(&out); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}
