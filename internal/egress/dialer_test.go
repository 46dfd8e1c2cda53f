package egress_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/internal/egress"
)

func TestDialerRefusesResolvedPrivateAddress(t *testing.T) {
	res := newFakeResolver().Map("internal.example", "10.1.2.3")
	rec := &recordingDialer{}
	d := &egress.Dialer{Resolver: res, DialFunc: rec.Dial}
	_, err := d.DialContext(context.Background(), "tcp", "internal.example:443")
	re := assertRefused(t, err)
	if re.Host != "internal.example" || re.Addr != netip.MustParseAddrPort("10.1.2.3:443") {
		t.Errorf("RefusedError = %+v", re)
	}
	if a := rec.Addrs(); len(a) != 0 {
		t.Errorf("dial func called with %v, want never", a)
	}
	if res.Calls("internal.example") != 1 {
		t.Errorf("resolver calls = %d, want 1", res.Calls("internal.example"))
	}
}

func TestDialerRefusesEveryAnswerBeforeDialling(t *testing.T) {
	res := newFakeResolver().Map("multi.example", "10.0.0.1", "::1", "169.254.169.254")
	rec := &recordingDialer{}
	d := &egress.Dialer{Resolver: res, DialFunc: rec.Dial}
	_, err := d.DialContext(context.Background(), "tcp", "multi.example:80")
	re := assertRefused(t, err)
	if re.Addr.Addr() != netip.MustParseAddr("10.0.0.1") {
		t.Errorf("refusal names %v, want the first answer", re.Addr)
	}
	if a := rec.Addrs(); len(a) != 0 {
		t.Errorf("dial func called with %v, want never", a)
	}
}

// TestDialerDialsOnlyAllowedAnswersInOrder: refused answers are skipped,
// allowed ones are tried in the resolver's order until one connects.
func TestDialerDialsOnlyAllowedAnswersInOrder(t *testing.T) {
	srv := newUpstream(t, nil) // listens on 127.0.0.1 only
	res := newFakeResolver().Map("mixed.example", "10.0.0.1", "127.0.0.2", "192.168.0.1", "127.0.0.1")
	rec := &recordingDialer{}
	g := mustGuard(t, egress.AllowPrefixes(netip.MustParsePrefix("127.0.0.0/8")))
	d := &egress.Dialer{Guard: g, Resolver: res, DialFunc: rec.Dial}
	conn, err := d.DialContext(context.Background(), "tcp", net.JoinHostPort("mixed.example", srv.Port()))
	if err != nil {
		t.Fatalf("DialContext: %v", err)
	}
	_ = conn.Close()
	want := []string{"127.0.0.2:" + srv.Port(), "127.0.0.1:" + srv.Port()}
	if got := rec.Addrs(); !slices.Equal(got, want) {
		t.Errorf("dialled %v, want %v (127.0.0.2 refuses, then 127.0.0.1)", got, want)
	}
}

// TestDialerDNSRebinding: the first lookup answers a public address, the
// second a private one. The first dial goes to the recorder (which refuses
// and never connects); the second is refused by the guard with no dial.
func TestDialerDNSRebinding(t *testing.T) {
	res := newFakeResolver().
		Map("rebind.example", "93.184.216.34").
		Map("rebind.example", "10.0.0.1")
	rec := &recordingDialer{}
	c := newTestClient(t, egress.ClientConfig{}, res, rec)

	_, err := get(context.Background(), c, "http://rebind.example/", nil)
	if !errors.Is(err, errRecorderRefused) {
		t.Fatalf("first request: %v, want the recorder's refusal (guard allowed it)", err)
	}
	if got, want := rec.Addrs(), []string{"93.184.216.34:80"}; !slices.Equal(got, want) {
		t.Fatalf("dialled %v, want %v", got, want)
	}

	_, err = get(context.Background(), c, "http://rebind.example/", nil)
	re := assertRefused(t, err)
	if re.Addr != netip.MustParseAddrPort("10.0.0.1:80") {
		t.Errorf("refused %v, want 10.0.0.1:80", re.Addr)
	}
	if got := rec.Addrs(); len(got) != 1 {
		t.Errorf("dialled %v after rebinding, want no new dial", got)
	}
	if n := res.Calls("rebind.example"); n != 2 {
		t.Errorf("resolver calls = %d, want 2", n)
	}
}

