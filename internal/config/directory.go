package config

import (
	"slices"

	"github.com/retrybroker/retrybroker/internal/credential"
	"github.com/retrybroker/retrybroker/internal/providers"
	"github.com/retrybroker/retrybroker/internal/tenant"
)

// Directory is an immutable snapshot of a loaded configuration: every
// tenant, indexed by id, API-key hash and mTLS identity. It is safe for
// concurrent use. The tenants, their policy maps and their policies must
// not be modified: tenants that use the same shared policies under the same
// names share one policy map, and all tenants share each shared policy.
type Directory struct {
	file       string
	digest     [32]byte
	tenants    []*tenant.Tenant
	byID       map[string]int32
	byKey      map[[32]byte]*tenant.Tenant
	byIdentity map[string]*tenant.Tenant
	policies   int
	templates  int
	hostMap    providers.HostMap
	catalog    *providers.Catalog
	// creds are the tenants' credentials by credentialKey, for the next
	// reload to keep those whose configuration did not change.
	creds map[string]credential.Credential
	admin [][32]byte // admin.token_sha256
}

// File returns the name the configuration was loaded from.
func (d *Directory) File() string { return d.file }

// Digest returns the SHA-256 of the file's contents.
func (d *Directory) Digest() [32]byte { return d.digest }

// Len returns the number of tenants.
func (d *Directory) Len() int { return len(d.tenants) }

// PolicyCount returns the number of policies over all tenants, counting a
// shared policy once per tenant that uses it.
func (d *Directory) PolicyCount() int { return d.policies }

// SharedPolicyCount returns the number of shared policies (the top-level
// policies of the file).
func (d *Directory) SharedPolicyCount() int { return d.templates }

// Tenants returns the tenants in file order, in a new slice.
func (d *Directory) Tenants() []*tenant.Tenant { return slices.Clone(d.tenants) }

// Tenant returns the tenant with the given id.
func (d *Directory) Tenant(id string) (*tenant.Tenant, bool) {
	i, ok := d.byID[id]
	if !ok {
		return nil, false
	}
	return d.tenants[i], true
}

// TenantByKeyHash returns the tenant whose api_key_sha256 list holds hash,
// the SHA-256 digest of an API key.
//
// The lookup is keyed by the digest, not by the key: its timing depends on
// the digest alone, which a caller cannot steer towards a stored digest
// without knowing the key, so it leaks nothing useful about stored keys.
func (d *Directory) TenantByKeyHash(hash [32]byte) (*tenant.Tenant, bool) {
	t, ok := d.byKey[hash]
	return t, ok
}

// TenantByIdentity returns the tenant mapped to an mTLS identity: a URI SAN
// exactly as written in mtls_identities (spiffe://corp/ns/a/sa/x) or a
// subject ("CN=team-a", compared as exact strings).
func (d *Directory) TenantByIdentity(identity string) (*tenant.Tenant, bool) {
	t, ok := d.byIdentity[identity]
	return t, ok
}

// HasIdentities reports whether any tenant is mapped to an mTLS identity.
func (d *Directory) HasIdentities() bool { return len(d.byIdentity) > 0 }

// Catalog returns the file's provider catalog: the built-in catalog with
// the file's top-level providers on top. A tenant that defines providers
// of its own sees them on top of this one (tenant.Tenant.Catalog).
func (d *Directory) Catalog() *providers.Catalog { return d.catalog }

// HostMap returns the host-to-provider map of policies that set no
// host_providers of their own, for tenants without providers of their
// own: the hosts of the file's catalog (Catalog) with the file's top-level
// host_providers on top.
func (d *Directory) HostMap() providers.HostMap { return d.hostMap }
