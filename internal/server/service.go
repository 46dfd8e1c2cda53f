// Package server is the gRPC face of the broker: it authenticates nothing
// and decides nothing itself, but validates requests, translates between the
// proto contract and the engine, and maps errors to precise gRPC statuses.
package server

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/tenant"
)

// Service implements rbv1.BrokerServiceServer.
type Service struct {
	rbv1.UnimplementedBrokerServiceServer

	clock engine.Clock
	rand  engine.Rand
	exec  *Executor
	// fallbackTenant serves calls that carry no authenticated tenant (the
	// embedded default, loopback only). Nil means such calls are refused.
	fallbackTenant *tenant.Tenant
	resolve        PolicyResolver
}

// PolicyResolver finds the policy a request names within the caller's
// tenant, answering a precise status (FAILED_PRECONDITION for an unknown
// name, PERMISSION_DENIED for another tenant's) otherwise.
type PolicyResolver func(t *tenant.Tenant, name string) (*tenant.Policy, error)

// WithPolicyResolver replaces the default resolver (the tenant's own
// policies by name).
func WithPolicyResolver(r PolicyResolver) Option { return func(s *Service) { s.resolve = r } }

func ownPolicy(t *tenant.Tenant, name string) (*tenant.Policy, error) {
	p, ok := t.Policy(name)
	if !ok {
		return nil, unknownPolicy(name)
	}
	return p, nil
}

// Option configures a Service.
type Option func(*Service)

// WithClock injects the clock (default engine.SystemClock).
func WithClock(c engine.Clock) Option { return func(s *Service) { s.clock = c } }

// WithRand injects the jitter source (default engine.GlobalRand).
func WithRand(r engine.Rand) Option { return func(s *Service) { s.rand = r } }

// WithDefaultTenant serves unauthenticated calls as t (dev mode).
func WithDefaultTenant(t *tenant.Tenant) Option { return func(s *Service) { s.fallbackTenant = t } }

// New returns a Service.
func New(opts ...Option) *Service {
	s := &Service{clock: engine.SystemClock{}, rand: engine.GlobalRand, resolve: ownPolicy}
	for _, o := range opts {
		o(s)
	}
	return s
}

func (s *Service) tenantFrom(ctx context.Context) (*tenant.Tenant, error) {
	if t, ok := tenant.FromContext(ctx); ok {
		return t, nil
	}
	if s.fallbackTenant != nil {
		return s.fallbackTenant, nil
	}
	return nil, status.Error(codes.Unauthenticated, "missing credentials: send authorization: Bearer <api key>")
}

// contextStatus maps a context error to Canceled or DeadlineExceeded.
func contextStatus(err error) error {
	switch {
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, "call canceled by the caller")
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, "deadline exceeded")
	}
	return nil
}
