package egress

import (
	"container/list"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/idna"

	"github.com/retrybroker/retrybroker/internal/credential"
)

// Defaults applied by NewTransport and NewClient to zero ClientConfig
// fields.
const (
	DefaultTLSHandshakeTimeout = 10 * time.Second
	DefaultIdleConnTimeout     = 90 * time.Second
	// DefaultMaxIdleConnsPerHost is sized for a broker: many concurrent
	// calls to few provider hosts. A smaller pool makes every call beyond
	// it open (and then close) a new upstream connection.
	DefaultMaxIdleConnsPerHost = 256
	// DefaultMaxIdleConns bounds idle connections across hosts per pool.
	DefaultMaxIdleConns = 1024
	DefaultMaxRedirects = 10
	DefaultMaxPools     = 256
)

// Caps on an upstream response's head, fixed for every pool. The gRPC
// server's send limit is derived from them (server.MaxSendMsgSize), so a
// response whose head passed them always fits the message that carries it.
const (
	// MaxResponseHeaderBytes bounds the bytes of a response head as the
	// transport reads them (http.Transport.MaxResponseHeaderBytes: the
	// status line and header lines on HTTP/1, the header list size on
	// HTTP/2), and the sum of the names' and values' lengths once parsed.
	MaxResponseHeaderBytes = 1 << 20
	// MaxResponseHeaderLines bounds the header lines (name-value pairs,
	// repeated names counted each time) of a response.
	MaxResponseHeaderLines = 1000
)

// ErrResponseHeadersTooLarge is returned (wrapped) by a round trip whose
// response head went past MaxResponseHeaderBytes or MaxResponseHeaderLines.
// The response is closed; none of it is returned.
var ErrResponseHeadersTooLarge = errors.New("egress: upstream response headers too large")

// DefaultSensitiveHeaders are stripped from a followed redirect once the
// origin changes. ClientConfig.SensitiveHeaders adds to them.
var DefaultSensitiveHeaders = []string{
	"Authorization", "Proxy-Authorization", "Cookie", "Cookie2",
	"X-Api-Key", "Api-Key", "X-Auth-Token",
}

// ErrTooManyRedirects is returned (wrapped in a *url.Error) when a client
// following redirects would exceed ClientConfig.MaxRedirects.
var ErrTooManyRedirects = errors.New("egress: too many redirects")

// ClientConfig configures NewTransport and NewClient. Zero fields take the
// documented defaults.
type ClientConfig struct {
	// Guard checks the destinations of NewTransport's own RoundTrip and
	// NewClient's client. nil means the default rules. Clients binds each
	// policy's guard instead (see Clients).
	Guard *Guard
	// Resolver resolves host names. nil means net.DefaultResolver.
	Resolver Resolver
	// DialFunc opens connections to checked addresses. nil means a
	// net.Dialer whose ControlContext repeats the guard's check.
	DialFunc DialFunc
	// DialTimeout bounds each connect attempt. Zero means
	// DefaultDialTimeout.
	DialTimeout time.Duration
	// TLSHandshakeTimeout bounds the TLS handshake. Zero means
	// DefaultTLSHandshakeTimeout.
	TLSHandshakeTimeout time.Duration
	// ResponseHeaderTimeout bounds the wait for response headers after the
	// request is written. Zero (the broker's setting) means no bound of the
	// transport's own: every request the broker sends carries a deadline
	// (an attempt's attempt_timeout, a token request's timeout), and a
	// fixed bound here would cut an attempt that its policy allows (an
	// upstream that takes 40 s to its head under attempt_timeout 60s), and
	// costs a timer and a channel per request besides.
	ResponseHeaderTimeout time.Duration
	// IdleConnTimeout closes pooled connections idle this long. Zero means
	// DefaultIdleConnTimeout.
	IdleConnTimeout time.Duration
	// MaxIdleConnsPerHost bounds pooled idle connections per host:port in
	// each pool. Zero means DefaultMaxIdleConnsPerHost.
	MaxIdleConnsPerHost int
	// MaxIdleConns bounds pooled idle connections across hosts in each
	// pool. Zero means DefaultMaxIdleConns.
	MaxIdleConns int
	// MaxPools bounds the number of per-guard connection pools kept; the
	// least recently used pool is dropped (its idle connections closed)
	// beyond it. Zero means DefaultMaxPools.
	MaxPools int
	// TLSClientConfig is cloned for every pool. nil means Go's defaults
	// (system roots).
	TLSClientConfig *tls.Config
	// Proxy, when set, sends every request through this HTTP proxy.
	// Environment proxy variables are never read. With a proxy, the broker
	// dials only the proxy (which is not checked by the guard: the operator
	// chose it); destinations are checked by name (Guard.CheckHost) and IP
	// literals by address, but names are resolved by the proxy, which must
	// enforce its own address rules.
	Proxy *url.URL
	// FollowRedirects makes NewClient follow up to MaxRedirects redirects.
	// By default a redirect response is returned as is.
	FollowRedirects bool
	// MaxRedirects is the number of redirects followed when
	// FollowRedirects is set. Zero means DefaultMaxRedirects.
	MaxRedirects int
	// SensitiveHeaders are stripped from a followed redirect once the
	// origin changes, in addition to DefaultSensitiveHeaders.
	SensitiveHeaders []string
	// Timeout is the overall http.Client timeout of NewClient, redirects
	// included. Zero means none: bound calls with the request context.
	Timeout time.Duration
}

