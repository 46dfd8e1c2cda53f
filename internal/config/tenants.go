package config

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/retrybroker/retrybroker/internal/tenant"
)

// The lists and maps of a tenant.
type (
	identities = list[identity, *identity]
	policyRefs = dict[policyRef, *policyRef]
)

// apiKeyHashes is the list of a tenant's API-key hashes.
type apiKeyHashes struct {
	list[apiKeyHash, *apiKeyHash]
}

// UnmarshalYAML decodes the list. A value that is not a list is refused
// without repeating it: it may be a plain key written without brackets.
func (k *apiKeyHashes) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && !isNull(n) {
		k.node = n
		return errAt(n, "want a list of SHA-256 hashes (64 hex digits) in brackets, got a single value; store the hash of the key, never the key: printf %%s \"$KEY\" | sha256sum")
	}
	return k.list.UnmarshalYAML(n)
}

// tenantDoc is one entry of tenants as written. Tenants inherit nothing,
// so only the fields whose absence means something are pointers.
type tenantDoc struct {
	section
	ID             str             `yaml:"id"`
	APIKeys        apiKeyHashes    `yaml:"api_key_sha256"`
	MTLSIdentities identities      `yaml:"mtls_identities"`
	Providers      *providerDocs   `yaml:"providers"`
	DefaultPolicy  *str            `yaml:"default_policy"`
	Policies       *policyRefs     `yaml:"policies"`
	Stream         *tenantStream   `yaml:"stream"`
	Credentials    *credentialDocs `yaml:"credentials"`
}

// tenantStream is a tenant's own stream limit, across its policies.
type tenantStream struct {
	section
	MaxConcurrent *intIn[streamsRange] `yaml:"max_concurrent"`
}

// UnmarshalYAML decodes the tenant's stream mapping.
func (s *tenantStream) UnmarshalYAML(n *yaml.Node) error {
	return decodeStruct(n, &s.section, s, wantMapping)
}

// UnmarshalYAML decodes a tenant mapping; unlike most mappings, a tenant
// may not be null.
func (t *tenantDoc) UnmarshalYAML(n *yaml.Node) error {
	const want = "a tenant (a mapping with id, api_key_sha256, ...)"
	if isNull(n) {
		t.node = n
		return errAt(n, "want %s, got %s", want, kindName(n))
	}
	return decodeStruct(n, &t.section, t, want)
}

// policyRef is one entry of a tenant's policies: the name of a shared
// policy, or a policy of the tenant's own.
type policyRef struct {
	at
	Name string     // the shared policy's name, when Doc is nil
	Doc  *policyDoc // the tenant's own policy
}

// UnmarshalYAML decodes a shared policy's name or a policy mapping.
func (r *policyRef) UnmarshalYAML(n *yaml.Node) error {
	r.node = n
	switch {
	case n.Kind == yaml.ScalarNode && !isNull(n):
		r.Name = n.Value
		return nil
	case n.Kind == yaml.MappingNode:
		r.Doc = new(policyDoc)
		return r.Doc.UnmarshalYAML(n)
	}
	return errAt(n, "want the name of a shared policy or a policy (a mapping of options), got %s", kindName(n))
}

// readTenants decodes, checks and indexes every tenant.
func (l *loader) readTenants(f *fileDoc, root *yaml.Node) {
	l.dir = &Directory{
		byID:       make(map[string]int32),
		byKey:      make(map[[32]byte]*tenant.Tenant),
		byIdentity: make(map[string]*tenant.Tenant),
		templates:  len(l.templates),
		hostMap:    l.files.hostMap,
		catalog:    l.files.cat,
	}
	l.sharedMaps = make(map[string]map[string]*tenant.Policy)
	if f.Tenants == nil {
		if f.key("tenants") == nil {
			l.addf(root, "tenants", "missing: list at least one tenant (id, api_key_sha256 or mtls_identities)")
		}
		return
	}
	n := f.Tenants.node
	switch {
	case isNull(n):
		l.addf(root, "tenants", "missing: list at least one tenant (id, api_key_sha256 or mtls_identities)")
		return
	case len(n.Content) == 0:
		l.addf(n, "tenants", "empty: list at least one tenant")
		return
	}
	l.dir.tenants = make([]*tenant.Tenant, 0, len(n.Content))
	l.idLines = make([]int32, 0, len(n.Content))
	l.dir.byID = make(map[string]int32, len(n.Content))
	l.dir.byKey = make(map[[32]byte]*tenant.Tenant, len(n.Content))
	for i, item := range n.Content {
		path := index("tenants", i)
		td := new(tenantDoc)
		err := decodeValue(td, item)
		l.report(path, err)
		if usable(err, item) {
			l.readTenant(td, path)
		}
	}
}

