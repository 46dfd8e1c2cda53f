package egress

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// RefusedError reports a destination the guard refused. Every refusal made
// by this package (by Guard.Check, Guard.CheckHost, the Dialer and the
// Transport) is, or wraps, a *RefusedError; find it with errors.As.
type RefusedError struct {
	// Host is the host name as requested, or "" when the refusal was made
	// on an address alone.
	Host string
	// Addr is the refused address and port. It is the zero AddrPort when the
	// host name was refused before resolution.
	Addr netip.AddrPort
	// Reason says why, for example "private range 10.0.0.0/8". It names
	// ranges and rules, never secrets.
	Reason string
}

// CallerMessage describes the refusal for the caller who asked for the
// destination: it names the host and the range class, but not the address a
// name resolved to (that is internal network information, kept for the
// server log in Error). An IP literal the caller gave is repeated.
func (e *RefusedError) CallerMessage() string {
	if e.Host != "" {
		return fmt.Sprintf("destination host %q refused: %s", e.Host, e.Reason)
	}
	if e.Addr.IsValid() {
		return fmt.Sprintf("destination %s refused: %s", e.Addr, e.Reason)
	}
	return "destination refused: " + e.Reason
}

// Error describes the refusal, for example
// "egress: destination 10.0.0.1:80 refused: private range 10.0.0.0/8".
func (e *RefusedError) Error() string {
	switch {
	case e.Addr.IsValid() && e.Host != "":
		return fmt.Sprintf("egress: destination %s (%s) refused: %s", e.Host, e.Addr, e.Reason)
	case e.Addr.IsValid():
		return fmt.Sprintf("egress: destination %s refused: %s", e.Addr, e.Reason)
	default:
		return fmt.Sprintf("egress: destination host %q refused: %s", e.Host, e.Reason)
	}
}

// rule is one special-purpose range with the reason given when it refuses.
type rule struct {
	prefix netip.Prefix
	reason string
}

func mustRule(prefix, kind string) rule {
	p := netip.MustParsePrefix(prefix)
	return rule{prefix: p, reason: kind + " " + p.String()}
}

// ipv4Rules lists the IPv4 ranges refused by default, most specific first so
// the reason names the narrowest range.
var ipv4Rules = []rule{
	mustRule("0.0.0.0/8", "unspecified or this-network range"),
	mustRule("10.0.0.0/8", "private range"),
	mustRule("100.64.0.0/10", "carrier-grade NAT range"),
	mustRule("127.0.0.0/8", "loopback range"),
	mustRule("169.254.169.254/32", "cloud metadata address"),
	mustRule("169.254.0.0/16", "link-local range"),
	mustRule("168.63.129.16/32", "cloud metadata address (Azure WireServer)"),
	mustRule("172.16.0.0/12", "private range"),
	mustRule("192.0.0.0/24", "IETF protocol assignments range"),
	mustRule("192.0.2.0/24", "documentation range"),
	mustRule("192.88.99.0/24", "6to4 relay anycast range"),
	mustRule("192.168.0.0/16", "private range"),
	mustRule("198.18.0.0/15", "benchmarking range"),
	mustRule("198.51.100.0/24", "documentation range"),
	mustRule("203.0.113.0/24", "documentation range"),
	mustRule("224.0.0.0/4", "multicast range"),
	mustRule("255.255.255.255/32", "broadcast address"),
	mustRule("240.0.0.0/4", "reserved range"),
}

// ipv6Rules lists the IPv6 ranges refused by default, most specific first.
// Addresses outside 2000::/3 are refused after these (ipv6GlobalUnicast).
var ipv6Rules = []rule{
	mustRule("::/128", "unspecified address"),
	mustRule("::1/128", "loopback address"),
	mustRule("::/96", "IPv4-compatible range"),
	mustRule("::/8", "IETF reserved range"),
	mustRule("100::/64", "discard-only range"),
	mustRule("2001::/23", "IETF protocol assignments range"),
	mustRule("2001:db8::/32", "documentation range"),
	mustRule("3fff::/20", "documentation range"),
	mustRule("fd00:ec2::254/128", "cloud metadata address"),
	mustRule("fc00::/7", "unique local range"),
	mustRule("fe80::/10", "link-local range"),
	mustRule("fec0::/10", "site-local range"),
	mustRule("ff00::/8", "multicast range"),
}