// Transport is an http.RoundTripper that sends each request under its
// configured guard, and hands out round trippers bound to other guards
// (Bind). It keeps one *http.Transport, and so one connection pool, per
// distinct guard (guards with identical settings share one): a pooled
// connection is only ever reused under a guard that decides exactly like
// the guard that accepted it, and every new connection is checked. Create
// it with NewTransport. It is safe for concurrent use.
type Transport struct {
	cfg       ClientConfig
	dialer    *Dialer
	proxyAddr string // host:port of cfg.Proxy, or ""

	mu    sync.Mutex
	pools map[string]*list.Element // of *pool
	lru   *list.List               // front: most recently used
}

type pool struct {
	key string
	rt  *http.Transport
}

// NewTransport builds a Transport from cfg, applying the defaults for zero
// fields.
func NewTransport(cfg ClientConfig) *Transport {
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.TLSHandshakeTimeout <= 0 {
		cfg.TLSHandshakeTimeout = DefaultTLSHandshakeTimeout
	}
	if cfg.IdleConnTimeout <= 0 {
		cfg.IdleConnTimeout = DefaultIdleConnTimeout
	}
	if cfg.MaxIdleConnsPerHost <= 0 {
		cfg.MaxIdleConnsPerHost = DefaultMaxIdleConnsPerHost
	}
	if cfg.MaxIdleConns <= 0 {
		cfg.MaxIdleConns = DefaultMaxIdleConns
	}
	if cfg.MaxPools <= 0 {
		cfg.MaxPools = DefaultMaxPools
	}
	t := &Transport{
		cfg: cfg,
		dialer: &Dialer{
			Guard:    cfg.Guard,
			Resolver: cfg.Resolver,
			DialFunc: cfg.DialFunc,
			Timeout:  cfg.DialTimeout,
		},
		pools: make(map[string]*list.Element),
		lru:   list.New(),
	}
	if cfg.Proxy != nil {
		t.proxyAddr = canonicalAddr(cfg.Proxy)
	}
	return t
}

// RoundTrip sends req under the configured guard (ClientConfig.Guard). It
// refuses, without opening a connection, a URL that is not http or https or
// has no host (error wrapping ErrInvalidURL), and a host refused by
// Guard.CheckHost or, for an IP literal, by Guard.Check (error wrapping
// *RefusedError). Addresses of names are checked when dialled.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	return t.roundTrip(t.cfg.Guard, req)
}

// Bind returns a round tripper that sends every request under g, exactly as
// RoundTrip does under the configured guard, through g's connection pool.
func (t *Transport) Bind(g *Guard) http.RoundTripper { return &boundTransport{t: t, g: g} }

// boundTransport is a Transport bound to one guard.
type boundTransport struct {
	t *Transport
	g *Guard
}

func (b *boundTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return b.t.roundTrip(b.g, req)
}

func (t *Transport) roundTrip(g *Guard, req *http.Request) (*http.Response, error) {
	if err := t.precheck(g, req.URL); err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	resp, err := t.transportFor(g).RoundTrip(req)
	if err != nil {
		if headTooLong(err) {
			err = fmt.Errorf("%w (more than %d bytes): %w", ErrResponseHeadersTooLarge, MaxResponseHeaderBytes, err)
		}
		return nil, err
	}
	if err := checkHead(resp.Header); err != nil {
		_ = resp.Body.Close()
		return nil, err
	}
	return resp, nil
}

// checkHead checks a parsed response head against the caps: the transport
// bounds the bytes it reads, but not the number of lines, and HTTP/2 counts
// bytes its own way.
func checkHead(h http.Header) error {
	lines, size := 0, 0
	for k, vs := range h {
		lines += len(vs)
		for _, v := range vs {
			size += len(k) + len(v)
		}
	}
	switch {
	case lines > MaxResponseHeaderLines:
		return fmt.Errorf("%w: %d header lines (at most %d)", ErrResponseHeadersTooLarge, lines, MaxResponseHeaderLines)
	case size > MaxResponseHeaderBytes:
		return fmt.Errorf("%w: %d bytes of names and values (at most %d)", ErrResponseHeadersTooLarge, size, MaxResponseHeaderBytes)
	}
	return nil
}

