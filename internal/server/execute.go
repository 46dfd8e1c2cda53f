package server

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"sync"
	"time"
	"unicode/utf8"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
	"github.com/retrybroker/retrybroker/internal/credential"
	"github.com/retrybroker/retrybroker/internal/egress"
	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/tenant"
)

// forbiddenRequestHeaders are set by the broker or are hop-by-hop; a
// request that carries them is refused.
var forbiddenRequestHeaders = map[string]bool{
	"Host": true, "Content-Length": true, "Transfer-Encoding": true, "Connection": true,
	"Keep-Alive": true, "Proxy-Connection": true, "Te": true, "Trailer": true, "Upgrade": true,
	"Proxy-Authorization": true,
}

// ClientSource gives the guarded HTTP client of a policy's destination
// rules. *egress.Clients is the broker's; tests and brokertest provide
// their own.
type ClientSource interface {
	For(r *egress.Rules) (*http.Client, error)
}

// Executor holds what Execute needs: the attempt runner and the source of
// guarded clients.
type Executor struct {
	// Runner runs the attempt loop. Its store holds gates, budgets and pacing.
	Runner *engine.Runner
	// Clients gives each policy's guarded client.
	Clients ClientSource
	// Logger, when set, receives the internal address behind a refused
	// destination (the caller is told only the range class).
	Logger interface {
		WarnContext(ctx context.Context, msg string, args ...any)
	}
}

// WithExecutor enables Execute and ExecuteStream.
func WithExecutor(e *Executor) Option { return func(s *Service) { s.exec = e } }

// Execute performs the HTTP call with retries and returns every attempt.
func (s *Service) Execute(ctx context.Context, req *rbv1.ExecuteRequest) (*rbv1.ExecuteResponse, error) {
	b, err := s.execute(ctx, req)
	if err != nil {
		return nil, err
	}
	return &b.r, nil
}

// execute is Execute, answering in a block from resultBlocks: the gRPC
// handler (executeHandler) encodes the response and gives the block back;
// a block that Execute returns to a direct caller is left to the
// collector.
func (s *Service) execute(ctx context.Context, req *rbv1.ExecuteRequest) (*resultBlock, error) {
	call, provider, err := s.prepare(ctx, req)
	if err != nil {
		return nil, err
	}
	res, err := s.exec.Runner.Run(ctx, call)
	if err != nil {
		return nil, s.executeError(ctx, err)
	}
	return resultInto(resultBlocks.get(), res, provider), nil
}

// prepare validates an Execute request and builds its engine call. It is
// not inlined: its locals would join Execute's frame, which stays on the
// stack for the whole call (engine.callState.run, TestExecuteStackDepth).
//
//go:noinline
func (s *Service) prepare(ctx context.Context, req *rbv1.ExecuteRequest) (*engine.Call, string, error) {
	if s.exec == nil {
		return nil, "", status.Error(codes.Unimplemented, "Execute is not enabled on this broker")
	}
	t, err := s.tenantFrom(ctx)
	if err != nil {
		return nil, "", err
	}
	// The request's own faults and an unknown provider are answered
	// together, in one INVALID_ARGUMENT: the provider can only be checked
	// against the resolved policy's catalog.
	var v violations
	u := validateExecute(&v, req)
	tp, err := s.resolve(t, req.GetPolicy())
	if err == nil {
		checkProvider(&v, tp, req.GetProvider())
		checkCredentialHeaders(&v, tp.Credential, req.GetRequest().GetHeaders())
	}
	if verr := v.err(); verr != nil {
		return nil, "", verr
	}
	if err != nil {
		return nil, "", err
	}
	pol, err := applyOverrides(tp, req)
	if err != nil {
		return nil, "", err
	}
	client, err := s.exec.Clients.For(tp.Egress())
	if err != nil {
		return nil, "", status.Error(codes.FailedPrecondition, "the policy's destination rules are invalid")
	}
	provider := chooseProvider(tp, req.GetProvider(), u)
	method := req.GetRequest().GetMethod()
	if method == "" {
		method = http.MethodGet
	}
	call := &engine.Call{
		Policy: pol, Provider: provider, Reader: pol.ReaderFor(provider),
		Method: method, URL: u, Header: toHTTPHeader(req.GetRequest().GetHeaders()), Body: req.GetRequest().GetBody(),
		Redact: egress.RedactURL, Client: client, Classify: egress.Classify, Tenant: t.ID,
	}
	if o := req.GetOverrides(); o != nil && o.MaxResponseBody != nil {
		call.MaxResponseBody = int64(*o.MaxResponseBody) // validated: at most the policy's
	}
	return call, provider, nil
}

