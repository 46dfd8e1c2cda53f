package egress_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/retrybroker/retrybroker/internal/egress"
)

// badDestinations must all be refused by the default guard. An entry is an
// IP address (checked with Guard.Check and requested as an IP-literal URL)
// or, with url set, a URL whose host is a numeric form.
var badDestinations = []struct {
	ip, url string
	reason  string // substring expected in RefusedError.Reason
}{
	{ip: "127.0.0.1", reason: "loopback range 127.0.0.0/8"},
	{ip: "127.255.255.254", reason: "loopback"},
	{ip: "::1", reason: "loopback address ::1/128"},
	{ip: "0.0.0.0", reason: "0.0.0.0/8"},
	{ip: "0.1.2.3", reason: "0.0.0.0/8"},
	{ip: "::", reason: "unspecified address ::/128"},
	{ip: "169.254.169.254", reason: "cloud metadata address 169.254.169.254/32"},
	{ip: "169.254.0.1", reason: "link-local range 169.254.0.0/16"},
	{ip: "168.63.129.16", reason: "cloud metadata"},
	{ip: "fe80::1%eth0", reason: "link-local range fe80::/10"},
	{ip: "fe80::1", reason: "link-local"},
	{ip: "10.0.0.1", reason: "private range 10.0.0.0/8"},
	{ip: "10.255.255.255", reason: "private range 10.0.0.0/8"},
	{ip: "172.16.0.1", reason: "private range 172.16.0.0/12"},
	{ip: "172.31.255.255", reason: "private range 172.16.0.0/12"},
	{ip: "192.168.1.1", reason: "private range 192.168.0.0/16"},
	{ip: "fc00::1", reason: "unique local range fc00::/7"},
	{ip: "fd00:ec2::254", reason: "cloud metadata address fd00:ec2::254/128"},
	{ip: "100.64.0.0", reason: "carrier-grade NAT range 100.64.0.0/10"},
	{ip: "100.127.255.255", reason: "carrier-grade NAT"},
	{ip: "100.100.100.200", reason: "carrier-grade NAT"}, // Alibaba metadata
	{ip: "::ffff:127.0.0.1", reason: "loopback"},
	{ip: "::ffff:10.0.0.1", reason: "private range 10.0.0.0/8"},
	{ip: "::ffff:169.254.169.254", reason: "cloud metadata"},
	{ip: "::127.0.0.1", reason: "IPv4-compatible range ::/96"},
	{ip: "::ffff:0:a00:1", reason: "IETF reserved range ::/8"}, // IPv4-translated (SIIT)
	{ip: "64:ff9b::a00:1", reason: "NAT64 address 64:ff9b::/96 embeds 10.0.0.1: private range"},
	{ip: "64:ff9b::7f00:1", reason: "embeds 127.0.0.1: loopback"},
	{ip: "64:ff9b::a9fe:a9fe", reason: "embeds 169.254.169.254: cloud metadata"},
	{ip: "64:ff9b:1::a00:1", reason: "local-use NAT64 address 64:ff9b:1::/48 embeds 10.0.0.1"},
	{ip: "2002:a00:1::1", reason: "6to4 address 2002::/16 embeds 10.0.0.1: private range"},
	{ip: "2002:7f00:1::1", reason: "6to4 address 2002::/16 embeds 127.0.0.1"},
	{ip: "2001:0:4136:e378:8000:63bf:3fff:fdd2", reason: "Teredo address 2001::/32 embeds 192.0.2.45: documentation range"},
	{ip: "2001:0:4136:e378:8000:63bf:f5ff:fffe", reason: "Teredo address 2001::/32 embeds 10.0.0.1"},
	{ip: "2001:0:4136:e378:8000:63bf:80ff:fffe", reason: "embeds 127.0.0.1"},
	{ip: "2001:2::1", reason: "IETF protocol assignments range 2001::/23"},
	{ip: "255.255.255.255", reason: "broadcast address"},
	{ip: "224.0.0.1", reason: "multicast range 224.0.0.0/4"},
	{ip: "239.255.255.250", reason: "multicast range"},
	{ip: "ff02::1", reason: "multicast range ff00::/8"},
	{ip: "240.0.0.1", reason: "reserved range 240.0.0.0/4"},
	{ip: "198.18.0.1", reason: "benchmarking range 198.18.0.0/15"},
	{ip: "198.19.255.255", reason: "benchmarking range 198.18.0.0/15"},
	{ip: "192.0.0.192", reason: "IETF protocol assignments range 192.0.0.0/24"}, // Oracle metadata
	{ip: "192.0.2.1", reason: "documentation range 192.0.2.0/24"},
	{ip: "198.51.100.7", reason: "documentation range 198.51.100.0/24"},
	{ip: "203.0.113.9", reason: "documentation range 203.0.113.0/24"},
	{ip: "192.88.99.1", reason: "6to4 relay anycast"},
	{ip: "2001:db8::1", reason: "documentation range 2001:db8::/32"},
	{ip: "3fff::1", reason: "documentation range 3fff::/20"},
	{ip: "100::1", reason: "discard-only range 100::/64"},
	{ip: "fec0::1", reason: "site-local range fec0::/10"},
	{ip: "5f00::1", reason: "outside IPv6 global unicast 2000::/3"},
	{url: "http://2130706433/", reason: "non-canonical numeric IPv4 form"},
	{url: "http://0177.0.0.1/", reason: "non-canonical numeric IPv4 form"},
	{url: "http://0x7f.1/", reason: "non-canonical numeric IPv4 form"},
	{url: "http://127.1/", reason: "non-canonical numeric IPv4 form"},
	{url: "http://0x7F000001/", reason: "non-canonical numeric IPv4 form"},
	{url: "http://017700000001/", reason: "non-canonical numeric IPv4 form"},
	{url: "http://127.0.0.1./", reason: "loopback"},
	{url: "http://[::ffff:7f00:1]/", reason: "loopback"},
	{url: "http://[fe80::1%25eth0]:8080/", reason: "link-local"},
}

