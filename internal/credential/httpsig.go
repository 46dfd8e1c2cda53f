package credential

import (
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dunglas/httpsfv"
	"golang.org/x/net/http/httpguts"
)

// The http_signature kind signs each attempt with RFC 9421 HTTP Message
// Signatures, algorithms hmac-sha256 (RFC 9421 3.3.3) and ed25519 (3.3.6).
//
// No Go RFC 9421 library is served by the module proxy here
// (github.com/yaronf/httpsign, github.com/common-fate/httpsig and
// github.com/remitly-oss/httpsig-go all fail), so the signature base (RFC
// 9421 2.5) is built here and checked against the RFC's Appendix B.2.5 and
// B.2.6 vectors; the structured fields of Signature-Input and
// @signature-params (RFC 8941 / 9651) are serialized by
// github.com/dunglas/httpsfv.
//
// Per attempt, Apply takes created from Deps.Clock (Unix seconds; expires
// is created + Expires, rounded up to whole seconds), sets Content-Digest
// (RFC 9530, sha-256 of the call's body, hashed once per call) when it is
// covered, builds the base over the request's final headers and sets
// Signature-Input and Signature (one signature, under Label), replacing
// any value. The parameters are created, expires (when set), keyid (when
// set), alg and tag (when set), in that order; no nonce.
//
// Covered components: by default "@method", "@target-uri", then
// "content-digest" when the call has a body and "content-type" when the
// request has that header. Configured components are all required: a
// header the attempt's request lacks is a *ComponentError (RFC 9421 2.5
// forbids leaving it out), and a configured "content-digest" is set even
// for an empty body. Supported: the derived components @method,
// @target-uri, @authority, @scheme, @request-target, @path and @query, and
// header fields by name, without component parameters. host and
// content-length are read from req.Host and req.ContentLength, where
// net/http keeps them.
//
// Keys come from the secret (a file re-read when it changes, or the
// environment), read as KeyEncoding says: "" or "raw" takes the bytes as
// they are (for hmac-sha256 the whole file is the key, a trailing newline
// included; for ed25519 a PEM "PRIVATE KEY" (PKCS#8) or a 32-byte seed),
// "base64" decodes them first (an HMAC key, an ed25519 seed or PKCS#8
// DER). A rotated file is used by the next attempt after the file check;
// a rotated file that holds no valid key leaves the last good key in use.

// Signature algorithms (the alg parameter's values).
const (
	sigHMACSHA256 = "hmac-sha256"
	sigEd25519    = "ed25519"
)

// The headers the kind sets, canonical.
const (
	hdrSignature      = "Signature"
	hdrSignatureInput = "Signature-Input"
	hdrContentDigest  = "Content-Digest"
)

// maxComponents bounds a signature's covered components.
const maxComponents = 64

// ComponentError says that an attempt cannot be signed because a covered
// component has no value in its request: a configured header the caller
// did not send (RFC 9421 2.5: the signer fails rather than leave it out),
// or a header value that may not be signed (a line break). The attempt is
// not sent, and no attempt of the call would be signed either: it is the
// caller's error (INVALID_ARGUMENT), not an unavailable credential. Its
// text names the credential and the component, never a value.
type ComponentError struct {
	Credential string
	Component  string // the component identifier, e.g. "content-type"
	Reason     string // e.g. "the request has no such header"
}

func (e *ComponentError) Error() string {
	return "credential " + e.Credential + ": the signature covers " + strconv.Quote(e.Component) + ", but " + e.Reason
}

// IsComponentError reports whether err is (or wraps) a *ComponentError.
func IsComponentError(err error) bool {
	var c *ComponentError
	return errors.As(err, &c)
}

// component is one covered component: a derived component ("@method") or
// a header field, by its lowercase name.
type component struct {
	name    string
	derived bool
}

