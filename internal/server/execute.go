package server

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
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

// Executor holds what Execute needs: the attempt runner and the shared,
// guarded HTTP transport.
type Executor struct {
	// Runner runs the attempt loop. Its Store holds gates, budgets and pacing.
	Runner *engine.Runner
	// Transport sends requests under the guard carried by their context.
	Transport http.RoundTripper
	// GuardOptions apply to every policy's guard (for example the broker's
	// own listening addresses).
	GuardOptions []egress.GuardOption

	mu       sync.Mutex // serialises building and forgetting entries
	policies sync.Map   // *tenant.Policy -> *policyEgress; read on every call
	size     int        // entries in policies, under mu
}

type policyEgress struct {
	guard  *egress.Guard
	client *http.Client
}

// WithExecutor enables Execute.
func WithExecutor(e *Executor) Option { return func(s *Service) { s.exec = e } }

// ForgetPolicies drops the cached guards and clients, for example after a
// configuration reload replaced every policy.
func (e *Executor) ForgetPolicies() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.policies.Clear()
	e.size = 0
}

// egressFor returns the guard and client of a policy, built once. The hit
// path takes no lock.
func (e *Executor) egressFor(p *tenant.Policy) (*policyEgress, error) {
	if pe, ok := e.policies.Load(p); ok {
		return pe.(*policyEgress), nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if pe, ok := e.policies.Load(p); ok {
		return pe.(*policyEgress), nil
	}
	opts := append([]egress.GuardOption(nil), e.GuardOptions...)
	if len(p.AllowDestinations) > 0 {
		opts = append(opts, egress.AllowPrefixes(p.AllowDestinations...))
	}
	if len(p.AllowPorts) > 0 {
		opts = append(opts, egress.AllowPorts(p.AllowPorts...))
	}
	if len(p.AllowHosts) > 0 {
		opts = append(opts, egress.AllowHosts(p.AllowHosts...))
	}
	g, err := egress.NewGuard(opts...)
	if err != nil {
		return nil, err
	}
	cfg := egress.ClientConfig{FollowRedirects: p.MaxRedirects > 0, MaxRedirects: p.MaxRedirects}
	pe := &policyEgress{guard: g, client: &http.Client{Transport: e.Transport, CheckRedirect: egress.RedirectPolicy(cfg)}}
	if e.size >= 10000 { // reloads make new policies; forget old ones
		e.policies.Clear()
		e.size = 0
	}
	e.policies.Store(p, pe)
	e.size++
	return pe, nil
}

// Execute performs the HTTP call with retries and returns every attempt.
func (s *Service) Execute(ctx context.Context, req *rbv1.ExecuteRequest) (*rbv1.ExecuteResponse, error) {
	if s.exec == nil {
		return nil, status.Error(codes.Unimplemented, "Execute is not enabled on this broker")
	}
	t, err := s.tenantFrom(ctx)
	if err != nil {
		return nil, err
	}
	u, err := validateExecute(req)
	if err != nil {
		return nil, err
	}
	tp, err := s.resolve(t, req.GetPolicy())
	if err != nil {
		return nil, err
	}
	pol, err := applyOverrides(tp, req)
	if err != nil {
		return nil, err
	}
	pe, err := s.exec.egressFor(tp)
	if err != nil {
		return nil, status.Error(codes.FailedPrecondition, "policy destination allowlist is invalid")
	}
	provider := chooseProvider(tp, req.GetProvider(), u)
	method := req.GetRequest().GetMethod()
	if method == "" {
		method = http.MethodGet
	}
	call := &engine.Call{
		Policy: pol, Provider: provider, Reader: pol.ReaderFor(provider),
		Method: method, URL: u, Header: toHTTPHeader(req.GetRequest().GetHeaders()), Body: req.GetRequest().GetBody(),
		RedactedURL: egress.RedactURL(u), Client: pe.client, Classify: egress.Classify,
		Tenant: t.ID, GateByCredential: tp.GateByCredential, FailClosed: tp.FailClosed, Budget: tp.Budget, Pace: tp.Pace,
	}
	if o := req.GetOverrides(); o != nil && o.MaxResponseBody != nil {
		call.MaxResponseBody = int64(*o.MaxResponseBody)
	}
	res, err := s.exec.Runner.Run(egress.WithGuard(ctx, pe.guard), call)
	if err != nil {
		return nil, executeError(err)
	}
	return resultToProto(res, provider), nil
}

func validateExecute(req *rbv1.ExecuteRequest) (*url.URL, error) {
	var v violations
	r := req.GetRequest()
	var u *url.URL
	if r == nil {
		v.add("request", "required")
		return nil, v.err()
	}
	checkMethod(&v, "request.method", r.GetMethod())
	if r.GetUrl() == "" {
		v.add("request.url", "required")
	} else if parsed, err := parseHTTPURL(r.GetUrl()); err != nil {
		v.add("request.url", "%s", err.Error())
	} else {
		u = parsed
	}
	checkHeaders(&v, "request.headers", r.GetHeaders())
	for i, h := range r.GetHeaders() {
		if forbiddenRequestHeaders[http.CanonicalHeaderKey(h.GetName())] {
			v.add(fieldIndex("request.headers", i, "name"), "%s is set by the broker and may not be sent", http.CanonicalHeaderKey(h.GetName()))
		}
	}
	if p := req.GetProvider(); p != "" {
		checkProvider(&v, p)
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
	return u, v.err()
}

// applyOverrides copies the policy and narrows it by the request's
// overrides, refusing any that would loosen it, and checks the body size.
func applyOverrides(tp *tenant.Policy, req *rbv1.ExecuteRequest) (*engine.Policy, error) {
	var v violations
	p := tp.Policy // a copy: overrides never touch the shared policy
	if n := int64(len(req.GetRequest().GetBody())); n > p.MaxRequestBody {
		v.add("request.body", "too large: %d bytes (policy max_request_body is %d); nothing was sent", n, p.MaxRequestBody)
	}
	o := req.GetOverrides()
	if o == nil {
		return &p, v.err()
	}
	if o.MaxRetries != nil {
		if int(*o.MaxRetries) > p.MaxRetries {
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
	if o.MaxResponseBody != nil && int64(*o.MaxResponseBody) > p.MaxResponseBody {
		v.add("overrides.max_response_body", "%d exceeds the policy's max_response_body %d", *o.MaxResponseBody, p.MaxResponseBody)
	}
	return &p, v.err()
}

// executeError maps runner errors to precise statuses.
func executeError(err error) error {
	var de *engine.DestinationError
	var pe *engine.PacingError
	var se *engine.StoreError
	switch {
	case errors.As(err, &de):
		var re *egress.RefusedError
		if errors.As(err, &re) {
			return status.Errorf(codes.PermissionDenied, "destination refused: %s", re.Error())
		}
		return status.Error(codes.PermissionDenied, "destination refused")
	case errors.As(err, &pe):
		st := status.New(codes.ResourceExhausted, pe.Error())
		if d, derr := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(pe.Wait)}); derr == nil {
			st = d
		}
		return st.Err()
	case errors.As(err, &se):
		return status.Error(codes.Unavailable, "shared state (cooldown gates, budgets, pacing) is unavailable; try again later")
	}
	if s := contextStatus(err); s != nil {
		return s
	}
	return status.Error(codes.Internal, "internal error")
}

func resultToProto(res *engine.Result, provider string) *rbv1.ExecuteResponse {
	out := &rbv1.ExecuteResponse{Outcome: rbv1.Outcome(res.Outcome), Provider: provider}
	if res.Response != nil {
		out.Response = &rbv1.HttpResponse{
			StatusCode: int32(res.Response.Status), Headers: fromHTTPHeader(res.Response.Header),
			Body: res.Response.Body, BodyTruncated: res.Response.Truncated,
		}
	}
	if res.HasRetryAfter {
		out.RetryAfter = durationpb.New(res.RetryAfter)
	}
	out.Attempts = make([]*rbv1.Attempt, len(res.Attempts))
	for i, a := range res.Attempts {
		out.Attempts[i] = &rbv1.Attempt{
			Number: uint32(a.Number), StartTime: timestamppb.New(a.Start), Duration: durationpb.New(a.Duration),
			StatusCode: int32(a.Status), TransportError: rbv1.TransportError(a.Transport), ErrorMessage: a.Error,
			Decision: decisionToProto(a.Decision, provider), Waited: durationpb.New(a.Waited),
		}
	}
	return out
}
