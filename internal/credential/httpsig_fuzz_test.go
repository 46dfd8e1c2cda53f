package credential

import (
	"context"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"
)

// FuzzHTTPSigComponent: a configured component identifier either is
// refused or is a lowercase name whose structured-field serialization
// parses back to itself.
func FuzzHTTPSigComponent(f *testing.F) {
	for _, s := range []string{"@method", "@target-uri", "Content-Type", "content-digest", "@status", `"@query-param";name="a"`, "x-ÿ", "a b", "", "@", "Signature-Input"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		comp, err := parseComponent(s)
		if err != nil {
			if comp != (component{}) {
				t.Fatalf("%q refused (%v) but returned %+v", s, err, comp)
			}
			return
		}
		if comp.name != strings.ToLower(s) || comp.derived != strings.HasPrefix(s, "@") {
			t.Fatalf("%q read as %+v", s, comp)
		}
		in, err := signatureParams([]component{comp}, sigParams{})
		if err != nil {
			t.Fatalf("%q accepted but not serializable: %v", s, err)
		}
		d, err := httpsfv.UnmarshalDictionary([]string{"l=" + in})
		if err != nil {
			t.Fatalf("%s does not parse: %v", in, err)
		}
		m, _ := d.Get("l")
		il, ok := m.(httpsfv.InnerList)
		if !ok || len(il.Items) != 1 || il.Items[0].Value != comp.name {
			t.Fatalf("%s parses back as %#v, want %q", in, m, comp.name)
		}
	})
}

// FuzzHTTPSigParams: the signature parameters a credential accepts at
// load serialize (by httpsfv) to a Signature-Input member that parses back
// to the same components and parameters and serializes again to the same
// text (the @signature-params line a verifier rebuilds); and the text an
// attempt builds from what prepare serialized once is that same text.
func FuzzHTTPSigParams(f *testing.F) {
	f.Add("sig1", "test-key", "tag", int64(1618884473), int64(300), "@method,@target-uri,content-type")
	f.Add("sig-b25", "test-shared-secret", "", int64(1618884473), int64(0), "date,@authority,content-type")
	f.Add("*x", `q"uo\te`, "é", int64(-1), int64(1e15), "")
	f.Add("Bad", "", "", int64(0), int64(0), "a,,b")
	f.Fuzz(func(t *testing.T, label, keyID, tag string, created, expiresIn int64, list string) {
		var comps []component
		if list != "" {
			seen := map[string]bool{}
			for _, s := range strings.Split(list, ",") {
				c, err := parseComponent(s)
				if err != nil || seen[c.name] {
					return
				}
				seen[c.name] = true
				comps = append(comps, c)
			}
		}
		if checkSFString(keyID) != nil || checkSFString(tag) != nil {
			return
		}
		if _, err := httpsfv.Marshal(dictOf(label, httpsfv.Item{Value: true, Params: httpsfv.NewParams()})); err != nil {
			return
		}
		const maxSFInt = 999_999_999_999_999
		p := sigParams{created: created, keyID: keyID, alg: "ed25519", tag: tag}
		if expiresIn > 0 && created <= maxSFInt-expiresIn {
			p.expires = created + expiresIn
		}
		in, err := signatureParams(comps, p)
		if created < -maxSFInt || created > maxSFInt || p.expires > maxSFInt {
			if err == nil {
				t.Fatalf("integers out of the structured-field range serialized: %s", in)
			}
			return
		}
		if err != nil {
			t.Fatalf("accepted parameters do not serialize: %v", err)
		}
		header := label + "=" + in
		d, err := httpsfv.UnmarshalDictionary([]string{header})
		if err != nil {
			t.Fatalf("%s does not parse: %v", header, err)
		}
		again, err := httpsfv.Marshal(d)
		if err != nil || again != header {
			t.Fatalf("%s serializes again as %s (%v)", header, again, err)
		}
		m, _ := d.Get(label)
		il := m.(httpsfv.InnerList)
		if len(il.Items) != len(comps) {
			t.Fatalf("%d components back, want %d", len(il.Items), len(comps))
		}
		for i, c := range comps {
			if il.Items[i].Value != c.name {
				t.Fatalf("component %d back as %v, want %s", i, il.Items[i].Value, c.name)
			}
		}
		for k, want := range map[string]any{"created": p.created, "expires": p.expires, "keyid": keyID, "alg": "ed25519", "tag": tag} {
			got, ok := il.Params.Get(k)
			if zero := want == int64(0) || want == ""; zero {
				if ok {
					t.Fatalf("%s set to %v, want it left out", k, got)
				}
				continue
			}
			if !ok || got != want {
				t.Fatalf("%s back as %v, want %v", k, got, want)
			}
		}
		if created <= 0 || (expiresIn > 0 && p.expires == 0) {
			return // an attempt's created is a clock's, always positive
		}
		c := &httpSignature{keyID: keyID, tag: tag, alg: "ed25519", withAlg: true, fixed: &coverage{comps: comps}}
		if expiresIn > 0 {
			c.expires = expiresIn
		}
		if err := c.prepare(); err != nil {
			t.Fatal(err)
		}
		if fast := c.input(c.fixed, created); fast != in {
			t.Fatalf("an attempt's parameters %s, httpsfv's %s", fast, in)
		}
	})
}