// derivedComponents are the derived components (RFC 9421 2.2) a request
// signature here may cover.
var derivedComponents = map[string]bool{
	"@method":         true,
	"@target-uri":     true,
	"@authority":      true,
	"@scheme":         true,
	"@request-target": true,
	"@path":           true,
	"@query":          true,
}

// unsignableFields are header fields a signature may not cover: its own
// output, and hop-by-hop fields the transport writes or drops itself.
var unsignableFields = map[string]string{
	"signature":         "it is the signature's own output",
	"signature-input":   "it is the signature's own output",
	"connection":        "it is a hop-by-hop field",
	"keep-alive":        "it is a hop-by-hop field",
	"proxy-connection":  "it is a hop-by-hop field",
	"te":                "it is a hop-by-hop field",
	"trailer":           "it is a hop-by-hop field",
	"transfer-encoding": "it is a hop-by-hop field",
	"upgrade":           "it is a hop-by-hop field",
}

// parseComponent reads one configured component identifier: a derived
// component of derivedComponents, or a header field name (case does not
// matter; it is lowercased, RFC 9421 2.1). Component parameters (";sf",
// ";key", ";req", @query-param's ";name") are not supported.
func parseComponent(s string) (component, error) {
	switch {
	case s == "":
		return component{}, errors.New("an empty component")
	case strings.HasPrefix(s, "@"):
		if !derivedComponents[s] {
			return component{}, fmt.Errorf("%q is not a supported derived component (@method, @target-uri, @authority, @scheme, @request-target, @path, @query)", s)
		}
		return component{name: s, derived: true}, nil
	case !httpguts.ValidHeaderFieldName(s):
		return component{}, fmt.Errorf("%q is neither a derived component nor a valid header name", s)
	}
	name := strings.ToLower(s)
	if why, bad := unsignableFields[name]; bad {
		return component{}, fmt.Errorf("%q cannot be covered: %s", s, why)
	}
	return component{name: name}, nil
}

// sigKey is a parsed key and the generation of the secret it came from.
type sigKey struct {
	gen  uint64
	hmac []byte
	ed   ed25519.PrivateKey
}

// httpSignature is the http_signature kind.
type httpSignature struct {
	name, label, keyID, tag, alg string
	encoding                     string
	expires                      int64 // seconds; 0: no expires parameter
	overwrite                    bool
	// withAlg says the alg parameter is sent (always, but for the RFC's
	// test vectors, whose signatures have none).
	withAlg bool
	// fixed are the configured components; nil: the default set, one of
	// defaults by whether the call has a body (1) and the request a
	// Content-Type (2).
	fixed    *coverage
	defaults [4]coverage
	// tail is the serialized keyid, alg and tag parameters, which follow
	// created and expires: ;keyid="...";alg="...";tag="...".
	tail string
	// digest: Content-Digest is set when it is covered.
	digest  bool
	headers []string
	key     *secret
	deps    *Deps
	cur     atomic.Pointer[sigKey]
}

