package config

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/retrybroker/retrybroker/internal/providers"
	"github.com/retrybroker/retrybroker/internal/tenant"
)

// Version is the only configuration file version this broker reads.
const Version = 1

// MaxNameLength bounds tenant ids and policy names.
const MaxNameLength = 64

var (
	topKeys    = []string{"version", "host_providers", "policies", "tenants"}
	tenantKeys = []string{"id", "api_key_sha256", "mtls_identities", "default_policy", "policies"}
)

// ValidName reports whether s may be a tenant id or a policy name: 1 to 64
// characters from A-Z, a-z, 0-9, '.', '_' and '-'. A '/' is never part of
// a name: "tenant/policy" is the cross-tenant reference syntax.
func ValidName(s string) bool {
	if s == "" || len(s) > MaxNameLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Load reads and validates the configuration file at path. An I/O error is
// returned wrapped; an invalid file gives an *Error listing every problem.
func Load(path string) (*Directory, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read configuration: %w", err)
	}
	return Parse(path, data)
}

// Parse validates configuration data; name is the file name used in
// problems. It returns an *Error listing every problem when data is not a
// valid configuration.
func Parse(name string, data []byte) (*Directory, error) {
	l := &loader{walker: walker{file: name}}
	dir := l.parse(data)
	if len(l.problems) > 0 {
		sortProblems(l.problems)
		return nil, &Error{File: name, Problems: l.problems}
	}
	dir.file = name
	dir.digest = sha256.Sum256(data)
	return dir, nil
}

// loader holds the state of one Parse.
type loader struct {
	walker
	hostOverrides map[string]string // top-level host_providers
	hostMap       providers.HostMap // built-in map with hostOverrides on top
	templates     map[string]*template
	builtin       *template // the standard policy, for tenants without policies
	sharedMaps    map[string]map[string]*tenant.Policy
	dir           *Directory
	idLines       []int32 // line of each tenant in dir.tenants
}

// template is a shared policy from the top-level policies.
type template struct {
	name    string
	d       *draft
	ok      bool
	aliases map[string]*tenant.Policy
}

// as returns the template's policy under the name a tenant gives it. Every
// tenant that uses the template under the same name shares one *Policy.
func (t *template) as(name string) *tenant.Policy {
	if p, ok := t.aliases[name]; ok {
		return p
	}
	p := new(tenant.Policy)
	*p = t.d.p
	p.Name = name
	t.aliases[name] = p
	return p
}

func (l *loader) parse(data []byte) *Directory {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			l.addf(nil, "", "the file is empty; a configuration needs at least version: 1 and tenants")
		} else {
			l.problems = append(l.problems, syntaxProblem(l.file, err))
		}
		return nil
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		l.addf(&extra, "", "more than one YAML document (---); put the whole configuration in one document")
	} else if !errors.Is(err, io.EOF) {
		l.problems = append(l.problems, syntaxProblem(l.file, err))
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		l.addf(&doc, "", "the file holds no configuration")
		return nil
	}
	root := doc.Content[0]
	if isNull(root) {
		l.addf(root, "", "the file is empty; a configuration needs at least version: 1 and tenants")
		return nil
	}
	var version, hosts, policies, tenants *yaml.Node
	ok := l.mapping(root, "", func(key string, k, v *yaml.Node) {
		switch key {
		case "version":
			version = v
		case "host_providers":
			hosts = v
		case "policies":
			policies = v
		case "tenants":
			tenants = v
		default:
			l.unknownKey(k, "", key, topKeys)
		}
	})
	if !ok {
		return nil
	}
	if version == nil {
		l.addf(root, "version", "missing: start the file with version: %d", Version)
	} else if v, ok := l.integer(version, "version", 0, 1<<31); ok && v != Version {
		l.addf(version, "version", "unsupported version %d; this broker reads version %d", v, Version)
	}

	l.hostOverrides = make(map[string]string)
	if hosts != nil {
		l.readHostProviders(hosts, "host_providers", l.hostOverrides)
	}
	hm, err := providers.NewHostMap(l.hostOverrides)
	if err != nil { // each entry was checked; this cannot happen
		l.addf(hosts, "host_providers", "%v", err)
	}
	l.hostMap = hm

	l.builtin = &template{name: "", d: &draft{p: *tenant.DefaultPolicy()}, aliases: map[string]*tenant.Policy{}}
	l.builtin.d.p.HostMap = l.hostMap
	l.builtin.ok = l.builtin.d.p.Validate() == nil
	l.readTemplates(policies)

	l.dir = &Directory{
		byID:       make(map[string]int32),
		byKey:      make(map[[32]byte]*tenant.Tenant),
		byIdentity: make(map[string]*tenant.Tenant),
		templates:  len(l.templates),
		hostMap:    l.hostMap,
	}
	l.sharedMaps = make(map[string]map[string]*tenant.Policy)
	if tenants == nil || isNull(tenants) {
		l.addf(root, "tenants", "missing: list at least one tenant (id, api_key_sha256 or mtls_identities)")
		return l.dir
	}
	if tenants.Kind == yaml.SequenceNode {
		l.dir.tenants = make([]*tenant.Tenant, 0, len(tenants.Content))
		l.idLines = make([]int32, 0, len(tenants.Content))
		l.dir.byID = make(map[string]int32, len(tenants.Content))
		l.dir.byKey = make(map[[32]byte]*tenant.Tenant, len(tenants.Content))
	}
	l.sequence(tenants, "tenants", l.readTenant)
	if tenants.Kind == yaml.SequenceNode && len(tenants.Content) == 0 {
		l.addf(tenants, "tenants", "empty: list at least one tenant")
	}
	return l.dir
}

