package egress_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/retrybroker/retrybroker/internal/egress"
)

func TestClientAllowlistedLoopbackSucceeds(t *testing.T) {
	srv := newUpstream(t, nil)
	// Default DialFunc: the real net.Dialer with the ControlContext hook.
	c := newTestClient(t, egress.ClientConfig{Guard: mustGuard(t, egress.AllowPrefixes(loopback32))}, nil, nil)
	resp := mustGet(t, context.Background(), c, srv.URL, nil)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || string(body) != "ok" {
		t.Errorf("got %d %q", resp.StatusCode, body)
	}
}

func TestClientDefaultRefusesLoopback(t *testing.T) {
	srv := newUpstream(t, nil)
	c := newTestClient(t, egress.ClientConfig{}, nil, nil)
	_, err := get(context.Background(), c, srv.URL, nil)
	assertRefused(t, err)
	if n := srv.conns.Load(); n != 0 {
		t.Errorf("server saw %d connections, want 0", n)
	}
}

func TestClientPortRestriction(t *testing.T) {
	srv := newUpstream(t, nil)
	other := srv.AddrPort().Port() + 1
	if other == 0 {
		other = 1
	}
	refusing := newTestClient(t, egress.ClientConfig{
		Guard: mustGuard(t, egress.AllowPrefixes(loopback32), egress.AllowPorts(other)),
	}, nil, nil)
	_, err := get(context.Background(), refusing, srv.URL, nil)
	if re := assertRefused(t, err); !strings.Contains(re.Reason, "not an allowed port") {
		t.Errorf("reason %q", re.Reason)
	}
	allowing := newTestClient(t, egress.ClientConfig{
		Guard: mustGuard(t, egress.AllowPrefixes(loopback32), egress.AllowPorts(srv.AddrPort().Port())),
	}, nil, nil)
	mustGet(t, context.Background(), allowing, srv.URL, nil)
	if n := srv.conns.Load(); n != 1 {
		t.Errorf("server saw %d connections, want 1", n)
	}
}

func TestClientSelfRefusedEvenWhenAllowlisted(t *testing.T) {
	self := newUpstream(t, nil)
	c := newTestClient(t, egress.ClientConfig{
		Guard: mustGuard(t, egress.AllowPrefixes(loopback32), egress.SelfAddrs(self.AddrPort())),
	}, nil, nil)
	_, err := get(context.Background(), c, self.URL, nil)
	if re := assertRefused(t, err); re.Reason != "the broker's own address" {
		t.Errorf("reason %q", re.Reason)
	}
	if n := self.conns.Load(); n != 0 {
		t.Errorf("self saw %d connections, want 0", n)
	}
}

func TestClientHostAllowlist(t *testing.T) {
	srv := newUpstream(t, nil)
	res := newFakeResolver().Map("api.svc.test", "127.0.0.1").Map("evil.test", "127.0.0.1")
	rec := &recordingDialer{}
	g := mustGuard(t, egress.AllowHosts("*.svc.test"), egress.AllowPrefixes(loopback32))
	c := newTestClient(t, egress.ClientConfig{Guard: g}, res, rec)

	mustGet(t, context.Background(), c, hostURL("api.svc.test", srv.Port()), nil)
	_, err := get(context.Background(), c, hostURL("evil.test", srv.Port()), nil)
	if re := assertRefused(t, err); re.Reason != "host is not an allowed host" {
		t.Errorf("reason %q", re.Reason)
	}
	if res.Calls("evil.test") != 0 {
		t.Error("a host outside the allowlist was resolved")
	}

	// Allowing a name does not allow its special address.
	nameOnly := newTestClient(t, egress.ClientConfig{Guard: mustGuard(t, egress.AllowHosts("*.svc.test"))}, res, rec)
	_, err = get(context.Background(), nameOnly, hostURL("api.svc.test", srv.Port()), nil)
	if re := assertRefused(t, err); !strings.Contains(re.Reason, "loopback") {
		t.Errorf("reason %q", re.Reason)
	}
	if got := rec.Addrs(); len(got) != 1 {
		t.Errorf("dialled %v, want only the first, allowed request", got)
	}
}

