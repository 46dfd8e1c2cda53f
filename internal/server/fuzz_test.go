package server_test

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
	"github.com/retrybroker/retrybroker/internal/server"
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