// validateExecute adds the request's faults to v and returns its URL (nil
// when it has none or it is invalid).
func validateExecute(v *violations, req *rbv1.ExecuteRequest) *url.URL {
	r := req.GetRequest()
	var u *url.URL
	if r == nil {
		v.add("request", "required")
		return nil
	}
	checkMethod(v, "request.method", r.GetMethod())
	if r.GetUrl() == "" {
		v.add("request.url", "required")
	} else if parsed, err := parseHTTPURL(r.GetUrl()); err != nil {
		v.add("request.url", "%s", err.Error())
	} else {
		u = parsed
	}
	checkHeaders(v, "request.headers", r.GetHeaders())
	for i, h := range r.GetHeaders() {
		if forbiddenRequestHeaders[http.CanonicalHeaderKey(h.GetName())] {
			v.add(fieldIndex("request.headers", i, "name"), "%s is set by the broker and may not be sent", http.CanonicalHeaderKey(h.GetName()))
		}
	}
	o := req.GetOverrides()
	for _, d := range []struct {
		field string
		val   *durationpb.Duration
	}{{"overrides.max_delay", o.GetMaxDelay()}, {"overrides.total_timeout", o.GetTotalTimeout()}, {"overrides.attempt_timeout", o.GetAttemptTimeout()}} {
		if d.val != nil && (d.val.CheckValid() != nil || d.val.AsDuration() <= 0) {
			v.add(d.field, "must be a positive duration")
		}
	}
	if o != nil && o.MaxResponseBody != nil && *o.MaxResponseBody == 0 {
		v.add("overrides.max_response_body", "must be at least 1 byte")
	}
	return u
}

// applyOverrides copies the policy and narrows it by the request's
// overrides, refusing any that would loosen it, and checks the body size.
func applyOverrides(tp *tenant.Policy, req *rbv1.ExecuteRequest) (*engine.Policy, error) {
	var v violations
	if n := int64(len(req.GetRequest().GetBody())); n > tp.MaxRequestBody {
		v.add("request.body", "too large: %d bytes (policy max_request_body is %d); nothing was sent", n, tp.MaxRequestBody)
	}
	o := req.GetOverrides()
	if o == nil {
		return &tp.Policy, v.err() // shared, read-only: the runner never writes its policy
	}
	p := tp.Policy // a copy: overrides never touch the shared policy
	if o.MaxRetries != nil {
		if uint64(*o.MaxRetries) > uint64(p.MaxRetries) {
			v.add("overrides.max_retries", "%d exceeds the policy's max_retries %d", *o.MaxRetries, p.MaxRetries)
		} else {
			p.MaxRetries = int(*o.MaxRetries)
		}
	}
	narrow := func(field string, d *durationpb.Duration, dst *time.Duration) {
		if d == nil || d.CheckValid() != nil || d.AsDuration() <= 0 {
			return
		}
		if d.AsDuration() > *dst {
			v.add(field, "%s exceeds the policy's %s", d.AsDuration(), *dst)
			return
		}
		*dst = d.AsDuration()
	}
	narrow("overrides.max_delay", o.GetMaxDelay(), &p.MaxDelay)
	narrow("overrides.total_timeout", o.GetTotalTimeout(), &p.TotalTimeout)
	narrow("overrides.attempt_timeout", o.GetAttemptTimeout(), &p.AttemptTimeout)
	// Compared as unsigned: a value of 2^63 or more must not wrap around.
	if o.MaxResponseBody != nil && *o.MaxResponseBody > uint64(p.MaxResponseBody) {
		v.add("overrides.max_response_body", "%d exceeds the policy's max_response_body %d", *o.MaxResponseBody, p.MaxResponseBody)
	}
	return &p, v.err()
}

// BudgetRetryDelay is the retry delay suggested to a call that found no
// room in the broker's body budget within its deadline: room frees as the
// calls in flight end, which the broker cannot foretell.
const BudgetRetryDelay = time.Second

// executeError maps runner errors to precise statuses.
func (s *Service) executeError(ctx context.Context, err error) error {
	var de *engine.DestinationError
	var pe *engine.PacingError
	var se *engine.StoreError
	var be *engine.BudgetError
	var ce *credential.ComponentError
	switch {
	case errors.As(err, &de):
		var re *egress.RefusedError
		if errors.As(err, &re) {
			if s.exec.Logger != nil {
				s.exec.Logger.WarnContext(ctx, "destination refused", "refusal", re.Error())
			}
			return status.Error(codes.PermissionDenied, re.CallerMessage())
		}
		return status.Error(codes.PermissionDenied, "destination refused")
	case errors.As(err, &pe):
		st := status.New(codes.ResourceExhausted, pe.Error())
		if d, derr := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(pe.Wait)}); derr == nil {
			st = d
		}
		return st.Err()
	case errors.As(err, &be):
		st := status.New(codes.ResourceExhausted, be.Error())
		if be.Waited {
			if d, derr := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(BudgetRetryDelay)}); derr == nil {
				st = d
			}
		}
		return st.Err()
	case errors.As(err, &se):
		return status.Error(codes.Unavailable, "shared state (cooldown gates, budgets, pacing) is unavailable; try again later")
	case errors.As(err, &ce):
		// The request lacks a component the policy's signature covers:
		// the caller's error. The text names the credential and the
		// component, never a value.
		return status.Error(codes.InvalidArgument, "invalid request: "+ce.Error())
	}
	if s := contextStatus(err); s != nil {
		return s
	}
	return status.Error(codes.Internal, "internal error")
}