// TestTransportPoolPerGuard: a connection pooled under tenant A's
// allowlist is not reused for tenant B, whose guard refuses it; a guard
// with A's settings shares A's pool.
func TestTransportPoolPerGuard(t *testing.T) {
	srv := newUpstream(t, nil)
	rec := &recordingDialer{}
	// A name, not an IP literal: the pre-dial check on the URL cannot
	// refuse it, only a fresh dial can.
	res := newFakeResolver().Map("api.svc.test", "127.0.0.1")
	tr := newTestClient(t, egress.ClientConfig{}, res, rec).Transport.(*egress.Transport)
	target := hostURL("api.svc.test", srv.Port())
	bound := func(g *egress.Guard) *http.Client { return &http.Client{Transport: tr.Bind(g)} }
	tenantA := bound(mustGuard(t, egress.AllowPrefixes(loopback32)))
	tenantB := bound(mustGuard(t)) // default rules
	sameAsA := bound(mustGuard(t, egress.AllowPrefixes(loopback32)))
	ctx := context.Background()

	resp := mustGet(t, ctx, tenantA, target, nil)
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close() // the connection goes back to A's pool

	_, err := get(ctx, tenantB, target, nil)
	assertRefused(t, err)
	if n := len(srv.Requests()); n != 1 {
		t.Fatalf("server got %d requests, want 1: tenant B reached it", n)
	}

	resp = mustGet(t, ctx, sameAsA, target, nil)
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if n := srv.conns.Load(); n != 1 {
		t.Errorf("server saw %d connections, want 1 (equal guards share a pool)", n)
	}
	if got := rec.Addrs(); len(got) != 1 {
		t.Errorf("dialled %v, want one dial", got)
	}
}

func TestTransportEvictsPoolsBeyondMax(t *testing.T) {
	srv := newUpstream(t, nil)
	tr := egress.NewTransport(egress.ClientConfig{MaxPools: 1, Resolver: newFakeResolver()})
	t.Cleanup(tr.CloseIdleConnections)
	g1 := mustGuard(t, egress.AllowPrefixes(loopback32))
	g2 := mustGuard(t, egress.AllowPrefixes(loopback32), egress.AllowPorts(srv.AddrPort().Port()))
	for i, g := range []*egress.Guard{g1, g2, g1} {
		resp := mustGet(t, context.Background(), &http.Client{Transport: tr.Bind(g)}, srv.URL, nil)
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if want := int32(i + 1); srv.conns.Load() != want {
			t.Errorf("after request %d: %d connections, want %d (evicted pools are not reused)", i+1, srv.conns.Load(), want)
		}
	}
}

func TestClientInvalidURL(t *testing.T) {
	c := newTestClient(t, egress.ClientConfig{}, nil, &recordingDialer{})
	for _, u := range []string{"ftp://example.com/x", "http:///nohost", "http://example.com:0/"} {
		_, err := get(context.Background(), c, u, nil)
		if got := egress.Classify(err).String(); got != "invalid_url" {
			t.Errorf("%s: %v classified %q, want invalid_url", u, err, got)
		}
	}
}

// redirector answers every request with a redirect to target(r).
func redirector(t *testing.T, target func(r *http.Request) string) *upstream {
	return newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target(r), http.StatusFound)
	})
}

var credentials = http.Header{
	"Authorization":       {"Bearer secret-token"},
	"Proxy-Authorization": {"Basic c2VjcmV0"},
	"Cookie":              {"session=secret"},
	"X-Api-Key":           {"secret-key"},
	"Api-Key":             {"secret-key-2"},
	"X-Tenant-Secret":     {"configured"},
	"X-Trace":             {"keep-me"},
}

var sensitive = []string{"Authorization", "Proxy-Authorization", "Cookie", "X-Api-Key", "Api-Key", "X-Tenant-Secret"}