func newHTTPSignature(spec Spec, deps Deps) (Credential, error) {
	s := spec.Signature
	what := "credentials." + spec.Name
	c := &httpSignature{
		name: spec.Name, label: s.Label, keyID: s.KeyID, tag: s.Tag, alg: s.Algorithm,
		encoding: s.KeyEncoding, overwrite: spec.Overwrite, withAlg: true, deps: &deps,
	}
	switch c.alg {
	case sigHMACSHA256, sigEd25519:
	default:
		return nil, fmt.Errorf("%s.algorithm: %q is not hmac-sha256 or ed25519", what, c.alg)
	}
	switch c.encoding {
	case "", "raw", "base64":
	default:
		return nil, fmt.Errorf("%s.key_encoding: %q is not raw or base64", what, c.encoding)
	}
	if c.label == "" {
		c.label = "sig1"
	}
	if _, err := httpsfv.Marshal(dictOf(c.label, httpsfv.Item{Value: true, Params: httpsfv.NewParams()})); err != nil {
		return nil, fmt.Errorf("%s.label: %q is not a structured-field key (lowercase letters, digits, _ - . *, starting with a letter or *)", what, c.label)
	}
	if err := checkSFString(c.keyID); err != nil {
		return nil, fmt.Errorf("%s.key_id: %w", what, err)
	}
	if err := checkSFString(c.tag); err != nil {
		return nil, fmt.Errorf("%s.tag: %w", what, err)
	}
	switch {
	case s.Expires < 0:
		return nil, fmt.Errorf("%s.expires: %s is negative", what, s.Expires)
	case s.Expires > 0:
		c.expires = int64((s.Expires + time.Second - 1) / time.Second)
	}
	if len(s.Components) > maxComponents {
		return nil, fmt.Errorf("%s.components: %d components, at most %d", what, len(s.Components), maxComponents)
	}
	if len(s.Components) > 0 {
		var comps []component
		seen := make(map[string]bool, len(s.Components))
		for i, raw := range s.Components {
			comp, err := parseComponent(raw)
			if err != nil {
				return nil, fmt.Errorf("%s.components[%d]: %w", what, i, err)
			}
			if seen[comp.name] {
				return nil, fmt.Errorf("%s.components[%d]: %q is covered twice", what, i, comp.name)
			}
			seen[comp.name] = true
			comps = append(comps, comp)
		}
		c.fixed = &coverage{comps: comps}
		c.digest = seen["content-digest"]
	} else {
		c.digest = true
		for v := range c.defaults {
			comps := []component{{name: "@method", derived: true}, {name: "@target-uri", derived: true}}
			if v&1 != 0 {
				comps = append(comps, component{name: "content-digest"})
			}
			if v&2 != 0 {
				comps = append(comps, component{name: "content-type"})
			}
			c.defaults[v] = coverage{comps: comps}
		}
	}
	if err := c.prepare(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	c.headers = []string{hdrSignature, hdrSignatureInput}
	if c.digest {
		c.headers = append(c.headers, hdrContentDigest)
	}
	key, err := newSecret(s.Key, what+".key", spec.Name, c.deps)
	if err != nil {
		return nil, err
	}
	c.key = key
	if _, err := c.currentKey(); err != nil {
		var u *UnavailableError
		if errors.As(err, &u) {
			return nil, fmt.Errorf("%s.key: %w", what, u.Cause)
		}
		return nil, err
	}
	return c, nil
}

// checkSFString checks that v can be an RFC 8941 sf-string (printable
// ASCII); the empty string is "not set".
func checkSFString(v string) error {
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return errors.New("only printable ASCII characters are allowed")
		}
	}
	return nil
}

// coverage is one list of covered components and its serialization as
// an inner list without parameters: ("@method" "@target-uri").
type coverage struct {
	comps []component
	list  string
}

// prepare serializes, once, what every attempt's signature parameters
// share: the component lists and the parameters after created and
// expires. An attempt's parameters are then list + created + expires +
// tail, the very text signatureParams makes (FuzzHTTPSigParams holds the
// two equal).
func (c *httpSignature) prepare() error {
	covs := c.defaults[:]
	if c.fixed != nil {
		covs = []coverage{*c.fixed}
	}
	for i := range covs {
		list, err := signatureParams(covs[i].comps, sigParams{})
		if err != nil {
			return fmt.Errorf("serializing the components: %w", err)
		}
		covs[i].list = list
	}
	if c.fixed != nil {
		c.fixed.list = covs[0].list
	}
	p := sigParams{keyID: c.keyID, tag: c.tag}
	if c.withAlg {
		p.alg = c.alg
	}
	tail, err := signatureParams(nil, p)
	if err != nil {
		return fmt.Errorf("serializing the parameters: %w", err)
	}
	c.tail = strings.TrimPrefix(tail, "()")
	return nil
}