var ipv6GlobalUnicast = netip.MustParsePrefix("2000::/3")

// embedRule is an IPv6 range that carries an IPv4 address. The address is
// refused when its embedded IPv4 address is refused.
type embedRule struct {
	prefix  netip.Prefix
	name    string
	extract func(a [16]byte) netip.Addr
}

var embedRules = []embedRule{
	{netip.MustParsePrefix("64:ff9b::/96"), "NAT64", last32},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "local-use NAT64", last32},
	{netip.MustParsePrefix("2002::/16"), "6to4", func(a [16]byte) netip.Addr {
		return netip.AddrFrom4([4]byte{a[2], a[3], a[4], a[5]})
	}},
	{netip.MustParsePrefix("2001::/32"), "Teredo", func(a [16]byte) netip.Addr {
		// The Teredo client's public IPv4 address is the last 32 bits
		// with every bit inverted (RFC 4380 section 4).
		return netip.AddrFrom4([4]byte{^a[12], ^a[13], ^a[14], ^a[15]})
	}},
}

func last32(a [16]byte) netip.Addr {
	return netip.AddrFrom4([4]byte{a[12], a[13], a[14], a[15]})
}

// Guard decides whether an address and port may be dialled. The zero value
// and a nil *Guard apply the default rules with no allowlist and no self
// addresses; build others with NewGuard. A Guard is immutable and
// safe for concurrent use.
//
// Order of the checks in Check:
//  1. the broker's own listening addresses are refused, even when
//     allowlisted;
//  2. when allowed ports are set, any other port is refused;
//  3. an address inside an allowed prefix is accepted;
//  4. an address in a special-purpose range is refused. IPv4-mapped
//     addresses are checked as IPv4; NAT64 (64:ff9b::/96, 64:ff9b:1::/48),
//     6to4 (2002::/16) and Teredo (2001::/32) addresses are refused when the
//     IPv4 address they embed is refused (allowed prefixes apply to the
//     embedded address too);
//  5. any other address is accepted.
type Guard struct {
	prefixes  []netip.Prefix
	ports     []uint16
	hosts     []string // exact names, or ".suffix" for "*.suffix"
	self      []netip.AddrPort
	local     []netip.Addr
	selfAnyIP bool
	key       string
}

// GuardOption configures a Guard built by NewGuard.
type GuardOption func(*Guard)

// AllowPrefixes accepts addresses inside the prefixes even when they lie in
// a special-purpose range, for example 127.0.0.1/32 for a development
// tenant. IPv4-mapped prefixes (::ffff:a.b.c.d/n, n >= 96) are treated as
// the IPv4 prefix. Options add up.
func AllowPrefixes(prefixes ...netip.Prefix) GuardOption {
	return func(g *Guard) { g.prefixes = append(g.prefixes, prefixes...) }
}

// AllowPorts restricts dialling to the given ports. With no port set, every
// port from 1 to 65535 may be dialled. Options add up.
func AllowPorts(ports ...uint16) GuardOption {
	return func(g *Guard) { g.ports = append(g.ports, ports...) }
}

// AllowHosts restricts which host names may be called at all. A pattern is
// an exact name ("api.example.com") or "*.suffix", which matches any name
// ending in ".suffix" but not "suffix" itself. Matching ignores case and a
// trailing dot. An IP-literal host is matched against IP-literal patterns.
// With no pattern set, every name may be called.
//
// Allowing a name does not allow the addresses it resolves to: a name
// resolving to 10.0.0.1 is still refused unless 10.0.0.0/8 (or a narrower
// prefix holding it) is allowed too. Options add up.
func AllowHosts(patterns ...string) GuardOption {
	return func(g *Guard) { g.hosts = append(g.hosts, patterns...) }
}

