package credential_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/retrybroker/retrybroker/internal/credential"
)

// FuzzSigV4Path: for any path a caller may send, Apply does not fail or
// panic, the request still names the same resource (its decoded path is
// unchanged), and the path sent is the form AWS signs: only unreserved
// characters, '/' and upper-case %XX escapes.
func FuzzSigV4Path(f *testing.F) {
	for _, s := range []string{"/", "/bucket/key", "/a%20b+c=d", "/a%2Fb/c", "/%E2%82%AC/~x", "/a b", "/x?y", "/%zz", ""} {
		f.Add(s)
	}
	dir := f.TempDir()
	ak, sk := writeFile(f, dir, "ak", testAK), writeFile(f, dir, "sk", testSK)
	var creds []credential.Credential
	for _, service := range []string{"s3", "execute-api"} {
		c, err := credential.New(credential.Spec{Name: "c", Kind: credential.KindAWSSigV4, SigV4: &credential.SigV4Spec{
			Region: "us-east-1", Service: service,
			AccessKeyID: credential.SecretRef{File: ak}, SecretAccessKey: credential.SecretRef{File: sk},
		}}, credential.Deps{})
		if err != nil {
			f.Fatal(err)
		}
		creds = append(creds, c)
	}
	f.Fuzz(func(t *testing.T, path string) {
		for _, c := range creds {
			checkSigV4Path(t, c, path)
		}
	})
}

// checkSigV4Path applies c to a request for path and checks the path sent.
func checkSigV4Path(t *testing.T, c credential.Credential, path string) {
	t.Helper()
	u, err := url.Parse("http://127.0.0.1:1" + path)
	if err != nil || u.Opaque != "" || u.Host != "127.0.0.1:1" {
		return
	}
	want := u.Path
	req := &http.Request{Method: http.MethodGet, URL: u, Host: u.Host, Header: http.Header{}}
	if _, err := c.Apply(context.Background(), req, credential.NewCall(nil)); err != nil {
		// A query that does not parse would be sent changed, so it is not
		// signed: the caller's error (a ComponentError), never the path's.
		if _, qerr := url.ParseQuery(u.RawQuery); qerr != nil && credential.IsComponentError(err) {
			return
		}
		t.Fatalf("Apply(%q): %v", path, err)
	}
	if req.URL.Path != want {
		t.Fatalf("path %q became %q", want, req.URL.Path)
	}
	sent := req.URL.EscapedPath()
	for i := 0; i < len(sent); i++ {
		b := sent[i]
		switch {
		case b == '%':
			if i+2 >= len(sent) || !strings.ContainsRune("0123456789ABCDEF", rune(sent[i+1])) || !strings.ContainsRune("0123456789ABCDEF", rune(sent[i+2])) {
				t.Fatalf("sent path %q: bad escape at %d", sent, i)
			}
		case b == '/' || b == '-' || b == '_' || b == '.' || b == '~' || (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || (b >= '0' && b <= '9'):
		default:
			t.Fatalf("sent path %q: %q is not escaped", sent, b)
		}
	}
}