func TestDialerNumericHostFormsRefusedBeforeResolution(t *testing.T) {
	hosts := []string{"2130706433", "0177.0.0.1", "0x7f.1", "127.1", "0x7f.0.0.1", "127.0.1", "0177.1"}
	res := newFakeResolver()
	for _, h := range hosts {
		res.Map(h, "127.0.0.1") // what an inet_aton resolver would answer
	}
	rec := &recordingDialer{}
	d := &egress.Dialer{Resolver: res, DialFunc: rec.Dial}
	for _, h := range hosts {
		_, err := d.DialContext(context.Background(), "tcp", net.JoinHostPort(h, "80"))
		re := assertRefused(t, err)
		if re.Reason != "non-canonical numeric IPv4 form" {
			t.Errorf("%s: reason %q", h, re.Reason)
		}
	}
	if n := res.TotalCalls(); n != 0 {
		t.Errorf("resolver called %d times, want 0", n)
	}
	if a := rec.Addrs(); len(a) != 0 {
		t.Errorf("dialled %v, want nothing", a)
	}
}

// TestDialerResolvedLoopbackRefused: even a name that is not numeric but
// resolves to loopback (localhost, or a numeric form a real resolver
// turned into 127.0.0.1) is refused on the resolved address.
func TestDialerResolvedLoopbackRefused(t *testing.T) {
	res := newFakeResolver().Map("localhost", "127.0.0.1", "::1")
	rec := &recordingDialer{}
	d := &egress.Dialer{Resolver: res, DialFunc: rec.Dial}
	_, err := d.DialContext(context.Background(), "tcp", "localhost:80")
	assertRefused(t, err)
	if a := rec.Addrs(); len(a) != 0 {
		t.Errorf("dialled %v, want nothing", a)
	}
}

func TestDialerGuard(t *testing.T) {
	srv := newUpstream(t, nil)
	rec := &recordingDialer{}
	d := &egress.Dialer{Resolver: newFakeResolver(), DialFunc: rec.Dial} // default rules
	addr := srv.Listener.Addr().String()

	_, err := d.DialContext(context.Background(), "tcp", addr)
	assertRefused(t, err)
	if a := rec.Addrs(); len(a) != 0 {
		t.Fatalf("default rules dialled %v", a)
	}

	allowed := &egress.Dialer{Guard: mustGuard(t, egress.AllowPrefixes(loopback32)), Resolver: newFakeResolver(), DialFunc: rec.Dial}
	conn, err := allowed.DialContext(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatalf("with the allowlist: %v", err)
	}
	_ = conn.Close()
}

// TestRefusedCallerMessageHidesResolvedAddress: the caller learns the host
// and the range class, never the internal address a name resolved to.
func TestRefusedCallerMessageHidesResolvedAddress(t *testing.T) {
	rec := &recordingDialer{}
	d := &egress.Dialer{Resolver: newFakeResolver().Map("db.corp.example", "10.20.30.40"), DialFunc: rec.Dial}
	_, err := d.DialContext(context.Background(), "tcp", "db.corp.example:443")
	re := assertRefused(t, err)
	msg := re.CallerMessage()
	if strings.Contains(msg, "10.20.30.40") {
		t.Errorf("caller message %q reveals the resolved address", msg)
	}
	if !strings.Contains(msg, "db.corp.example") || !strings.Contains(msg, "private") {
		t.Errorf("caller message %q should name the host and the range class", msg)
	}
	if !strings.Contains(re.Error(), "10.20.30.40") {
		t.Errorf("server-side message %q should keep the address for the log", re.Error())
	}
	if a := rec.Addrs(); len(a) != 0 {
		t.Errorf("dialled %v", a)
	}
}

