// Package credential holds the credentials a tenant lets the broker keep
// (tenants[].credentials) and applies them to each attempt, inside the
// attempt loop: secrets come from files or the environment only (files are
// re-read when they change), tokens are fetched, cached and refreshed, and
// signatures are made over each attempt's final headers.
//
// The engine calls, per call, NewCall once (the body and its payload hash),
// and per attempt, after the gate admitted it and after every other header
// of the attempt is set, Credential.Apply: the credential, and a signature
// last. Nothing here knows of gRPC, policies or the store.
package credential

import (
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"sync"
	"time"
)

// Kind names a credential's kind as configured (credentials.NAME.kind).
type Kind string

// The four kinds.
const (
	KindHeader        Kind = "header"
	KindOAuth2        Kind = "oauth2_client_credentials"
	KindAWSSigV4      Kind = "aws_sigv4"
	KindHTTPSignature Kind = "http_signature"
)

// Credential is one named, broker-held credential of a tenant. It is safe
// for concurrent use by any number of calls.
type Credential interface {
	// Name is the credential's configured name, unique within its tenant.
	Name() string
	// Kind is the credential's kind.
	Kind() Kind
	// Headers are the canonical names of the headers Apply sets. A caller
	// that sends one of them is refused (INVALID_ARGUMENT) unless
	// Overwrite.
	Headers() []string
	// Overwrite reports that the credential replaces caller-supplied
	// headers of the same names instead of having them refused.
	Overwrite() bool
	// Apply sets the credential on one attempt's request, whose other
	// headers are final: headers are set, never appended. It is called
	// after the attempt was admitted, once per attempt (a retry after a
	// long wait gets a fresh token and a fresh signature time). It blocks
	// at most until ctx ends (a token fetch has its own, shorter timeout).
	// When no credential can be had it returns an *UnavailableError and
	// the attempt is not sent.
	Apply(ctx context.Context, req *http.Request, call *Call) (Stamp, error)
	// Rejected is told that the upstream answered 401 to an attempt that
	// carried stamp. It reports whether the attempt should be repeated
	// once with a new credential: true only when the credential that
	// failed was still the current one and is now invalidated (an OAuth2
	// token); false for kinds with nothing to renew.
	Rejected(stamp Stamp) bool
}

// Stamp identifies what one Apply put on an attempt (for OAuth2, which
// token), so that Rejected can tell whether that is still current. Its
// zero value identifies nothing. It never holds a secret.
type Stamp struct {
	// Generation counts the credential's values: it changes when a token
	// is fetched or a secret file is re-read.
	Generation uint64
}

// UnavailableError says that no credential could be had for an attempt
// (token endpoint down or refusing, secret file unreadable, no AWS
// credentials): the attempt is not sent and the call ends with
// OUTCOME_CREDENTIALS_UNAVAILABLE. Its text names the credential and the
// cause, and never a secret.
type UnavailableError struct {
	Credential string
	Cause      error
}

func (e *UnavailableError) Error() string {
	return "credential " + e.Credential + " unavailable: " + e.Cause.Error()
}

func (e *UnavailableError) Unwrap() error { return e.Cause }

// IsUnavailable reports whether err is (or wraps) an *UnavailableError.
func IsUnavailable(err error) bool {
	var u *UnavailableError
	return errors.As(err, &u)
}

// Call is what one call computes once, before its attempt loop, for the
// credential: the request body and, on first use, its SHA-256 (the payload
// hash of a signature). It is used by one call's attempts, one at a time.
type Call struct {
	body   []byte
	once   sync.Once
	sha256 [sha256.Size]byte
}

// NewCall returns the per-call state for a request body (nil for none).
// The body is not copied; it must not change during the call.
func NewCall(body []byte) *Call { return &Call{body: body} }

// Body is the call's request body.
func (c *Call) Body() []byte { return c.body }

// BodySHA256 is the SHA-256 of the call's body, computed once per call.
func (c *Call) BodySHA256() []byte {
	c.once.Do(func() { c.sha256 = sha256.Sum256(c.body) })
	return c.sha256[:]
}

// Observer receives the credentials' metrics. Labels never hold a secret.
type Observer interface {
	// TokenFetch counts one token request by result: "ok", "refused"
	// (the endpoint answered an error), "error" (transport or timeout),
	// "invalid" (a response that is no token).
	TokenFetch(tenant, credential, result string)
	// TokenExpiry sets the time left until the credential's current token
	// expires (negative when expired).
	TokenExpiry(tenant, credential string, left time.Duration)
	// FileReload counts one re-read of a secret file that changed, by
	// result: "ok" or "error".
	FileReload(tenant, credential, result string)
	// Unavailable counts one attempt that was not sent because the
	// credential could not be had. The engine calls it (through its
	// CredentialObserver), once per attempt not sent; the kinds do not.
	Unavailable(tenant, credential string)
}

// NopObserver observes nothing.
type NopObserver struct{}

func (NopObserver) TokenFetch(string, string, string)         {}
func (NopObserver) TokenExpiry(string, string, time.Duration) {}
func (NopObserver) FileReload(string, string, string)         {}
func (NopObserver) Unavailable(string, string)                {}

// Clock is the time source of tokens, signatures and file checks.
type Clock interface{ Now() time.Time }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// SystemClock is the wall clock.
var SystemClock Clock = systemClock{}

type ctxKey struct{}

// WithCredential returns ctx carrying c, the credential applied to the
// request that runs under it: the egress client's redirect policy reads it
// (FromContext) to drop every header c sets (Credential.Headers) from a
// hop to another origin. The credential is never re-applied on a hop.
func WithCredential(ctx context.Context, c Credential) context.Context {
	return context.WithValue(ctx, ctxKey{}, c)
}

// FromContext returns the credential WithCredential put on ctx, or nil.
func FromContext(ctx context.Context) Credential {
	c, _ := ctx.Value(ctxKey{}).(Credential)
	return c
}
