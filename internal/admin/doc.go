// Package admin serves the broker's admin view on its own listener: the
// live gates of a tenant (paged, as JSON), one gate, the tenant's loaded
// provider catalog, a small self-refreshing HTML page over them, and
// net/http/pprof, all behind one guard (GET and HEAD only; loopback peers
// only unless an admin token is set, then a bearer token from every
// peer). It reads state and changes nothing, and it never shows a secret
// or a credential fingerprint: a gate kept per caller credential says only
// that it is, and a gate of a broker-held credential shows that
// credential's name.
package admin
