package engine

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// StreamChunkSize is the size of the one buffer a streamed body is read
// into: each Chunk carries at most this many bytes, and it is all the body
// a stream holds in the broker at any time (beyond what the HTTP and gRPC
// transports buffer themselves, each bounded by its flow control).
//
// It is 64 bytes short of 32 KiB on purpose: grpc-go encodes each message
// into a buffer from its tiered pool (256 B, 4 KiB, 16 KiB, 32 KiB, 1 MiB),
// and a chunk of exactly 32 KiB plus its few bytes of framing would take a
// 1 MiB buffer, queued up to the stream's write quota (measured: 6 MiB of
// live heap per slow stream, against 0.1 MiB at this size).
const StreamChunkSize = 32<<10 - 64

// chunkBuffers holds the chunk buffers of streams that ended, for the next
// ones: a stream's body is read into one (StreamChunkSize) and the sink
// is done with it when Chunk returns, so a buffer is free again once its
// stream ended. Allocating one per stream was 32 KiB of a small stream's
// 59 KiB of garbage: half the collections, each scanning every stack.
var chunkBuffers = sync.Pool{New: func() any { return new([StreamChunkSize]byte) }}

// BodyEnd says how a streamed body ended.
type BodyEnd int8

// Body ends. Every stream ends with exactly one of them.
const (
	BodyEndUnspecified BodyEnd = iota
	// BodyEndComplete: the upstream sent the whole body.
	BodyEndComplete
	// BodyEndNoResponse: the call ended without a final response (no head).
	BodyEndNoResponse
	// BodyEndUpstreamError: the upstream body broke off (reset, short
	// Content-Length, protocol error).
	BodyEndUpstreamError
	// BodyEndIdleTimeout: no body byte arrived for StreamLimits.IdleTimeout.
	BodyEndIdleTimeout
	// BodyEndSizeLimit: the body went past the stream's byte cap.
	BodyEndSizeLimit
	// BodyEndTimeout: StreamLimits.MaxDuration passed since the head.
	BodyEndTimeout
	// BodyEndCanceled: the caller canceled (or its deadline passed, or it
	// stopped receiving).
	BodyEndCanceled
	// BodyEndShuttingDown: the broker's drain deadline cut the body.
	BodyEndShuttingDown
)

var bodyEndNames = [...]string{
	BodyEndUnspecified:   "unspecified",
	BodyEndComplete:      "complete",
	BodyEndNoResponse:    "no_response",
	BodyEndUpstreamError: "upstream_error",
	BodyEndIdleTimeout:   "idle_timeout",
	BodyEndSizeLimit:     "size_limit",
	BodyEndTimeout:       "timeout",
	BodyEndCanceled:      "canceled",
	BodyEndShuttingDown:  "shutting_down",
}

// String returns a snake_case name, e.g. "idle_timeout".
func (e BodyEnd) String() string {
	if e < 0 || int(e) >= len(bodyEndNames) {
		return "unspecified"
	}
	return bodyEndNames[e]
}

// BodyEnds lists every BodyEnd, in order.
func BodyEnds() []BodyEnd {
	out := make([]BodyEnd, len(bodyEndNames))
	for i := range out {
		out[i] = BodyEnd(i)
	}
	return out
}

// StreamHead is the final response's status and headers, sent before any
// body byte.
type StreamHead struct {
	Status int
	Header http.Header
	// Attempts are the attempts so far; the last one is the attempt whose
	// body is streamed.
	Attempts []AttemptRecord
}

// StreamSink receives a streamed response: Head once, when a response is
// final by the rules, then Chunk for the body bytes in order. Both are
// called from the goroutine that called Runner.Stream, and each call may
// block (that is the backpressure). An error from either means the
// receiver is gone: the body ends with BodyEndCanceled and the upstream
// request is canceled.
type StreamSink interface {
	Head(StreamHead) error
	// Chunk receives the next body bytes; p is valid only during the call
	// (the broker reuses its buffer), and holds at most StreamChunkSize bytes.
	Chunk(p []byte) error
}

