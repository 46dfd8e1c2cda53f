package credential

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"
)

// SecretRef says where a secret is read from: a file (re-read when it
// changes) or an environment variable (read at load). Exactly one is set.
// A secret is never inline.
type SecretRef struct {
	File string
	Env  string
}

// IsZero reports that neither is set.
func (r SecretRef) IsZero() bool { return r.File == "" && r.Env == "" }

// Spec is one named credential as configured (tenants[].credentials.NAME).
// Exactly one of the kind's sections is set, the one Kind names.
type Spec struct {
	Name      string
	Kind      Kind
	Overwrite bool // replace caller-supplied headers of the same names

	Header    *HeaderSpec
	OAuth2    *OAuth2Spec
	SigV4     *SigV4Spec
	Signature *SignatureSpec
}

// HeaderSpec is a static secret placed in one header: Name: Prefix+value.
type HeaderSpec struct {
	Name   string // e.g. Authorization, x-api-key, api-key
	Prefix string // e.g. "Bearer "
	Value  SecretRef
}

// OAuth2Spec is an OAuth 2.0 client-credentials grant (RFC 6749 4.4).
type OAuth2Spec struct {
	TokenURL       string
	ClientID       string
	ClientSecret   SecretRef
	Scopes         []string
	EndpointParams map[string][]string
	// AuthStyle is "header" (HTTP Basic), "params" (in the form) or ""
	// (auto-detect, as x/oauth2 does).
	AuthStyle string
	// Timeout bounds one token request. Default 10s.
	Timeout time.Duration
	// ExpiryMargin: a token is refreshed this long before it expires.
	// Default 30s, at most half the token's lifetime.
	ExpiryMargin time.Duration
}

// SigV4Spec signs each attempt with AWS Signature Version 4.
type SigV4Spec struct {
	Region  string
	Service string
	// Keys from files; when AccessKeyID and SecretAccessKey are both
	// zero, the AWS SDK's default chain is used (environment, web
	// identity token file with a role, shared config).
	AccessKeyID     SecretRef
	SecretAccessKey SecretRef
	SessionToken    SecretRef // optional
	// UnsignedPayload sends X-Amz-Content-Sha256: UNSIGNED-PAYLOAD
	// instead of the body's hash (S3 allows it; most services do not).
	UnsignedPayload bool
}

// SignatureSpec signs each attempt with RFC 9421 HTTP Message Signatures.
type SignatureSpec struct {
	// Algorithm is "hmac-sha256" or "ed25519".
	Algorithm string
	KeyID     string
	// Key: for hmac-sha256 the shared secret's bytes; for ed25519 a PEM
	// PKCS#8 private key (or a 32-byte seed).
	Key SecretRef
	// KeyEncoding is how Key's bytes are read: "" or "raw" (as they are,
	// nothing trimmed), or "base64" (standard base64 of the key's bytes,
	// surrounding white space ignored).
	KeyEncoding string
	// Label is the signature's label in Signature-Input. Default "sig1".
	Label string
	// Components are the covered components, in order. Default
	// ["@method", "@target-uri", "content-digest", "content-type"] where
	// content-digest is added (and set by the broker, RFC 9530 sha-256)
	// when the request has a body.
	Components []string
	// Tag, when set, is the tag parameter.
	Tag string
	// Expires, when positive, sets expires = created + Expires.
	Expires time.Duration
}

// Deps are what credentials need from the broker.
type Deps struct {
	Tenant string
	// TokenClient returns the HTTP client for a token endpoint: dialled
	// through the destination guard with the credential's own
	// allow_destinations (nil: the default ranges only), never following
	// redirects. Required for oauth2_client_credentials; aws_sigv4's
	// default chain sends its STS requests (web identity) through it too,
	// and without it refuses them.
	TokenClient func(allow []string) (*http.Client, error)
	// TokenAllow is the OAuth2 credential's allow_destinations.
	TokenAllow []string
	Clock      Clock    // default SystemClock
	Observer   Observer // default NopObserver
	Log        *slog.Logger
	// Getenv reads the environment (default os.Getenv); tests set it.
	Getenv func(string) string
	// FileCheck is how often a secret file is checked for a change when
	// it is used. Default 1s.
	FileCheck time.Duration
}

func (d *Deps) defaults() {
	if d.Clock == nil {
		d.Clock = SystemClock
	}
	if d.Observer == nil {
		d.Observer = NopObserver{}
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.FileCheck <= 0 {
		d.FileCheck = time.Second
	}
}

// New builds a credential from its spec. Every secret it names is read
// once here, so a missing file or variable is an error at load (its path
// or name is given, never a value).
func New(spec Spec, deps Deps) (Credential, error) {
	deps.defaults()
	if spec.Name == "" {
		return nil, errors.New("credential without a name")
	}
	switch spec.Kind {
	case KindHeader:
		if spec.Header == nil {
			return nil, fmt.Errorf("credential %s: kind header without its settings", spec.Name)
		}
		return newHeader(spec, deps)
	case KindOAuth2:
		if spec.OAuth2 == nil {
			return nil, fmt.Errorf("credential %s: kind %s without its settings", spec.Name, spec.Kind)
		}
		return newOAuth2(spec, deps)
	case KindAWSSigV4:
		if spec.SigV4 == nil {
			return nil, fmt.Errorf("credential %s: kind %s without its settings", spec.Name, spec.Kind)
		}
		return newSigV4(spec, deps)
	case KindHTTPSignature:
		if spec.Signature == nil {
			return nil, fmt.Errorf("credential %s: kind %s without its settings", spec.Name, spec.Kind)
		}
		return newHTTPSignature(spec, deps)
	}
	return nil, fmt.Errorf("credential %s: unknown kind %q (header, oauth2_client_credentials, aws_sigv4, http_signature)", spec.Name, spec.Kind)
}
