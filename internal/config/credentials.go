package config

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/retrybroker/retrybroker/internal/credential"
	"github.com/retrybroker/retrybroker/internal/tenant"
)

// The maps and lists of a tenant's credentials.
type (
	credentialDocs = dict[credentialDoc, *credentialDoc]
	paramDocs      = dict[paramValues, *paramValues]
)

// credentialDoc is one entry of a tenant's credentials as written: the
// keys of every kind, of which only those of its kind may be set. There is
// no key for an inline secret: secrets are named by file or environment
// variable only.
type credentialDoc struct {
	section
	Kind      *str     `yaml:"kind"`
	Overwrite *boolean `yaml:"overwrite"`
	// header
	Name      *header `yaml:"name"`
	ValueFile *str    `yaml:"value_file"`
	ValueEnv  *str    `yaml:"value_env"`
	Prefix    *str    `yaml:"prefix"`
	// oauth2_client_credentials
	TokenURL          *str       `yaml:"token_url"`
	ClientID          *str       `yaml:"client_id"`
	ClientSecretFile  *str       `yaml:"client_secret_file"`
	ClientSecretEnv   *str       `yaml:"client_secret_env"`
	Scopes            *strs      `yaml:"scopes"`
	EndpointParams    *paramDocs `yaml:"endpoint_params"`
	AllowDestinations *prefixes  `yaml:"allow_destinations"`
	Timeout           *duration  `yaml:"timeout"`
	ExpiryMargin      *duration  `yaml:"expiry_margin"`
	AuthStyle         *str       `yaml:"auth_style"`
	// aws_sigv4
	Region              *str     `yaml:"region"`
	Service             *str     `yaml:"service"`
	AccessKeyIDFile     *str     `yaml:"access_key_id_file"`
	SecretAccessKeyFile *str     `yaml:"secret_access_key_file"`
	SessionTokenFile    *str     `yaml:"session_token_file"`
	UnsignedPayload     *boolean `yaml:"unsigned_payload"`
	// http_signature
	Algorithm  *str      `yaml:"algorithm"`
	KeyID      *str      `yaml:"key_id"`
	KeyFile    *str      `yaml:"key_file"`
	KeyEncode  *str      `yaml:"key_encoding"`
	Label      *str      `yaml:"label"`
	Components *strs     `yaml:"components"`
	Tag        *str      `yaml:"tag"`
	Expires    *duration `yaml:"expires"`
}

// kindKeys are the keys each kind may set, besides kind and overwrite.
var kindKeys = map[credential.Kind][]string{
	credential.KindHeader: {"name", "value_file", "value_env", "prefix"},
	credential.KindOAuth2: {
		"token_url", "client_id", "client_secret_file", "client_secret_env", "scopes", "endpoint_params",
		"allow_destinations", "timeout", "expiry_margin", "auth_style",
	},
	credential.KindAWSSigV4:      {"region", "service", "access_key_id_file", "secret_access_key_file", "session_token_file", "unsigned_payload"},
	credential.KindHTTPSignature: {"algorithm", "key_id", "key_file", "key_encoding", "label", "components", "tag", "expires"},
}

// inlineSecretKeys are the keys a secret would be written under inline,
// each with the keys that name where it is read from instead.
var inlineSecretKeys = map[string]string{
	"value":             "value_file or value_env",
	"secret":            "value_file or value_env",
	"token":             "value_file or value_env",
	"api_key":           "value_file or value_env",
	"client_secret":     "client_secret_file or client_secret_env",
	"access_key_id":     "access_key_id_file",
	"secret_access_key": "secret_access_key_file",
	"session_token":     "session_token_file",
	"key":               "key_file",
	"private_key":       "key_file",
}

// UnmarshalYAML decodes a credential mapping. A key that would hold a
// secret inline is refused, never repeating its value.
func (d *credentialDoc) UnmarshalYAML(n *yaml.Node) error {
	const want = "a credential (a mapping with kind and the kind's keys)"
	var errs issues
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if use, ok := inlineSecretKeys[k.Value]; ok {
				errs.addf(k, keySeg(k.Value), "a secret is never written in the configuration: secrets are read from files or the environment: use %s", use)
			}
		}
	}
	if len(errs) > 0 {
		// Decode the rest without the inline keys, for their own problems.
		m := &yaml.Node{Kind: yaml.MappingNode, Line: n.Line, Column: n.Column}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if _, ok := inlineSecretKeys[n.Content[i].Value]; !ok {
				m.Content = append(m.Content, n.Content[i], n.Content[i+1])
			}
		}
		errs.under("", decodeStruct(m, &d.section, d, want))
		d.node, d.bad = n, true
		return errs
	}
	if isNull(n) {
		d.node = n
		return errAt(n, "want %s, got %s", want, kindName(n))
	}
	if err := decodeStruct(n, &d.section, d, want); err != nil {
		return err
	}
	return d.checkKind()
}