// readTenant checks the tenant decoded as td and adds it to the directory.
func (l *loader) readTenant(td *tenantDoc, path string) {
	t := &tenant.Tenant{ID: td.ID.V, DefaultPolicy: tenant.DefaultPolicyName}
	set(&t.DefaultPolicy, td.DefaultPolicy)
	switch {
	case td.key("id") == nil:
		l.addf(td.node, join(path, "id"), "missing: every tenant needs an id")
	case td.ID.node != nil && !ValidName(t.ID):
		l.addf(td.ID.node, join(path, "id"), "invalid tenant id %s: use 1 to %d characters from A-Z, a-z, 0-9, '.', '_' and '-'", describe(t.ID), MaxNameLength)
	}
	if td.APIKeys.written()+td.MTLSIdentities.written() == 0 {
		l.addf(td.node, path, "tenant %s has no credentials: list api_key_sha256 hashes or mtls_identities", describe(t.ID))
	}
	sc := l.tenantScope(td, path)
	t.Catalog = sc.cat
	t.Policies = l.tenantPolicies(td, path, sc)
	creds, credsOK := l.tenantCredentials(td, t.ID, path)
	t.Credentials = creds
	if t.Policies != nil {
		if !credsOK {
			t.Policies = nil // a policy may name a broken credential: reported there
		} else {
			t.Policies = l.bindCredentials(t.Policies, creds, td, path)
		}
	}
	if td.Stream != nil {
		set(&t.StreamMaxConcurrent, td.Stream.MaxConcurrent)
	}
	t.StreamMaxConcurrent = t.StreamLimit() // the default, computed once
	l.checkDefaultPolicy(t, td, path)
	l.index(t, td, path)
}

// checkDefaultPolicy checks that the tenant's default policy is one of the
// policies it lists, whether or not they are valid.
func (l *loader) checkDefaultPolicy(t *tenant.Tenant, td *tenantDoc, path string) {
	var listed []string
	switch {
	case td.Policies != nil:
		for _, e := range td.Policies.Entries {
			listed = append(listed, e.Key.Value)
		}
	case td.key("policies") == nil:
		listed = []string{tenant.DefaultPolicyName}
	default: // not a mapping (reported)
		return
	}
	if slices.Contains(listed, t.DefaultPolicy) {
		return
	}
	slices.Sort(listed)
	names := strings.Join(listed, ", ")
	if td.DefaultPolicy != nil {
		l.addf(td.DefaultPolicy.node, join(path, "default_policy"), "no policy named %s in this tenant (it has: %s)", describe(t.DefaultPolicy), names)
		return
	}
	l.addf(td.node, join(path, "default_policy"), "this tenant has no policy named %q (it has: %s); add one or set default_policy", tenant.DefaultPolicyName, names)
}

// index adds the tenant to the directory by id, key hash and identity,
// reporting what another tenant already has.
func (l *loader) index(t *tenant.Tenant, td *tenantDoc, path string) {
	d := l.dir
	if td.ID.node != nil && t.ID != "" {
		if first, dup := d.byID[t.ID]; dup {
			l.addf(td.ID.node, join(path, "id"), "duplicate tenant id %s (first defined at line %d)", describe(t.ID), l.idLines[first])
		} else {
			d.byID[t.ID] = int32(len(d.tenants))
		}
	}
	d.tenants = append(d.tenants, t)
	l.idLines = append(l.idLines, int32(td.node.Line))
	keys := td.APIKeys.Items
	for j := range keys {
		k := &keys[j]
		other, dup := d.byKey[k.V]
		switch {
		case !dup:
			d.byKey[k.V] = t
		case other == t:
			l.addf(k.node, l.keyPath(td, path, k), "this hash is listed twice for the tenant (see %s)", l.keyPath(td, path, &keys[firstKey(keys, j)]))
		default:
			l.addf(k.node, l.keyPath(td, path, k), "this API key hash is also listed for tenant %s; a key must identify exactly one tenant", describe(other.ID))
		}
	}
	for _, id := range td.MTLSIdentities.Items {
		if other, dup := d.byIdentity[id.V]; dup {
			l.addf(id.node, index(join(path, "mtls_identities"), td.MTLSIdentities.itemIndex(id.node)), "identity %s is also mapped to tenant %s; an identity must map to exactly one tenant", describe(id.V), describe(other.ID))
			continue
		}
		d.byIdentity[id.V] = t
	}
	d.policies += len(t.Policies)
}

