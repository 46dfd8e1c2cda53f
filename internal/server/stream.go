package server

import (
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
	"github.com/retrybroker/retrybroker/internal/engine"
)

// bodyEnds maps engine.BodyEnd to the contract's BodyEnd, by name.
var bodyEnds = enumTable(engine.BodyEnds(), func(e engine.BodyEnd) string { return "BODY_END_" + strings.ToUpper(e.String()) }, rbv1.BodyEnd_value)

// ExecuteStream performs the call exactly as Execute does (the same
// request validation, policy, overrides, destination guard, gates,
// learning and spans) and streams the final response: one head, the body
// as chunks as the upstream sends them (gRPC flow control is the
// backpressure; the broker holds one chunk buffer), then one end. A call
// without a final response sends only end (BODY_END_NO_RESPONSE).
//
// Before the head, errors are the statuses Execute returns (a refused
// destination PERMISSION_DENIED, pacing RESOURCE_EXHAUSTED, ...); one more
// stream than the policy's stream.max_concurrent for the tenant, or than
// the tenant's own limit across its policies (tenant.Tenant.StreamLimit),
// is RESOURCE_EXHAUSTED. Both limits are per broker replica. After the head, how the body ended is in end, never a
// status. Canceling the RPC cancels the upstream request and closes its
// connection.
func (s *Service) ExecuteStream(req *rbv1.ExecuteRequest, stream grpc.ServerStreamingServer[rbv1.ExecuteStreamResponse]) error {
	ctx := stream.Context()
	call, provider, err := s.prepare(ctx, req)
	if err != nil {
		return err
	}
	t, err := s.tenantFrom(ctx)
	if err != nil {
		return err
	}
	limit, tenantLimit := call.Policy.Stream.MaxConcurrent, t.StreamLimit()
	release, full := s.streams.acquire(call.Tenant, call.Policy.Name, limit, tenantLimit)
	switch full {
	case slotsPolicyFull:
		return status.Errorf(codes.ResourceExhausted,
			"the tenant already has %d ExecuteStream calls open under policy %q on this broker (its stream.max_concurrent); try again when one ends", limit, call.Policy.Name)
	case slotsTenantFull:
		return status.Errorf(codes.ResourceExhausted,
			"the tenant already has %d ExecuteStream calls open across its policies on this broker (tenants[].stream.max_concurrent); try again when one ends", tenantLimit)
	}
	defer release()
	sink := &grpcSink{stream: stream, provider: provider, msg: &rbv1.ExecuteStreamResponse{}}
	res, err := s.exec.Runner.Stream(ctx, call, sink)
	// The upstream body is over: the slot is free before the end message,
	// so a caller that opens its next stream on reading end is never
	// refused for the one it just finished.
	release()
	if err != nil && !res.HeadSent {
		return s.executeError(ctx, err)
	}
	if res.BodyEnd == engine.BodyEndCanceled && ctx.Err() != nil {
		return contextStatus(ctx.Err()) // nobody is listening for end
	}
	if err := stream.Send(&rbv1.ExecuteStreamResponse{Event: &rbv1.ExecuteStreamResponse_End{End: streamEndToProto(res, sink)}}); err != nil {
		return err
	}
	return nil
}

// grpcSink sends the head and the chunks of a stream as messages. The
// chunk message is reused: SendMsg encodes it before it returns.
type grpcSink struct {
	stream   grpc.ServerStreamingServer[rbv1.ExecuteStreamResponse]
	provider string
	msg      *rbv1.ExecuteStreamResponse
	chunk    rbv1.ExecuteStreamResponse_Chunk
	yielded  bool // after the first chunk
	// The head's attempts, as the engine gave them and as sent: the end
	// repeats them (the head's attempt is the last one), and reuses the
	// messages when the records did not change since.
	headRecs     []engine.AttemptRecord
	headAttempts []*rbv1.Attempt
}

func (g *grpcSink) Head(h engine.StreamHead) error {
	g.headRecs, g.headAttempts = h.Attempts, attemptsToProto(h.Attempts, g.provider)
	return g.stream.Send(&rbv1.ExecuteStreamResponse{Event: &rbv1.ExecuteStreamResponse_Head{Head: &rbv1.StreamHead{
		StatusCode: int32(h.Status), Headers: fromHTTPHeader(h.Header),
		Attempts: g.headAttempts, Provider: g.provider,
	}}})
}