// input is an attempt's serialized signature parameters.
func (c *httpSignature) input(cov *coverage, created int64) string {
	var b strings.Builder
	b.Grow(len(cov.list) + len(c.tail) + 48)
	b.WriteString(cov.list)
	b.WriteString(";created=")
	b.WriteString(strconv.FormatInt(created, 10))
	if c.expires > 0 {
		b.WriteString(";expires=")
		b.WriteString(strconv.FormatInt(created+c.expires, 10))
	}
	b.WriteString(c.tail)
	return b.String()
}

func dictOf(label string, m httpsfv.Member) *httpsfv.Dictionary {
	d := httpsfv.NewDictionary()
	d.Add(label, m)
	return d
}

func (c *httpSignature) Name() string      { return c.name }
func (c *httpSignature) Kind() Kind        { return KindHTTPSignature }
func (c *httpSignature) Headers() []string { return c.headers }
func (c *httpSignature) Overwrite() bool   { return c.overwrite }

// Rejected: a signing key has nothing to renew; a rotated key file is
// used by the next attempt anyway.
func (c *httpSignature) Rejected(Stamp) bool { return false }

// currentKey returns the parsed key of the secret's current value,
// parsing it again when the file changed. A changed file that holds no
// valid key leaves the last good key in use (logged, without the value),
// as the secret does for a file it cannot read; a key that never parsed is
// an *UnavailableError.
func (c *httpSignature) currentKey() (*sigKey, error) {
	raw, gen := c.key.get()
	cur := c.cur.Load()
	if cur != nil && cur.gen >= gen {
		return cur, nil
	}
	k, err := parseSigKey(c.alg, c.encoding, raw)
	if err != nil {
		if cur != nil {
			c.deps.Log.Warn("signing key file holds no valid key; the last good key stays in use",
				"tenant", c.deps.Tenant, "credential", c.name, "error", err)
			return cur, nil
		}
		return nil, &UnavailableError{Credential: c.name, Cause: err}
	}
	k.gen = gen
	// Another attempt may have stored a newer generation meanwhile: keep
	// the newest.
	for {
		old := c.cur.Load()
		if old != nil && old.gen >= gen {
			return old, nil
		}
		if c.cur.CompareAndSwap(old, k) {
			return k, nil
		}
	}
}

// parseSigKey reads a key's bytes. Errors never hold key material.
func parseSigKey(alg, encoding string, raw []byte) (*sigKey, error) {
	if encoding == "base64" {
		text := strings.TrimSpace(string(raw))
		dec, err := base64.StdEncoding.DecodeString(text)
		if err != nil {
			dec, err = base64.RawStdEncoding.DecodeString(text)
		}
		if err != nil {
			return nil, errors.New("the key is not valid base64")
		}
		raw = dec
	}
	if len(raw) == 0 {
		return nil, errors.New("the key is empty")
	}
	if alg == sigHMACSHA256 {
		return &sigKey{hmac: raw}, nil
	}
	switch {
	case len(raw) == ed25519.SeedSize:
		return &sigKey{ed: ed25519.NewKeyFromSeed(raw)}, nil
	case encoding != "base64":
		block, _ := pem.Decode(raw)
		if block == nil {
			return nil, errors.New("the ed25519 key is neither PEM nor a 32-byte seed")
		}
		if block.Type != "PRIVATE KEY" {
			return nil, fmt.Errorf("the ed25519 key's PEM block is %q, not PRIVATE KEY (PKCS#8)", block.Type)
		}
		raw = block.Bytes
	}
	pk, err := x509.ParsePKCS8PrivateKey(raw)
	if err != nil {
		return nil, errors.New("the ed25519 key is not a PKCS#8 private key")
	}
	ed, ok := pk.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("the PKCS#8 key is a %T, not an ed25519 key", pk)
	}
	return &sigKey{ed: ed}, nil
}

