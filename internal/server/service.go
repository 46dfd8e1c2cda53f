// Package server is the gRPC face of the broker: it decides nothing itself,
// but validates requests, translates between the proto contract and the
// engine, and maps errors to precise gRPC statuses. Identity is checked
// before a request is decoded (NewGRPCServer), and each request is bounded
// by what its RPC may carry.
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

	clock      engine.Clock
	rand       engine.Rand
	classifier *engine.Classifier
	exec       *Executor
	// fallbackTenant serves calls that carry no authenticated tenant (the
	// embedded default, loopback only). Nil means such calls are refused.
	fallbackTenant *tenant.Tenant
	resolve        PolicyResolver
	streams        streamSlots // open ExecuteStream calls per tenant and policy
	tasks          *Tasks      // the task RPCs; nil answers UNIMPLEMENTED
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

// WithClock sets the clock of the classifier New builds when no executor
// provides one (default engine.SystemClock).
func WithClock(c engine.Clock) Option { return func(s *Service) { s.clock = c } }

// WithRand sets the jitter source of that classifier (default
// engine.GlobalRand).
func WithRand(r engine.Rand) Option { return func(s *Service) { s.rand = r } }

// WithClassifier sets the classifier of ClassifyResponse (default: the
// executor's runner's, or one without shared state).
func WithClassifier(c *engine.Classifier) Option { return func(s *Service) { s.classifier = c } }

// WithDefaultTenant serves unauthenticated calls as t (dev mode).
func WithDefaultTenant(t *tenant.Tenant) Option { return func(s *Service) { s.fallbackTenant = t } }

// New returns a Service.
func New(opts ...Option) *Service {
	s := &Service{clock: engine.SystemClock{}, rand: engine.GlobalRand, resolve: ownPolicy}
	for _, o := range opts {
		o(s)
	}
	if s.classifier == nil {
		if s.exec != nil && s.exec.Runner != nil {
			s.classifier = s.exec.Runner.Classifier()
		} else {
			s.classifier = engine.NewRunner(nil, engine.WithClock(s.clock), engine.WithRand(s.rand)).Classifier()
		}
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

// MaxRequestSize implements RequestLimiter: ClassifyResponse accepts
// MaxClassifyMessage, the task RPCs that only name a task
// MaxTaskRefMessage; Execute, ExecuteStream and CreateTask accept the largest request
// body among the caller's policies plus ExecuteOverhead. A caller without
// a tenant gets the smallest limit (its call is refused anyway).
func (s *Service) MaxRequestSize(ctx context.Context, method string) int {
	switch method {
	case rbv1.BrokerService_ClassifyResponse_FullMethodName:
		return MaxClassifyMessage
	case rbv1.BrokerService_GetTask_FullMethodName, rbv1.BrokerService_ListTasks_FullMethodName,
		rbv1.BrokerService_CancelTask_FullMethodName, rbv1.BrokerService_RetryTask_FullMethodName,
		rbv1.BrokerService_WatchTask_FullMethodName:
		return MaxTaskRefMessage
	}
	t, err := s.tenantFrom(ctx)
	if err != nil {
		return MaxClassifyMessage
	}
	largest := int64(0)
	for _, p := range t.Policies {
		largest = max(largest, p.MaxRequestBody)
	}
	return int(min(largest, engine.MaxBodyLimit)) + ExecuteOverhead
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
