package auth

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"strings"

	grpcauth "github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/retrybroker/retrybroker/internal/config"
	"github.com/retrybroker/retrybroker/internal/tenant"
)

// Messages of the statuses New returns. They never contain the key.
const (
	MsgMissingCredentials = "missing credentials: send authorization: Bearer <api key>"
	MsgMalformed          = MsgMissingCredentials + " (the authorization metadata is not one bearer token)"
	MsgUnknownKey         = "unknown API key"
	MsgUnmappedCert       = "the client certificate is not mapped to a tenant: send authorization: Bearer <api key>, or map the certificate's URI SAN or subject in mtls_identities"
	MsgAmbiguousCert      = "the client certificate's identities map to more than one tenant"
	MsgKeyCertMismatch    = "the API key and the client certificate identify different tenants"
	MsgNoConfiguration    = "no tenant configuration is loaded"
)

// APIKeyHash returns the lower-case hex SHA-256 of key: the value to list
// under api_key_sha256. The shell equivalent is
//
//	printf %s "$KEY" | sha256sum
//
// (printf, not echo, which would add a newline to the key).
func APIKeyHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// Method says how a caller authenticated.
type Method string

// Authentication methods.
const (
	MethodAPIKey Method = "api_key"
	MethodMTLS   Method = "mtls"
	// MethodBoth is an API key and a client certificate naming the same
	// tenant.
	MethodBoth Method = "api_key+mtls"
)

// Identity describes an authenticated caller, for logs and spans. It holds
// no secret.
type Identity struct {
	// TenantID is the tenant the caller acts as.
	TenantID string
	// Method is how it proved it.
	Method Method
	// Certificate is the mTLS identity that matched (a URI SAN or a
	// subject); empty for MethodAPIKey.
	Certificate string
}

type identityKey struct{}

// IdentityFromContext returns the identity New established for the call.
func IdentityFromContext(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}

// Option configures New.
type Option func(*options)

type options struct {
	onFailure func(ctx context.Context, err error)
}

// WithOnFailure calls fn with every refusal (an UNAUTHENTICATED,
// PERMISSION_DENIED or UNAVAILABLE status), for example to count them. fn
// must not block. The error never contains a key.
func WithOnFailure(fn func(ctx context.Context, err error)) Option {
	return func(o *options) { o.onFailure = fn }
}

// New returns an authenticator for the gRPC server's tap (it is a
// server.AuthFunc): it runs when a call's headers arrive, before any message
// is read, and only hashes the key and looks it up. For each call it takes
// the configuration from dir (so reloads apply to the next call),
// identifies the tenant, and returns ctx carrying it (tenant.FromContext)
// and its Identity (IdentityFromContext).
//
//   - "authorization: Bearer <key>" (scheme case-insensitive) is hashed and
//     looked up among the api_key_sha256 hashes. No authorization metadata
//     and no mapped certificate gives UNAUTHENTICATED MsgMissingCredentials;
//     another scheme, an empty token or several authorization values give
//     UNAUTHENTICATED MsgMalformed; a key matching no tenant gives
//     UNAUTHENTICATED MsgUnknownKey, even when a certificate is valid.
//   - A client certificate counts only when the TLS handshake verified it
//     (a verified chain exists). Its URI SANs, its subject string and
//     "CN=<common name>" are looked up among the mtls_identities. A
//     verified certificate that maps to no tenant, with no key, gives
//     UNAUTHENTICATED MsgUnmappedCert followed by the certificate's
//     identities in parentheses; identities naming two tenants give
//     PERMISSION_DENIED MsgAmbiguousCert.
//   - A key and a certificate naming different tenants give
//     PERMISSION_DENIED MsgKeyCertMismatch.
//   - dir returning nil gives UNAVAILABLE MsgNoConfiguration.
func New(dir func() *config.Directory, opts ...Option) func(context.Context) (context.Context, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return func(ctx context.Context) (context.Context, error) {
		out, err := authenticate(ctx, dir())
		if err != nil && o.onFailure != nil {
			o.onFailure(ctx, err)
		}
		return out, err
	}
}

