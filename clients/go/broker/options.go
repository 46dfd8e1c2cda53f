package broker

import (
	"net/http"
	"time"
)

// CallOption configures one Execute call (or every call of a RoundTripper).
type CallOption interface{ applyCall(*callConfig) }

// ClassifyOption configures one Classify or ClassifyError call.
type ClassifyOption interface{ applyClassify(*classifyConfig) }

// RetryOption configures Retry.
type RetryOption interface{ applyRetry(*retryConfig) }

type callConfig struct {
	policy    string
	hasPolicy bool
	provider  string

	maxRetries      *uint32
	maxDelay        time.Duration
	totalTimeout    time.Duration
	attemptTimeout  time.Duration
	maxResponseBody *uint64
	onResult        func(*Result)
	errs            []error
}

// requestInfo is what Classify and Retry know about the request that got the
// response.
type requestInfo struct {
	method      string
	hasMethod   bool
	rawURL      string
	hasURL      bool
	reqHeader   http.Header
	provider    string
	policy      string
	hasPolicy   bool
	deadline    time.Time
	hasDeadline bool
}

type classifyConfig struct {
	requestInfo
	attempt int
	now     time.Time
	body    []byte
	hasBody bool
}

type retryConfig struct {
	requestInfo
	sleeper Sleeper
	onRetry func(RetryEvent)
}

// PolicyOption names a policy of the caller's tenant. It applies to
// Execute, Classify and Retry.
type PolicyOption struct{ name string }

// Policy names the tenant policy for this call, overriding
// WithDefaultPolicy. Empty means the tenant's default policy. An unknown
// name fails with FAILED_PRECONDITION (IsUnknownPolicy).
func Policy(name string) PolicyOption { return PolicyOption{name: name} }

func (o PolicyOption) applyCall(c *callConfig)         { c.policy, c.hasPolicy = o.name, true }
func (o PolicyOption) applyClassify(c *classifyConfig) { c.policy, c.hasPolicy = o.name, true }
func (o PolicyOption) applyRetry(c *retryConfig)       { c.policy, c.hasPolicy = o.name, true }

// ProviderOption overrides the hint reader. It applies to Execute,
// Classify and Retry.
type ProviderOption struct{ name string }

// Provider overrides the hint reader for this call, for example "github",
// "openai" or "none" (no hints). Empty means the policy's provider, or the
// one chosen from the URL's host. An unknown name fails with
// INVALID_ARGUMENT.
func Provider(name string) ProviderOption { return ProviderOption{name: name} }

func (o ProviderOption) applyCall(c *callConfig)         { c.provider = o.name }
func (o ProviderOption) applyClassify(c *classifyConfig) { c.provider = o.name }
func (o ProviderOption) applyRetry(c *retryConfig)       { c.provider = o.name }

// RequestOption describes the request that got a response. It applies to
// Classify, ClassifyError and Retry.
type RequestOption struct{ f func(*requestInfo) }

func (o RequestOption) applyClassify(c *classifyConfig) { o.f(&c.requestInfo) }
func (o RequestOption) applyRetry(c *retryConfig)       { o.f(&c.requestInfo) }

// Method is the request's HTTP method (default: resp.Request.Method, else
// GET). POST, PUT, PATCH and DELETE retry only when the policy allows
// unsafe methods or the request carries an idempotency key.
func Method(m string) RequestOption {
	return RequestOption{func(r *requestInfo) { r.method, r.hasMethod = m, true }}
}

// URL is the request's URL (default: resp.Request.URL). It chooses the
// provider by host and makes the broker share the tenant's cooldown gate
// for the destination with Execute. The client sends only scheme, host and
// path: never userinfo or the query.
func URL(u string) RequestOption {
	return RequestOption{func(r *requestInfo) { r.rawURL, r.hasURL = u, true }}
}

// RequestHeader is the header the request was sent with. The broker looks
// for the policy's idempotency-key header in it (and, when the policy gates
// by credential, fingerprints Authorization). Not sent unless given.
func RequestHeader(h http.Header) RequestOption {
	return RequestOption{func(r *requestInfo) { r.reqHeader = h }}
}

