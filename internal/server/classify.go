package server

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/providers"
	"github.com/retrybroker/retrybroker/internal/store"
	"github.com/retrybroker/retrybroker/internal/tenant"
)

// ClassifyResponse applies the tenant's policy to a response the caller got.
func (s *Service) ClassifyResponse(ctx context.Context, req *rbv1.ClassifyResponseRequest) (*rbv1.ClassifyResponseResponse, error) {
	t, err := s.tenantFrom(ctx)
	if err != nil {
		return nil, err
	}
	var u *url.URL
	if err := validateClassify(req, &u); err != nil {
		return nil, err
	}
	pol, err := s.resolve(t, req.GetPolicy())
	if err != nil {
		return nil, err
	}
	now := s.clock.Now()
	if req.GetNow() != nil {
		now = req.GetNow().AsTime()
	}
	provider := chooseProvider(pol, req.GetProvider(), u)
	in := engine.Input{
		Method:  req.GetMethod(),
		Attempt: int(req.GetAttempt()),
		Reader:  pol.ReaderFor(provider),
		Now:     now,
	}
	if req.GetDeadline() != nil {
		in.Deadline = req.GetDeadline().AsTime()
	}
	if req.GetTransportError() != rbv1.TransportError_TRANSPORT_ERROR_UNSPECIFIED {
		in.Transport = engine.TransportError(req.GetTransportError())
	} else {
		in.Response = &providers.Response{
			Status: int(req.GetStatusCode()),
			Header: toHTTPHeader(req.GetHeaders()),
			Body:   req.GetBody(),
			Now:    now,
		}
		// Read once: Decide and the gate observation share the reading.
		reading := in.Reader.Read(in.Response)
		in.Reading = &reading
	}
	in.HasIdempotencyKey = hasHeader(req.GetRequestHeaders(), pol.IdempotencyHeader) ||
		hasHeader(req.GetHeaders(), pol.IdempotencyHeader)
	d := pol.Decide(&in, s.rand)
	if u != nil && s.exec != nil && s.exec.Runner.Store != nil {
		d, err = s.shareGate(ctx, t, pol, provider, u, req, &in, d)
		if err != nil {
			return nil, err
		}
	}
	span := trace.SpanFromContext(ctx)
	engine.RecordDecision(span, d)
	span.SetAttributes(engine.AttrProvider.String(provider))
	return &rbv1.ClassifyResponseResponse{Decision: decisionToProto(d, provider)}, nil
}

func validateClassify(req *rbv1.ClassifyResponseRequest, u **url.URL) error {
	var v violations
	if p := req.GetProvider(); p != "" {
		checkProvider(&v, p)
	}
	checkMethod(&v, "method", req.GetMethod())
	te := req.GetTransportError()
	switch {
	case te != rbv1.TransportError_TRANSPORT_ERROR_UNSPECIFIED && req.GetStatusCode() != 0:
		v.add("status_code", "set either status_code or transport_error, not both")
	case te == rbv1.TransportError_TRANSPORT_ERROR_UNSPECIFIED && (req.GetStatusCode() < 100 || req.GetStatusCode() > 599):
		v.add("status_code", "must be between 100 and 599, got %d", req.GetStatusCode())
	}
	if te != rbv1.TransportError_TRANSPORT_ERROR_UNSPECIFIED {
		if _, ok := rbv1.TransportError_name[int32(te)]; !ok || te == rbv1.TransportError_TRANSPORT_ERROR_DESTINATION_REFUSED {
			v.add("transport_error", "unsupported transport error %d", int32(te))
		}
	}
	checkHeaders(&v, "headers", req.GetHeaders())
	checkHeaders(&v, "request_headers", req.GetRequestHeaders())
	if req.GetAttempt() > engine.MaxAttemptNumber {
		v.add("attempt", "must be at most %d, got %d", engine.MaxAttemptNumber, req.GetAttempt())
	}
	if len(req.GetBody()) > MaxClassifyBody {
		v.add("body", "too large: %d bytes (at most %d; send only the leading bytes)", len(req.GetBody()), MaxClassifyBody)
	}
	if ts := req.GetNow(); ts != nil && ts.CheckValid() != nil {
		v.add("now", "invalid timestamp")
	}
	if ts := req.GetDeadline(); ts != nil && ts.CheckValid() != nil {
		v.add("deadline", "invalid timestamp")
	}
	if raw := req.GetUrl(); raw != "" {
		if parsed, err := parseHTTPURL(raw); err != nil {
			v.add("url", "%s", err.Error())
		} else {
			*u = parsed
		}
	}
	return v.err()
}