// SelfAddrs lists the broker's own listening addresses. A dial to one of
// them is always refused, even when allowlisted. An entry whose address is
// unspecified (0.0.0.0 or ::, a listener on every interface) stands for the
// port on every local address: loopback, unspecified, the addresses given
// with LocalAddrs, and, with SelfPortAnyAddr, any address at all. Options
// add up.
func SelfAddrs(addrs ...netip.AddrPort) GuardOption {
	return func(g *Guard) { g.self = append(g.self, addrs...) }
}

// LocalAddrs lists the addresses of the local interfaces (see
// InterfaceAddrs), used to recognise the broker itself when it listens on
// an unspecified address. Options add up.
func LocalAddrs(addrs ...netip.Addr) GuardOption {
	return func(g *Guard) { g.local = append(g.local, addrs...) }
}

// SelfPortAnyAddr makes a self entry with an unspecified address refuse
// its port on every address, not only on the known local ones. Use it when
// the local addresses cannot be listed (for example behind NAT where the
// broker's public address is unknown).
func SelfPortAnyAddr() GuardOption {
	return func(g *Guard) { g.selfAnyIP = true }
}

// NewGuard builds a guard with the default deny rules and the given
// allowances. It reports an error for an invalid prefix, port 0 in the
// allowed ports, an invalid host pattern, or an invalid self or local
// address.
func NewGuard(opts ...GuardOption) (*Guard, error) {
	g := &Guard{}
	for _, o := range opts {
		o(g)
	}
	for i, p := range g.prefixes {
		if !p.IsValid() {
			return nil, fmt.Errorf("egress: invalid allowed prefix %q", p)
		}
		p = p.Masked()
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		g.prefixes[i] = p
	}
	for _, port := range g.ports {
		if port == 0 {
			return nil, errors.New("egress: allowed port 0 is invalid")
		}
	}
	for i, h := range g.hosts {
		n, err := normalizePattern(h)
		if err != nil {
			return nil, err
		}
		g.hosts[i] = n
	}
	for i, s := range g.self {
		if !s.IsValid() || !s.Addr().IsValid() {
			return nil, fmt.Errorf("egress: invalid self address %q", s)
		}
		g.self[i] = netip.AddrPortFrom(s.Addr().WithZone("").Unmap(), s.Port())
	}
	for i, a := range g.local {
		if !a.IsValid() {
			return nil, errors.New("egress: invalid local address")
		}
		g.local[i] = a.WithZone("").Unmap()
	}
	g.prefixes = sortedUnique(g.prefixes, func(a, b netip.Prefix) int {
		return cmp.Or(a.Addr().Compare(b.Addr()), cmp.Compare(a.Bits(), b.Bits()))
	})
	g.ports = sortedUnique(g.ports, cmp.Compare[uint16])
	g.hosts = sortedUnique(g.hosts, strings.Compare)
	g.self = sortedUnique(g.self, netip.AddrPort.Compare)
	g.local = sortedUnique(g.local, netip.Addr.Compare)
	g.key = g.fingerprint()
	return g, nil
}

func sortedUnique[T comparable](s []T, c func(a, b T) int) []T {
	s = slices.Clone(s)
	slices.SortFunc(s, c)
	return slices.Compact(s)
}

// fingerprint is a canonical description of every setting that affects the
// guard's decisions: two guards with the same fingerprint decide alike.
func (g *Guard) fingerprint() string {
	var b strings.Builder
	b.WriteString("p:")
	for _, p := range g.prefixes {
		b.WriteString(p.String() + ",")
	}
	b.WriteString("|o:")
	for _, p := range g.ports {
		b.WriteString(strconv.Itoa(int(p)) + ",")
	}
	b.WriteString("|h:")
	for _, h := range g.hosts {
		b.WriteString(h + ",") // patterns hold no ',' or '|'
	}
	b.WriteString("|s:")
	for _, s := range g.self {
		b.WriteString(s.String() + ",")
	}
	b.WriteString("|l:")
	for _, a := range g.local {
		b.WriteString(a.String() + ",")
	}
	if g.selfAnyIP {
		b.WriteString("|any")
	}
	return b.String()
}

// defaultGuardKey is the fingerprint of the nil (default) guard.
var defaultGuardKey = (&Guard{}).fingerprint()

