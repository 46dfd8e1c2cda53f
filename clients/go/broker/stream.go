package broker

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
)

// BodyEnd says how a streamed body ended. Its value is the proto enum
// name, for example "BODY_END_IDLE_TIMEOUT".
type BodyEnd string

// Body ends (see proto/retrybroker/v1/broker.proto and docs/contract.md).
const (
	BodyEndUnspecified   BodyEnd = "BODY_END_UNSPECIFIED"
	BodyEndComplete      BodyEnd = "BODY_END_COMPLETE"
	BodyEndNoResponse    BodyEnd = "BODY_END_NO_RESPONSE"
	BodyEndUpstreamError BodyEnd = "BODY_END_UPSTREAM_ERROR"
	BodyEndIdleTimeout   BodyEnd = "BODY_END_IDLE_TIMEOUT"
	BodyEndSizeLimit     BodyEnd = "BODY_END_SIZE_LIMIT"
	BodyEndTimeout       BodyEnd = "BODY_END_TIMEOUT"
	BodyEndCanceled      BodyEnd = "BODY_END_CANCELED"
	BodyEndShuttingDown  BodyEnd = "BODY_END_SHUTTING_DOWN"
)

// BodyError is the read error of a streamed body that did not complete:
// the upstream broke it off, it went idle, it reached the policy's byte or
// time limit, the broker shut down, or the stream itself failed. The bytes
// read before it are all that arrived. errors.Is(err, io.ErrUnexpectedEOF)
// holds, as for a truncated body read by net/http; when the stream itself
// failed, errors.As also finds the *Error.
type BodyError struct {
	// End says how the body ended; BodyEndUnspecified when the stream
	// failed before the broker could say (Err is then the *Error).
	End BodyEnd
	// Message is the broker's description (URL redacted).
	Message string
	// Result is the call's record, as far as it is known (complete when
	// the broker sent its end).
	Result *Result
	// Err is the RPC's failure, when the stream broke before its end.
	Err error
}

