package auth

import (
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/retrybroker/retrybroker/internal/tenant"
)

// MsgOtherTenantPolicy is the message of the PERMISSION_DENIED status for a
// reference to another tenant's policy. It is the same whether or not the
// tenant or the policy exists.
const MsgOtherTenantPolicy = "policies of other tenants cannot be used"

// PolicyRef splits a policy reference. A plain name ("bulk") names a
// policy of the caller's own tenant. "tenant/policy" names a policy of a
// tenant explicitly; crossTenant is then true. Tenant ids and policy names
// never contain '/', so the first '/' separates them. An empty name means
// the tenant's default policy.
func PolicyRef(name string) (tenantID, policy string, crossTenant bool) {
	if t, p, ok := strings.Cut(name, "/"); ok {
		return t, p, true
	}
	return "", name, false
}

// ResolvePolicy returns the policy a request names, within tenant t:
//
//   - "" is t's default policy;
//   - "name" or "<t.ID>/name" is t's policy name, or FAILED_PRECONDITION
//     `unknown policy "name" for this tenant`;
//   - "<other>/name" is PERMISSION_DENIED MsgOtherTenantPolicy, whether or
//     not the other tenant or its policy exists, so callers learn nothing
//     about other tenants.
func ResolvePolicy(t *tenant.Tenant, name string) (*tenant.Policy, error) {
	tid, pname, cross := PolicyRef(name)
	if cross && tid != t.ID {
		return nil, status.Error(codes.PermissionDenied, MsgOtherTenantPolicy)
	}
	p, ok := t.Policy(pname)
	if !ok {
		if len(pname) > 64 {
			pname = pname[:64] + "..."
		}
		return nil, status.Errorf(codes.FailedPrecondition, "unknown policy %q for this tenant", pname)
	}
	return p, nil
}