func authenticate(ctx context.Context, d *config.Directory) (context.Context, error) {
	if d == nil {
		return ctx, status.Error(codes.Unavailable, MsgNoConfiguration)
	}
	certTenant, certID, err := fromCertificate(ctx, d)
	if err != nil {
		return ctx, err
	}
	keyTenant, hasKey, err := fromAPIKey(ctx, d)
	if err != nil {
		return ctx, err
	}
	var t *tenant.Tenant
	var id Identity
	switch {
	case hasKey && certTenant != nil:
		if keyTenant != certTenant {
			return ctx, status.Error(codes.PermissionDenied, MsgKeyCertMismatch)
		}
		t, id = keyTenant, Identity{Method: MethodBoth, Certificate: certID}
	case hasKey:
		t, id = keyTenant, Identity{Method: MethodAPIKey}
	case certTenant != nil:
		t, id = certTenant, Identity{Method: MethodMTLS, Certificate: certID}
	case certID != "":
		return ctx, status.Error(codes.Unauthenticated, MsgUnmappedCert+" (certificate identities: "+certID+")")
	default:
		return ctx, status.Error(codes.Unauthenticated, MsgMissingCredentials)
	}
	id.TenantID = t.ID
	ctx = tenant.NewContext(ctx, t)
	return context.WithValue(ctx, identityKey{}, id), nil
}

// fromAPIKey resolves the bearer token, if the call has authorization
// metadata. hasKey is false when it has none.
func fromAPIKey(ctx context.Context, d *config.Directory) (t *tenant.Tenant, hasKey bool, err error) {
	vals := metadata.ValueFromIncomingContext(ctx, "authorization")
	if len(vals) == 0 {
		return nil, false, nil
	}
	if len(vals) > 1 {
		return nil, true, status.Error(codes.Unauthenticated, MsgMalformed)
	}
	token, err := grpcauth.AuthFromMD(ctx, "bearer")
	token = strings.TrimSpace(token)
	if err != nil || token == "" {
		return nil, true, status.Error(codes.Unauthenticated, MsgMalformed)
	}
	// The lookup is keyed by the key's SHA-256: its timing depends only on
	// the digest, which a caller cannot aim at a stored digest without the
	// key itself, so no constant-time comparison of keys is needed.
	t, ok := d.TenantByKeyHash(sha256.Sum256([]byte(token)))
	if !ok {
		return nil, true, status.Error(codes.Unauthenticated, MsgUnknownKey)
	}
	return t, true, nil
}

// fromCertificate maps the verified client certificate, if any, to a
// tenant. certID is the identity that matched or, when none did, a list of
// the certificate's identities; it is non-empty whenever a verified
// certificate exists.
func fromCertificate(ctx context.Context, d *config.Directory) (t *tenant.Tenant, certID string, err error) {
	cert := verifiedClientCert(ctx)
	if cert == nil {
		return nil, "", nil
	}
	for _, id := range CertificateIdentities(cert) {
		found, ok := d.TenantByIdentity(id)
		if !ok {
			continue
		}
		if t != nil && found != t {
			return nil, "", status.Error(codes.PermissionDenied, MsgAmbiguousCert)
		}
		if t == nil {
			t, certID = found, id
		}
	}
	if t == nil {
		certID = describeIdentities(CertificateIdentities(cert))
	}
	return t, certID, nil
}

// describeIdentities lists a certificate's identities for the caller (it
// is the caller's own certificate), bounded in length.
func describeIdentities(ids []string) string {
	if len(ids) == 0 {
		return "none"
	}
	s := strings.Join(ids, ", ")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// CertificateIdentities returns the identities a client certificate may be
// mapped by, in order of precedence: each URI SAN as a string, the subject
// in RFC 2253 form (cert.Subject.String(), for example
// "CN=team-a,OU=payments,O=Corp"), and "CN=" plus the common name. Empty
// values are left out.
func CertificateIdentities(cert *x509.Certificate) []string {
	ids := make([]string, 0, len(cert.URIs)+2)
	for _, u := range cert.URIs {
		ids = append(ids, u.String())
	}
	if s := cert.Subject.String(); s != "" {
		ids = append(ids, s)
	}
	if cn := cert.Subject.CommonName; cn != "" {
		if s := "CN=" + cn; len(ids) == 0 || ids[len(ids)-1] != s {
			ids = append(ids, s)
		}
	}
	return ids
}

// verifiedClientCert returns the peer's leaf certificate when the TLS
// handshake verified it against the client CA.
func verifiedClientCert(ctx context.Context) *x509.Certificate {
	p, ok := peer.FromContext(ctx)
	if !ok || p.AuthInfo == nil {
		return nil
	}
	var ti credentials.TLSInfo
	switch ai := p.AuthInfo.(type) {
	case credentials.TLSInfo:
		ti = ai
	case *credentials.TLSInfo:
		ti = *ai
	default:
		return nil
	}
	chains := ti.State.VerifiedChains
	if len(chains) == 0 || len(chains[0]) == 0 {
		return nil
	}
	return chains[0][0]
}