func TestGuardRefusesBadDestinations(t *testing.T) {
	if n := len(badDestinations); n < 30 {
		t.Fatalf("only %d bad destinations", n)
	}
	var g *egress.Guard // nil: default rules
	for _, tc := range badDestinations {
		if tc.ip == "" {
			continue
		}
		t.Run(tc.ip, func(t *testing.T) {
			addr := netip.MustParseAddr(tc.ip)
			err := g.Check(netip.AddrPortFrom(addr, 443))
			re := assertRefused(t, err)
			if !strings.Contains(re.Reason, tc.reason) {
				t.Errorf("reason = %q, want it to contain %q", re.Reason, tc.reason)
			}
			if re.Addr.Addr() != addr {
				t.Errorf("RefusedError.Addr = %v, want %v", re.Addr, addr)
			}
			// The same through a built guard with no allowances.
			if err := mustGuard(t).Check(netip.AddrPortFrom(addr, 80)); err == nil {
				t.Errorf("NewGuard().Check(%v) = nil, want refusal", addr)
			}
		})
	}
}

// TestClientRefusesBadDestinations requests every bad destination through
// the client: each must be refused before any dial (the recording dialer
// sees nothing) and classified as a refused destination.
func TestClientRefusesBadDestinations(t *testing.T) {
	res := newFakeResolver()
	// Were the numeric-form check missing, a resolver that reads inet_aton
	// forms (as glibc does) would answer loopback; the guard must still
	// refuse, and with the check it never even asks.
	for _, h := range []string{"2130706433", "0177.0.0.1", "0x7f.1", "127.1", "0x7f000001", "017700000001"} {
		res.Map(h, "127.0.0.1")
	}
	rec := &recordingDialer{}
	c := newTestClient(t, egress.ClientConfig{}, res, rec)
	for _, tc := range badDestinations {
		u := tc.url
		if u == "" {
			u = hostURL(tc.ip, "80")
		}
		t.Run(u, func(t *testing.T) {
			resp, err := get(context.Background(), c, u, nil)
			if err == nil {
				_ = resp.Body.Close()
				t.Fatalf("GET %s succeeded, want refusal", u)
			}
			re := assertRefused(t, err)
			if !strings.Contains(re.Reason, tc.reason) {
				t.Errorf("reason = %q, want it to contain %q", re.Reason, tc.reason)
			}
			if got := egress.Classify(err); got.String() != "destination_refused" {
				t.Errorf("Classify = %v, want destination_refused", got)
			}
		})
	}
	if a := rec.Addrs(); len(a) != 0 {
		t.Errorf("dials attempted: %v, want none", a)
	}
	if n := res.TotalCalls(); n != 0 {
		t.Errorf("resolver called %d times, want 0 (numeric forms are refused before resolution)", n)
	}
}

func TestGuardAllowsPublicAndEdges(t *testing.T) {
	// Checked only, never dialled.
	for _, ip := range []string{
		"100.63.255.255", "100.128.0.0", // edges of 100.64.0.0/10
		"172.15.255.255", "172.32.0.0", // edges of 172.16.0.0/12
		"192.167.255.255", "192.169.0.0",
		"198.17.255.255", "198.20.0.0", // edges of 198.18.0.0/15
		"169.253.255.255", "169.255.0.0",
		"9.255.255.255", "11.0.0.0",
		"126.255.255.255", "128.0.0.0",
		"223.255.255.255", // below multicast
		"1.1.1.1", "8.8.8.8", "93.184.216.34",
		"::ffff:8.8.8.8",
		"2606:4700:4700::1111", "2a00:1450:4001::200e",
		"64:ff9b::808:808",                       // NAT64 of 8.8.8.8
		"2002:808:808::1",                        // 6to4 of 8.8.8.8
		"2001:0:4136:e378:8000:63bf:f7f7:f7f7",   // Teredo, client 8.8.8.8
		"2001:200::1",                            // just above 2001::/23
		"2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", // just below 2001:db8::/32
	} {
		addr := netip.MustParseAddr(ip)
		if err := (*egress.Guard)(nil).Check(netip.AddrPortFrom(addr, 443)); err != nil {
			t.Errorf("Check(%s) = %v, want allowed", ip, err)
		}
	}
}