func (g *Guard) poolKey() string {
	if g == nil || g.key == "" {
		return defaultGuardKey // nil or a zero Guard: the default rules
	}
	return g.key
}

// Check reports whether addr may be dialled: nil when allowed, a
// *RefusedError otherwise. An IPv6 zone (fe80::1%eth0) is ignored for the
// decision. Port 0 and an invalid address are refused.
func (g *Guard) Check(addr netip.AddrPort) error {
	if reason := g.refusal(addr); reason != "" {
		return &RefusedError{Addr: addr, Reason: reason}
	}
	return nil
}

// refusal returns why addr is refused, or "" when it is allowed.
func (g *Guard) refusal(addr netip.AddrPort) string {
	a := addr.Addr()
	if !a.IsValid() {
		return "invalid address"
	}
	a = a.WithZone("").Unmap()
	port := addr.Port()
	if port == 0 {
		return "port 0"
	}
	if g.isSelf(a, port) {
		return "the broker's own address"
	}
	if g != nil && len(g.ports) > 0 {
		if _, ok := slices.BinarySearch(g.ports, port); !ok {
			return fmt.Sprintf("port %d is not an allowed port", port)
		}
	}
	return g.rangeRefusal(a)
}

func (g *Guard) isSelf(a netip.Addr, port uint16) bool {
	if g == nil {
		return false
	}
	for _, s := range g.self {
		if s.Port() != port {
			continue
		}
		sa := s.Addr()
		if sa == a {
			return true
		}
		if !sa.IsUnspecified() {
			continue
		}
		if g.selfAnyIP || a.IsLoopback() || a.IsUnspecified() {
			return true
		}
		if _, ok := slices.BinarySearchFunc(g.local, a, netip.Addr.Compare); ok {
			return true
		}
	}
	return false
}

func (g *Guard) allowedPrefix(a netip.Addr) bool {
	if g == nil {
		return false
	}
	for _, p := range g.prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// rangeRefusal applies the allowlist and the special-purpose ranges to a
// zone-less, unmapped address.
func (g *Guard) rangeRefusal(a netip.Addr) string {
	if g.allowedPrefix(a) {
		return ""
	}
	if a.Is4() {
		for _, r := range ipv4Rules {
			if r.prefix.Contains(a) {
				return r.reason
			}
		}
		return ""
	}
	for _, e := range embedRules {
		if e.prefix.Contains(a) {
			v4 := e.extract(a.As16())
			if reason := g.rangeRefusal(v4); reason != "" {
				return fmt.Sprintf("%s address %s embeds %s: %s", e.name, e.prefix, v4, reason)
			}
			return ""
		}
	}
	for _, r := range ipv6Rules {
		if r.prefix.Contains(a) {
			return r.reason
		}
	}
	if !ipv6GlobalUnicast.Contains(a) {
		return "outside IPv6 global unicast 2000::/3"
	}
	return ""
}

// CheckHost reports whether a host name (or IP literal) from a URL may be
// called, before any resolution: nil when allowed, a *RefusedError
// otherwise. It refuses an empty host, a host that ends in a numeric label
// but is not a canonical dotted-quad IPv4 address ("2130706433",
// "0177.0.0.1", "0x7f.1", "127.1": forms some resolvers turn into loopback),
// a name with characters outside letters, digits, '-', '_' and '.', and,
// when allowed hosts are set, any host they do not match. It does not check
// addresses: a name passing CheckHost must still pass Check on every
// address it resolves to, and an IP literal must pass Check.
func (g *Guard) CheckHost(host string) error {
	_, _, err := g.checkHost(host)
	return err
}

// checkHost normalizes host and applies CheckHost. It returns the
// normalized name and, for an IP literal, its address.
func (g *Guard) checkHost(host string) (string, netip.Addr, error) {
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	refuse := func(reason string) (string, netip.Addr, error) {
		return "", netip.Addr{}, &RefusedError{Host: host, Reason: reason}
	}
	if name == "" {
		return refuse("empty host")
	}
	if ip, err := netip.ParseAddr(name); err == nil {
		if !g.hostAllowed(name, ip) {
			return refuse("host is not an allowed host")
		}
		return name, ip, nil
	}
	if isNumericHost(name) {
		return refuse("non-canonical numeric IPv4 form")
	}
	if !validHostName(name) {
		return refuse("invalid host name")
	}
	if !g.hostAllowed(name, netip.Addr{}) {
		return refuse("host is not an allowed host")
	}
	return name, netip.Addr{}, nil
}

func (g *Guard) hostAllowed(name string, ip netip.Addr) bool {
	if g == nil || len(g.hosts) == 0 {
		return true
	}
	for _, h := range g.hosts {
		switch {
		case ip.IsValid():
			if p, err := netip.ParseAddr(h); err == nil && p.WithZone("").Unmap() == ip.WithZone("").Unmap() {
				return true
			}
		case strings.HasPrefix(h, "."):
			if strings.HasSuffix(name, h) && len(name) > len(h) {
				return true
			}
		case h == name:
			return true
		}
	}
	return false
}

// normalizePattern turns an AllowHosts pattern into its stored form: a
// lower-case exact name or IP literal, or ".suffix" for "*.suffix".
func normalizePattern(p string) (string, error) {
	n := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(p)), ".")
	if ip, err := netip.ParseAddr(n); err == nil {
		return ip.WithZone("").String(), nil
	}
	wild := strings.HasPrefix(n, "*.")
	if wild {
		n = n[2:]
	}
	if n == "" || !validHostName(n) || isNumericHost(n) || strings.HasPrefix(n, ".") || strings.Contains(n, "..") {
		return "", fmt.Errorf("egress: invalid allowed host pattern %q", p)
	}
	if wild {
		return "." + n, nil
	}
	return n, nil
}