// keyPath returns the path of the tenant's key hash k.
func (l *loader) keyPath(td *tenantDoc, path string, k *apiKeyHash) string {
	return index(join(path, "api_key_sha256"), td.APIKeys.itemIndex(k.node))
}

// firstKey returns the index of the first key with the same hash as
// keys[j].
func firstKey(keys []apiKeyHash, j int) int {
	for i := range j {
		if keys[i].V == keys[j].V {
			return i
		}
	}
	return j
}

// checkIdentity returns what is wrong with an mTLS identity, or "".
// An identity is either a URI (a URI SAN such as spiffe://corp/ns/a/sa/x)
// or a subject distinguished name in RFC 2253 form (CN=team-a or
// CN=team-a,O=Corp).
func checkIdentity(s string) string {
	if strings.TrimSpace(s) != s || s == "" {
		return "an identity must not be empty or have surrounding spaces"
	}
	if strings.Contains(s, "://") {
		u, err := url.Parse(s)
		if err != nil || u.Scheme == "" || u.Host == "" {
			return fmt.Sprintf("%s is not a valid URI SAN (want for example spiffe://trust.domain/ns/team-a/sa/caller)", describe(s))
		}
		return ""
	}
	attr, _, ok := strings.Cut(s, "=")
	if !ok || attr == "" || !isAttrType(attr) {
		return fmt.Sprintf("%s is neither a URI SAN (spiffe://...) nor a subject such as CN=team-a", describe(s))
	}
	return ""
}

