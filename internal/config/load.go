package config

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/netip"
	"os"

	"go.yaml.in/yaml/v3"

	"github.com/retrybroker/retrybroker/internal/credential"
	"github.com/retrybroker/retrybroker/internal/providers"
	"github.com/retrybroker/retrybroker/internal/tenant"
)

// Version is the only configuration file version this broker reads.
const Version = 1

// MaxNameLength bounds tenant ids and policy names.
const MaxNameLength = 64

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

// LoadOption configures Load, Parse and Check.
type LoadOption func(*loadOptions)

type loadOptions struct {
	credDeps func(tenant string) credential.Deps
	// keep are the credentials of the configuration being replaced, by
	// credentialKey: a reload keeps each whose configuration did not
	// change (its cached token, its secret file's state).
	keep map[string]credential.Credential
}

// deps returns the credential dependencies of tenant.
func (o *loadOptions) deps(tenant string) credential.Deps {
	if o.credDeps == nil {
		return credential.Deps{Tenant: tenant, TokenClient: checkTokenClient}
	}
	d := o.credDeps(tenant)
	d.Tenant = tenant
	return d
}

// WithCredentialDeps sets what the tenants' credentials are built with
// (credential.New): fn returns the dependencies of one tenant (its token
// client, observer, clock and logger). Without it a credential observes
// nothing and its token client sends nothing (checkTokenClient), which is
// enough to check a file.
func WithCredentialDeps(fn func(tenant string) credential.Deps) LoadOption {
	return func(o *loadOptions) { o.credDeps = fn }
}

// keepCredentials makes a reload keep the credentials of old (nil: none)
// whose configuration did not change.
func keepCredentials(old *Directory) LoadOption {
	return func(o *loadOptions) {
		if old != nil {
			o.keep = old.creds
		}
	}
}

// Load reads and validates the configuration file at path. An I/O error is
// returned wrapped; an invalid file gives an *Error listing every problem.
// Every secret a credential names is read once (a missing file or variable
// is a problem naming it, never a value).
func Load(path string, opts ...LoadOption) (*Directory, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read configuration: %w", err)
	}
	return Parse(path, data, opts...)
}

// Parse validates configuration data; name is the file name used in
// problems. It returns an *Error listing every problem when data is not a
// valid configuration.
func Parse(name string, data []byte, opts ...LoadOption) (*Directory, error) {
	l := &loader{file: name, src: source{data: data}}
	for _, o := range opts {
		o(&l.opts)
	}
	dir := l.parse(data)
	if len(l.problems) > 0 {
		sortProblems(l.problems)
		return nil, &Error{File: name, Problems: l.problems}
	}
	dir.file = name
	dir.digest = sha256.Sum256(data)
	return dir, nil
}

// fileDoc is the configuration file as written.
type fileDoc struct {
	section
	Version       *intIn[versionRange]         `yaml:"version"`
	Providers     *providerDocs                `yaml:"providers"`
	HostProviders *hostProviders               `yaml:"host_providers"`
	Policies      *dict[policyDoc, *policyDoc] `yaml:"policies"`
	Tenants       *rawList                     `yaml:"tenants"`
	Admin         *adminDoc                    `yaml:"admin"`
}

// UnmarshalYAML decodes the document's top-level mapping. Tenants are
// decoded by the loader, one at a time.
func (f *fileDoc) UnmarshalYAML(n *yaml.Node) error {
	return decodeStruct(n, &f.section, f, wantMapping)
}

// rawList is a YAML list whose items the loader decodes itself, one at a
// time and with their index (the tenants, which are many).
type rawList struct{ at }

// UnmarshalYAML checks that n is a list (or null) and keeps it.
func (r *rawList) UnmarshalYAML(n *yaml.Node) error {
	r.node = n
	if n.Kind == yaml.AliasNode {
		return errAlias(n)
	}
	if n.Kind != yaml.SequenceNode && !isNull(n) {
		return errAt(n, "want a list, got %s", kindName(n))
	}
	return nil
}

// loader holds the state of one Parse.
type loader struct {
	file          string
	src           source
	problems      []*Problem
	compiler      providers.Compiler // shares compiled CEL among the file's entries
	hostOverrides map[string]string  // top-level host_providers
	files         *scope             // the file's catalog, its host map, its broken entries
	templates     map[string]*template
	builtin       *template // the standard policy, for tenants without policies
	sharedMaps    map[string]map[string]*tenant.Policy
	dir           *Directory
	idLines       []int32 // line of each tenant in dir.tenants
	opts          loadOptions
}

// addf records a problem at node n (nil for the whole file). Any check may
// place a problem on a decoded value with addf(v.node, path, ...).
func (l *loader) addf(n *yaml.Node, path, format string, args ...any) {
	p := &Problem{File: l.file, Path: path, Message: fmt.Sprintf(format, args...)}
	if n != nil {
		p.Line, p.Column = n.Line, n.Column
	}
	l.problems = append(l.problems, p)
}

// report records the problems of a decoding error; base is the absolute
// path of the decoded value ("" for the document).
func (l *loader) report(base string, err error) {
	if err == nil {
		return
	}
	var is issues
	if !errors.As(err, &is) {
		l.addf(nil, base, "%v", err)
		return
	}
	for _, x := range is {
		l.addf(x.node, below(base, x.path), "%s", x.msg)
	}
}

// template is a shared policy from the top-level policies, resolved.
type template struct {
	name string
	p    tenant.Policy
	// hosts are the policy's own host_providers; nil when it sets none.
	hosts   map[string]string
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
	*p = t.p
	p.Name = name
	t.aliases[name] = p
	return p
}

