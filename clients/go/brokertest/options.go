package brokertest

import (
	"time"

	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/tenant"
)

// Option configures Start and New.
type Option interface{ apply(*config) }

type config struct {
	defaults []PolicyOption
	named    map[string][]PolicyOption
	order    []string
}

// PolicyOption changes a policy of the test tenant. Passed to New or
// Start, it changes the default policy; passed to WithNamedPolicy, the
// named one. Every policy starts as the broker's standard policy (3
// retries, 60s max delay, full-jitter backoff from 1s capped at 30s, the
// provider chosen by host).
type PolicyOption struct{ f func(*tenant.Policy) }

func (o PolicyOption) apply(c *config) { c.defaults = append(c.defaults, o) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithMaxRetries sets max_retries: at most n+1 sends; 0 disables retries.
func WithMaxRetries(n int) PolicyOption {
	return PolicyOption{func(p *tenant.Policy) { p.MaxRetries = n }}
}

// WithMaxDelay sets max_delay, the longest server hint the broker waits for.
func WithMaxDelay(d time.Duration) PolicyOption {
	return PolicyOption{func(p *tenant.Policy) { p.MaxDelay = d }}
}

// WithProvider sets the policy's hint reader, for example "github" or
// "none"; empty chooses by the request's host.
func WithProvider(name string) PolicyOption {
	return PolicyOption{func(p *tenant.Policy) { p.Provider = name }}
}

// WithRetryUnsafeMethods lets POST, PUT, PATCH and DELETE retry.
func WithRetryUnsafeMethods() PolicyOption {
	return PolicyOption{func(p *tenant.Policy) { p.RetryUnsafeMethods = true }}
}

// WithRetryableStatuses replaces the retryable statuses (default 408, 429,
// 500, 502, 503, 504).
func WithRetryableStatuses(codes ...int) PolicyOption {
	return PolicyOption{func(p *tenant.Policy) { p.RetryableStatuses = engine.NewStatusSet(codes...) }}
}

// WithBackoff sets the backoff ceiling after the first attempt (base) and
// its cap; the ceiling doubles per attempt.
func WithBackoff(base, maxCeiling time.Duration) PolicyOption {
	return PolicyOption{func(p *tenant.Policy) { p.Backoff.Base, p.Backoff.Cap = base, maxCeiling }}
}

// WithoutJitter makes backoff delays exactly their ceiling (1s, 2s, 4s,
// ... by default), so that tests can assert them.
func WithoutJitter() PolicyOption {
	return PolicyOption{func(p *tenant.Policy) { p.Backoff.Jitter = engine.JitterNone }}
}

// WithAttemptHeader makes the broker set header name to the attempt number
// on every attempt (for example X-Retry-Attempt: 2).
func WithAttemptHeader(name string) PolicyOption {
	return PolicyOption{func(p *tenant.Policy) { p.AttemptHeader = name }}
}

// WithIdempotencyKeys makes the broker add an Idempotency-Key (a random
// UUID, the same on every attempt) to requests that have none, which also
// lets unsafe methods retry.
func WithIdempotencyKeys() PolicyOption {
	return PolicyOption{func(p *tenant.Policy) { p.GenerateIdempotencyKey = true }}
}

// WithTotalTimeout bounds a whole Execute call, waits included, on the
// fake clock.
func WithTotalTimeout(d time.Duration) PolicyOption {
	return PolicyOption{func(p *tenant.Policy) { p.TotalTimeout = d }}
}

// WithMaxRequestBody sets max_request_body in bytes (default 1 MiB).
func WithMaxRequestBody(n int64) PolicyOption {
	return PolicyOption{func(p *tenant.Policy) { p.MaxRequestBody = n }}
}

// WithMaxResponseBody sets max_response_body in bytes (default 4 MiB).
func WithMaxResponseBody(n int64) PolicyOption {
	return PolicyOption{func(p *tenant.Policy) { p.MaxResponseBody = n }}
}

// WithNamedPolicy adds a policy called name (selected with broker.Policy
// or broker.WithDefaultPolicy), built from the standard policy and opts.
func WithNamedPolicy(name string, opts ...PolicyOption) Option {
	return optionFunc(func(c *config) {
		if c.named == nil {
			c.named = map[string][]PolicyOption{}
		}
		if _, ok := c.named[name]; !ok {
			c.order = append(c.order, name)
		}
		c.named[name] = append(c.named[name], opts...)
	})
}
