package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"
)

// Resolver resolves host names to addresses. *net.Resolver implements it.
// network is "ip", "ip4" or "ip6".
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// DialFunc opens a connection to address, which is always a numeric
// "ip:port" that the guard has accepted.
type DialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// DefaultDialTimeout is the connect timeout per address when none is set.
const DefaultDialTimeout = 10 * time.Second

// Dialer opens guarded TCP connections. Its DialContext fits
// http.Transport.DialContext. The zero value is ready to use: default
// rules, net.DefaultResolver and a net.Dialer whose ControlContext repeats
// the guard's check. A Dialer is safe for concurrent use; do not change its
// fields after first use.
//
// DialContext:
//  1. refuses the host by name when Guard.CheckHost does (non-canonical
//     numeric forms, allowed-host list);
//  2. takes an IP literal as is, or resolves the name with Resolver;
//  3. checks every address with the guard;
//  4. dials only the accepted addresses, in the resolver's order, and
//     returns the first connection made.
//
// When no address is accepted it returns an error wrapping the first
// *RefusedError and never calls DialFunc. The address dialled is exactly
// the address checked, so DNS rebinding between check and connect is not
// possible. Happy Eyeballs (parallel IPv4/IPv6 racing) is not done.
type Dialer struct {
	// Guard checks every destination. nil means the default rules.
	Guard *Guard
	// Resolver resolves host names. nil means net.DefaultResolver.
	Resolver Resolver
	// DialFunc opens the connection to a checked "ip:port". nil means a
	// net.Dialer with Timeout, 30s keep-alive and ControlContext hooked to
	// the guard, so the address passed to connect(2) is checked again.
	DialFunc DialFunc
	// Timeout bounds each connect attempt of the default DialFunc. Zero
	// means DefaultDialTimeout.
	Timeout time.Duration
}

// DialContext connects to address ("host:port") on network ("tcp",
// "tcp4" or "tcp6") under d.Guard.
func (d *Dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	return d.dial(ctx, d.Guard, network, address)
}

func (d *Dialer) dial(ctx context.Context, g *Guard, network, address string) (net.Conn, error) {
	addrs, err := d.resolve(ctx, g, network, address)
	if err != nil {
		return nil, err
	}
	dial := d.DialFunc
	if dial == nil {
		dial = d.defaultDial(g)
	}
	var first error
	for _, ap := range addrs {
		conn, err := dial(ctx, network, ap.String())
		if err == nil {
			return conn, nil
		}
		if first == nil {
			first = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("egress: dial %s: %w", address, first)
}

// resolve returns the accepted addresses for address, in order, or an
// error wrapping a *RefusedError (none accepted), a resolver error, or an
// invalid-address error.
func (d *Dialer) resolve(ctx context.Context, g *Guard, network, address string) ([]netip.AddrPort, error) {
	host, portStr, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("egress: dial %q: %w: %w", address, ErrInvalidURL, err)
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil || port == 0 {
		return nil, fmt.Errorf("egress: dial %q: %w: invalid port", address, ErrInvalidURL)
	}
	name, ip, err := g.checkHost(host)
	if err != nil {
		return nil, err
	}
	var ips []netip.Addr
	if ip.IsValid() {
		ips = []netip.Addr{ip}
	} else {
		r := d.Resolver
		if r == nil {
			r = net.DefaultResolver
		}
		ips, err = r.LookupNetIP(ctx, ipNetwork(network), name)
		if err != nil {
			return nil, fmt.Errorf("egress: resolve %q: %w", name, err)
		}
		if len(ips) == 0 {
			return nil, fmt.Errorf("egress: resolve %q: %w", name,
				&net.DNSError{Err: "no such host", Name: name, IsNotFound: true})
		}
	}
	var (
		ok      []netip.AddrPort
		refused *RefusedError
	)
	for _, a := range ips {
		if a.Is4In6() {
			a = a.Unmap()
		}
		ap := netip.AddrPortFrom(a, uint16(port))
		if !familyMatches(network, a) {
			continue
		}
		if reason := g.refusal(ap); reason != "" {
			if refused == nil {
				refused = &RefusedError{Host: host, Addr: ap, Reason: reason}
			}
			continue
		}
		ok = append(ok, ap)
	}
	if len(ok) == 0 {
		if refused == nil {
			return nil, fmt.Errorf("egress: resolve %q: %w", name,
				&net.DNSError{Err: "no address of the requested family", Name: name, IsNotFound: true})
		}
		return nil, refused
	}
	return ok, nil
}

func ipNetwork(network string) string {
	switch network {
	case "tcp4", "udp4":
		return "ip4"
	case "tcp6", "udp6":
		return "ip6"
	default:
		return "ip"
	}
}

func familyMatches(network string, a netip.Addr) bool {
	switch network {
	case "tcp4", "udp4":
		return a.Is4()
	case "tcp6", "udp6":
		return a.Is6()
	default:
		return true
	}
}

func (d *Dialer) defaultDial(g *Guard) DialFunc {
	timeout := d.Timeout
	if timeout <= 0 {
		timeout = DefaultDialTimeout
	}
	nd := &net.Dialer{
		Timeout:        timeout,
		KeepAlive:      30 * time.Second,
		ControlContext: g.controlContext,
	}
	return nd.DialContext
}

// ErrInvalidURL marks a request or dial address that cannot be sent: a
// missing host, an unsupported scheme, an unparsable port. Classify maps
// it to engine.TransportInvalidURL.
var ErrInvalidURL = errors.New("invalid URL")