// headTooLong reports whether err is net/http's own report of a response
// head past MaxResponseHeaderBytes (unexported errors, matched by text as
// isInvalidURL does).
func headTooLong(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "server response headers exceeded") ||
		strings.Contains(msg, "http2: response header list larger than advertised limit") ||
		strings.Contains(msg, "header list too large")
}

func (t *Transport) precheck(g *Guard, u *url.URL) error {
	if u == nil {
		return fmt.Errorf("egress: %w: nil URL", ErrInvalidURL)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("egress: %w: unsupported protocol scheme %q", ErrInvalidURL, u.Scheme)
	}
	host := u.Hostname()
	if host == "" {
		return fmt.Errorf("egress: %w: no host", ErrInvalidURL)
	}
	host, err := toASCII(host)
	if err != nil {
		return err
	}
	_, ip, err := g.checkHost(host)
	if err != nil {
		return err
	}
	if ip.IsValid() {
		port, err := urlPort(u)
		if err != nil {
			return err
		}
		return g.Check(netip.AddrPortFrom(ip, port))
	}
	return nil
}

func urlPort(u *url.URL) (uint16, error) {
	p := u.Port()
	if p == "" {
		if u.Scheme == "https" {
			return 443, nil
		}
		return 80, nil
	}
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("egress: %w: invalid port", ErrInvalidURL)
	}
	return uint16(n), nil
}

// transportFor returns the pool for g's settings, creating it (and
// dropping the least recently used pool beyond MaxPools) as needed.
func (t *Transport) transportFor(g *Guard) *http.Transport {
	key := g.poolKey()
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.pools[key]; ok {
		t.lru.MoveToFront(e)
		return e.Value.(*pool).rt
	}
	p := &pool{key: key, rt: t.newHTTPTransport(g)}
	t.pools[key] = t.lru.PushFront(p)
	for t.lru.Len() > t.cfg.MaxPools {
		old := t.lru.Back()
		t.lru.Remove(old)
		op := old.Value.(*pool)
		delete(t.pools, op.key)
		// Connections in use finish normally; they are closed once idle
		// for IdleConnTimeout.
		op.rt.CloseIdleConnections()
	}
	return p.rt
}

func (t *Transport) newHTTPTransport(g *Guard) *http.Transport {
	rt := &http.Transport{
		Proxy: nil, // never http.ProxyFromEnvironment
		DialContext: func(ctx context.Context, network, address string) (net.Conn, error) {
			if t.proxyAddr != "" && address == t.proxyAddr {
				return t.dialProxy(ctx, network, address)
			}
			// The pool's own guard, not the context's: every connection
			// in this pool was accepted by a guard with this pool's key.
			return t.dialer.dial(ctx, g, network, address)
		},
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    t.cfg.TLSHandshakeTimeout,
		ResponseHeaderTimeout:  t.cfg.ResponseHeaderTimeout,
		IdleConnTimeout:        t.cfg.IdleConnTimeout,
		MaxIdleConns:           t.cfg.MaxIdleConns,
		MaxIdleConnsPerHost:    t.cfg.MaxIdleConnsPerHost,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: MaxResponseHeaderBytes,
	}
	if t.cfg.TLSClientConfig != nil {
		rt.TLSClientConfig = t.cfg.TLSClientConfig.Clone()
	}
	if t.cfg.Proxy != nil {
		rt.Proxy = http.ProxyURL(t.cfg.Proxy)
	}
	return rt
}

// dialProxy dials the operator-configured proxy. It is not subject to the
// tenant's guard.
func (t *Transport) dialProxy(ctx context.Context, network, address string) (net.Conn, error) {
	if t.cfg.DialFunc != nil {
		host, port, err := net.SplitHostPort(address)
		if err != nil {
			return nil, err
		}
		if _, err := netip.ParseAddr(host); err != nil {
			r := t.cfg.Resolver
			if r == nil {
				r = net.DefaultResolver
			}
			ips, err := r.LookupNetIP(ctx, ipNetwork(network), host)
			if err != nil {
				return nil, fmt.Errorf("egress: resolve proxy: %w", err)
			}
			if len(ips) == 0 {
				return nil, fmt.Errorf("egress: resolve proxy: %w",
					&net.DNSError{Err: "no such host", Name: host, IsNotFound: true})
			}
			address = net.JoinHostPort(ips[0].Unmap().String(), port)
		}
		return t.cfg.DialFunc(ctx, network, address)
	}
	nd := &net.Dialer{Timeout: t.cfg.DialTimeout, KeepAlive: 30 * time.Second}
	return nd.DialContext(ctx, network, address)
}

