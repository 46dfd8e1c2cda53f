package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
)

func errorf(format string, args ...any) error { return fmt.Errorf("broker: "+format, args...) }

// droppedRequestHeaders are hop-by-hop headers, and headers the broker sets
// itself, that an HTTP proxy would not forward. Execute leaves them out
// rather than have the broker refuse the request.
var droppedRequestHeaders = map[string]bool{
	"Host": true, "Content-Length": true, "Transfer-Encoding": true, "Connection": true,
	"Keep-Alive": true, "Proxy-Connection": true, "Te": true, "Trailer": true, "Upgrade": true,
	"Proxy-Authorization": true,
}

// Execute asks the broker to send req, retrying it by the tenant's policy
// and the provider's rate-limit hints, and returns the final response with
// the record of every attempt.
//
// The request: method, URL, headers and body are sent as they are, except
// hop-by-hop headers (Connection, Transfer-Encoding, Te, Upgrade, ...),
// Host, Content-Length and Proxy-Authorization, which the broker sets or
// which only concern a proxy; req.Host is ignored. Header lines keep their
// per-name order and duplicates (names are sent sorted, since http.Header
// does not remember their order). Execute reads the whole body into memory
// (at most WithMaxRequestBody bytes, default 8 MiB; more fails with
// ErrRequestBodyTooLarge before anything is sent) and closes it. ctx (not
// req.Context()) bounds the call, and its deadline becomes the gRPC
// deadline: the broker stops waiting for a retry that would end after it
// and returns at once (OutcomeDeadlineTooShort).
//
// The results, by case:
//   - a final HTTP response, whatever its status (a 503 after every retry
//     is a response, not an error): a non-nil *http.Response, the *Result,
//     nil. The body is in memory; closing it is optional but harmless.
//   - the final attempt failed without a response: nil, the *Result, and a
//     *TransportError carrying the kind and the Result.
//   - no response for another reason (a closed cooldown gate, pacing):
//     nil, the *Result, and a *NoResponseError.
//   - the RPC failed (bad request, authentication, refused destination,
//     broker unreachable, deadline): nil, nil, and an *Error.
//
// Execute never retries the RPC itself; see the package doc.
func (c *Client) Execute(ctx context.Context, req *http.Request, opts ...CallOption) (*http.Response, *Result, error) {
	cfg, pr, err := c.executeRequest("Execute", req, opts)
	if err != nil {
		return nil, nil, err
	}
	out, err := c.rpc.Execute(ctx, pr, c.callOpts...)
	if err != nil {
		return nil, nil, fromRPC(err)
	}
	res := resultFromProto(out)
	if cfg.onResult != nil {
		cfg.onResult(res)
	}
	if final := out.GetResponse(); final != nil {
		return buildResponse(req, final), res, nil
	}
	return nil, res, noResponse(res)
}

// executeRequest applies opts and builds the request of an Execute or
// ExecuteStream call from req, reading (and closing) its body.
func (c *Client) executeRequest(rpc string, req *http.Request, opts []CallOption) (*callConfig, *rbv1.ExecuteRequest, error) {
	var cfg callConfig
	for _, o := range opts {
		o.applyCall(&cfg)
	}
	if req == nil {
		return nil, nil, errorf("%s: nil request", rpc)
	}
	body, err := c.readBody(req)
	if err != nil {
		return nil, nil, err
	}
	if err := errors.Join(cfg.errs...); err != nil {
		return nil, nil, err
	}
	if req.URL == nil {
		return nil, nil, errorf("%s: request has no URL", rpc)
	}
	pr := &rbv1.ExecuteRequest{
		Request: &rbv1.HttpRequest{
			Method:  req.Method,
			Url:     req.URL.String(),
			Headers: headerLines(req.Header, droppedRequestHeaders),
			Body:    body,
		},
		Policy:   c.policyName(cfg.policy, cfg.hasPolicy),
		Provider: cfg.provider,
	}
	if o := cfg.overrides(); o != nil {
		pr.Overrides = o
	}
	return &cfg, pr, nil
}

// noResponse is the error of a call that ended without a final response:
// a *TransportError when its last attempt failed in transport, else a
// *NoResponseError.
func noResponse(res *Result) error {
	if n := len(res.Attempts); n > 0 && res.Attempts[n-1].TransportError != KindNone {
		last := res.Attempts[n-1]
		return &TransportError{Kind: last.TransportError, Message: last.ErrorMessage, Result: res}
	}
	return &NoResponseError{Outcome: res.Outcome, RetryAfter: res.RetryAfter, HasRetryAfter: res.HasRetryAfter, Result: res}
}