// attemptBlock holds one Attempt message and everything it points to, so
// that one allocation makes them all.
type attemptBlock struct {
	a              rbv1.Attempt
	start          timestamppb.Timestamp
	duration, wait durationpb.Duration
	decision       decisionBlock
}

func attemptsToProto(attempts []engine.AttemptRecord, provider string) []*rbv1.Attempt {
	return attemptsInto(attempts, provider, nil, nil)
}

// attemptsInto converts attempts into blocks and out when they have room
// (allocating one slice of blocks and one of pointers when not).
func attemptsInto(attempts []engine.AttemptRecord, provider string, blocks []attemptBlock, out []*rbv1.Attempt) []*rbv1.Attempt {
	if len(blocks) < len(attempts) {
		blocks = make([]attemptBlock, len(attempts))
	}
	if cap(out) < len(attempts) {
		out = make([]*rbv1.Attempt, len(attempts))
	}
	out = out[:len(attempts)]
	for i, a := range attempts {
		b := &blocks[i]
		b.start.Seconds, b.start.Nanos = a.Start.Unix(), int32(a.Start.Nanosecond())
		setDuration(&b.duration, a.Duration)
		setDuration(&b.wait, a.Waited)
		m := &b.a
		m.Number, m.StartTime, m.Duration = uint32(a.Number), &b.start, &b.duration
		m.StatusCode, m.TransportError, m.ErrorMessage = int32(a.Status), rbv1.TransportError(transports.proto(a.Transport)), cutText(a.Error, MaxErrorMessage)
		m.Decision, m.Waited, m.Probe = b.decision.fill(a.Decision, provider), &b.wait, a.Probe
		out[i] = m
	}
	return out
}

// resultBlock holds an ExecuteResponse and what it points to in the common
// case (one attempt, a few response headers), so that one allocation makes
// them all; more attempts or headers take slices of their own.
type resultBlock struct {
	r    rbv1.ExecuteResponse
	resp rbv1.HttpResponse
	answerBlock
}

// answerBlock is what an answer's messages point to in the common case:
// its retry_after, one attempt and up to six header lines.
type answerBlock struct {
	retryAfter durationpb.Duration
	attempt    [1]attemptBlock
	attemptPtr [1]*rbv1.Attempt
	header     [6]rbv1.HttpHeader
	headerPtr  [6]*rbv1.HttpHeader
}

// resultBlocks holds zeroed resultBlocks. An Execute answer is some
// 1.3 KiB of small messages; taking them from a pool rather than the heap
// makes each call's garbage smaller by as much, and the collections it
// causes fewer (issue 22).
var resultBlocks zeroPool[resultBlock]

// zeroPool is a pool of *T whose values are zero when taken: put zeroes a
// value, so that it holds nothing of its last use, before it keeps it.
// Nothing may use a value or what it holds after giving it back.
type zeroPool[T any] struct{ p sync.Pool }

func (z *zeroPool[T]) get() *T {
	if x, ok := z.p.Get().(*T); ok {
		return x
	}
	return new(T)
}

func (z *zeroPool[T]) put(x *T) {
	var zero T
	*x = zero
	z.p.Put(x)
}

// resultToProto converts res into a new ExecuteResponse.
func resultToProto(res *engine.Result, provider string) *rbv1.ExecuteResponse {
	return &resultInto(new(resultBlock), res, provider).r
}

// resultInto converts res into the zeroed block b and returns b.
func resultInto(b *resultBlock, res *engine.Result, provider string) *resultBlock {
	out := &b.r
	out.Outcome, out.Provider = rbv1.Outcome(outcomes.proto(res.Outcome)), provider
	if r := res.Response; r != nil {
		b.resp.StatusCode, b.resp.Headers = int32(r.Status), headersInto(r.Header, b.header[:], b.headerPtr[:0])
		b.resp.Body, b.resp.BodyTruncated, b.resp.BodyIncomplete = r.Body, r.Truncated, r.Incomplete
		out.Response = &b.resp
	}
	if res.HasRetryAfter {
		setDuration(&b.retryAfter, res.RetryAfter)
		out.RetryAfter = &b.retryAfter
	}
	out.Attempts = attemptsInto(res.Attempts, provider, b.attempt[:], b.attemptPtr[:0])
	return b
}

// cutText returns s cut to at most n bytes, at a character boundary.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