// checkKind checks that kind is set and names a kind, and that only the
// kind's keys are set.
func (d *credentialDoc) checkKind() error {
	var errs issues
	if d.Kind == nil {
		errs.addf(d.node, "", "missing kind: one of %s", kindList())
		d.bad = true
		return errs
	}
	keys, ok := kindKeys[credential.Kind(d.Kind.V)]
	if !ok {
		errs.addf(d.Kind.node, ".kind", "unknown kind %s: one of %s", describe(d.Kind.V), kindList())
		d.bad = true
		return errs
	}
	for i := 0; i+1 < len(d.node.Content); i += 2 {
		k := d.node.Content[i].Value
		if k == "kind" || k == "overwrite" || slices.Contains(keys, k) {
			continue
		}
		errs.addf(d.node.Content[i], keySeg(k), "not a key of kind %s (its keys: kind, overwrite, %s)", d.Kind.V, strings.Join(keys, ", "))
	}
	d.bad = len(errs) > 0
	return errs.err()
}

func kindList() string {
	return "header, oauth2_client_credentials, aws_sigv4, http_signature"
}

// paramValues is one endpoint parameter's value: a string or a list of
// strings.
type paramValues struct {
	at
	V []string
}

// UnmarshalYAML decodes a string or a list of strings.
func (p *paramValues) UnmarshalYAML(n *yaml.Node) error {
	p.node = n
	if n.Kind == yaml.SequenceNode {
		var l strs
		err := l.UnmarshalYAML(n)
		p.V = values(l.Items)
		return err
	}
	s, err := text(n, "a string or a list of strings")
	p.V = []string{s}
	return err
}

// spec returns the credential.Spec d describes, under name, and the token
// endpoint's allowed destinations (nil for none).
func (d *credentialDoc) spec(name string) (credential.Spec, []string) {
	sp := credential.Spec{Name: name, Kind: credential.Kind(d.Kind.V)}
	set(&sp.Overwrite, d.Overwrite)
	ref := func(file, env *str) credential.SecretRef {
		var r credential.SecretRef
		set(&r.File, file)
		set(&r.Env, env)
		return r
	}
	var allow []string
	switch sp.Kind {
	case credential.KindHeader:
		h := &credential.HeaderSpec{Value: ref(d.ValueFile, d.ValueEnv)}
		set(&h.Name, d.Name)
		set(&h.Prefix, d.Prefix)
		sp.Header = h
	case credential.KindOAuth2:
		o := &credential.OAuth2Spec{ClientSecret: ref(d.ClientSecretFile, d.ClientSecretEnv)}
		set(&o.TokenURL, d.TokenURL)
		set(&o.ClientID, d.ClientID)
		set(&o.AuthStyle, d.AuthStyle)
		set(&o.Timeout, d.Timeout)
		set(&o.ExpiryMargin, d.ExpiryMargin)
		if d.Scopes != nil {
			o.Scopes = values(d.Scopes.Items)
		}
		if d.EndpointParams != nil {
			o.EndpointParams = make(map[string][]string, len(d.EndpointParams.Entries))
			for _, e := range d.EndpointParams.Entries {
				o.EndpointParams[e.Key.Value] = e.V.V
			}
		}
		if d.AllowDestinations != nil {
			for _, p := range d.AllowDestinations.Items {
				allow = append(allow, p.V.String())
			}
		}
		sp.OAuth2 = o
	case credential.KindAWSSigV4:
		s := &credential.SigV4Spec{
			AccessKeyID: ref(d.AccessKeyIDFile, nil), SecretAccessKey: ref(d.SecretAccessKeyFile, nil),
			SessionToken: ref(d.SessionTokenFile, nil),
		}
		set(&s.Region, d.Region)
		set(&s.Service, d.Service)
		set(&s.UnsignedPayload, d.UnsignedPayload)
		sp.SigV4 = s
	case credential.KindHTTPSignature:
		s := &credential.SignatureSpec{Key: ref(d.KeyFile, nil)}
		set(&s.Algorithm, d.Algorithm)
		set(&s.KeyID, d.KeyID)
		set(&s.KeyEncoding, d.KeyEncode)
		set(&s.Label, d.Label)
		set(&s.Tag, d.Tag)
		set(&s.Expires, d.Expires)
		if d.Components != nil {
			s.Components = values(d.Components.Items)
		}
		sp.Signature = s
	}
	return sp, allow
}