func (cfg *callConfig) overrides() *rbv1.ExecuteOverrides {
	o := &rbv1.ExecuteOverrides{MaxRetries: cfg.maxRetries, MaxResponseBody: cfg.maxResponseBody}
	set := cfg.maxRetries != nil || cfg.maxResponseBody != nil
	dur := func(d time.Duration) *durationpb.Duration {
		if d == 0 {
			return nil
		}
		set = true
		return durationpb.New(d)
	}
	o.MaxDelay = dur(cfg.maxDelay)
	o.TotalTimeout = dur(cfg.totalTimeout)
	o.AttemptTimeout = dur(cfg.attemptTimeout)
	if !set {
		return nil
	}
	return o
}

// readBody reads and closes req.Body, bounded by the client's limit.
func (c *Client) readBody(req *http.Request) ([]byte, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	defer req.Body.Close()
	if req.ContentLength > c.maxBody {
		return nil, fmt.Errorf("%w: Content-Length %d exceeds the client's limit of %d bytes; nothing was sent", ErrRequestBodyTooLarge, req.ContentLength, c.maxBody)
	}
	b, err := io.ReadAll(io.LimitReader(req.Body, c.maxBody+1))
	if err != nil {
		return nil, errorf("read request body: %w", err)
	}
	if int64(len(b)) > c.maxBody {
		return nil, fmt.Errorf("%w: more than the client's limit of %d bytes; nothing was sent", ErrRequestBodyTooLarge, c.maxBody)
	}
	return b, nil
}

// headerLines lists h's lines: names sorted, each name's values in order,
// duplicates kept; names in drop are left out.
func headerLines(h http.Header, drop map[string]bool) []*rbv1.HttpHeader {
	names := make([]string, 0, len(h))
	n := 0
	for k, vs := range h {
		if drop[http.CanonicalHeaderKey(k)] {
			continue
		}
		names = append(names, k)
		n += len(vs)
	}
	slices.Sort(names)
	out := make([]*rbv1.HttpHeader, 0, n)
	for _, k := range names {
		for _, v := range h[k] {
			out = append(out, &rbv1.HttpHeader{Name: k, Value: v})
		}
	}
	return out
}

// buildResponse turns the broker's final response into an *http.Response.
func buildResponse(req *http.Request, r *rbv1.HttpResponse) *http.Response {
	code := int(r.GetStatusCode())
	status := strconv.Itoa(code)
	if text := http.StatusText(code); text != "" {
		status += " " + text
	}
	h := make(http.Header, len(r.GetHeaders()))
	for _, x := range r.GetHeaders() {
		h.Add(x.GetName(), x.GetValue())
	}
	return &http.Response{
		Status:        status,
		StatusCode:    code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(bytes.NewReader(r.GetBody())),
		ContentLength: int64(len(r.GetBody())),
		Request:       req,
	}
}

// RoundTripper returns an http.RoundTripper that sends every request
// through the broker with ExecuteStream, so that
//
//	httpClient := &http.Client{Transport: client.RoundTripper()}
//
// gets the broker's retries with a one-line change, and response bodies
// stream: resp.Body reads the body as the upstream sends it (server-sent
// events arrive as they are sent; a download larger than memory flows
// through). It returns the final response whatever its status (the
// retries happened in the broker), and an error for a final transport
// failure (*TransportError), a response withheld by a closed gate
// (*NoResponseError) or a failed RPC (*Error); http.Client wraps them in a
// *url.Error, which errors.As sees through. A body that does not complete
// fails its read with a *BodyError (errors.Is(err, io.ErrUnexpectedEOF)).
// Each request's context bounds its call; closing the body early cancels
// it, and the upstream request with it. Use OnResult to see the attempts:
// it is called when the body's end arrives. Do not stack it under another
// retrying client: the retries would multiply.
func (c *Client) RoundTripper(opts ...CallOption) http.RoundTripper {
	return &roundTripper{c: c, opts: slices.Clone(opts)}
}

type roundTripper struct {
	c    *Client
	opts []CallOption
}

func (rt *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	return rt.c.ExecuteStream(req.Context(), req, rt.opts...)
}