// FuzzHTTPSigApply: whatever the request's method, path, query and a
// covered header hold, Apply signs it or refuses it with a ComponentError,
// never panics, and a signed base has one line per covered component plus
// @signature-params (no value can inject a line).
func FuzzHTTPSigApply(f *testing.F) {
	f.Add("POST", "/foo", "param=Value&Pet=dog", "X-Thing", "value", []byte(`{"hello": "world"}`))
	f.Add("GET", "", "", "Date", "a\r\nInjected: b", []byte(nil))
	f.Add("get", "/a%20b/%zz", "x=%2D", "x", "\x00", []byte("x"))
	f.Fuzz(func(t *testing.T, method, path, query, name, value string, body []byte) {
		u, err := url.Parse("http://example.com" + path)
		if err != nil {
			return
		}
		u.RawQuery = query
		req := &http.Request{Method: method, URL: u, Header: http.Header{}, Host: u.Host}
		req.Header[name] = []string{value, " " + value + " "}
		comps := []string{"@method", "@target-uri", "@authority", "@path", "@query", "@request-target", "content-digest"}
		if _, err := parseComponent(name); err == nil && !strings.EqualFold(name, "content-digest") {
			comps = append(comps, name)
		}
		c, err := New(Spec{Name: "f", Kind: KindHTTPSignature, Signature: &SignatureSpec{
			Algorithm: "hmac-sha256", KeyID: "k", Components: comps,
			Key: SecretRef{File: filepath.Join("testdata", "httpsig-test-shared-secret.b64")}, KeyEncoding: "base64",
		}}, Deps{Clock: &httpsigClock{now: time.Unix(httpsigRFCCreated, 0)}})
		if err != nil {
			t.Fatal(err)
		}
		hs := c.(*httpSignature)
		call := NewCall(body)
		base, berr := signatureBase(req, hs.fixed.comps, hs.input(hs.fixed, httpsigRFCCreated), contentDigest(call))
		_, err = c.Apply(context.Background(), req, call)
		if (err == nil) != (berr == nil) {
			t.Fatalf("Apply %v, base %v", err, berr)
		}
		if err != nil {
			if !IsComponentError(err) {
				t.Fatalf("Apply: %v, want a ComponentError", err)
			}
			return
		}
		if n := strings.Count(string(base), "\n"); n != len(hs.fixed.comps) {
			t.Fatalf("base has %d line breaks for %d components:\n%s", n, len(hs.fixed.comps), base)
		}
		if _, err := httpsfv.UnmarshalDictionary(req.Header.Values("Signature")); err != nil {
			t.Fatalf("Signature %q does not parse: %v", req.Header.Get("Signature"), err)
		}
	})
}
