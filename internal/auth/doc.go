// Package auth identifies the tenant behind each gRPC call.
//
// A caller proves who it is with an API key, sent as gRPC metadata
// "authorization: Bearer <key>", or with a TLS client certificate verified
// against the broker's client CA. New returns the server.AuthFunc that
// checks both against the current config.Directory and puts the tenant in
// the call's context (tenant.NewContext).
//
//   - API keys are never stored: the configuration holds their SHA-256
//     (APIKeyHash, or: printf %s "$KEY" | sha256sum), and the broker hashes
//     the presented key to look it up. Keys are never logged or echoed.
//   - A certificate maps to a tenant by one of its URI SANs (for example a
//     SPIFFE ID, spiffe://corp/ns/team-a/sa/caller) or by its subject, either
//     the full RFC 2253 subject (x509.Certificate.Subject.String(), for
//     example "CN=team-a,O=Corp") or "CN=" and the common name alone.
//   - When both a key and a certificate are presented they must name the
//     same tenant, or the call is refused with PERMISSION_DENIED.
//
// ServerTLS builds the server's transport credentials (TLS 1.2 or later,
// optional or required client certificates, certificate rotation without
// restart). PolicyRef and ResolvePolicy resolve the policy a request names
// inside the caller's tenant without revealing other tenants' policies.
package auth
