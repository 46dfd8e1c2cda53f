// Package tenant models who calls the broker and under which policies: a
// Tenant owns named Policies; a Directory is an immutable snapshot of all
// tenants that can be swapped atomically on reload.
package tenant

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/retrybroker/retrybroker/internal/credential"
	"github.com/retrybroker/retrybroker/internal/egress"
	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/providers"
	"github.com/retrybroker/retrybroker/internal/store"
)

// DevTenantID is the id of the single tenant of the embedded default.
const DevTenantID = "dev"

// DefaultPolicyName is the name of a tenant's default policy.
const DefaultPolicyName = "default"

// Policy is an engine policy plus what Execute needs around it.
type Policy struct {
	engine.Policy
	// HostMap chooses the provider from the request host when the policy
	// names none. Its names are entries of the policy's Catalog.
	HostMap providers.HostMap
	// AllowDestinations are address ranges this policy may reach even
	// though they are special-purpose (loopback, private, ...), parsed
	// once when the configuration loads; a single address is a /32 or
	// /128.
	AllowDestinations []netip.Prefix
	// AllowPorts, when non-empty, are the only ports this policy may reach.
	AllowPorts []uint16
	// AllowHosts, when non-empty, are the only host names this policy may
	// call: exact names or "*.suffix" wildcards. Allowing a name never
	// allows a special-purpose address it resolves to.
	AllowHosts []string
	// MaxRedirects is the number of redirects followed; 0 follows none.
	MaxRedirects int
	// CredentialName is the policy's credential key: the name of one of
	// its tenant's Credentials, bound to engine.Policy.Credential when the
	// tenant is loaded ("" for none).
	CredentialName string

	// egress is built from the destination fields by Validate.
	egress *egress.Rules
}

// Validate checks the engine policy (engine.Policy.Validate) and builds the
// policy's destination rules from AllowDestinations, AllowPorts, AllowHosts
// and MaxRedirects, once. Call it after changing any field; Egress returns
// what it built.
func (p *Policy) Validate() error {
	if err := p.Policy.Validate(); err != nil {
		return err
	}
	r, err := egress.NewRules(egress.RulesConfig{
		AllowPrefixes: p.AllowDestinations, AllowPorts: p.AllowPorts, AllowHosts: p.AllowHosts, MaxRedirects: p.MaxRedirects,
	})
	if err != nil {
		return &engine.FieldError{Field: "allow_destinations", Message: err.Error()}
	}
	p.egress = r
	return nil
}

// Egress returns the destination rules Validate built (nil before
// Validate: the default rules, no redirects).
func (p *Policy) Egress() *egress.Rules { return p.egress }

// Tenant is one caller identity and its policies.
type Tenant struct {
	// ID is the tenant's stable id; it namespaces all shared state.
	ID string
	// Policies by name; DefaultPolicyName must be present.
	Policies map[string]*Policy
	// DefaultPolicy names the policy used when a request names none.
	DefaultPolicy string
	// Catalog is the provider catalog the tenant's policies resolve names
	// through: the built-in catalog, the configuration file's providers on
	// top, and the tenant's own on top of those. Nil means the built-in
	// catalog. Another tenant's own providers are never in it.
	Catalog *providers.Catalog
	// StreamMaxConcurrent is the most ExecuteStream calls the tenant may
	// have open at once in one broker replica, across all its policies
	// (each policy's own stream.max_concurrent holds as well); 0 means the
	// largest stream.max_concurrent among its policies (see StreamLimit).
	// Like every limit, it is per replica: N replicas allow N times as many.
	StreamMaxConcurrent int
	// Credentials are the tenant's broker-held credentials by name
	// (tenants[].credentials); its policies' Credential fields point into
	// it. Nil for none.
	Credentials map[string]credential.Credential
}

// StreamLimit returns the most ExecuteStream calls the tenant may have
// open at once in one replica, across its policies: StreamMaxConcurrent,
// or when that is 0 the largest stream.max_concurrent among its policies
// (at least 1).
func (t *Tenant) StreamLimit() int {
	if t.StreamMaxConcurrent > 0 {
		return t.StreamMaxConcurrent
	}
	n := 1
	for _, p := range t.Policies {
		n = max(n, p.Stream.MaxConcurrent)
	}
	return n
}

// ProviderCatalog returns Catalog, or the built-in catalog when it is nil.
func (t *Tenant) ProviderCatalog() *providers.Catalog {
	if t.Catalog != nil {
		return t.Catalog
	}
	return providers.Builtin()
}

// Policy returns the named policy, or the default for "". It reports
// false for an unknown name.
func (t *Tenant) Policy(name string) (*Policy, bool) {
	if name == "" {
		name = t.DefaultPolicy
		if name == "" {
			name = DefaultPolicyName
		}
	}
	p, ok := t.Policies[name]
	return p, ok
}

// DefaultPolicy returns the standard policy wrapped with the broker's
// defaults for budgets, host mapping and redirects.
func DefaultPolicy() *Policy {
	p := &Policy{Policy: engine.DefaultPolicy(), HostMap: providers.DefaultHostMap()}
	p.Budget = store.DefaultBudget()
	p.Learning = store.DefaultLearning()
	p.Breaker = store.DefaultBreaker()
	return p
}

// Dev returns the embedded default tenant: one default policy, with the
// given extra destination ranges allowed, as CIDRs (for example
// "127.0.0.1/32"). A range that is not a CIDR is an error.
func Dev(allow []string) (*Tenant, error) {
	p := DefaultPolicy()
	for _, s := range allow {
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("allowed destination %q: %w", s, err)
		}
		p.AllowDestinations = append(p.AllowDestinations, pfx)
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &Tenant{ID: DevTenantID, Policies: map[string]*Policy{DefaultPolicyName: p}, DefaultPolicy: DefaultPolicyName}, nil
}

type ctxKey struct{}

// NewContext returns ctx carrying t.
func NewContext(ctx context.Context, t *Tenant) context.Context {
	return context.WithValue(ctx, ctxKey{}, t)
}

// FromContext returns the tenant in ctx, if any.
func FromContext(ctx context.Context) (*Tenant, bool) {
	t, ok := ctx.Value(ctxKey{}).(*Tenant)
	return t, ok && t != nil
}