// StreamResult is how an ExecuteStream call ended: the attempts and the
// outcome (as for Run), and how the body ended.
type StreamResult struct {
	Result
	// HeadSent is true once StreamSink.Head returned without error.
	HeadSent bool
	// BodyEnd says how the body ended; BodyEndNoResponse when there was no
	// final response.
	BodyEnd BodyEnd
	// BodyBytes is the number of body bytes given to StreamSink.Chunk.
	BodyBytes int64
	// Error says why the body did not complete (URL query redacted); empty
	// when it did.
	Error string
	// Trailers are the upstream's HTTP trailers (complete bodies only).
	Trailers http.Header
}

// Causes of a streamed body's end that the broker itself decides.
var (
	errStreamIdle     = errors.New("no body bytes arrived within the stream idle timeout")
	errStreamDuration = errors.New("the stream reached its max_duration")
	errStreamShutdown = errors.New("the broker is shutting down")
)

// Stream performs the call exactly as Run does (the same admission,
// attempts, waits, decisions, store updates and spans) until a response is
// final by the rules, then streams that response to sink: Head, then the
// body in chunks as the upstream sends them. Nothing is retried once the
// head was sent.
//
// Time limits: the policy's attempt timeout and total timeout bound the
// attempts up to the head, not the body. The body is bounded by the
// policy's StreamLimits (idle timeout between reads, optional max duration
// from the head, optional byte cap, narrowed by Call.MaxResponseBody when
// set), by ctx (the caller's cancellation and deadline) and by the
// broker's drain deadline. The attempt's span ends after the body and
// carries its byte count and how it ended.
//
// It returns an error only in the cases Run does, and only before the
// head; a body that does not complete is reported in the result
// (BodyEnd, Error), never as an error, and its outcome is never
// OutcomeSuccess.
func (r *Runner) Stream(ctx context.Context, c *Call, sink StreamSink) (*StreamResult, error) {
	r.observer.InFlight(1)
	defer r.observer.InFlight(-1)
	start := r.clock.Now()
	st := &streamState{sink: sink, limits: c.Policy.Stream}
	if m := c.MaxResponseBody; m > 0 && (st.limits.MaxBytes == 0 || m < st.limits.MaxBytes) {
		st.limits.MaxBytes = m
	}
	s := r.newCall(ctx, c, st)
	defer s.end()
	res, err := s.run()
	out := &StreamResult{Result: *res, HeadSent: st.headSent, BodyEnd: st.end, BodyBytes: st.bytes, Error: st.errMsg, Trailers: st.trailers}
	if out.BodyEnd == BodyEndUnspecified {
		out.BodyEnd = BodyEndNoResponse
	}
	r.observer.StreamEnd(out.BodyEnd)
	r.observer.CallDone("stream", out.Outcome, len(out.Attempts), r.clock.Now().Sub(start))
	return out, err
}

// streamState is the streaming part of a call: the sink, the limits, the
// current attempt's request context, and how the body went.
type streamState struct {
	sink   StreamSink
	limits StreamLimits

	// The attempt in progress: its request context, which only the
	// caller's context, cancel, the drain and the attempt's deadline (the
	// earlier of the attempt timeout and the call's total timeout, lifted
	// at the head: attemptLink.headed) end.
	ctx     context.Context
	cancel  context.CancelCauseFunc
	preHead error // the body broke off (or the deadline cut it) before the head

	// first holds the head's attempt record when it is the call's first
	// attempt (the sink may keep the records it was given).
	first [1]AttemptRecord

	headSent bool
	end      BodyEnd
	bytes    int64
	errMsg   string
	trailers http.Header
}

// attemptParent: a stream's attempts are children of the caller's
// context always (with the call's values): its timeouts bound it up to
// its head, not its body (final).
func (st *streamState) attemptParent(s *callState) context.Context { return s.vctx }