func followConfig() egress.ClientConfig {
	return egress.ClientConfig{
		Guard:            mustGuardNoT(egress.AllowPrefixes(loopback32)),
		FollowRedirects:  true,
		MaxRedirects:     5,
		SensitiveHeaders: []string{"x-tenant-secret"},
	}
}

func mustGuardNoT(opts ...egress.GuardOption) *egress.Guard {
	g, err := egress.NewGuard(opts...)
	if err != nil {
		panic(err)
	}
	return g
}

func TestClientRedirectNotFollowedByDefault(t *testing.T) {
	final := newUpstream(t, nil)
	start := redirector(t, func(*http.Request) string { return final.URL + "/final" })
	c := newTestClient(t, egress.ClientConfig{Guard: mustGuard(t, egress.AllowPrefixes(loopback32))}, nil, nil)
	resp := mustGet(t, context.Background(), c, start.URL, nil)
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != final.URL+"/final" {
		t.Errorf("got %d Location %q, want the 302 itself", resp.StatusCode, resp.Header.Get("Location"))
	}
	if n := final.conns.Load(); n != 0 {
		t.Errorf("redirect target saw %d connections, want 0", n)
	}
}

// TestClientRedirectStripsCredentialsAcrossOrigins: 127.0.0.1 on another
// port is another origin, so credentials are stripped.
func TestClientRedirectStripsCredentialsAcrossOrigins(t *testing.T) {
	final := newUpstream(t, nil)
	start := redirector(t, func(*http.Request) string { return final.URL + "/final" })
	c := newTestClient(t, followConfig(), nil, nil)
	resp := mustGet(t, context.Background(), c, start.URL, credentials)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	first := start.Requests()[0]
	for _, h := range sensitive {
		if first.Header.Get(h) == "" {
			t.Errorf("first hop lacks %s", h)
		}
	}
	reqs := final.Requests()
	if len(reqs) != 1 {
		t.Fatalf("final got %d requests", len(reqs))
	}
	for _, h := range sensitive {
		if v := reqs[0].Header.Get(h); v != "" {
			t.Errorf("cross-origin hop carried %s: %q", h, v)
		}
	}
	if reqs[0].Header.Get("X-Trace") != "keep-me" {
		t.Error("non-sensitive header dropped")
	}
}

func TestClientRedirectKeepsCredentialsOnSameOrigin(t *testing.T) {
	srv := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/start" {
			http.Redirect(w, r, "/final", http.StatusFound)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	c := newTestClient(t, followConfig(), nil, nil)
	mustGet(t, context.Background(), c, srv.URL+"/start", credentials)
	reqs := srv.Requests()
	if len(reqs) != 2 || reqs[1].URL.Path != "/final" {
		t.Fatalf("requests: %d", len(reqs))
	}
	for _, h := range sensitive {
		if reqs[1].Header.Get(h) == "" {
			t.Errorf("same-origin hop lost %s", h)
		}
	}
}

// TestClientRedirectBackToOriginStaysStripped: A -> B -> A. Once a hop left
// the origin, credentials are not restored on the way back, since B chose
// where they would go.
func TestClientRedirectBackToOriginStaysStripped(t *testing.T) {
	var aURL atomic.Value
	b := redirector(t, func(*http.Request) string { return aURL.Load().(string) + "/back" })
	a := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/start" {
			http.Redirect(w, r, b.URL+"/bounce", http.StatusFound)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	aURL.Store(a.URL)
	c := newTestClient(t, followConfig(), nil, nil)
	mustGet(t, context.Background(), c, a.URL+"/start", credentials)
	reqs := a.Requests()
	if len(reqs) != 2 || reqs[1].URL.Path != "/back" {
		t.Fatalf("A got %d requests", len(reqs))
	}
	for _, h := range sensitive {
		if v := reqs[1].Header.Get(h); v != "" {
			t.Errorf("hop back to A carried %s: %q", h, v)
		}
	}
}

