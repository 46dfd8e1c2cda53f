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
// [Clients] is the one owner of the broker's guarded clients. A policy's
// destination rules ([Rules], built once when the policy loads) become,
// once per owner, a guard (the rules plus the broker's own addresses) and
// an *http.Client whose transport is bound to that guard
// ([Transport.Bind]); the client is kept with the rules, so a call looks
// nothing up. [Transport] keeps a separate *http.Transport, and therefore a
// separate connection pool, per distinct guard: a connection opened under
// one tenant's allowlist is never reused for a tenant whose guard would
// have refused it. No guard travels in a context.
//
// # Redirects and proxies
//
// [NewClient] (and every client of [Clients]) does not follow redirects
// unless asked. When it does, every hop is dialled through the same guard,
// and credentials are stripped once the origin (scheme, host or port)
// changes. A hop never carries a Referer the caller did not send (net/http
// would send the previous URL, query and API keys included), and never one
// across origins. Environment proxy variables
// (HTTP_PROXY, HTTPS_PROXY, NO_PROXY) are always ignored; a proxy is used
// only when [ClientConfig.Proxy] is set.
//
// # Decisions
//
//   - Teredo (2001::/32) addresses are decoded: the client's IPv4 address
//     (last 32 bits, inverted) is checked and the Teredo address is refused
//     when that address is. The rest of 2001::/23 is refused whole, even its
//     few globally reachable anycast assignments; a tenant can allowlist them.
//   - 6to4 (2002::/16) and NAT64 (64:ff9b::/96, 64:ff9b:1::/48) addresses
//     are checked on the IPv4 address they embed; IPv4-mapped addresses
//     are checked as IPv4; IPv4-compatible (::/96) and the rest of ::/8 are
//     refused.
//   - Besides the IANA special-purpose ranges, 168.63.129.16 (Azure's
//     WireServer, reachable from every Azure VM) is refused as a metadata
//     address.
//   - When a name resolves to several addresses, the refused ones are
//     skipped and the accepted ones are dialled in order; only when none is
//     accepted is the call refused.
//   - Hosts ending in a numeric label that are not canonical dotted-quad
//     IPv4 ("2130706433", "0177.0.0.1", "0x7f.1", "127.1", "foo.123") are
//     refused before resolution, so no resolver gets to read them as
//     inet_aton forms.
//   - Allowing a host name restricts which names may be called; it never
//     allows the special addresses they resolve to. Allowing a prefix does.
//   - Connection pools are kept per guard: see Transport. Pools are keyed by
//     the guard's settings, so rebuilding an identical guard (a config
//     reload) keeps its pool; at most ClientConfig.MaxPools pools are kept.
//   - A redirect to another port of the same host is a change of origin:
//     credentials are stripped, which is stricter than net/http.
package egress