// attempts returns recs as messages: the head's when recs are the records
// the head was sent with (Send encoded those messages before it returned,
// so the end may send them again), new ones otherwise.
func (g *grpcSink) attempts(recs []engine.AttemptRecord) []*rbv1.Attempt {
	if g.headAttempts != nil && slices.Equal(recs, g.headRecs) {
		return g.headAttempts
	}
	return attemptsToProto(recs, g.provider)
}

func (g *grpcSink) Chunk(p []byte) error {
	g.chunk.Chunk = p
	g.msg.Event = &g.chunk
	err := g.stream.Send(g.msg)
	g.chunk.Chunk = nil
	if !g.yielded {
		// Send queues the message for the transport's writer goroutine,
		// which runs only when this one yields. When the upstream sent the
		// body at once, this goroutine would not block again before the
		// call is over (the rest of the body, the store, the metrics, the
		// end message): the first byte would wait for all of it. It
		// yields once, so the head and the first chunk leave now.
		g.yielded = true
		runtime.Gosched()
	}
	return err
}

// streamEndToProto builds the end message of the stream sink sent.
func streamEndToProto(res *engine.StreamResult, sink *grpcSink) *rbv1.StreamEnd {
	provider := sink.provider
	end := &rbv1.StreamEnd{
		Attempts: sink.attempts(res.Attempts), Outcome: rbv1.Outcome(outcomes.proto(res.Outcome)),
		BodyComplete: res.BodyEnd == engine.BodyEndComplete, BodyEnd: rbv1.BodyEnd(bodyEnds.proto(res.BodyEnd)),
		ErrorMessage: res.Error, BodyBytes: uint64(max(res.BodyBytes, 0)), Provider: provider,
	}
	if res.HasRetryAfter {
		end.RetryAfter = durationpb.New(res.RetryAfter)
	}
	if len(res.Trailers) > 0 {
		end.Trailers = fromHTTPHeader(trailersOnly(res.Trailers))
	}
	if res.BodyEnd == engine.BodyEndNoResponse && end.ErrorMessage == "" {
		end.ErrorMessage = "the call ended without a final response (" + end.Outcome.String() + ")"
		if n := len(res.Attempts); n > 0 && res.Attempts[n-1].Error != "" {
			end.ErrorMessage = fmt.Sprintf("%s: %s", end.ErrorMessage, res.Attempts[n-1].Error)
		}
	}
	return end
}

// trailersOnly drops the trailer names the upstream announced but never
// sent (net/http lists them with no values).
func trailersOnly(h http.Header) http.Header {
	out := make(http.Header, len(h))
	for k, vs := range h {
		if len(vs) > 0 {
			out[k] = vs
		}
	}
	return out
}

// streamKey names one tenant's streams under one policy, or (policy "",
// whole) across all its policies.
type streamKey struct {
	tenant, policy string
	whole          bool
}

// streamSlots counts the open ExecuteStream calls per tenant and policy,
// and per tenant. The zero value is ready; it is safe for concurrent use.
type streamSlots struct {
	mu   sync.Mutex
	open map[streamKey]int
}

// slotsFull says which limit refused a slot.
type slotsFull int

const (
	slotsOK         slotsFull = iota
	slotsPolicyFull           // the policy's stream.max_concurrent
	slotsTenantFull           // the tenant's, across its policies
)

// acquire takes a slot of tenant's policy when fewer than policyLimit are
// open under it and fewer than tenantLimit under all the tenant's policies,
// and returns the function that gives it back (call it once); otherwise it
// says which limit is reached.
func (t *streamSlots) acquire(tenant, policy string, policyLimit, tenantLimit int) (release func(), full slotsFull) {
	pk, tk := streamKey{tenant: tenant, policy: policy}, streamKey{tenant: tenant, whole: true}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.open[pk] >= policyLimit:
		return nil, slotsPolicyFull
	case t.open[tk] >= tenantLimit:
		return nil, slotsTenantFull
	}
	if t.open == nil {
		t.open = make(map[streamKey]int)
	}
	t.open[pk]++
	t.open[tk]++
	var once sync.Once
	return func() {
		once.Do(func() {
			t.mu.Lock()
			defer t.mu.Unlock()
			for _, k := range [2]streamKey{pk, tk} {
				if t.open[k]--; t.open[k] <= 0 {
					delete(t.open, k)
				}
			}
		})
	}, slotsOK
}