func TestClientRedirectLimit(t *testing.T) {
	loop := redirector(t, func(*http.Request) string { return "/again" })
	cfg := followConfig()
	cfg.MaxRedirects = 3
	c := newTestClient(t, cfg, nil, nil)
	_, err := get(context.Background(), c, loop.URL, nil)
	if !errors.Is(err, egress.ErrTooManyRedirects) {
		t.Fatalf("err = %v, want ErrTooManyRedirects", err)
	}
	if n := len(loop.Requests()); n != 4 {
		t.Errorf("server got %d requests, want 4 (first + 3 redirects)", n)
	}
}

// TestClientRedirectToInternalHostRefused: the allowlisted loopback
// upstream redirects to a name that resolves to 10.0.0.5; the hop is
// refused and nothing dials 10.0.0.5.
func TestClientRedirectToInternalHostRefused(t *testing.T) {
	start := redirector(t, func(*http.Request) string { return "http://internal.example/" })
	res := newFakeResolver().Map("internal.example", "10.0.0.5")
	rec := &recordingDialer{}
	c := newTestClient(t, followConfig(), res, rec)
	_, err := get(context.Background(), c, start.URL, nil)
	re := assertRefused(t, err)
	if re.Addr != netip.MustParseAddrPort("10.0.0.5:80") {
		t.Errorf("refused %v", re.Addr)
	}
	if got, want := rec.Addrs(), []string{start.Listener.Addr().String()}; !slices.Equal(got, want) {
		t.Errorf("dialled %v, want only %v", got, want)
	}
	if res.Calls("internal.example") != 1 {
		t.Error("redirect target was not resolved and checked")
	}
}

func TestClientRedirectToMetadataLiteralRefused(t *testing.T) {
	start := redirector(t, func(*http.Request) string { return "http://169.254.169.254/latest/meta-data/" })
	rec := &recordingDialer{}
	c := newTestClient(t, followConfig(), nil, rec)
	_, err := get(context.Background(), c, start.URL, nil)
	assertRefused(t, err)
	if got := rec.Addrs(); len(got) != 1 {
		t.Errorf("dialled %v, want only the start server", got)
	}
}

func TestClientRedirectToSelfRefused(t *testing.T) {
	self := newUpstream(t, nil)
	start := redirector(t, func(*http.Request) string { return self.URL + "/" })
	cfg := followConfig()
	cfg.Guard = mustGuard(t, egress.AllowPrefixes(loopback32), egress.SelfAddrs(self.AddrPort()))
	rec := &recordingDialer{}
	c := newTestClient(t, cfg, nil, rec)
	_, err := get(context.Background(), c, start.URL, nil)
	if re := assertRefused(t, err); re.Reason != "the broker's own address" {
		t.Errorf("reason %q", re.Reason)
	}
	if n := self.conns.Load(); n != 0 {
		t.Errorf("self saw %d connections, want 0", n)
	}
}

// recordingProxy is a loopback listener that counts connections and
// answers any HTTP request with 200 "via proxy", recording its target.
func recordingProxy(t *testing.T) *upstream {
	return newUpstream(t, func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("via proxy"))
	})
}

func TestClientIgnoresProxyEnvironment(t *testing.T) {
	proxy := recordingProxy(t)
	srv := newUpstream(t, nil)
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"} {
		t.Setenv(k, proxy.URL)
	}
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")

	// Control: a transport that honours the variables reaches the proxy,
	// so the setup would catch a client that read them. (Not
	// http.ProxyFromEnvironment, which caches the environment per process.)
	// Its dial func connects to loopback only and it never resolves names.
	if os.Getenv("HTTP_PROXY") != proxy.URL {
		t.Fatal("HTTP_PROXY not set")
	}
	control := &http.Client{Transport: &http.Transport{
		Proxy:       func(*http.Request) (*url.URL, error) { return url.Parse(os.Getenv("HTTP_PROXY")) },
		DialContext: (&recordingDialer{}).Dial,
	}}
	t.Cleanup(control.CloseIdleConnections)
	resp := mustGet(t, context.Background(), control, "http://api.example.test/", nil)
	_, _ = io.Copy(io.Discard, resp.Body)
	if len(proxy.Requests()) != 1 {
		t.Fatal("control request did not reach the proxy")
	}

	// A non-loopback name, so that an environment proxy would apply
	// (net/http never proxies localhost or loopback literals).
	res := newFakeResolver().Map("api.example.test", "127.0.0.1")
	c := newTestClient(t, egress.ClientConfig{Guard: mustGuard(t, egress.AllowPrefixes(loopback32))}, res, nil)
	resp = mustGet(t, context.Background(), c, hostURL("api.example.test", srv.Port()), nil)
	body, _ := io.ReadAll(resp.Body)
	if string(body) != "ok" {
		t.Errorf("body %q, want the upstream's", body)
	}
	if n := len(proxy.Requests()); n != 1 {
		t.Errorf("proxy got %d requests, want only the control's", n)
	}
}