func (l *loader) parse(data []byte) *Directory {
	root := l.document(data)
	if root == nil {
		return nil
	}
	var f fileDoc
	err := f.UnmarshalYAML(root)
	l.report("", err)
	if !usable(err, root) {
		return nil
	}
	if f.Version == nil && f.key("version") == nil {
		l.addf(root, "version", "missing: start the file with version: %d", Version)
	} else if f.Version != nil && f.Version.V != Version {
		l.addf(f.Version.node, "version", "unsupported version %d; this broker reads version %d", f.Version.V, Version)
	}
	l.readFileProviders(&f)
	l.builtin = &template{p: *tenant.DefaultPolicy(), aliases: map[string]*tenant.Policy{}}
	l.builtin.p.Catalog, l.builtin.p.HostMap = l.files.cat, l.files.hostMap
	l.builtin.ok = l.builtin.p.Validate() == nil
	l.readTemplates(f.Policies)
	l.readTenants(&f, root)
	l.readAdmin(&f)
	return l.dir
}

// document parses data into its root node, reporting syntax errors, an
// empty file and a second document. It returns nil when there is nothing
// to decode.
func (l *loader) document(data []byte) *yaml.Node {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
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
	return root
}

// readFileProviders builds the file's scope: the built-in catalog with the
// top-level providers on top, and the host map of policies without
// host_providers of their own, the catalog's hosts with the top-level
// host_providers on top (their names resolve through the file's catalog).
func (l *loader) readFileProviders(f *fileDoc) {
	files := l.readProviders(f.Providers, providers.Builtin(), nil, "providers", "", nil)
	l.hostOverrides = make(map[string]string)
	if h := f.HostProviders; h != nil && l.checkHostNames(h, files, "host_providers") {
		l.hostOverrides = h.hosts
	}
	hm, err := files.cat.HostMap(l.hostOverrides)
	if err != nil { // each entry was checked; this cannot happen
		l.addf(nil, "host_providers", "%v", err)
	}
	files.hostMap = hm
	l.files = files
}

// readTemplates resolves the top-level shared policies.
func (l *loader) readTemplates(policies *dict[policyDoc, *policyDoc]) {
	l.templates = make(map[string]*template)
	if policies == nil {
		return
	}
	for i := range policies.Entries {
		e := &policies.Entries[i]
		name := e.Key.Value
		path := join("policies", name)
		if !ValidName(name) {
			l.addf(e.Key, path, "invalid policy name: use 1 to %d characters from A-Z, a-z, 0-9, '.', '_' and '-'", MaxNameLength)
			continue
		}
		t := &template{name: name, aliases: map[string]*tenant.Policy{}}
		l.templates[name] = t
		if !e.OK {
			continue
		}
		if k := e.V.key("extends"); k != nil {
			l.addf(k, join(path, "extends"), "shared policies cannot extend; only tenant policies can")
		}
		t.p, t.hosts, t.ok = l.resolvePolicy(&e.V, l.builtin, name, path, nil, l.files)
	}
}

// resolvePolicy builds the policy doc describes over base (the standard
// policy, or the shared policy doc extends, whose extends value is ext),
// gives it the catalog and host map of scope sc and validates it,
// reporting every problem at path. It returns the policy, its own
// host_providers, and whether it may be used: it may not when doc, base or
// the result has a problem.
func (l *loader) resolvePolicy(doc *policyDoc, base *template, name, path string, ext *yaml.Node, sc *scope) (tenant.Policy, map[string]string, bool) {
	p, hosts, ok := base.p, base.hosts, base.ok
	if !ok { // base's own problems are reported; check doc over the standard policy
		p, hosts = l.builtin.p, nil
	}
	p.Name = name
	hosts, errs := doc.applyTo(&p, hosts)
	l.report(path, errs.err())
	ok = ok && !doc.bad && len(errs) == 0
	mapped := hosts
	if !l.checkHostNames(doc.HostProviders, sc, join(path, "host_providers")) {
		ok, mapped = false, nil // reported; check the rest without them
	}
	if sc.broken[p.Provider] {
		// The entry's problems are reported; do not report the policy as
		// naming an unknown provider too.
		ok, p.Provider = false, ""
	}
	if !l.scopePolicy(&p, mapped, sc) {
		l.addf(doc.key("host_providers"), join(path, "host_providers"), "the host map cannot be built")
		return p, hosts, false
	}
	if err := p.Validate(); err != nil {
		l.reportInvalid(err, doc, path, ext)
		ok = false
	}
	return p, hosts, ok
}

// scopePolicy gives p the catalog of scope sc and its host map: sc's, or,
// when the policy has host_providers of its own (hosts), the file's
// top-level ones and hosts over sc's catalog. It reports false when the
// host map cannot be built, which the checks of the names before it rule
// out.
func (l *loader) scopePolicy(p *tenant.Policy, hosts map[string]string, sc *scope) bool {
	p.Catalog, p.HostMap = sc.cat, sc.hostMap
	if hosts == nil {
		return true
	}
	merged := maps.Clone(l.hostOverrides)
	maps.Copy(merged, hosts)
	hm, err := sc.cat.HostMap(merged)
	if err != nil {
		return false
	}
	p.HostMap = hm
	return true
}

// digestOf returns the SHA-256 of data.
func digestOf(data []byte) [32]byte { return sha256.Sum256(data) }

// checkTokenClient is the token client of a configuration that is only
// checked (config check, tests): it checks the allowed destinations as the
// broker's does, and refuses to send anything.
func checkTokenClient(allow []string) (*http.Client, error) {
	for _, a := range allow {
		if _, err := netip.ParsePrefix(a); err != nil {
			return nil, err
		}
	}
	return &http.Client{
		Transport:     refuseTransport{},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}, nil
}

// refuseTransport sends nothing.
type refuseTransport struct{}

func (refuseTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
	return nil, errors.New("a configuration that is only checked sends no token request")
}
