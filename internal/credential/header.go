package credential

import (
	"context"
	"fmt"
	"net/http"
	"net/textproto"
	"strings"
	"sync/atomic"

	"golang.org/x/net/http/httpguts"
)

// headerCred places a static secret in one header: Name: Prefix+value.
type headerCred struct {
	name, header, prefix string
	overwrite            bool
	value                *secret
	last                 atomic.Pointer[headerValue] // the value of the current generation, made once
}

// headerValue is the header line of one generation of the secret, as the
// one-element slice Apply sets (shared by every attempt: the transport
// only reads it).
type headerValue struct {
	gen  uint64
	line []string
}

func newHeader(spec Spec, deps Deps) (Credential, error) {
	h := spec.Header
	if !httpguts.ValidHeaderFieldName(h.Name) {
		return nil, fmt.Errorf("credentials.%s.name: %q is not a valid header name", spec.Name, h.Name)
	}
	if !httpguts.ValidHeaderFieldValue(h.Prefix) {
		return nil, fmt.Errorf("credentials.%s.prefix: not a valid header value", spec.Name)
	}
	v, err := newSecret(h.Value, "credentials."+spec.Name+".value", spec.Name, &deps)
	if err != nil {
		return nil, err
	}
	c := &headerCred{name: spec.Name, header: textproto.CanonicalMIMEHeaderKey(h.Name), prefix: h.Prefix, overwrite: spec.Overwrite, value: v}
	if _, _, err := c.current(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *headerCred) Name() string      { return c.name }
func (c *headerCred) Kind() Kind        { return KindHeader }
func (c *headerCred) Headers() []string { return []string{c.header} }
func (c *headerCred) Overwrite() bool   { return c.overwrite }

// current returns the header's value, checking that the secret makes a
// valid header value (the error names the credential, not the value).
func (c *headerCred) current() (string, uint64, error) {
	v, gen := c.value.text()
	if !httpguts.ValidHeaderFieldValue(v) || strings.ContainsAny(v, "\r\n") {
		return "", 0, &UnavailableError{Credential: c.name, Cause: fmt.Errorf("the secret is not a valid value for header %s", c.header)}
	}
	return c.prefix + v, gen, nil
}

func (c *headerCred) Apply(_ context.Context, req *http.Request, _ *Call) (Stamp, error) {
	if hv := c.last.Load(); hv != nil && c.value.unchanged(hv.gen) {
		req.Header[c.header] = hv.line
		return Stamp{Generation: hv.gen}, nil
	}
	v, gen, err := c.current()
	if err != nil {
		return Stamp{}, err
	}
	hv := &headerValue{gen: gen, line: []string{v}}
	c.last.Store(hv)
	req.Header[c.header] = hv.line
	return Stamp{Generation: gen}, nil
}

// Rejected: a static secret has nothing to renew; a rotated file is used
// by the next attempt anyway.
func (c *headerCred) Rejected(Stamp) bool { return false }