// canonicalAddr returns u's host:port with the scheme's default port, as
// http.Transport passes it to DialContext.
func canonicalAddr(u *url.URL) string {
	host := u.Hostname()
	if ascii, err := toASCII(host); err == nil {
		host = ascii
	}
	port := u.Port()
	if port == "" {
		switch u.Scheme {
		case "https":
			port = "443"
		case "socks5", "socks5h":
			port = "1080"
		default:
			port = "80"
		}
	}
	return net.JoinHostPort(host, port)
}

// toASCII converts a non-ASCII (internationalized) host name to its
// punycode form, as net/http does before dialling; ASCII hosts are
// returned unchanged.
func toASCII(host string) (string, error) {
	for i := 0; i < len(host); i++ {
		if host[i] >= 0x80 {
			ascii, err := idna.Lookup.ToASCII(host)
			if err != nil {
				return "", &RefusedError{Host: host, Reason: "invalid internationalized host name"}
			}
			return ascii, nil
		}
	}
	return host, nil
}

// CloseIdleConnections closes the idle connections of every pool.
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for e := t.lru.Front(); e != nil; e = e.Next() {
		e.Value.(*pool).rt.CloseIdleConnections()
	}
}

// NewClient returns an *http.Client using NewTransport(cfg). It has no
// cookie jar. By default it does not follow redirects: a 3xx response is
// returned as is (CheckRedirect returns http.ErrUseLastResponse). With
// cfg.FollowRedirects it follows up to cfg.MaxRedirects of them, each hop
// dialled through the guard; once any hop's origin (scheme, host or port)
// differs from the first request's, the sensitive headers (Authorization,
// Proxy-Authorization, Cookie, API-key headers: DefaultSensitiveHeaders
// plus cfg.SensitiveHeaders) are removed from that hop and every later one,
// even one back on the first origin. A different port on the same host
// counts as a different origin (RFC 6454), which is stricter than
// net/http's own rule. Every header of the broker-held credential the
// request's context names (credential.WithCredential) is removed the same
// way; the credential is not applied again on any hop.
func NewClient(cfg ClientConfig) *http.Client {
	return &http.Client{
		Transport:     NewTransport(cfg),
		CheckRedirect: redirectPolicy(cfg),
		Timeout:       cfg.Timeout,
	}
}

func redirectPolicy(cfg ClientConfig) func(*http.Request, []*http.Request) error {
	if !cfg.FollowRedirects {
		return func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	}
	limit := cfg.MaxRedirects
	if limit <= 0 {
		limit = DefaultMaxRedirects
	}
	sensitive := make([]string, 0, len(DefaultSensitiveHeaders)+len(cfg.SensitiveHeaders))
	for _, h := range DefaultSensitiveHeaders {
		sensitive = append(sensitive, http.CanonicalHeaderKey(h))
	}
	for _, h := range cfg.SensitiveHeaders {
		sensitive = append(sensitive, http.CanonicalHeaderKey(h))
	}
	return func(req *http.Request, via []*http.Request) error {
		if len(via) > limit {
			return fmt.Errorf("%w: stopped after %d", ErrTooManyRedirects, limit)
		}
		first := origin(via[0].URL)
		crossed := origin(req.URL) != first
		for _, v := range via[1:] {
			crossed = crossed || origin(v.URL) != first
		}
		// net/http sets Referer to the previous URL, query included, and a
		// query may carry an API key: a hop never carries a Referer the
		// caller did not send, and never one across origins.
		req.Header.Del("Referer")
		if own := via[0].Header.Get("Referer"); own != "" && !crossed {
			req.Header.Set("Referer", own)
		}
		if crossed {
			for k := range req.Header {
				for _, h := range sensitive {
					if strings.EqualFold(k, h) {
						delete(req.Header, k)
					}
				}
			}
			// A broker-held credential's headers (a signature, X-Amz-*,
			// an API key under any name) never cross origins either.
			if cred := credential.FromContext(req.Context()); cred != nil {
				for _, h := range cred.Headers() {
					for k := range req.Header {
						if strings.EqualFold(k, h) {
							delete(req.Header, k)
						}
					}
				}
			}
		}
		return nil
	}
}

// origin returns scheme://host:port of u, lower-cased, with the scheme's
// default port made explicit.
func origin(u *url.URL) string {
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(canonicalAddr(u))
}