// started records the context of the attempt in progress (see
// callState.attemptContext: a child of the caller's context, with the
// call's timeouts up to the head, and the drain deadline).
func (st *streamState) started(ctx context.Context, cancel context.CancelCauseFunc) {
	st.ctx, st.cancel, st.preHead = ctx, cancel, nil
}

// reservesBodies: a stream holds one chunk at a time, not a body.
func (st *streamState) reservesBodies() bool { return false }

// failed keeps msg as the reason the stream has no body.
func (st *streamState) failed(msg string) { st.errMsg = msg }

// final lifts the attempt's deadline and returns the final response
// without its body. When the body already broke off (while peeking at it
// for hints) or the deadline cut the attempt before its head, the attempt
// becomes a transport failure (TransportBodyIncomplete) and is decided
// again, as Execute's readFinal does: no byte has left the broker, so it
// is retried where the rules allow.
func (st *streamState) final(s *callState, at *attempt) *FinalResponse {
	at.drain.headed()
	resp := at.resp
	f := &FinalResponse{Status: resp.StatusCode, Header: resp.Header}
	err := at.peekErr
	if err == nil && st.ctx.Err() != nil {
		err = context.Cause(st.ctx)
	}
	if err != nil {
		st.preHead = err
		f.Incomplete = true
		s.transportFailure(at, TransportBodyIncomplete, bodyError{err})
		at.rec.Status = resp.StatusCode // the status did arrive
		at.a = s.r.classifier.assess(s.p, &at.in, s.r.clock.Now(), &at.reading)
	}
	return f
}

// deliver streams the final response: the head, the bytes already peeked,
// then the rest as the upstream sends it, within the stream limits. It
// closes the body, records how it ended on the attempt's span (which ends
// after it) and in the attempt record, and makes the outcome say so.
func (st *streamState) deliver(s *callState, at *attempt, f *FinalResponse) {
	resp := at.resp
	defer resp.Body.Close()
	defer func() { st.finish(s, at, f) }()

	if !st.sendHead(s, at) {
		return
	}
	s.r.observer.StreamOpen(1)
	defer s.r.observer.StreamOpen(-1)
	if lim := st.limits.MaxDuration; lim > 0 {
		t := time.AfterFunc(lim, func() { st.cancel(errStreamDuration) })
		defer t.Stop()
	}
	if len(at.peek) > 0 && !st.send(s, at.peek) {
		return
	}
	if st.preHead != nil {
		st.fail(s, st.preHead)
		return
	}
	idle := time.AfterFunc(st.limits.IdleTimeout, func() { st.cancel(errStreamIdle) })
	defer idle.Stop()
	bp := chunkBuffers.Get().(*[StreamChunkSize]byte)
	defer chunkBuffers.Put(bp)
	buf := bp[:]
	for {
		n, err := resp.Body.Read(buf)
		idle.Stop() // the idle timeout counts waits on the upstream, not on the caller
		if n > 0 && !st.send(s, buf[:n]) {
			return
		}
		if err == io.EOF {
			st.end = BodyEndComplete
			st.trailers = resp.Trailer
			return
		}
		if err != nil {
			st.fail(s, err)
			return
		}
		idle.Reset(st.limits.IdleTimeout)
	}
}

// sendHead gives the head to the sink: the status, the headers and the
// attempts so far, this one last. It reports whether the body goes on. It
// is not inlined: the head's encoding is the deepest point of a stream,
// and deliver's frame, which holds the stream's timers, is above it (see
// callState.run on the stack budget).
//
//go:noinline
func (st *streamState) sendHead(s *callState, at *attempt) bool {
	n := len(s.res.Attempts)
	attempts := st.first[:]
	if n > 0 {
		attempts = make([]AttemptRecord, n+1)
		copy(attempts, s.res.Attempts)
	}
	attempts[n] = at.rec
	if err := st.sink.Head(StreamHead{Status: at.resp.StatusCode, Header: at.resp.Header, Attempts: attempts}); err != nil {
		st.end = BodyEndCanceled
		st.errMsg = "the caller stopped receiving before the head"
		return false
	}
	st.headSent = true
	return true
}

