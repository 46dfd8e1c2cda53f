package credential

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// httpsigClock is a fake clock the tests move by hand.
type httpsigClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *httpsigClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *httpsigClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// httpsigRFCCreated is the created time of every RFC 9421 Appendix B
// example.
const httpsigRFCCreated = 1618884473

func httpsigTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// httpsigRFCRequest is the RFC 9421 B.2 test request as a client sends it
// (https://example.com/foo?param=Value&Pet=dog), and its body.
func httpsigRFCRequest(t testing.TB) (*http.Request, []byte) {
	t.Helper()
	r, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(httpsigTestdata(t, "httpsig-test-request.http"))))
	if err != nil {
		t.Fatal(err)
	}
	body := make([]byte, r.ContentLength)
	if _, err := r.Body.Read(body); err != nil && len(body) != 18 {
		t.Fatal(err)
	}
	u, err := url.Parse("https://example.com" + r.RequestURI)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(r.Method, u.String(), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = r.Host
	req.Header = r.Header.Clone()
	return req, body
}

// httpsigWriteFile writes a key file in a fresh directory.
func httpsigWriteFile(t testing.TB, name string, content []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, content, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func httpsigRFCSharedSecret(t testing.TB) []byte {
	t.Helper()
	k, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(httpsigTestdata(t, "httpsig-test-shared-secret.b64"))))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func httpsigRFCPublicKey(t testing.TB) ed25519.PublicKey {
	t.Helper()
	block, _ := pem.Decode(httpsigTestdata(t, "httpsig-test-key-ed25519.pub.pem"))
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return pub.(ed25519.PublicKey)
}

