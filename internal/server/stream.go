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
	slot, full := s.streams.acquire(call.Tenant, call.Policy.Name, limit, tenantLimit)
	switch full {
	case slotsPolicyFull:
		return status.Errorf(codes.ResourceExhausted,
			"the tenant already has %d ExecuteStream calls open under policy %q on this broker (its stream.max_concurrent); try again when one ends", limit, call.Policy.Name)
	case slotsTenantFull:
		return status.Errorf(codes.ResourceExhausted,
			"the tenant already has %d ExecuteStream calls open across its policies on this broker (tenants[].stream.max_concurrent); try again when one ends", tenantLimit)
	}
	defer slot.release()
	sink := grpcSinks.get()
	defer grpcSinks.put(sink)
	sink.stream, sink.provider = stream, provider
	res, err := s.exec.Runner.Stream(ctx, call, sink)
	// The upstream body is over: the slot is free before the end message,
	// so a caller that opens its next stream on reading end is never
	// refused for the one it just finished.
	slot.release()
	if err != nil && !res.HeadSent {
		return s.executeError(ctx, err)
	}
	if res.BodyEnd == engine.BodyEndCanceled && ctx.Err() != nil {
		return contextStatus(ctx.Err()) // nobody is listening for end
	}
	return sink.End(res)
}

// grpcSink sends the head, the chunks and the end of a stream as
// messages. The messages are reused: SendMsg encodes one before it
// returns. A sink holds the messages of a stream and what they point to
// in the common case (one attempt, a few headers), so that one block
// makes them all; sinks come from a pool (grpcSinks) and go back zeroed
// when the stream's handler returns (issue 22: a stream's garbage is
// what its collections cost).
type grpcSink struct {
	stream   grpc.ServerStreamingServer[rbv1.ExecuteStreamResponse]
	provider string
	msg      rbv1.ExecuteStreamResponse
	chunk    rbv1.ExecuteStreamResponse_Chunk
	yielded  bool // after the first chunk
	// The head's attempts, as the engine gave them and as sent: the end
	// repeats them (the head's attempt is the last one), and reuses the
	// messages when the records did not change since.
	headRecs     []engine.AttemptRecord
	headAttempts []*rbv1.Attempt

	head      rbv1.StreamHead
	headEvent rbv1.ExecuteStreamResponse_Head
	end       rbv1.StreamEnd
	endEvent  rbv1.ExecuteStreamResponse_End
	answerBlock
}

// grpcSinks holds zeroed sinks.
var grpcSinks zeroPool[grpcSink]

func (g *grpcSink) Head(h engine.StreamHead) error {
	g.headRecs, g.headAttempts = h.Attempts, attemptsInto(h.Attempts, g.provider, g.attempt[:], g.attemptPtr[:0])
	g.head = rbv1.StreamHead{
		StatusCode: int32(h.Status), Headers: headersInto(h.Header, g.header[:], g.headerPtr[:0]),
		Attempts: g.headAttempts, Provider: g.provider,
	}
	g.headEvent.Head = &g.head
	g.msg.Event = &g.headEvent
	return g.stream.Send(&g.msg)
}

// attempts returns recs as messages: the head's when recs are the records
// the head was sent with (Send encoded those messages before it returned,
// so the end may send them again), new ones otherwise.
func (g *grpcSink) attempts(recs []engine.AttemptRecord) []*rbv1.Attempt {
	if g.headAttempts != nil && slices.Equal(recs, g.headRecs) {
		return g.headAttempts
	}
	if g.headAttempts == nil { // no head: the sink's block is free
		return attemptsInto(recs, g.provider, g.attempt[:], g.attemptPtr[:0])
	}
	return attemptsToProto(recs, g.provider)
}

func (g *grpcSink) Chunk(p []byte) error {
	g.chunk.Chunk = p
	g.msg.Event = &g.chunk
	err := g.stream.Send(&g.msg)
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

// End sends the end message of the stream res describes.
func (g *grpcSink) End(res *engine.StreamResult) error {
	g.endInto(res)
	g.endEvent.End = &g.end
	g.msg.Event = &g.endEvent
	return g.stream.Send(&g.msg)
}

// endInto fills g.end, the end message of the stream g sent, from res.
func (g *grpcSink) endInto(res *engine.StreamResult) {
	end := &g.end
	*end = rbv1.StreamEnd{
		Attempts: g.attempts(res.Attempts), Outcome: rbv1.Outcome(outcomes.proto(res.Outcome)),
		BodyComplete: res.BodyEnd == engine.BodyEndComplete, BodyEnd: rbv1.BodyEnd(bodyEnds.proto(res.BodyEnd)),
		ErrorMessage: res.Error, BodyBytes: uint64(max(res.BodyBytes, 0)), Provider: g.provider,
	}
	if res.HasRetryAfter {
		setDuration(&g.retryAfter, res.RetryAfter)
		end.RetryAfter = &g.retryAfter
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
// and returns it (give it back with its release); otherwise it says which
// limit is reached.
func (t *streamSlots) acquire(tenant, policy string, policyLimit, tenantLimit int) (slot streamSlot, full slotsFull) {
	pk, tk := streamKey{tenant: tenant, policy: policy}, streamKey{tenant: tenant, whole: true}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.open[pk] >= policyLimit:
		return streamSlot{}, slotsPolicyFull
	case t.open[tk] >= tenantLimit:
		return streamSlot{}, slotsTenantFull
	}
	if t.open == nil {
		t.open = make(map[streamKey]int)
	}
	t.open[pk]++
	t.open[tk]++
	return streamSlot{t: t, pk: pk, tk: tk}, slotsOK
}

// streamSlot is one stream's slot. It is a value, so that taking one
// allocates nothing; one goroutine releases it.
type streamSlot struct {
	t      *streamSlots
	pk, tk streamKey
}

// release gives the slot back; after the first call it does nothing.
func (s *streamSlot) release() {
	t := s.t
	if t == nil {
		return
	}
	s.t = nil
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, k := range [2]streamKey{s.pk, s.tk} {
		if t.open[k]--; t.open[k] <= 0 {
			delete(t.open, k)
		}
	}
}