// TestDialerDefaultDialFunc runs the real net.Dialer path (with the
// ControlContext hook) against loopback only.
func TestDialerDefaultDialFunc(t *testing.T) {
	srv := newUpstream(t, nil)
	addr := srv.Listener.Addr().String()
	d := &egress.Dialer{Resolver: newFakeResolver().Map("up.example", "127.0.0.1")}

	_, err := d.DialContext(context.Background(), "tcp", addr)
	assertRefused(t, err)

	d.Guard = mustGuard(t, egress.AllowPrefixes(loopback32))
	conn, err := d.DialContext(context.Background(), "tcp", net.JoinHostPort("up.example", srv.Port()))
	if err != nil {
		t.Fatalf("DialContext: %v", err)
	}
	_ = conn.Close()
	// The server counts the connection when it accepts it, which may be
	// after DialContext returned.
	for deadline := time.Now().Add(5 * time.Second); srv.conns.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if n := srv.conns.Load(); n != 1 {
		t.Errorf("server saw %d connections, want 1", n)
	}
}

func TestDialerSelfRefused(t *testing.T) {
	self := newUpstream(t, nil)
	g := mustGuard(t, egress.AllowPrefixes(loopback32), egress.SelfAddrs(self.AddrPort()))
	d := &egress.Dialer{Guard: g, Resolver: newFakeResolver().Map("broker.example", "127.0.0.1")}
	for _, a := range []string{self.Listener.Addr().String(), net.JoinHostPort("broker.example", self.Port())} {
		_, err := d.DialContext(context.Background(), "tcp", a)
		re := assertRefused(t, err)
		if re.Reason != "the broker's own address" {
			t.Errorf("%s: reason %q", a, re.Reason)
		}
	}
	if n := self.conns.Load(); n != 0 {
		t.Errorf("self saw %d connections, want 0", n)
	}
}

func TestDialerResolverErrorsAndFamilies(t *testing.T) {
	temp := &net.DNSError{Err: "server misbehaving", Name: "flaky.example", IsTemporary: true}
	res := newFakeResolver().
		Fail("flaky.example", temp).
		Map("empty.example").
		Map("v6only.example", "2606:4700:4700::1111")
	rec := &recordingDialer{}
	d := &egress.Dialer{Resolver: res, DialFunc: rec.Dial}
	ctx := context.Background()

	_, err := d.DialContext(ctx, "tcp", "flaky.example:80")
	if !errors.Is(err, temp) || egress.Classify(err).String() != "dns_temporary" {
		t.Errorf("flaky: %v (%v)", err, egress.Classify(err))
	}
	_, err = d.DialContext(ctx, "tcp", "missing.example:80")
	if egress.Classify(err).String() != "dns_not_found" {
		t.Errorf("missing: %v (%v)", err, egress.Classify(err))
	}
	_, err = d.DialContext(ctx, "tcp", "empty.example:80")
	if egress.Classify(err).String() != "dns_not_found" {
		t.Errorf("empty answer: %v (%v)", err, egress.Classify(err))
	}
	_, err = d.DialContext(ctx, "tcp4", "v6only.example:80")
	if egress.Classify(err).String() != "dns_not_found" {
		t.Errorf("tcp4 with only IPv6 answers: %v (%v)", err, egress.Classify(err))
	}
	for _, bad := range []string{"no-port", "host:http", "host:0", "host:70000"} {
		_, err = d.DialContext(ctx, "tcp", bad)
		if !errors.Is(err, egress.ErrInvalidURL) {
			t.Errorf("%q: %v, want ErrInvalidURL", bad, err)
		}
	}
	if a := rec.Addrs(); len(a) != 0 {
		t.Errorf("dialled %v, want nothing", a)
	}
}

// TestDialerReturnsDialError: when every allowed address fails, the first
// dial error is returned wrapped.
func TestDialerReturnsDialError(t *testing.T) {
	boom := errors.New("boom")
	var calls int
	d := &egress.Dialer{
		Resolver: newFakeResolver().Map("pub.example", "93.184.216.34", "93.184.216.35"),
		DialFunc: func(context.Context, string, string) (net.Conn, error) {
			calls++
			if calls == 1 {
				return nil, boom
			}
			return nil, io.ErrUnexpectedEOF
		},
	}
	_, err := d.DialContext(context.Background(), "tcp", "pub.example:443")
	if !errors.Is(err, boom) || calls != 2 {
		t.Errorf("err = %v after %d calls, want boom after 2", err, calls)
	}
}