// readTemplates reads the top-level shared policies.
func (l *loader) readTemplates(n *yaml.Node) {
	l.templates = make(map[string]*template)
	if n == nil {
		return
	}
	l.mapping(n, "policies", func(name string, k, v *yaml.Node) {
		path := join("policies", name)
		if !ValidName(name) {
			l.addf(k, path, "invalid policy name: use 1 to %d characters from A-Z, a-z, 0-9, '.', '_' and '-'", MaxNameLength)
			return
		}
		t := &template{name: name, aliases: map[string]*tenant.Policy{}}
		l.templates[name] = t
		if !l.noAlias(v, path) {
			return
		}
		if v.Kind != yaml.MappingNode && !isNull(v) {
			l.addf(v, path, "want a policy (a mapping of options), got %s", kindName(v))
			return
		}
		if ext := findKey(v, "extends"); ext != nil {
			l.addf(ext, join(path, "extends"), "shared policies cannot extend; only tenant policies can")
		}
		t.d = &draft{p: l.builtin.d.p}
		t.d.p.Name = name
		l.readPolicy(t.d, v, path)
		t.ok = l.finish(t.d, path)
	})
}

// findKey returns the key node of key in mapping n, if present.
func findKey(n *yaml.Node, key string) *yaml.Node {
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i]
		}
	}
	return nil
}