func TestClientConfiguredProxy(t *testing.T) {
	proxy := recordingProxy(t)
	pu, _ := url.Parse(proxy.URL)
	rec := &recordingDialer{}
	c := newTestClient(t, egress.ClientConfig{Proxy: pu}, nil, rec)

	resp := mustGet(t, context.Background(), c, "http://api.example.test/v1?x=1", nil)
	body, _ := io.ReadAll(resp.Body)
	if string(body) != "via proxy" {
		t.Fatalf("body %q", body)
	}
	reqs := proxy.Requests()
	if len(reqs) != 1 || reqs[0].URL.Host != "api.example.test" {
		t.Fatalf("proxy requests %v", reqs)
	}
	// Destinations are still checked by name and IP literal.
	for _, u := range []string{"http://10.0.0.1/", "http://0177.0.0.1/", "http://[::1]:8080/"} {
		_, err := get(context.Background(), c, u, nil)
		assertRefused(t, err)
	}
	if n := len(proxy.Requests()); n != 1 {
		t.Errorf("proxy got %d requests, want 1", n)
	}
	if got := rec.Addrs(); len(got) != 1 || got[0] != proxy.Listener.Addr().String() {
		t.Errorf("dialled %v, want only the proxy", got)
	}
}

func TestNewClientHasNoJarAndNoProxy(t *testing.T) {
	c := egress.NewClient(egress.ClientConfig{})
	if c.Jar != nil {
		t.Error("client has a cookie jar")
	}
	if _, ok := c.Transport.(*egress.Transport); !ok {
		t.Errorf("transport is %T", c.Transport)
	}
}

// TestClientsShareOneTransport: policies with different redirect settings
// but the same destination rules get their own clients over one Transport,
// and each policy's client is built once.
func TestClientsShareOneTransport(t *testing.T) {
	final := newUpstream(t, nil)
	start := redirector(t, func(*http.Request) string { return final.URL + "/final" })
	owner := egress.NewClients(egress.ClientConfig{Resolver: newFakeResolver()})
	t.Cleanup(owner.CloseIdleConnections)
	noFollowRules := mustRules(t, egress.RulesConfig{AllowPrefixes: []netip.Prefix{loopback32}})
	followRules := mustRules(t, egress.RulesConfig{AllowPrefixes: []netip.Prefix{loopback32}, MaxRedirects: 1})
	noFollow, err := owner.For(noFollowRules)
	if err != nil {
		t.Fatal(err)
	}
	follow, err := owner.For(followRules)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := owner.For(followRules); again != follow {
		t.Error("For built a second client for the same rules")
	}
	if resp := mustGet(t, context.Background(), noFollow, start.URL, nil); resp.StatusCode != http.StatusFound {
		t.Errorf("no-follow client got %d", resp.StatusCode)
	}
	resp := mustGet(t, context.Background(), follow, start.URL, credentials)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("follow client got %d", resp.StatusCode)
	}
	if reqs := final.Requests(); len(reqs) != 1 || reqs[0].Header.Get("Authorization") != "" {
		t.Errorf("final requests %d, Authorization stripped: %v", len(reqs), len(reqs) == 1 && reqs[0].Header.Get("Authorization") == "")
	}
	// Another owner (a new broker wiring) builds its own client for the
	// same rules rather than reuse the first owner's.
	other := egress.NewClients(egress.ClientConfig{Resolver: newFakeResolver()})
	t.Cleanup(other.CloseIdleConnections)
	if c, _ := other.For(followRules); c == follow {
		t.Error("a second owner reused the first owner's client")
	}
}