// httpsigParams serializes signature parameters with httpsfv.
func httpsigParams(t testing.TB, comps []component, p sigParams) string {
	t.Helper()
	in, err := signatureParams(comps, p)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func httpsigNew(t testing.TB, sig SignatureSpec, clock Clock) *httpSignature {
	t.Helper()
	c, err := New(Spec{Name: "sig", Kind: KindHTTPSignature, Signature: &sig}, Deps{Tenant: "t", Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	return c.(*httpSignature)
}

// TestHTTPSignatureRFC9421B25HMAC reproduces RFC 9421 B.2.5 through Apply:
// the signature base, Signature-Input and the HMAC-SHA256 signature, with
// the test-shared-secret read from a file both as raw bytes and as the
// RFC's base64.
func TestHTTPSignatureRFC9421B25HMAC(t *testing.T) {
	for _, tc := range []struct {
		name, encoding string
		key            []byte
	}{
		{"raw", "", httpsigRFCSharedSecret(t)},
		{"base64", "base64", httpsigTestdata(t, "httpsig-test-shared-secret.b64")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := httpsigNew(t, SignatureSpec{
				Algorithm: "hmac-sha256", KeyID: "test-shared-secret", Label: "sig-b25",
				Key: SecretRef{File: httpsigWriteFile(t, "key", tc.key)}, KeyEncoding: tc.encoding,
				Components: []string{"date", "@authority", "content-type"},
			}, &httpsigClock{now: time.Unix(httpsigRFCCreated, 0)})
			c.withAlg = false // the RFC's examples carry no alg
			if err := c.prepare(); err != nil {
				t.Fatal(err)
			}
			req, body := httpsigRFCRequest(t)

			base, err := signatureBase(req, c.fixed.comps, httpsigParams(t, c.fixed.comps, sigParams{created: httpsigRFCCreated, keyID: "test-shared-secret"}), "")
			if err != nil {
				t.Fatal(err)
			}
			if want := httpsigTestdata(t, "httpsig-b25-base.txt"); !bytes.Equal(base, want) {
				t.Fatalf("signature base:\n%s\nwant:\n%s", base, want)
			}
			if _, err := c.Apply(context.Background(), req, NewCall(body)); err != nil {
				t.Fatal(err)
			}
			if got, want := req.Header.Get("Signature-Input"), `sig-b25=("date" "@authority" "content-type");created=1618884473;keyid="test-shared-secret"`; got != want {
				t.Errorf("Signature-Input = %s, want %s", got, want)
			}
			if got, want := req.Header.Get("Signature"), "sig-b25=:pxcQw6G3AjtMBQjwo8XzkZf/bws5LelbaMk5rGIGtE8=:"; got != want {
				t.Errorf("Signature = %s, want %s", got, want)
			}
			if got := req.Header.Get("Content-Digest"); !strings.HasPrefix(got, "sha-512=") {
				t.Errorf("Content-Digest is not covered here and must be left as sent, got %q", got)
			}
		})
	}
}

// TestHTTPSignatureRFC9421B26Ed25519 reproduces RFC 9421 B.2.6 through
// Apply: the signature base and the (deterministic) Ed25519 signature of
// test-key-ed25519 from its PEM PKCS#8 file, and checks it with the RFC's
// public key.
func TestHTTPSignatureRFC9421B26Ed25519(t *testing.T) {
	c := httpsigNew(t, SignatureSpec{
		Algorithm: "ed25519", KeyID: "test-key-ed25519", Label: "sig-b26",
		Key:        SecretRef{File: filepath.Join("testdata", "httpsig-test-key-ed25519.pem")},
		Components: []string{"date", "@method", "@path", "@authority", "content-type", "content-length"},
	}, &httpsigClock{now: time.Unix(httpsigRFCCreated, 0)})
	c.withAlg = false
	if err := c.prepare(); err != nil {
		t.Fatal(err)
	}
	req, body := httpsigRFCRequest(t)

	base, err := signatureBase(req, c.fixed.comps, httpsigParams(t, c.fixed.comps, sigParams{created: httpsigRFCCreated, keyID: "test-key-ed25519"}), "")
	if err != nil {
		t.Fatal(err)
	}
	if want := httpsigTestdata(t, "httpsig-b26-base.txt"); !bytes.Equal(base, want) {
		t.Fatalf("signature base:\n%s\nwant:\n%s", base, want)
	}
	if _, err := c.Apply(context.Background(), req, NewCall(body)); err != nil {
		t.Fatal(err)
	}
	if got, want := req.Header.Get("Signature-Input"), `sig-b26=("date" "@method" "@path" "@authority" "content-type" "content-length");created=1618884473;keyid="test-key-ed25519"`; got != want {
		t.Errorf("Signature-Input = %s, want %s", got, want)
	}
	const wantSig = "wqcAqbmYJ2ji2glfAMaRy4gruYYnx2nEFN2HN6jrnDnQCK1u02Gb04v9EDgwUPiu4A0w6vuQv5lIp5WPpBKRCw=="
	if got := req.Header.Get("Signature"); got != "sig-b26=:"+wantSig+":" {
		t.Errorf("Signature = %s, want sig-b26=:%s:", got, wantSig)
	}
	sig, _ := base64.StdEncoding.DecodeString(wantSig)
	if !ed25519.Verify(httpsigRFCPublicKey(t), base, sig) {
		t.Error("the RFC's public key does not verify the RFC's signature over our base")
	}
}

// TestHTTPSignatureDerivedComponents checks each derived component's
// value against RFC 9421 2.2's examples and net/http's request forms.
func TestHTTPSignatureDerivedComponents(t *testing.T) {
	for _, tc := range []struct {
		url, host, name, want string
	}{
		{"https://www.example.com/path?param=value", "", "@method", "POST"},
		{"https://www.example.com/path?param=value", "", "@target-uri", "https://www.example.com/path?param=value"},
		{"https://www.example.com/path?param=value", "", "@authority", "www.example.com"},
		{"https://www.example.com/path?param=value", "", "@scheme", "https"},
		{"https://www.example.com/path?param=value", "", "@request-target", "/path?param=value"},
		{"https://www.example.com/path?param=value", "", "@path", "/path"},
		{"https://www.example.com/path?param=value&foo=bar&baz=bat%2Dman", "", "@query", "?param=value&foo=bar&baz=bat%2Dman"},
		{"https://www.example.com/path", "", "@query", "?"},
		{"https://www.example.com", "", "@path", "/"},
		{"https://www.example.com", "", "@request-target", "/"},
		{"HTTPS://WWW.Example.com:443/a%20b", "", "@authority", "www.example.com"},
		{"HTTPS://WWW.Example.com:443/a%20b", "", "@path", "/a%20b"},
		{"http://example.com:80/", "", "@authority", "example.com"},
		{"http://example.com:8080/", "", "@authority", "example.com:8080"},
		{"http://127.0.0.1:8080/x?y", "api.example.com", "@authority", "api.example.com"},
		{"http://127.0.0.1:8080/x?y", "api.example.com", "@target-uri", "http://api.example.com/x?y"},
	} {
		req, err := http.NewRequest(http.MethodPost, tc.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = tc.host
		got, err := derivedValue(req, tc.name)
		if err != nil || got != tc.want {
			t.Errorf("%s of %s (host %q) = %q, %v; want %q", tc.name, tc.url, tc.host, got, err, tc.want)
		}
	}
}

// TestHTTPSignatureFieldValues: header values are trimmed and field lines
// joined with ", " (RFC 9421 2.1); host and content-length come from
// where net/http keeps them.
func TestHTTPSignatureFieldValues(t *testing.T) {
	req, _ := http.NewRequest(http.MethodPost, "https://example.com/", strings.NewReader("12345"))
	req.Header["X-Obs-Fold-Header"] = []string{"Obsolete\t  line folding.  "}
	req.Header["Example-Dict"] = []string{"  a=1,    b=2;x=1;y=2,   c=(a   b   c)", "d"}
	req.Header["X-Empty-Header"] = []string{""}
	req.Header["x-lower"] = []string{"v"}
	for name, want := range map[string]string{
		"x-obs-fold-header": "Obsolete\t  line folding.",
		"example-dict":      "a=1,    b=2;x=1;y=2,   c=(a   b   c), d",
		"x-empty-header":    "",
		"x-lower":           "v",
		"host":              "example.com",
		"content-length":    "5",
	} {
		got, err := fieldValue(req, name)
		if err != nil || got != want {
			t.Errorf("%s = %q, %v; want %q", name, got, err, want)
		}
	}
	if _, err := fieldValue(req, "date"); !IsComponentError(err) {
		t.Errorf("a missing header: %v, want a ComponentError", err)
	}
	req.Header["X-Bad"] = []string{"a\r\nInjected: b"}
	if _, err := fieldValue(req, "x-bad"); !IsComponentError(err) {
		t.Errorf("a value with a line break: %v, want a ComponentError", err)
	}
}

// TestHTTPSignatureContentDigest: the default components cover
// Content-Digest (RFC 9530 sha-256, RFC 9530's own example) with a body,
// and content-type when present; without a body neither is there.
func TestHTTPSignatureContentDigest(t *testing.T) {
	c := httpsigNew(t, SignatureSpec{
		Algorithm: "ed25519", KeyID: "k",
		Key: SecretRef{File: filepath.Join("testdata", "httpsig-test-key-ed25519.pem")},
	}, &httpsigClock{now: time.Unix(httpsigRFCCreated, 0)})
	if got, want := c.Headers(), []string{"Signature", "Signature-Input", "Content-Digest"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("Headers() = %v, want %v", got, want)
	}
	req, _ := http.NewRequest(http.MethodPost, "https://example.com/foo", nil)
	req.Header.Set("Content-Type", "application/json")
	if _, err := c.Apply(context.Background(), req, NewCall([]byte(`{"hello": "world"}`))); err != nil {
		t.Fatal(err)
	}
	if got, want := req.Header.Get("Content-Digest"), "sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:"; got != want {
		t.Errorf("Content-Digest = %s, want %s", got, want)
	}
	if got, want := req.Header.Get("Signature-Input"), `sig1=("@method" "@target-uri" "content-digest" "content-type");created=1618884473;keyid="k";alg="ed25519"`; got != want {
		t.Errorf("Signature-Input = %s, want %s", got, want)
	}

	get, _ := http.NewRequest(http.MethodGet, "https://example.com/foo", nil)
	if _, err := c.Apply(context.Background(), get, NewCall(nil)); err != nil {
		t.Fatal(err)
	}
	if v, ok := get.Header["Content-Digest"]; ok {
		t.Errorf("a call without a body got Content-Digest %v", v)
	}
	if got, want := get.Header.Get("Signature-Input"), `sig1=("@method" "@target-uri");created=1618884473;keyid="k";alg="ed25519"`; got != want {
		t.Errorf("Signature-Input = %s, want %s", got, want)
	}
}

// TestHTTPSignatureMissingComponent: a configured header the request does
// not have is a ComponentError at Apply (RFC 9421 2.5: no signature
// without it), naming the component and leaving the request unsigned.
func TestHTTPSignatureMissingComponent(t *testing.T) {
	c := httpsigNew(t, SignatureSpec{
		Algorithm: "hmac-sha256", KeyID: "k",
		Key:        SecretRef{File: httpsigWriteFile(t, "key", []byte("a-shared-secret-of-some-length!!"))},
		Components: []string{"@method", "X-Request-Date", "content-digest"},
	}, &httpsigClock{now: time.Unix(httpsigRFCCreated, 0)})
	req, _ := http.NewRequest(http.MethodGet, "https://example.com/", nil)
	_, err := c.Apply(context.Background(), req, NewCall(nil))
	var ce *ComponentError
	if !errors.As(err, &ce) || ce.Component != "x-request-date" || ce.Credential != "sig" || IsUnavailable(err) {
		t.Fatalf("Apply = %v, want a ComponentError for x-request-date", err)
	}
	if len(req.Header) != 0 {
		t.Errorf("a refused attempt was changed: %v", req.Header)
	}
	if strings.Contains(err.Error(), "a-shared-secret") {
		t.Errorf("the error holds the secret: %v", err)
	}
	// Configured content-digest is set even for an empty body.
	req.Header.Set("X-Request-Date", "now")
	if _, err := c.Apply(context.Background(), req, NewCall(nil)); err != nil {
		t.Fatal(err)
	}
	if got, want := req.Header.Get("Content-Digest"), "sha-256=:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=:"; got != want {
		t.Errorf("Content-Digest of no body = %s, want %s", got, want)
	}
}

// TestHTTPSignatureLoadErrors: every bad setting is an error at load that
// names the setting, and never the key.
func TestHTTPSignatureLoadErrors(t *testing.T) {
	const secretText = "load-error-secret-value-0123456789"
	good := httpsigWriteFile(t, "key", []byte(secretText))
	edPEM := filepath.Join("testdata", "httpsig-test-key-ed25519.pem")
	for _, tc := range []struct {
		name string
		spec SignatureSpec
		want string
	}{
		{"algorithm", SignatureSpec{Algorithm: "rsa-pss-sha512", Key: SecretRef{File: good}}, "algorithm"},
		{"encoding", SignatureSpec{Algorithm: "hmac-sha256", Key: SecretRef{File: good}, KeyEncoding: "hex"}, "key_encoding"},
		{"label", SignatureSpec{Algorithm: "hmac-sha256", Key: SecretRef{File: good}, Label: "Sig 1"}, "label"},
		{"keyid", SignatureSpec{Algorithm: "hmac-sha256", Key: SecretRef{File: good}, KeyID: "k\n"}, "key_id"},
		{"tag", SignatureSpec{Algorithm: "hmac-sha256", Key: SecretRef{File: good}, Tag: "é"}, "tag"},
		{"expires", SignatureSpec{Algorithm: "hmac-sha256", Key: SecretRef{File: good}, Expires: -time.Second}, "expires"},
		{"derived", SignatureSpec{Algorithm: "hmac-sha256", Key: SecretRef{File: good}, Components: []string{"@status"}}, "components[0]"},
		{"query-param", SignatureSpec{Algorithm: "hmac-sha256", Key: SecretRef{File: good}, Components: []string{"@method", `"@query-param";name="a"`}}, "components[1]"},
		{"header", SignatureSpec{Algorithm: "hmac-sha256", Key: SecretRef{File: good}, Components: []string{"bad header"}}, "components[0]"},
		{"own output", SignatureSpec{Algorithm: "hmac-sha256", Key: SecretRef{File: good}, Components: []string{"Signature"}}, "own output"},
		{"hop-by-hop", SignatureSpec{Algorithm: "hmac-sha256", Key: SecretRef{File: good}, Components: []string{"connection"}}, "hop-by-hop"},
		{"twice", SignatureSpec{Algorithm: "hmac-sha256", Key: SecretRef{File: good}, Components: []string{"Date", "date"}}, "twice"},
		{"no key", SignatureSpec{Algorithm: "hmac-sha256"}, "key"},
		{"missing file", SignatureSpec{Algorithm: "hmac-sha256", Key: SecretRef{File: filepath.Join(t.TempDir(), "nope")}}, "nope"},
		{"not base64", SignatureSpec{Algorithm: "hmac-sha256", Key: SecretRef{File: good}, KeyEncoding: "base64"}, "base64"},
		{"ed25519 not PEM", SignatureSpec{Algorithm: "ed25519", Key: SecretRef{File: good}}, "neither PEM"},
		{"ed25519 public key", SignatureSpec{Algorithm: "ed25519", Key: SecretRef{File: filepath.Join("testdata", "httpsig-test-key-ed25519.pub.pem")}}, "PUBLIC KEY"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(Spec{Name: "sig", Kind: KindHTTPSignature, Signature: &tc.spec}, Deps{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, want an error about %s", err, tc.want)
			}
			if strings.Contains(err.Error(), secretText) {
				t.Errorf("the error holds the secret: %v", err)
			}
		})
	}
	// The good forms load: a PEM key, a 32-byte seed raw or in base64.
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = byte(i)
	}
	for _, spec := range []SignatureSpec{
		{Algorithm: "ed25519", Key: SecretRef{File: edPEM}},
		{Algorithm: "ed25519", Key: SecretRef{File: httpsigWriteFile(t, "seed", seed)}},
		{Algorithm: "ed25519", Key: SecretRef{File: httpsigWriteFile(t, "seed64", []byte(base64.StdEncoding.EncodeToString(seed)+"\n"))}, KeyEncoding: "base64"},
		{Algorithm: "hmac-sha256", Key: SecretRef{Env: "K"}, Expires: 1500 * time.Millisecond},
	} {
		c, err := New(Spec{Name: "sig", Kind: KindHTTPSignature, Signature: &spec}, Deps{Getenv: func(string) string { return "env-secret" }})
		if err != nil {
			t.Errorf("%+v: %v", spec, err)
			continue
		}
		if spec.Expires > 0 && c.(*httpSignature).expires != 2 {
			t.Errorf("expires 1.5s = %ds, want rounded up to 2s", c.(*httpSignature).expires)
		}
	}
}