// isAttrType reports whether s looks like a DN attribute type (CN, O, OU,
// 2.5.4.3).
func isAttrType(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// sharedRef is a tenant's use of a shared policy under a name.
type sharedRef struct {
	name string
	t    *template
}

// tenantPolicies builds a tenant's policies, or returns nil when one of
// them has a problem (reported). Tenants that only reference shared
// policies, under the same names, share one map.
func (l *loader) tenantPolicies(td *tenantDoc, path string, sc *scope) map[string]*tenant.Policy {
	if td.Policies == nil {
		if td.key("policies") != nil { // present but not a mapping: reported
			return nil
		}
		return l.defaultPolicies(sc, path)
	}
	pp := join(path, "policies")
	var refs []sharedRef
	var own map[string]*tenant.Policy
	broken := false
	for i := range td.Policies.Entries {
		e := &td.Policies.Entries[i]
		name, fp := e.Key.Value, join(pp, e.Key.Value)
		if !ValidName(name) {
			l.addf(e.Key, fp, "invalid policy name: use 1 to %d characters from A-Z, a-z, 0-9, '.', '_' and '-'", MaxNameLength)
			broken = true
			continue
		}
		if !e.OK {
			broken = true
			continue
		}
		if e.V.Doc == nil {
			t := l.sharedPolicy(&e.V, fp)
			if t == nil {
				broken = true
				continue
			}
			refs = append(refs, sharedRef{name, t})
			continue
		}
		p := l.ownPolicy(e.V.Doc, name, fp, sc)
		if p == nil {
			broken = true
			continue
		}
		if own == nil {
			own = make(map[string]*tenant.Policy, len(td.Policies.Entries))
		}
		own[name] = p
	}
	if broken {
		return nil
	}
	return l.policyMap(refs, own, sc, pp)
}

// defaultPolicies returns the policies of a tenant that lists none: the
// shared policy named default if there is one, else the standard policy.
func (l *loader) defaultPolicies(sc *scope, path string) map[string]*tenant.Policy {
	t := l.builtin
	if dt, ok := l.templates[tenant.DefaultPolicyName]; ok {
		t = dt
	}
	if !t.ok {
		return nil
	}
	if sc != l.files {
		p := l.inScope(t, tenant.DefaultPolicyName, sc, join(path, "policies"))
		if p == nil {
			return nil
		}
		return map[string]*tenant.Policy{tenant.DefaultPolicyName: p}
	}
	return l.shared(tenant.DefaultPolicyName+"\x00"+t.name, func() map[string]*tenant.Policy {
		return map[string]*tenant.Policy{tenant.DefaultPolicyName: t.as(tenant.DefaultPolicyName)}
	})
}

// sharedPolicy returns the shared policy r names, or nil when there is
// none (reported) or it has problems (reported at the shared policy).
func (l *loader) sharedPolicy(r *policyRef, path string) *template {
	t, ok := l.templates[r.Name]
	if !ok {
		l.addf(r.node, path, "no shared policy named %s under the top-level policies%s", describe(r.Name), l.knownTemplates())
		return nil
	}
	if !t.ok {
		return nil
	}
	return t
}

// ownPolicy resolves a policy a tenant defines itself, over the shared
// policy it extends if any. It returns nil when the policy has a problem
// (reported).
func (l *loader) ownPolicy(doc *policyDoc, name, path string, sc *scope) *tenant.Policy {
	base := l.builtin
	var ext *yaml.Node
	switch {
	case doc.Extends != nil:
		ext = doc.Extends.node
		t, found := l.templates[doc.Extends.V]
		if !found {
			l.addf(ext, join(path, "extends"), "no shared policy named %s under the top-level policies%s", describe(doc.Extends.V), l.knownTemplates())
			return nil
		}
		base = t
	case doc.key("extends") != nil: // not a name: reported
		return nil
	}
	p, _, ok := l.resolvePolicy(doc, base, name, path, ext, sc)
	if !ok {
		return nil
	}
	return &p
}

// policyMap returns the map of a tenant's policies: its own, plus the
// shared ones it references. A tenant with only references shares the map
// of every other tenant with the same references, unless it defines
// providers (sc is not the file's scope): its shared policies are then
// copies that resolve names through its catalog. path is the tenant's
// policies.
func (l *loader) policyMap(refs []sharedRef, own map[string]*tenant.Policy, sc *scope, path string) map[string]*tenant.Policy {
	if sc != l.files {
		if own == nil {
			own = make(map[string]*tenant.Policy, len(refs))
		}
		for _, r := range refs {
			p := l.inScope(r.t, r.name, sc, join(path, r.name))
			if p == nil {
				return nil
			}
			own[r.name] = p
		}
		return own
	}
	if own != nil {
		for _, r := range refs {
			own[r.name] = r.t.as(r.name)
		}
		return own
	}
	if len(refs) == 0 {
		return map[string]*tenant.Policy{}
	}
	var sig string
	if len(refs) == 1 {
		sig = refs[0].name + "\x00" + refs[0].t.name
	} else {
		slices.SortFunc(refs, func(a, b sharedRef) int { return strings.Compare(a.name, b.name) })
		var b strings.Builder
		for _, r := range refs {
			b.WriteString(r.name + "\x00" + r.t.name + "\x00")
		}
		sig = b.String()
	}
	return l.shared(sig, func() map[string]*tenant.Policy {
		m := make(map[string]*tenant.Policy, len(refs))
		for _, r := range refs {
			m[r.name] = r.t.as(r.name)
		}
		return m
	})
}

// shared returns the policy map cached under sig, building it once.
func (l *loader) shared(sig string, build func() map[string]*tenant.Policy) map[string]*tenant.Policy {
	if m, ok := l.sharedMaps[sig]; ok {
		return m
	}
	m := build()
	l.sharedMaps[sig] = m
	return m
}

// knownTemplates lists the shared policy names for a message.
func (l *loader) knownTemplates() string {
	if len(l.templates) == 0 {
		return " (there are none)"
	}
	return " (there are: " + strings.Join(slices.Sorted(maps.Keys(l.templates)), ", ") + ")"
}

// tenantScope returns the scope of a tenant's policies: the file's, or,
// when the tenant defines providers, the file's catalog with the tenant's
// on top. Its broken names are the file's and the tenant's.
func (l *loader) tenantScope(td *tenantDoc, path string) *scope {
	if td.Providers == nil || len(td.Providers.Entries) == 0 {
		return l.files
	}
	sc := l.readProviders(td.Providers, l.files.cat, l.files.broken, join(path, "providers"), ", tenant "+td.ID.V, l.hostOverrides)
	for name := range l.files.broken {
		if sc.broken == nil {
			sc.broken = map[string]bool{}
		}
		if !sc.cat.Has(name) {
			sc.broken[name] = true
		}
	}
	return sc
}

// inScope returns the shared policy t under name for a tenant whose
// policies resolve names through sc: t's own policy in the file's scope,
// else a copy with sc's catalog and host map. path is where the tenant
// uses it. It returns nil when the copy does not validate, which cannot
// happen (sc's catalog holds every name the file's does), reported.
func (l *loader) inScope(t *template, name string, sc *scope, path string) *tenant.Policy {
	if sc == l.files {
		return t.as(name)
	}
	p := new(tenant.Policy)
	*p = t.p
	p.Name = name
	if !l.scopePolicy(p, t.hosts, sc) {
		l.addf(nil, path, "the host map of shared policy %s cannot be built for this tenant", describe(t.name))
		return nil
	}
	if err := p.Validate(); err != nil {
		l.addf(nil, path, "shared policy %s is not valid for this tenant: %v", describe(t.name), err)
		return nil
	}
	return p
}
