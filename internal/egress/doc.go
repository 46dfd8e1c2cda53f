// Package egress makes the broker's outbound HTTP safe for many tenants: it
// builds the transport and client used for upstream calls, checks every
// destination on the IP address actually dialled, classifies transport
// errors into engine.TransportError kinds, and redacts URLs for logs and
// spans.
//
// # Destination checks
//
// A [Guard] decides whether an (IP, port) may be dialled. By default it
// refuses loopback, private, link-local, cloud-metadata, CGNAT, multicast,
// documentation, benchmarking and the other special-purpose ranges of the
// IANA registries, including their IPv4-mapped, NAT64, 6to4 and Teredo
// forms, and everything outside IPv6 global unicast (2000::/3). A tenant may
// allow prefixes, ports and host names. The broker's own listening
// addresses are refused even when allowlisted.
//
// The check runs after DNS resolution, on the address handed to connect(2):
// [Dialer] resolves the name itself, checks every answer, and dials only the
// addresses it checked, so a DNS answer that changes between check and
// connect (rebinding) cannot slip through. The default low-level dial also
// hooks net.Dialer.ControlContext with the same check as a second line of
// defence.
//
// # One transport, many tenants
//
// [Transport] takes the guard of each request from its context
// ([WithGuard]) and keeps a separate *http.Transport, and therefore a
// separate connection pool, per distinct guard. A connection opened under
// one tenant's allowlist is never reused for a tenant whose guard would
// have refused it.
//
// # Redirects and proxies
//
// [NewClient] does not follow redirects unless asked. When it does, every
// hop is dialled through the same guard, and credentials are stripped once
// the origin (scheme, host or port) changes. Environment proxy variables
// (HTTP_PROXY, HTTPS_PROXY, NO_PROXY) are always ignored; a proxy is used
// only when [ClientConfig.Proxy] is set.
package egress