// readTenant reads tenants[i].
func (l *loader) readTenant(i int, n *yaml.Node) {
	path := index("tenants", i)
	if n.Kind != yaml.MappingNode {
		l.addf(n, path, "want a tenant (a mapping with id, api_key_sha256, ...), got %s", kindName(n))
		return
	}
	t := &tenant.Tenant{DefaultPolicy: tenant.DefaultPolicyName}
	var idNode, policiesNode, defaultNode *yaml.Node
	var keys []keyAt
	var idents []identAt
	listed := false // credentials were listed, valid or not
	l.mapping(n, path, func(key string, k, v *yaml.Node) {
		fp := join(path, key)
		switch key {
		case "id":
			idNode = v
			if s, ok := l.str(v, fp); ok {
				if !ValidName(s) {
					l.addf(v, fp, "invalid tenant id %s: use 1 to %d characters from A-Z, a-z, 0-9, '.', '_' and '-'", describe(s), MaxNameLength)
				}
				t.ID = s
			}
		case "api_key_sha256":
			l.sequence(v, fp, func(j int, item *yaml.Node) {
				listed = true
				if h, ok := l.keyHash(item, index(fp, j)); ok {
					keys = append(keys, keyAt{h, item, index(fp, j)})
				}
			})
		case "mtls_identities":
			l.sequence(v, fp, func(j int, item *yaml.Node) {
				listed = true
				if s, ok := l.str(item, index(fp, j)); ok {
					if msg := checkIdentity(s); msg != "" {
						l.addf(item, index(fp, j), "%s", msg)
						return
					}
					idents = append(idents, identAt{s, item, index(fp, j)})
				}
			})
		case "default_policy":
			defaultNode = v
			if s, ok := l.str(v, fp); ok {
				t.DefaultPolicy = s
			}
		case "policies":
			policiesNode = v
		default:
			l.unknownKey(k, path, key, tenantKeys)
		}
	})
	if idNode == nil {
		l.addf(n, join(path, "id"), "missing: every tenant needs an id")
	}
	if !listed {
		l.addf(n, path, "tenant %s has no credentials: list api_key_sha256 hashes or mtls_identities", describe(t.ID))
	}
	t.Policies = l.tenantPolicies(path, policiesNode)
	if t.Policies != nil {
		if _, ok := t.Policies[t.DefaultPolicy]; !ok {
			names := slices.Sorted(maps.Keys(t.Policies))
			if defaultNode != nil {
				l.addf(defaultNode, join(path, "default_policy"), "no policy named %s in this tenant (it has: %s)", describe(t.DefaultPolicy), strings.Join(names, ", "))
			} else {
				l.addf(n, join(path, "default_policy"), "this tenant has no policy named %q (it has: %s); add one or set default_policy", tenant.DefaultPolicyName, strings.Join(names, ", "))
			}
		}
	}

	d := l.dir
	if idNode != nil && t.ID != "" {
		if first, dup := d.byID[t.ID]; dup {
			l.addf(idNode, join(path, "id"), "duplicate tenant id %s (first defined at line %d)", describe(t.ID), l.idLines[first])
		} else {
			d.byID[t.ID] = int32(len(d.tenants))
		}
	}
	d.tenants = append(d.tenants, t)
	l.idLines = append(l.idLines, int32(n.Line))
	for j, k := range keys {
		if other, dup := d.byKey[k.hash]; dup {
			if other == t {
				l.addf(k.node, k.path, "this hash is listed twice for the tenant (see %s)", keys[firstKey(keys, j)].path)
			} else {
				l.addf(k.node, k.path, "this API key hash is also listed for tenant %s; a key must identify exactly one tenant", describe(other.ID))
			}
			continue
		}
		d.byKey[k.hash] = t
	}
	for _, id := range idents {
		if other, dup := d.byIdentity[id.id]; dup {
			l.addf(id.node, id.path, "identity %s is also mapped to tenant %s; an identity must map to exactly one tenant", describe(id.id), describe(other.ID))
			continue
		}
		d.byIdentity[id.id] = t
	}
	d.policies += len(t.Policies)
}

// keyAt and identAt are credentials with their position.
type keyAt struct {
	hash [32]byte
	node *yaml.Node
	path string
}

type identAt struct {
	id   string
	node *yaml.Node
	path string
}

func firstKey(keys []keyAt, j int) int {
	for i := range j {
		if keys[i].hash == keys[j].hash {
			return i
		}
	}
	return j
}

// keyHash decodes a hex SHA-256 digest. Its messages never repeat the value,
// which may be a plain key pasted by mistake.
func (l *loader) keyHash(n *yaml.Node, path string) ([32]byte, bool) {
	var h [32]byte
	s, ok := l.scalar(n, path, "a SHA-256 hash (64 hex digits)")
	if !ok {
		return h, false
	}
	const hint = "store the hash of the key, never the key: printf %s \"$KEY\" | sha256sum"
	if strings.HasSuffix(s, "-") && len(strings.TrimSpace(strings.TrimSuffix(s, "-"))) == 64 {
		l.addf(n, path, "remove the trailing \"  -\" that sha256sum prints after the hash")
		return h, false
	}
	if len(s) != 64 {
		l.addf(n, path, "want a SHA-256 hash of 64 hex digits, got %d characters; %s", len(s), hint)
		return h, false
	}
	if !decodeHex32(&h, s) {
		l.addf(n, path, "want a SHA-256 hash of 64 hex digits (0-9, a-f), got other characters; %s", hint)
		return h, false
	}
	return h, true
}