// sign signs a signature base.
func (k *sigKey) sign(base []byte) []byte {
	if k.ed != nil {
		return ed25519.Sign(k.ed, base)
	}
	m := hmac.New(sha256.New, k.hmac)
	m.Write(base)
	return m.Sum(nil)
}

// Apply signs the attempt: see the kind's comment above. A key that never
// parsed is an *UnavailableError; a covered component the request lacks
// is a *ComponentError, and the request is then left as it was.
func (c *httpSignature) Apply(_ context.Context, req *http.Request, call *Call) (Stamp, error) {
	k, err := c.currentKey()
	if err != nil {
		return Stamp{}, err
	}
	if call == nil {
		call = NewCall(nil)
	}
	if req.Header == nil {
		req.Header = make(http.Header)
	}
	cov := c.fixed
	if cov == nil {
		v := 0
		if len(call.Body()) > 0 {
			v |= 1
		}
		if _, ok := req.Header["Content-Type"]; ok {
			v |= 2
		}
		cov = &c.defaults[v]
	}
	digest := ""
	if c.digest && (c.fixed != nil || len(call.Body()) > 0) {
		digest = contentDigest(call)
	}
	input := c.input(cov, c.deps.Clock.Now().Unix())
	base, err := signatureBase(req, cov.comps, input, digest)
	if err != nil {
		var ce *ComponentError
		if errors.As(err, &ce) {
			ce.Credential = c.name
		}
		return Stamp{}, err
	}
	if digest != "" {
		req.Header[hdrContentDigest] = []string{digest}
	}
	req.Header[hdrSignatureInput] = []string{c.label + "=" + input}
	req.Header[hdrSignature] = []string{c.label + "=" + byteSequence(k.sign(base))}
	return Stamp{Generation: k.gen}, nil
}

// byteSequence serializes b as an RFC 8941 byte sequence (3.3.5):
// ":" base64 ":".
func byteSequence(b []byte) string {
	return ":" + base64.StdEncoding.EncodeToString(b) + ":"
}

// contentDigest is the Content-Digest field value (RFC 9530) of the call's
// body: sha-256 as a byte sequence.
func contentDigest(call *Call) string {
	return "sha-256=" + byteSequence(call.BodySHA256())
}

// sigParams are a signature's parameters (RFC 9421 2.3); zero values are
// left out.
type sigParams struct {
	created, expires int64
	keyID, alg, tag  string
}

// signatureParams serializes the covered components and parameters as
// the inner list of Signature-Input and of the @signature-params line:
// ("@method" ...);created=...;expires=...;keyid="...";alg="...";tag="...".
func signatureParams(comps []component, p sigParams) (string, error) {
	il := httpsfv.InnerList{Items: make([]httpsfv.Item, len(comps)), Params: httpsfv.NewParams()}
	for i, comp := range comps {
		il.Items[i] = httpsfv.Item{Value: comp.name, Params: httpsfv.NewParams()}
	}
	if p.created != 0 {
		il.Params.Add("created", p.created)
	}
	if p.expires != 0 {
		il.Params.Add("expires", p.expires)
	}
	if p.keyID != "" {
		il.Params.Add("keyid", p.keyID)
	}
	if p.alg != "" {
		il.Params.Add("alg", p.alg)
	}
	if p.tag != "" {
		il.Params.Add("tag", p.tag)
	}
	return httpsfv.Marshal(il)
}