// tenantCredentials builds the tenant's credentials with credential.New,
// which reads every secret once: a missing file or variable is a problem
// naming its path or name, never a value. It returns nil when the tenant
// has none, and ok false when one of them has a problem (reported).
func (l *loader) tenantCredentials(td *tenantDoc, tenantID, path string) (map[string]credential.Credential, bool) {
	if td.Credentials == nil {
		return nil, td.key("credentials") == nil // present but not a mapping: reported
	}
	if len(td.Credentials.Entries) == 0 {
		return nil, true
	}
	cp := join(path, "credentials")
	out := make(map[string]credential.Credential, len(td.Credentials.Entries))
	ok := true
	for i := range td.Credentials.Entries {
		e := &td.Credentials.Entries[i]
		name, fp := e.Key.Value, join(cp, e.Key.Value)
		if !ValidName(name) {
			l.addf(e.Key, fp, "invalid credential name: use 1 to %d characters from A-Z, a-z, 0-9, '.', '_' and '-'", MaxNameLength)
			ok = false
			continue
		}
		if !e.OK || e.V.bad {
			ok = false
			continue
		}
		sp, allow := e.V.spec(name)
		key := credentialKey(tenantID, sp, allow)
		c, kept := l.opts.keep[key]
		if !kept || key == "" {
			deps := l.opts.deps(tenantID)
			deps.TokenAllow = allow
			var err error
			if c, err = credential.New(sp, deps); err != nil {
				l.addf(e.V.node, fp, "%v", err)
				ok = false
				continue
			}
		}
		if key != "" {
			if l.dir.creds == nil {
				l.dir.creds = map[string]credential.Credential{}
			}
			l.dir.creds[key] = c
		}
		out[name] = c
	}
	return out, ok
}

// bindCredentials sets each policy's Credential to the tenant's credential
// its credential key names, copying the policies (and the map, which may be
// shared with other tenants) that have one. A name the tenant does not
// define is a problem at the policy's credential key (or at the tenant's
// use of the shared policy that names it). It returns nil when there was a
// problem.
func (l *loader) bindCredentials(pols map[string]*tenant.Policy, creds map[string]credential.Credential, td *tenantDoc, path string) map[string]*tenant.Policy {
	var out map[string]*tenant.Policy
	ok := true
	for _, name := range slices.Sorted(maps.Keys(pols)) {
		p := pols[name]
		if p.CredentialName == "" {
			continue
		}
		c, found := creds[p.CredentialName]
		if !found {
			n, fp := l.credentialRef(td, name, path)
			known := " (the tenant defines none)"
			if len(creds) > 0 {
				known = " (it defines: " + strings.Join(slices.Sorted(maps.Keys(creds)), ", ") + ")"
			}
			l.addf(n, fp, "policy %s names credential %s, which is not one of this tenant's credentials%s", describe(name), describe(p.CredentialName), known)
			ok = false
			continue
		}
		if out == nil {
			out = maps.Clone(pols)
		}
		np := new(tenant.Policy)
		*np = *p
		np.Credential = c
		out[name] = np
	}
	switch {
	case !ok:
		return nil
	case out == nil:
		return pols
	}
	return out
}

// credentialRef returns where a tenant's policy name gets its credential
// key: the key in the tenant's own policy, the tenant's use of a shared
// policy, or the tenant itself (a default policy it does not list).
func (l *loader) credentialRef(td *tenantDoc, name, path string) (*yaml.Node, string) {
	if td.Policies != nil {
		for i := range td.Policies.Entries {
			e := &td.Policies.Entries[i]
			if e.Key.Value != name {
				continue
			}
			fp := join(join(path, "policies"), name)
			if e.V.Doc != nil && e.V.Doc.Credential != nil {
				return e.V.Doc.Credential.node, join(fp, "credential")
			}
			return e.Key, fp
		}
	}
	return td.node, path
}

// credentialName is a policy's credential: the name of one of its
// tenant's credentials, or "" for none (over a shared policy that names
// one).
type credentialName = scalar[string, credentialNameKind]

type credentialNameKind struct{}

func (credentialNameKind) parse(n *yaml.Node) (string, error) {
	s, err := text(n, "the name of one of the tenant's credentials")
	if err != nil {
		return "", err
	}
	if s != "" && !ValidName(s) { // "" clears an inherited credential
		return "", errAt(n, "invalid credential name %s: use 1 to %d characters from A-Z, a-z, 0-9, '.', '_' and '-'", describe(s), MaxNameLength)
	}
	return s, nil
}

// credentialKey identifies a credential's configuration: its tenant, and
// its spec and token-endpoint rules as JSON (maps sorted, no secret: a spec
// only names where secrets are read from).
func credentialKey(tenantID string, sp credential.Spec, allow []string) string {
	b, err := json.Marshal(struct {
		Spec  credential.Spec
		Allow []string
	}{sp, allow})
	if err != nil {
		return "" // never kept
	}
	return tenantID + "\x00" + string(b)
}