// send gives p to the sink within the byte cap and reports whether the
// body goes on.
func (st *streamState) send(s *callState, p []byte) bool {
	if lim := st.limits.MaxBytes; lim > 0 && st.bytes+int64(len(p)) > lim {
		p = p[:lim-st.bytes]
		if len(p) > 0 && st.sink.Chunk(p) == nil {
			st.bytes += int64(len(p))
			s.r.observer.StreamBytes(len(p))
		}
		st.end = BodyEndSizeLimit
		st.errMsg = "the body is larger than the stream's byte limit"
		st.cancel(errors.New(st.errMsg))
		return false
	}
	if err := st.sink.Chunk(p); err != nil {
		st.end = BodyEndCanceled
		st.errMsg = "the caller stopped receiving"
		st.cancel(context.Canceled)
		return false
	}
	st.bytes += int64(len(p))
	s.r.observer.StreamBytes(len(p))
	return true
}

// fail ends the body on a read error: by the broker's own cause when one
// canceled the request (idle timeout, max duration, drain), the caller's
// cancellation, or else an upstream failure.
func (st *streamState) fail(s *callState, err error) {
	cause := context.Cause(st.ctx)
	switch {
	case errors.Is(cause, errStreamIdle):
		st.end = BodyEndIdleTimeout
	case errors.Is(cause, errStreamDuration):
		st.end = BodyEndTimeout
	case errors.Is(cause, errStreamShutdown) || s.r.drain.hard.Err() != nil:
		st.end, cause = BodyEndShuttingDown, errStreamShutdown
	case s.caller.Err() != nil:
		st.end, cause = BodyEndCanceled, context.Cause(s.caller)
	default:
		st.end, cause = BodyEndUpstreamError, nil
	}
	if cause != nil {
		err = cause
	}
	st.errMsg = errorText(bodyError{err}, s.c.URL)
}

// finish records how the body ended: on the attempt record (a body the
// upstream broke off or left idle makes it TransportBodyIncomplete), on
// the final response, in the outcome, and on the attempt's span.
func (st *streamState) finish(s *callState, at *attempt, f *FinalResponse) {
	if st.end != BodyEndComplete {
		st.cancel(errors.New("stream ended: " + st.end.String())) // the connection is closed, not reused
		f.Incomplete = true
	}
	switch st.end {
	case BodyEndComplete:
	case BodyEndCanceled:
		s.res.Outcome = OutcomeCanceled
	case BodyEndShuttingDown:
		s.res.Outcome = OutcomeShuttingDown
	default:
		if s.res.Outcome == OutcomeSuccess {
			s.res.Outcome = OutcomeNotRetryable // never report a cut-short body as a success
		}
	}
	if (st.end == BodyEndUpstreamError || st.end == BodyEndIdleTimeout) && at.rec.Transport == TransportNone {
		at.rec.Transport, at.rec.Error = TransportBodyIncomplete, st.errMsg
	}
	if at.span.IsRecording() { // with tracing off, the attributes cost nothing (see startAttemptSpan)
		recordBodyEnd(at.span, st)
	}
}

// recordBodyEnd puts how the body ended on a span that records. It is not
// inlined: its attributes would take room in deliver's frame (see
// callState.run on the stack).
//
//go:noinline
func recordBodyEnd(span trace.Span, st *streamState) {
	span.SetAttributes(attrBodySize.Int64(st.bytes), AttrStreamBodyEnd.String(st.end.String()))
	if st.end != BodyEndComplete {
		span.SetAttributes(attrErrorType.String("stream_" + st.end.String()))
		span.SetStatus(codes.Error, st.errMsg)
	}
}

// Span attributes of a streamed attempt.
const (
	attrBodySize = attribute.Key("http.response.body.size")
	// AttrStreamBodyEnd says how a streamed body ended ("complete",
	// "upstream_error", "idle_timeout", ...).
	AttrStreamBodyEnd = attribute.Key("retrybroker.stream.body_end")
)