// signatureBase builds the signature base (RFC 9421 2.5) of req over
// comps, whose serialized signature parameters are input. digest, when
// set, is the Content-Digest value the attempt will carry (it is set on
// the request only once the signature is made).
func signatureBase(req *http.Request, comps []component, input, digest string) ([]byte, error) {
	var b strings.Builder
	b.Grow(256)
	for _, comp := range comps {
		var (
			v   string
			err error
		)
		if comp.derived {
			v, err = derivedValue(req, comp.name)
			if err == nil && hasCTL(v) {
				err = &ComponentError{Component: comp.name, Reason: "its value holds a control character"}
			}
		} else if comp.name == "content-digest" && digest != "" {
			v = digest
		} else {
			v, err = fieldValue(req, comp.name)
		}
		if err != nil {
			return nil, err
		}
		b.WriteByte('"')
		b.WriteString(comp.name)
		b.WriteString(`": `)
		b.WriteString(v)
		b.WriteByte('\n')
	}
	b.WriteString(`"@signature-params": `)
	b.WriteString(input)
	return []byte(b.String()), nil
}

// derivedValue is a derived component's value (RFC 9421 2.2) as the
// request will be sent by net/http: the host is req.Host, else the URL's.
func derivedValue(req *http.Request, name string) (string, error) {
	if req.URL == nil {
		return "", &ComponentError{Component: name, Reason: "the request has no URL"}
	}
	switch name {
	case "@method":
		if req.Method == "" {
			return http.MethodGet, nil
		}
		return req.Method, nil
	case "@scheme":
		return strings.ToLower(req.URL.Scheme), nil
	case "@authority":
		return authority(req), nil
	case "@target-uri":
		return strings.ToLower(req.URL.Scheme) + "://" + requestHost(req) + req.URL.RequestURI(), nil
	case "@request-target":
		return req.URL.RequestURI(), nil
	case "@path":
		path, _, _ := strings.Cut(req.URL.RequestURI(), "?")
		if path == "" {
			path = "/"
		}
		return path, nil
	case "@query":
		_, query, _ := strings.Cut(req.URL.RequestURI(), "?")
		return "?" + query, nil
	}
	return "", &ComponentError{Component: name, Reason: "it is not a supported derived component"}
}

// hasCTL reports a control character (net/http refuses to send one in a
// method, host or request target; in a base it could forge a line).
func hasCTL(v string) bool {
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] == 0x7f {
			return true
		}
	}
	return false
}

// requestHost is the Host net/http sends.
func requestHost(req *http.Request) string {
	if req.Host != "" {
		return req.Host
	}
	return req.URL.Host
}

// authority is @authority (RFC 9421 2.2.3): the host lowercased, without
// the scheme's default port.
func authority(req *http.Request) string {
	h := strings.ToLower(requestHost(req))
	switch strings.ToLower(req.URL.Scheme) {
	case "https":
		h = strings.TrimSuffix(h, ":443")
	case "http":
		h = strings.TrimSuffix(h, ":80")
	}
	return h
}

// fieldValue is a header field's component value (RFC 9421 2.1): each
// field line's value without leading and trailing white space, joined by
// ", ". host and content-length are read where net/http keeps them
// (req.Host, req.ContentLength) when the header map lacks them.
func fieldValue(req *http.Request, name string) (string, error) {
	vals, ok := req.Header[textproto.CanonicalMIMEHeaderKey(name)]
	if !ok {
		for k, vs := range req.Header {
			if strings.EqualFold(k, name) {
				vals, ok = append(vals, vs...), true
			}
		}
	}
	if !ok {
		switch {
		case name == "host" && req.URL != nil:
			return requestHost(req), nil
		case name == "content-length" && req.ContentLength > 0:
			return strconv.FormatInt(req.ContentLength, 10), nil
		}
		return "", &ComponentError{Component: name, Reason: "the request has no such header"}
	}
	if len(vals) == 1 {
		if !httpguts.ValidHeaderFieldValue(vals[0]) {
			return "", &ComponentError{Component: name, Reason: "its value is not a valid header value"}
		}
		return strings.Trim(vals[0], " \t"), nil
	}
	var b strings.Builder
	for i, v := range vals {
		if !httpguts.ValidHeaderFieldValue(v) {
			return "", &ComponentError{Component: name, Reason: "its value is not a valid header value"}
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strings.Trim(v, " \t"))
	}
	return b.String(), nil
}
