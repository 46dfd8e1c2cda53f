// Package baseline holds the services the broker's overhead is measured
// against: an empty unary handler (for ClassifyResponse) and a minimal
// gRPC-to-HTTP forwarder with no retry logic, guard or store (for Execute).
// Serve them with server.NewGRPCServer so they share the broker's server
// options.
package baseline

import (
	"bytes"
	"context"
	"io"
	"net/http"

	"google.golang.org/protobuf/types/known/timestamppb"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
)

// EmptyService answers ClassifyResponse at once with an empty decision.
type EmptyService struct {
	rbv1.UnimplementedBrokerServiceServer
}

// ClassifyResponse returns an empty decision without looking at the request.
func (EmptyService) ClassifyResponse(context.Context, *rbv1.ClassifyResponseRequest) (*rbv1.ClassifyResponseResponse, error) {
	return &rbv1.ClassifyResponseResponse{Decision: &rbv1.Decision{}}, nil
}

// Forwarder sends each Execute request once with Client and returns the
// response: no retries, no destination guard, no shared state.
type Forwarder struct {
	rbv1.UnimplementedBrokerServiceServer
	Client *http.Client
}

// Execute forwards the request and copies the response back.
func (f Forwarder) Execute(ctx context.Context, req *rbv1.ExecuteRequest) (*rbv1.ExecuteResponse, error) {
	r := req.GetRequest()
	hr, err := http.NewRequestWithContext(ctx, r.GetMethod(), r.GetUrl(), bytes.NewReader(r.GetBody()))
	if err != nil {
		return nil, err
	}
	resp, err := f.Client.Do(hr)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	out := &rbv1.HttpResponse{StatusCode: int32(resp.StatusCode), Body: body}
	for k, vs := range resp.Header {
		for _, v := range vs {
			out.Headers = append(out.Headers, &rbv1.HttpHeader{Name: k, Value: v})
		}
	}
	return &rbv1.ExecuteResponse{Response: out, Outcome: rbv1.Outcome_OUTCOME_SUCCESS}, nil
}

// ClassifyRequest is the ClassifyResponse request the overhead scenario and
// the server's benchmarks measure: a 429 with Retry-After: 5.
func ClassifyRequest() *rbv1.ClassifyResponseRequest {
	return &rbv1.ClassifyResponseRequest{
		Method: "GET", StatusCode: 429, Attempt: 1, Now: timestamppb.Now(),
		Headers: []*rbv1.HttpHeader{{Name: "Retry-After", Value: "5"}, {Name: "Content-Type", Value: "application/json"}},
	}
}
