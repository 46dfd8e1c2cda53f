package egress_test

// SAFETY: every test in this package sends traffic to loopback only.
// Clients built here always get a fakeResolver (no real DNS query leaves
// the process) and, unless a test needs the default net.Dialer path against
// a loopback server, a recordingDialer that connects to loopback addresses
// only and records and refuses every other address. A broken guard
// therefore produces a recorded, refused dial, never a connection.

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/retrybroker/retrybroker/internal/egress"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// errRecorderRefused is returned by recordingDialer for any non-loopback
// address: it never connects there.
var errRecorderRefused = errors.New("test recorder: refused non-loopback dial")

// recordingDialer records every address it is asked to dial. It connects
// only to loopback addresses; anything else is refused without a syscall.
type recordingDialer struct {
	mu    sync.Mutex
	addrs []string
}

func (r *recordingDialer) Dial(ctx context.Context, network, address string) (net.Conn, error) {
	r.mu.Lock()
	r.addrs = append(r.addrs, address)
	r.mu.Unlock()
	ap, err := netip.ParseAddrPort(address)
	if err != nil || !ap.Addr().Unmap().IsLoopback() {
		return nil, errRecorderRefused
	}
	var d net.Dialer
	return d.DialContext(ctx, network, address)
}

func (r *recordingDialer) Addrs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.addrs)
}

// fakeResolver answers from a fixed table. A host with several answer
// lists gets them in turn, one per lookup, the last one repeating. An
// unknown host gets a not-found *net.DNSError. It never sends a query.
type fakeResolver struct {
	mu      sync.Mutex
	answers map[string][][]netip.Addr
	errs    map[string]error
	calls   map[string]int
}

func newFakeResolver() *fakeResolver {
	return &fakeResolver{
		answers: map[string][][]netip.Addr{},
		errs:    map[string]error{},
		calls:   map[string]int{},
	}
}

// Map adds an answer list for host: each call of Map adds one lookup turn.
func (f *fakeResolver) Map(host string, addrs ...string) *fakeResolver {
	f.mu.Lock()
	defer f.mu.Unlock()
	var list []netip.Addr
	for _, a := range addrs {
		list = append(list, netip.MustParseAddr(a))
	}
	f.answers[host] = append(f.answers[host], list)
	return f
}

// Fail makes lookups of host return err.
func (f *fakeResolver) Fail(host string, err error) *fakeResolver {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs[host] = err
	return f
}

func (f *fakeResolver) LookupNetIP(_ context.Context, network, host string) ([]netip.Addr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.calls[host]
	f.calls[host]++
	if err, ok := f.errs[host]; ok {
		return nil, err
	}
	turns, ok := f.answers[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	if n >= len(turns) {
		n = len(turns) - 1
	}
	return slices.Clone(turns[n]), nil
}

func (f *fakeResolver) Calls(host string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[host]
}

func (f *fakeResolver) TotalCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		n += c
	}
	return n
}

// upstream is a loopback httptest server that counts connections and
// requests and records the headers of each request.
type upstream struct {
	*httptest.Server
	conns    atomic.Int32
	mu       sync.Mutex
	requests []*http.Request
}

func newUpstream(t *testing.T, h http.HandlerFunc) *upstream {
	t.Helper()
	u := &upstream{}
	if h == nil {
		h = func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }
	}
	u.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.requests = append(u.requests, r.Clone(context.Background()))
		u.mu.Unlock()
		h(w, r)
	}))
	u.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			u.conns.Add(1)
		}
	}
	u.Start()
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) Requests() []*http.Request {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.requests)
}

// AddrPort is the server's 127.0.0.1:port.
func (u *upstream) AddrPort() netip.AddrPort {
	return netip.MustParseAddrPort(u.Listener.Addr().String())
}

// Port is the server's port as a string.
func (u *upstream) Port() string {
	return strconv.Itoa(int(u.AddrPort().Port()))
}

func mustGuard(t *testing.T, opts ...egress.GuardOption) *egress.Guard {
	t.Helper()
	g, err := egress.NewGuard(opts...)
	if err != nil {
		t.Fatalf("NewGuard: %v", err)
	}
	return g
}

var loopback32 = netip.MustParsePrefix("127.0.0.1/32")

// newTestClient builds a client that can only ever reach loopback: the
// config's Resolver and DialFunc are filled with fakes when unset.
func newTestClient(t *testing.T, cfg egress.ClientConfig, res *fakeResolver, rec *recordingDialer) *http.Client {
	t.Helper()
	if res == nil {
		res = newFakeResolver()
	}
	cfg.Resolver = res
	if rec != nil {
		cfg.DialFunc = rec.Dial
	}
	c := egress.NewClient(cfg)
	t.Cleanup(c.CloseIdleConnections)
	return c
}

func get(ctx context.Context, c *http.Client, rawURL string, hdr http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, err
	}
	for k, vv := range hdr {
		req.Header[k] = vv
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	return resp, nil
}

func mustGet(t *testing.T, ctx context.Context, c *http.Client, rawURL string, hdr http.Header) *http.Response {
	t.Helper()
	resp, err := get(ctx, c, rawURL, hdr)
	if err != nil {
		t.Fatalf("GET %s: %v", rawURL, err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

func assertRefused(t *testing.T, err error) *egress.RefusedError {
	t.Helper()
	var re *egress.RefusedError
	if !errors.As(err, &re) {
		t.Fatalf("error = %v, want a *egress.RefusedError", err)
	}
	return re
}

func hostURL(host, port string) string {
	return (&url.URL{Scheme: "http", Host: net.JoinHostPort(host, port), Path: "/"}).String()
}