// validHostName reports whether a lower-case name holds only the
// characters of DNS host names (plus '_', which some services use).
func validHostName(name string) bool {
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_', c == '.':
		default:
			return false
		}
	}
	return len(name) <= 253
}

// isNumericHost reports whether a lower-case host without a trailing dot
// ends in a numeric label (all decimal digits, or "0x" followed by hex
// digits) and is not a canonical dotted-quad IPv4 address. Such hosts are
// the inet_aton forms ("2130706433", "0177.0.0.1", "0x7f.1", "127.1") that
// some resolvers read as IPv4 addresses; the WHATWG URL standard also
// treats a host ending in a number as an IPv4 address. No real DNS name
// ends in an all-numeric label, so refusing them loses nothing.
func isNumericHost(host string) bool {
	last := host[strings.LastIndexByte(host, '.')+1:]
	if !isNumericLabel(last) {
		return false
	}
	ip, err := netip.ParseAddr(host)
	return err != nil || !ip.Is4()
}

func isNumericLabel(s string) bool {
	if s == "" {
		return false
	}
	digits := s
	hex := false
	if len(s) >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
		digits, hex = s[2:], true
	}
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		switch {
		case '0' <= c && c <= '9':
		case hex && ('a' <= c && c <= 'f' || 'A' <= c && c <= 'F'):
		default:
			return false
		}
	}
	return true
}

// Control checks the address a socket is about to connect to. It has the
// signature of net.Dialer.Control: set it (or call it from ControlContext)
// on any net.Dialer so the check also sees the address actually passed to
// connect(2). It returns a *RefusedError for a refused or unparsable
// address.
func (g *Guard) Control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &RefusedError{Host: address, Reason: "unparsable dial address"}
	}
	return g.Check(ap)
}

// controlContext adapts Control to net.Dialer.ControlContext.
func (g *Guard) controlContext(_ context.Context, network, address string, c syscall.RawConn) error {
	return g.Control(network, address, c)
}

// InterfaceAddrs lists the addresses of the local network interfaces, for
// LocalAddrs. It opens no connection.
func InterfaceAddrs() ([]netip.Addr, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("egress: list interface addresses: %w", err)
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		var ip net.IP
		switch v := a.(type) {
		case *net.IPNet:
			ip = v.IP
		case *net.IPAddr:
			ip = v.IP
		default:
			continue
		}
		if na, ok := netip.AddrFromSlice(ip); ok {
			out = append(out, na.Unmap())
		}
	}
	return out, nil
}
