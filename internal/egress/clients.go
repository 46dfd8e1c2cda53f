package egress

import (
	"errors"
	"net/http"
	"net/netip"
	"sync/atomic"
)

// Rules are one policy's destination rules: the special-purpose ranges,
// ports and host names it may reach, and how many redirects it follows.
// Build them once, when the policy is loaded (NewRules); Clients turns them
// into a guarded client. Rules are immutable and safe for concurrent use;
// share them by pointer.
type Rules struct {
	prefixes  []netip.Prefix
	ports     []uint16
	hosts     []string
	redirects int

	bound atomic.Pointer[binding] // the client of the last Clients that bound r
}

// binding is Rules made into a client by one Clients owner.
type binding struct {
	owner  *Clients
	client *http.Client
}

// RulesConfig is what NewRules builds Rules from.
type RulesConfig struct {
	// AllowPrefixes are ranges the policy may reach even though they are
	// special-purpose (see AllowPrefixes).
	AllowPrefixes []netip.Prefix
	// AllowPorts, when non-empty, are the only ports it may reach.
	AllowPorts []uint16
	// AllowHosts, when non-empty, are the only host names it may call
	// (exact names or "*.suffix").
	AllowHosts []string
	// MaxRedirects is the number of redirects followed; 0 follows none.
	MaxRedirects int
}

// NewRules checks cfg (the same checks NewGuard makes) and returns its
// rules.
func NewRules(cfg RulesConfig) (*Rules, error) {
	if cfg.MaxRedirects < 0 {
		return nil, errors.New("egress: negative max redirects")
	}
	r := &Rules{
		prefixes:  append([]netip.Prefix(nil), cfg.AllowPrefixes...),
		ports:     append([]uint16(nil), cfg.AllowPorts...),
		hosts:     append([]string(nil), cfg.AllowHosts...),
		redirects: cfg.MaxRedirects,
	}
	if _, err := NewGuard(r.guardOptions()...); err != nil {
		return nil, err
	}
	return r, nil
}

// MaxRedirects returns the number of redirects the rules follow (0: none).
func (r *Rules) MaxRedirects() int {
	if r == nil {
		return 0
	}
	return r.redirects
}

func (r *Rules) guardOptions() []GuardOption {
	var opts []GuardOption
	if len(r.prefixes) > 0 {
		opts = append(opts, AllowPrefixes(r.prefixes...))
	}
	if len(r.ports) > 0 {
		opts = append(opts, AllowPorts(r.ports...))
	}
	if len(r.hosts) > 0 {
		opts = append(opts, AllowHosts(r.hosts...))
	}
	return opts
}

// Clients is the one owner of the broker's guarded HTTP clients. For each
// policy's Rules it builds, once, a guard from the rules plus the broker's
// own options (its listening addresses), and an *http.Client whose
// transport is bound to that guard (Transport.Bind): every connection the
// client opens, redirects included, is checked on the address dialled, and
// pooled connections are shared only between guards that decide alike.
// The client is kept with the Rules, so the hot path does no lookup; Rules
// dropped by a configuration reload take their clients with them. Safe for
// concurrent use.
type Clients struct {
	transport *Transport
	cfg       ClientConfig
	base      []GuardOption
}

// NewClients returns an owner whose clients share one Transport built from
// cfg (cfg.Guard is ignored) and whose guards all include base (for
// example SelfAddrs).
func NewClients(cfg ClientConfig, base ...GuardOption) *Clients {
	cfg.Guard = nil
	return &Clients{transport: NewTransport(cfg), cfg: cfg, base: append([]GuardOption(nil), base...)}
}

// For returns the guarded client of r (nil r: the default rules, no
// redirects). It fails only when r and the base options make an invalid
// guard together.
func (c *Clients) For(r *Rules) (*http.Client, error) {
	if r == nil {
		r = defaultRules
	}
	if b := r.bound.Load(); b != nil && b.owner == c {
		return b.client, nil
	}
	opts := append(append([]GuardOption(nil), c.base...), r.guardOptions()...)
	g, err := NewGuard(opts...)
	if err != nil {
		return nil, err
	}
	cfg := c.cfg
	cfg.FollowRedirects, cfg.MaxRedirects = r.redirects > 0, r.redirects
	client := &http.Client{Transport: c.transport.Bind(g), CheckRedirect: redirectPolicy(cfg)}
	r.bound.Store(&binding{owner: c, client: client})
	return client, nil
}

// CloseIdleConnections closes the idle connections of every pool.
func (c *Clients) CloseIdleConnections() { c.transport.CloseIdleConnections() }

// defaultRules are the rules of a policy that allows nothing special.
var defaultRules = &Rules{}