func TestGuardAllowPrefixes(t *testing.T) {
	g := mustGuard(t, egress.AllowPrefixes(loopback32, netip.MustParsePrefix("::ffff:10.1.0.0/112")))
	for _, tc := range []struct {
		addr    string
		allowed bool
	}{
		{"127.0.0.1:8080", true},
		{"[::ffff:127.0.0.1]:8080", true}, // mapped form of an allowed address
		{"[64:ff9b::7f00:1]:80", true},    // NAT64 embedding an allowed address
		{"127.0.0.2:8080", false},
		{"[::1]:8080", false},
		{"10.1.2.3:80", true}, // mapped prefix ::ffff:10.1.0.0/112 is 10.1.0.0/16
		{"10.2.0.1:80", false},
		{"169.254.169.254:80", false},
	} {
		err := g.Check(netip.MustParseAddrPort(tc.addr))
		if (err == nil) != tc.allowed {
			t.Errorf("Check(%s) = %v, want allowed=%v", tc.addr, err, tc.allowed)
		}
	}
}

func TestGuardAllowPorts(t *testing.T) {
	g := mustGuard(t, egress.AllowPorts(443, 8443), egress.AllowPrefixes(loopback32))
	for _, tc := range []struct {
		addr    string
		allowed bool
	}{
		{"93.184.216.34:443", true},
		{"93.184.216.34:8443", true},
		{"93.184.216.34:80", false},
		{"127.0.0.1:443", true},
		{"127.0.0.1:22", false},
		{"10.0.0.1:443", false}, // ports do not open private ranges
	} {
		err := g.Check(netip.MustParseAddrPort(tc.addr))
		if (err == nil) != tc.allowed {
			t.Errorf("Check(%s) = %v, want allowed=%v", tc.addr, err, tc.allowed)
		}
	}
	err := g.Check(netip.MustParseAddrPort("93.184.216.34:80"))
	if re := assertRefused(t, err); re.Reason != "port 80 is not an allowed port" {
		t.Errorf("reason = %q", re.Reason)
	}
	// Port 0 is never dialled.
	assertRefused(t, (*egress.Guard)(nil).Check(netip.MustParseAddrPort("93.184.216.34:0")))
}

