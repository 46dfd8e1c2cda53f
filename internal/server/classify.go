package server

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/providers"
	"github.com/retrybroker/retrybroker/internal/tenant"
)

// ClassifyResponse applies the tenant's policy to a response the caller got.
func (s *Service) ClassifyResponse(ctx context.Context, req *rbv1.ClassifyResponseRequest) (*rbv1.ClassifyResponseResponse, error) {
	t, err := s.tenantFrom(ctx)
	if err != nil {
		return nil, err
	}
	var v violations // the request's faults and an unknown provider, together
	u, transport := validateClassify(&v, req)
	pol, err := s.resolve(t, req.GetPolicy())
	if err == nil {
		checkProvider(&v, pol, req.GetProvider())
	}
	if verr := v.err(); verr != nil {
		return nil, verr
	}
	if err != nil {
		return nil, err
	}
	provider := chooseProvider(pol, req.GetProvider(), u)
	cl := engine.Classification{
		Policy: &pol.Policy,
		Reader: pol.ReaderFor(provider),
		Input: engine.Input{
			Method:    req.GetMethod(),
			Attempt:   int(req.GetAttempt()),
			Transport: transport,
			HasIdempotencyKey: hasHeader(req.GetRequestHeaders(), pol.IdempotencyHeader) ||
				hasHeader(req.GetHeaders(), pol.IdempotencyHeader),
		},
	}
	if req.GetNow() != nil {
		cl.Input.Now = req.GetNow().AsTime()
	}
	if req.GetDeadline() != nil {
		cl.Input.Deadline = req.GetDeadline().AsTime()
	}
	if transport == engine.TransportNone {
		cl.Input.Response = &providers.Response{
			Status: int(req.GetStatusCode()),
			Header: toHTTPHeader(req.GetHeaders()),
			Body:   req.GetBody(),
			Now:    cl.Input.Now,
		}
	}
	if u != nil {
		cl.Destination = &engine.Destination{
			Tenant: t.ID, Provider: provider, Host: u.Host, Authorization: headerValue(req.GetRequestHeaders(), "Authorization"),
		}
	}
	d, err := s.classifier.Classify(ctx, &cl)
	if err != nil {
		var se *engine.StoreError
		if errors.As(err, &se) {
			return nil, status.Error(codes.Unavailable, "shared state is unavailable and the policy fails closed; try again later")
		}
		return nil, status.Error(codes.Internal, "internal error")
	}
	span := trace.SpanFromContext(ctx)
	engine.RecordDecision(span, d)
	span.SetAttributes(engine.AttrProvider.String(provider))
	return &rbv1.ClassifyResponseResponse{Decision: decisionToProto(d, provider)}, nil
}

// validateClassify adds the request's faults to v and returns its URL (nil when unset)
// and transport error (TransportNone when a status is set).
func validateClassify(v *violations, req *rbv1.ClassifyResponseRequest) (*url.URL, engine.TransportError) {
	var u *url.URL
	kind := engine.TransportNone
	checkMethod(v, "method", req.GetMethod())
	te := req.GetTransportError()
	switch {
	case te != rbv1.TransportError_TRANSPORT_ERROR_UNSPECIFIED && req.GetStatusCode() != 0:
		v.add("status_code", "set either status_code or transport_error, not both")
	case te == rbv1.TransportError_TRANSPORT_ERROR_UNSPECIFIED && (req.GetStatusCode() < 100 || req.GetStatusCode() > 599):
		v.add("status_code", "must be between 100 and 599, got %d", req.GetStatusCode())
	}
	if te != rbv1.TransportError_TRANSPORT_ERROR_UNSPECIFIED {
		k, ok := transports.engine(int32(te))
		if !ok || k == engine.TransportDestinationRefused {
			v.add("transport_error", "unsupported transport error %d", int32(te))
		} else {
			kind = k
		}
	}
	checkHeaders(v, "headers", req.GetHeaders())
	checkHeaders(v, "request_headers", req.GetRequestHeaders())
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
			u = parsed
		}
	}
	return u, kind
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

func headerValue(hs []*rbv1.HttpHeader, name string) string {
	for _, h := range hs {
		if strings.EqualFold(h.GetName(), name) {
			return h.GetValue()
		}
	}
	return ""
}

func unknownPolicy(name string) error {
	return status.Errorf(codes.FailedPrecondition, "unknown policy %s for this tenant", quoteName(name))
}

// parseHTTPURL parses an absolute http(s) URL with a host and, when it has
// one, a port from 1 to 65535.
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
	if p := u.Port(); p != "" {
		if n, err := strconv.ParseUint(p, 10, 16); err != nil || n == 0 {
			return nil, errors.New("port must be between 1 and 65535")
		}
	} else if strings.HasSuffix(u.Host, ":") {
		return nil, errors.New("port must be between 1 and 65535")
	}
	return u, nil
}