// TestClientsDefaultRulesRefuseLoopback: nil rules are the default rules,
// and the owner's base options (the broker's own address) apply to every
// policy, even one that allows the address's range.
func TestClientsDefaultRulesRefuseLoopback(t *testing.T) {
	srv := newUpstream(t, nil)
	rec := &recordingDialer{}
	self := netip.MustParseAddrPort(srv.Listener.Addr().String())
	owner := egress.NewClients(egress.ClientConfig{Resolver: newFakeResolver(), DialFunc: rec.Dial}, egress.SelfAddrs(self))
	t.Cleanup(owner.CloseIdleConnections)
	def, err := owner.For(nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = get(context.Background(), def, srv.URL, nil)
	assertRefused(t, err)
	loop, err := owner.For(mustRules(t, egress.RulesConfig{AllowPrefixes: []netip.Prefix{loopback32}}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = get(context.Background(), loop, srv.URL, nil)
	assertRefused(t, err)
	if a := rec.Addrs(); len(a) != 0 {
		t.Errorf("dialled %v, want nothing", a)
	}
}

func TestNewRulesRejectsBadHostPattern(t *testing.T) {
	if _, err := egress.NewRules(egress.RulesConfig{AllowHosts: []string{"exa mple.com"}}); err == nil {
		t.Error("NewRules accepted an invalid host pattern")
	}
	if _, err := egress.NewRules(egress.RulesConfig{AllowPorts: []uint16{0}}); err == nil {
		t.Error("NewRules accepted port 0")
	}
}

// TestClientRedirectNeverLeaksReferer: net/http sets Referer to the
// previous URL on a followed redirect, query and all; a query may carry an
// API key. A cross-origin hop carries no Referer at all, and a same-origin
// hop carries only the caller's own.
func TestClientRedirectNeverLeaksReferer(t *testing.T) {
	final := newUpstream(t, nil)
	start := redirector(t, func(*http.Request) string { return final.URL + "/final" })
	c := newTestClient(t, followConfig(), nil, nil)
	mustGet(t, context.Background(), c, start.URL+"/start?api_key=secret-in-query", nil)
	mustGet(t, context.Background(), c, start.URL+"/start?api_key=secret-in-query", http.Header{"Referer": {"https://caller.example/page"}})
	reqs := final.Requests()
	if len(reqs) != 2 {
		t.Fatalf("final got %d requests", len(reqs))
	}
	for i, r := range reqs {
		if ref := r.Header.Get("Referer"); ref != "" {
			t.Errorf("cross-origin hop %d carried Referer %q", i, ref)
		}
	}

	same := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/start" {
			http.Redirect(w, r, "/final", http.StatusFound)
		}
	})
	mustGet(t, context.Background(), c, same.URL+"/start?api_key=secret-in-query", nil)
	sreqs := same.Requests()
	if len(sreqs) != 2 {
		t.Fatalf("same-origin server got %d requests", len(sreqs))
	}
	if ref := sreqs[1].Header.Get("Referer"); ref != "" {
		t.Errorf("same-origin hop carried Referer %q the caller never sent", ref)
	}
	mustGet(t, context.Background(), c, same.URL+"/start?api_key=secret-in-query", http.Header{"Referer": {"https://caller.example/page"}})
	if ref := same.Requests()[3].Header.Get("Referer"); ref != "https://caller.example/page" {
		t.Errorf("same-origin hop Referer %q, want the caller's own", ref)
	}
}

func mustRules(t *testing.T, cfg egress.RulesConfig) *egress.Rules {
	t.Helper()
	r, err := egress.NewRules(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