func TestGuardSelf(t *testing.T) {
	pub := netip.MustParseAddr("203.0.114.7") // a public address standing for the broker's
	g := mustGuard(t,
		egress.AllowPrefixes(netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")),
		egress.SelfAddrs(netip.MustParseAddrPort("127.0.0.1:7443"), netip.MustParseAddrPort("[::]:9090")),
		egress.LocalAddrs(pub),
	)
	for _, tc := range []struct {
		addr    string
		allowed bool
	}{
		{"127.0.0.1:7443", false}, // self, although everything is allowlisted
		{"[::ffff:127.0.0.1]:7443", false},
		{"127.0.0.1:7444", true},
		{"127.0.0.2:7443", true}, // a different loopback address, allowlisted
		{"127.0.0.1:9090", false},
		{"[::1]:9090", false},
		{"0.0.0.0:9090", false},
		{"203.0.114.7:9090", false}, // a local interface address at the wildcard port
		{"203.0.114.8:9090", true},  // not local
		{"203.0.114.7:9091", true},
	} {
		err := g.Check(netip.MustParseAddrPort(tc.addr))
		if (err == nil) != tc.allowed {
			t.Errorf("Check(%s) = %v, want allowed=%v", tc.addr, err, tc.allowed)
		}
		if err != nil && !strings.Contains(err.Error(), "own address") {
			t.Errorf("Check(%s) reason %q, want the broker's own address", tc.addr, err)
		}
	}
	anyAddr := mustGuard(t, egress.SelfAddrs(netip.MustParseAddrPort("0.0.0.0:9090")), egress.SelfPortAnyAddr())
	assertRefused(t, anyAddr.Check(netip.MustParseAddrPort("93.184.216.34:9090")))
	if err := anyAddr.Check(netip.MustParseAddrPort("93.184.216.34:443")); err != nil {
		t.Errorf("other port refused: %v", err)
	}
}

func TestGuardCheckHost(t *testing.T) {
	open := mustGuard(t)
	// CheckHost does not check addresses: IP literals pass it.
	for _, h := range []string{"api.example.com", "API.Example.COM.", "a_b.example", "127.0.0.1", "::1", "xn--bcher-kva.example", "1a.example", "0x.example"} {
		if err := open.CheckHost(h); err != nil {
			t.Errorf("CheckHost(%q) = %v, want nil", h, err)
		}
	}
	for _, h := range []string{"", ".", "2130706433", "0177.0.0.1", "0x7f.1", "127.1", "1.2.3.4.5", "foo.123", "example.0x", "example.0x1F", "01.02.03.04", "256.1.1.1", "a b", "evil.com/x", "user@host", "x%00y"} {
		assertRefused(t, open.CheckHost(h))
	}

	g := mustGuard(t, egress.AllowHosts("api.example.com", "*.svc.example", "10.0.0.9"))
	for _, tc := range []struct {
		host    string
		allowed bool
	}{
		{"api.example.com", true},
		{"API.EXAMPLE.COM.", true},
		{"other.example.com", false},
		{"a.svc.example", true},
		{"a.b.svc.example", true},
		{"svc.example", false}, // "*.suffix" does not match the suffix itself
		{"evilsvc.example", false},
		{"10.0.0.9", true},
		{"10.0.0.8", false},
	} {
		err := g.CheckHost(tc.host)
		if (err == nil) != tc.allowed {
			t.Errorf("CheckHost(%q) = %v, want allowed=%v", tc.host, err, tc.allowed)
		}
	}
	// Allowing the IP literal as a host does not open its private range.
	assertRefused(t, g.Check(netip.MustParseAddrPort("10.0.0.9:80")))
}

func TestNewGuardRejectsBadOptions(t *testing.T) {
	for name, opt := range map[string]egress.GuardOption{
		"zero prefix":  egress.AllowPrefixes(netip.Prefix{}),
		"port 0":       egress.AllowPorts(0),
		"bare star":    egress.AllowHosts("*"),
		"inner star":   egress.AllowHosts("a.*.example"),
		"numeric host": egress.AllowHosts("127.1"),
		"empty host":   egress.AllowHosts(""),
		"bad self":     egress.SelfAddrs(netip.AddrPort{}),
		"bad local":    egress.LocalAddrs(netip.Addr{}),
	} {
		if _, err := egress.NewGuard(opt); err == nil {
			t.Errorf("%s: NewGuard succeeded, want error", name)
		}
	}
}

func TestGuardControl(t *testing.T) {
	var g *egress.Guard
	for _, a := range []string{"10.0.0.1:80", "[fe80::1%eth0]:80", "[::ffff:169.254.169.254]:80", "not-an-address", "127.0.0.1:0"} {
		assertRefused(t, g.Control("tcp", a, nil))
	}
	if err := g.Control("tcp4", "93.184.216.34:443", nil); err != nil {
		t.Errorf("Control(public) = %v", err)
	}
}

// TestGuardControlRefusesRealConnect shows the ControlContext hook refusing
// a real socket before connect(2): the loopback server sees no connection.
func TestGuardControlRefusesRealConnect(t *testing.T) {
	srv := newUpstream(t, nil)
	d := net.Dialer{Control: (*egress.Guard)(nil).Control}
	_, err := d.DialContext(context.Background(), "tcp", srv.Listener.Addr().String())
	assertRefused(t, err)
	if n := srv.conns.Load(); n != 0 {
		t.Errorf("server saw %d connections, want 0", n)
	}

	allow := mustGuard(t, egress.AllowPrefixes(loopback32))
	d = net.Dialer{Control: allow.Control}
	conn, err := d.DialContext(context.Background(), "tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatalf("allowlisted dial: %v", err)
	}
	_ = conn.Close()
}

func TestRefusedErrorMessage(t *testing.T) {
	err := (*egress.Guard)(nil).Check(netip.MustParseAddrPort("10.0.0.1:80"))
	if got, want := err.Error(), "egress: destination 10.0.0.1:80 refused: private range 10.0.0.0/8"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	wrapped := errors.Join(errors.New("context"), err)
	assertRefused(t, wrapped)
}

func TestInterfaceAddrs(t *testing.T) {
	addrs, err := egress.InterfaceAddrs()
	if err != nil {
		t.Skipf("no interfaces: %v", err)
	}
	for _, a := range addrs {
		if !a.IsValid() || a.Is4In6() {
			t.Errorf("bad address %v", a)
		}
	}
	if _, err := egress.NewGuard(egress.LocalAddrs(addrs...)); err != nil {
		t.Errorf("NewGuard(LocalAddrs(InterfaceAddrs())): %v", err)
	}
}