// Deadline is when the caller's logical call must end. When the wait
// before the next attempt would end at or after it, the decision is
// ActionDoNotRetry with ReasonDeadlineTooShort, and the hint is still
// reported. Retry sets it from its context's deadline.
func Deadline(t time.Time) RequestOption {
	return RequestOption{func(r *requestInfo) { r.deadline, r.hasDeadline = t, true }}
}

type classifyFunc func(*classifyConfig)

func (f classifyFunc) applyClassify(c *classifyConfig) { f(c) }

// AttemptNumber is the 1-based number of the attempt that produced the
// response (default 1). A response from attempt n may be retried only while
// n <= max_retries. (It is not called Attempt: that is the record type.)
func AttemptNumber(n int) ClassifyOption {
	return classifyFunc(func(c *classifyConfig) { c.attempt = n })
}

// Now is the clock for absolute hints (HTTP-dates, reset times); default
// the broker's clock.
func Now(t time.Time) ClassifyOption {
	return classifyFunc(func(c *classifyConfig) { c.now = t })
}

// Body gives the leading bytes of the response body (at most 64 KiB) to
// body-aware readers (discord, google). Without it, Classify peeks at an
// error response's body itself (see Classify).
func Body(b []byte) ClassifyOption {
	return classifyFunc(func(c *classifyConfig) { c.body, c.hasBody = b, true })
}

type callFunc func(*callConfig)

func (f callFunc) applyCall(c *callConfig) { f(c) }

// MaxRetries lowers the policy's max_retries for this call (0 disables
// retries). A value above the policy's is refused with INVALID_ARGUMENT:
// overrides only make a call more conservative.
func MaxRetries(n int) CallOption {
	return callFunc(func(c *callConfig) {
		if n < 0 {
			c.errs = append(c.errs, errorf("MaxRetries: must not be negative, got %d", n))
			return
		}
		v := uint32(min(n, 1<<31))
		c.maxRetries = &v
	})
}

// MaxDelay lowers the longest server hint the broker waits for; a longer
// hint ends the call at once with OutcomeHintExceedsMaxDelay.
func MaxDelay(d time.Duration) CallOption {
	return callFunc(func(c *callConfig) { c.maxDelay = d })
}

// TotalTimeout lowers the overall time of the call, waits included. The
// context's deadline also bounds the call.
func TotalTimeout(d time.Duration) CallOption {
	return callFunc(func(c *callConfig) { c.totalTimeout = d })
}

// AttemptTimeout lowers the time of one attempt.
func AttemptTimeout(d time.Duration) CallOption {
	return callFunc(func(c *callConfig) { c.attemptTimeout = d })
}

// MaxResponseBody lowers the number of response body bytes returned; a
// longer body is cut and Result.BodyTruncated is set.
func MaxResponseBody(n int64) CallOption {
	return callFunc(func(c *callConfig) {
		if n <= 0 {
			c.errs = append(c.errs, errorf("MaxResponseBody: must be positive, got %d", n))
			return
		}
		v := uint64(n)
		c.maxResponseBody = &v
	})
}

// OnResult calls f with the Result of every Execute call that got an
// answer from the broker, before Execute returns. It is how RoundTripper
// users see the attempts.
func OnResult(f func(*Result)) CallOption {
	return callFunc(func(c *callConfig) { c.onResult = f })
}

type retryFunc func(*retryConfig)

func (f retryFunc) applyRetry(c *retryConfig) { f(c) }

// WithSleeper makes Retry wait with s instead of a real timer; tests pass
// a fake (brokertest's Clock is one) so that they never wait.
func WithSleeper(s Sleeper) RetryOption {
	return retryFunc(func(c *retryConfig) { c.sleeper = s })
}

// OnRetry calls f before each wait of Retry, with the failed attempt.
func OnRetry(f func(RetryEvent)) RetryOption {
	return retryFunc(func(c *retryConfig) { c.onRetry = f })
}