// chooseProvider picks the reader: the request's override, then the
// policy's provider, then the policy's host map, then "retry-after".
func chooseProvider(p *tenant.Policy, override string, u *url.URL) string {
	if override != "" {
		return override
	}
	if p.Provider != "" {
		return p.Provider
	}
	if u != nil {
		if name, ok := p.HostMap.ProviderFor(u.Host); ok {
			return name
		}
	}
	return "retry-after"
}

func hasHeader(hs []*rbv1.HttpHeader, canonical string) bool {
	for _, h := range hs {
		if strings.EqualFold(h.GetName(), canonical) {
			return true
		}
	}
	return false
}

func unknownPolicy(name string) error {
	return status.Errorf(codes.FailedPrecondition, "unknown policy %q for this tenant", truncate(name))
}

// parseHTTPURL parses an absolute http(s) URL with a host.
func parseHTTPURL(raw string) (*url.URL, error) {
	if len(raw) > MaxURLLength {
		return nil, fmt.Errorf("too long: %d bytes (at most %d)", len(raw), MaxURLLength)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("not a valid URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, errors.New("scheme must be http or https")
	}
	if u.Host == "" || u.Hostname() == "" {
		return nil, errors.New("URL must have a host")
	}
	return u, nil
}

// shareGate records what the response says about the tenant's cooldown gate
// for the URL's destination, and lengthens a retry delay (or turns it into
// a give-up) while the gate stays closed, so callers that make their own
// calls share gates with Execute. ClassifyResponse spends no retry budget.
func (s *Service) shareGate(ctx context.Context, t *tenant.Tenant, pol *tenant.Policy, provider string, u *url.URL, req *rbv1.ClassifyResponseRequest, in *engine.Input, d engine.Decision) (engine.Decision, error) {
	call := engine.Call{Tenant: t.ID, Provider: provider, URL: u, GateByCredential: pol.GateByCredential, Header: toHTTPHeader(req.GetRequestHeaders())}
	key := call.GateKey()
	var obs store.Observation
	if in.Response != nil {
		obs = engine.Observation(in.Response.Status, *in.Reading, in.Now)
	}
	sctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	st, err := s.exec.Runner.Store.Observe(sctx, store.ObserveRequest{Gate: key, Obs: obs, MaxGate: pol.MaxGate, FailClosed: pol.FailClosed, Now: in.Now})
	until := st.ClosedUntil
	if err != nil {
		if pol.FailClosed {
			return d, status.Error(codes.Unavailable, "shared state is unavailable and the policy fails closed; try again later")
		}
		return d, nil // the decision stands on its own without shared state
	}
	if d.Action != engine.ActionRetry || until.IsZero() {
		return d, nil
	}
	wait := until.Sub(in.Now)
	if wait <= d.Delay {
		return d, nil
	}
	if wait > pol.MaxDelay || (!in.Deadline.IsZero() && !in.Now.Add(wait).Before(in.Deadline)) {
		return engine.Decision{Action: engine.ActionDoNotRetry, Reason: engine.ReasonGateClosed, Hint: wait, HasHint: true}, nil
	}
	return engine.Decision{Action: engine.ActionRetry, Reason: engine.ReasonGateClosed, Delay: wait, Hint: d.Hint, HasHint: d.HasHint}, nil
}