func (e *BodyError) Error() string {
	msg := "broker: response body incomplete"
	if e.End != BodyEndUnspecified {
		msg += " (" + string(e.End) + ")"
	}
	if e.Message != "" {
		msg += ": " + e.Message
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns io.ErrUnexpectedEOF and, when set, Err.
func (e *BodyError) Unwrap() []error {
	if e.Err != nil {
		return []error{io.ErrUnexpectedEOF, e.Err}
	}
	return []error{io.ErrUnexpectedEOF}
}

// ExecuteStream asks the broker to send req exactly as Execute does
// (retrying by the tenant's policy until a response is final) and streams
// that response: it returns once the status and headers arrived, and
// resp.Body reads the body as the upstream sends it, a chunk at a time, with
// nothing buffered beyond gRPC's flow-control window. The request is sent
// as Execute sends it (see Execute). ctx bounds the whole call, body
// included; the broker's policy bounds the body by its stream limits
// (idle timeout, optional max duration and byte cap), not by its
// total_timeout.
//
// The body: Read returns io.EOF once the whole body arrived, and then
// resp.Trailer holds the upstream's trailers. A body that did not complete
// fails its Read with a *BodyError after the bytes that arrived. Close
// before the end cancels the call, and the broker cancels the upstream
// request. OnResult is called when the end arrives (read the body to its
// end to get it), with the complete record.
//
// The errors before a response are Execute's: a *TransportError or a
// *NoResponseError (with the Result) when the call ended without a final
// response, an *Error when the RPC failed (including RESOURCE_EXHAUSTED
// when the tenant has as many streams open as its policy allows).
func (c *Client) ExecuteStream(ctx context.Context, req *http.Request, opts ...CallOption) (*http.Response, error) {
	cfg, pr, err := c.executeRequest("ExecuteStream", req, opts)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	st, err := c.rpc.ExecuteStream(sctx, pr, c.callOpts...)
	if err != nil {
		cancel()
		return nil, fromRPC(err)
	}
	first, err := st.Recv()
	if err != nil {
		cancel()
		if errors.Is(err, io.EOF) {
			return nil, errorf("ExecuteStream: the broker closed the stream without a response")
		}
		return nil, fromRPC(err)
	}
	switch ev := first.GetEvent().(type) {
	case *rbv1.ExecuteStreamResponse_Head:
		return streamResponse(req, ev.Head, st, cancel, cfg.onResult), nil
	case *rbv1.ExecuteStreamResponse_End:
		cancel()
		res := streamResultFromProto(ev.End, nil)
		if cfg.onResult != nil {
			cfg.onResult(res)
		}
		return nil, noResponse(res)
	}
	cancel()
	return nil, errorf("ExecuteStream: the broker sent a %T before the head", first.GetEvent())
}

// streamResponse builds the *http.Response of a stream whose head arrived.
func streamResponse(req *http.Request, h *rbv1.StreamHead, st grpc.ServerStreamingClient[rbv1.ExecuteStreamResponse], cancel context.CancelFunc, onResult func(*Result)) *http.Response {
	code := int(h.GetStatusCode())
	status := strconv.Itoa(code)
	if text := http.StatusText(code); text != "" {
		status += " " + text
	}
	header := make(http.Header, len(h.GetHeaders()))
	for _, x := range h.GetHeaders() {
		header.Add(x.GetName(), x.GetValue())
	}
	length := int64(-1)
	if cl := header.Get("Content-Length"); cl != "" {
		if n, err := strconv.ParseInt(cl, 10, 64); err == nil && n >= 0 {
			length = n
		}
	}
	resp := &http.Response{
		Status: status, StatusCode: code, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: header, ContentLength: length, Trailer: http.Header{}, Request: req,
	}
	resp.Body = &streamBody{st: st, cancel: cancel, onResult: onResult, head: h, trailer: resp.Trailer}
	return resp
}

// errBodyClosed is returned by Read after Close, as net/http does.
var errBodyClosed = errors.New("broker: read on closed response body")

// streamBody reads a streamed body from the stream's chunks. Close may be
// called concurrently with Read.
type streamBody struct {
	st       grpc.ServerStreamingClient[rbv1.ExecuteStreamResponse]
	cancel   context.CancelFunc
	onResult func(*Result)
	head     *rbv1.StreamHead
	trailer  http.Header

	mu     sync.Mutex // serialises Read
	buf    []byte     // the unread part of the current chunk
	err    error      // io.EOF or the *BodyError, once the end is known
	closed atomic.Bool
}

func (b *streamBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for len(b.buf) == 0 {
		if b.err != nil {
			return 0, b.err
		}
		if b.closed.Load() {
			return 0, errBodyClosed
		}
		if len(p) == 0 {
			return 0, nil
		}
		m, err := b.st.Recv()
		if err != nil {
			if b.closed.Load() {
				return 0, errBodyClosed
			}
			b.finish(nil, err)
			continue
		}
		switch ev := m.GetEvent().(type) {
		case *rbv1.ExecuteStreamResponse_Chunk:
			b.buf = ev.Chunk
		case *rbv1.ExecuteStreamResponse_End:
			b.finish(ev.End, nil)
		default:
			b.finish(nil, errorf("ExecuteStream: unexpected %T after the head", m.GetEvent()))
		}
	}
	n := copy(p, b.buf)
	b.buf = b.buf[n:]
	return n, nil
}

// finish records the end of the body: the broker's end message, or the
// failure of the stream before it.
func (b *streamBody) finish(end *rbv1.StreamEnd, rpcErr error) {
	b.cancel() // the call is over: free its resources
	if end == nil {
		if errors.Is(rpcErr, io.EOF) {
			rpcErr = errorf("ExecuteStream: the stream closed before its end")
		} else {
			rpcErr = fromRPC(rpcErr)
		}
		b.err = &BodyError{End: BodyEndUnspecified, Err: rpcErr}
		return
	}
	res := streamResultFromProto(end, b.head)
	if end.GetBodyComplete() {
		for _, t := range end.GetTrailers() {
			b.trailer.Add(t.GetName(), t.GetValue())
		}
		b.err = io.EOF
	} else {
		b.err = &BodyError{End: res.BodyEnd, Message: end.GetErrorMessage(), Result: res}
	}
	if b.onResult != nil {
		b.onResult(res)
	}
}

// Close ends the body. Before the end arrived it cancels the call, and
// the broker cancels the upstream request and closes its connection.
func (b *streamBody) Close() error {
	b.closed.Store(true)
	b.cancel()
	return nil
}

// streamResultFromProto builds the Result of a stream from its end (and
// its head, when one was sent).
func streamResultFromProto(end *rbv1.StreamEnd, head *rbv1.StreamHead) *Result {
	res := resultFromProto(&rbv1.ExecuteResponse{
		Attempts: end.GetAttempts(), Outcome: end.GetOutcome(), RetryAfter: end.GetRetryAfter(), Provider: end.GetProvider(),
	})
	res.BodyEnd = BodyEnd(end.GetBodyEnd().String())
	res.BodyBytes = int64(min(end.GetBodyBytes(), uint64(1<<63-1)))
	res.BodyIncomplete = !end.GetBodyComplete()
	if head != nil {
		res.ResponseHeaders = make([]HeaderField, 0, len(head.GetHeaders()))
		for _, h := range head.GetHeaders() {
			res.ResponseHeaders = append(res.ResponseHeaders, HeaderField{Name: h.GetName(), Value: h.GetValue()})
		}
	}
	return res
}