// decodeHex32 decodes 64 hex digits (either case) into h without
// allocating.
func decodeHex32(h *[32]byte, s string) bool {
	for i := range h {
		hi, ok1 := unhex(s[2*i])
		lo, ok2 := unhex(s[2*i+1])
		if !ok1 || !ok2 {
			return false
		}
		h[i] = hi<<4 | lo
	}
	return true
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
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

// tenantPolicies builds a tenant's policies. Tenants that only reference
// shared policies, under the same names, share one map.
func (l *loader) tenantPolicies(path string, n *yaml.Node) map[string]*tenant.Policy {
	if n == nil {
		t := l.builtin
		if dt, ok := l.templates[tenant.DefaultPolicyName]; ok {
			t = dt
		}
		if !t.ok {
			return nil
		}
		return l.shared(tenant.DefaultPolicyName+"\x00"+t.name, func() map[string]*tenant.Policy {
			return map[string]*tenant.Policy{tenant.DefaultPolicyName: t.as(tenant.DefaultPolicyName)}
		})
	}
	type ref struct {
		name string
		t    *template
	}
	var refs []ref
	var inline map[string]*tenant.Policy
	broken := false
	pp := join(path, "policies")
	ok := l.mapping(n, pp, func(name string, k, v *yaml.Node) {
		fp := join(pp, name)
		if !ValidName(name) {
			l.addf(k, fp, "invalid policy name: use 1 to %d characters from A-Z, a-z, 0-9, '.', '_' and '-'", MaxNameLength)
			broken = true
			return
		}
		switch {
		case v.Kind == yaml.ScalarNode && !isNull(v):
			t, ok := l.templates[v.Value]
			if !ok {
				l.addf(v, fp, "no shared policy named %s under the top-level policies%s", describe(v.Value), l.knownTemplates())
				broken = true
				return
			}
			if !t.ok {
				broken = true // its own problems are reported
				return
			}
			refs = append(refs, ref{name, t})
		case v.Kind == yaml.MappingNode:
			base := l.builtin
			var ext *yaml.Node
			if e := findKey(v, "extends"); e != nil {
				ext = valueOf(v, e)
				s, ok := l.str(ext, join(fp, "extends"))
				if !ok {
					broken = true
					return
				}
				t, found := l.templates[s]
				if !found {
					l.addf(ext, join(fp, "extends"), "no shared policy named %s under the top-level policies%s", describe(s), l.knownTemplates())
					broken = true
					return
				}
				base = t
			}
			d := &draft{extends: ext}
			if base.ok {
				d.p, d.hosts = base.d.p, base.d.hosts
			} else {
				d.p = l.builtin.d.p
				d.broken = true
			}
			d.p.Name = name
			l.readPolicy(d, v, fp)
			if !l.finish(d, fp) {
				broken = true
				return
			}
			if inline == nil {
				inline = make(map[string]*tenant.Policy, len(v.Content)/2)
			}
			p := new(tenant.Policy)
			*p = d.p
			inline[name] = p
		default:
			l.addf(v, fp, "want the name of a shared policy or a policy (a mapping of options), got %s", kindName(v))
			broken = true
		}
	})
	if !ok || broken {
		return nil
	}
	if inline != nil {
		for _, r := range refs {
			inline[r.name] = r.t.as(r.name)
		}
		return inline
	}
	if len(refs) == 0 {
		return map[string]*tenant.Policy{}
	}
	var sig string
	if len(refs) == 1 {
		sig = refs[0].name + "\x00" + refs[0].t.name
	} else {
		slices.SortFunc(refs, func(a, b ref) int { return strings.Compare(a.name, b.name) })
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

// valueOf returns the value node of key node k in mapping n.
func valueOf(n, k *yaml.Node) *yaml.Node {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i] == k {
			return n.Content[i+1]
		}
	}
	return nil
}

// digestOf returns the SHA-256 of data.
func digestOf(data []byte) [32]byte { return sha256.Sum256(data) }
