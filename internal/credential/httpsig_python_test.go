package credential

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestHTTPSignatureVerifiedByPython cross-checks Apply's signatures with
// a second, independent RFC 9421 implementation: PyPI's
// http-message-signatures (pyauth), which verifies signature, created,
// expires and Content-Digest. Optional: it runs only when HTTPSIG_PYTHON
// names a Python that has the library (and requests), e.g.
//
//	python3 -m venv /tmp/hs && /tmp/hs/bin/pip install http-message-signatures==3.0.0 requests
//	HTTPSIG_PYTHON=/tmp/hs/bin/python go test -run VerifiedByPython ./internal/credential/
//
// No request is sent anywhere: the Python process reads them from a file.
func TestHTTPSignatureVerifiedByPython(t *testing.T) {
	py := os.Getenv("HTTPSIG_PYTHON")
	if py == "" {
		t.Skip("HTTPSIG_PYTHON is not set")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, py, "-c", "import http_message_signatures, requests").CombinedOutput(); err != nil {
		t.Skipf("%s has no http_message_signatures: %v %s", py, err, out)
	}
	type pyCase struct {
		Alg     string      `json:"alg"`
		KeyID   string      `json:"keyid"`
		Method  string      `json:"method"`
		URL     string      `json:"url"`
		Headers [][2]string `json:"headers"`
		Body    string      `json:"body"`
		Comps   int         `json:"-"`
	}
	keys := map[string]SecretRef{
		"ed25519":     {File: filepath.Join("testdata", "httpsig-test-key-ed25519.pem")},
		"hmac-sha256": {File: filepath.Join("testdata", "httpsig-test-shared-secret.b64")},
	}
	var cases []pyCase
	for _, alg := range []string{"ed25519", "hmac-sha256"} {
		enc := ""
		if alg == "hmac-sha256" {
			enc = "base64"
		}
		for _, comps := range [][]string{nil, {"@method", "@target-uri", "@authority", "@scheme", "@request-target", "@path", "@query", "content-type", "content-digest", "x-multi"}} {
			c := httpsigNew(t, SignatureSpec{Algorithm: alg, KeyID: "py-" + alg, Key: keys[alg], KeyEncoding: enc, Components: comps, Tag: "retrybroker", Expires: time.Minute}, SystemClock)
			for _, m := range []struct {
				method, url string
				body        []byte
			}{
				{http.MethodPost, "https://api.example.com/v1/charges?expand=customer&a=%2F", []byte(`{"hello": "world"}`)},
				{http.MethodGet, "https://api.example.com:8443/", nil},
			} {
				req, _ := http.NewRequest(m.method, m.url, nil)
				req.Header.Set("Content-Type", "application/json")
				req.Header["X-Multi"] = []string{"a", " b "}
				if _, err := c.Apply(context.Background(), req, NewCall(m.body)); err != nil {
					t.Fatal(err)
				}
				pc := pyCase{Comps: len(comps), Alg: alg, KeyID: "py-" + alg, Method: m.method, URL: m.url, Body: base64.StdEncoding.EncodeToString(m.body)}
				for name, vs := range req.Header {
					for _, v := range vs {
						pc.Headers = append(pc.Headers, [2]string{name, v})
					}
				}
				cases = append(cases, pc)
			}
		}
	}
	in, _ := json.Marshal(cases)
	path := filepath.Join(t.TempDir(), "cases.json")
	if err := os.WriteFile(path, in, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, py, filepath.Join("testdata", "httpsig-verify.py"), path,
		filepath.Join("testdata", "httpsig-test-key-ed25519.pub.pem"), filepath.Join("testdata", "httpsig-test-shared-secret.b64"))
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(cases) {
		t.Fatalf("%d results for %d cases:\n%s", len(lines), len(cases), out)
	}
	for i, l := range lines {
		if l != "ok" {
			t.Errorf("%s, %d components, %s %s: %s", cases[i].Alg, cases[i].Comps, cases[i].Method, cases[i].URL, l)
		}
	}
}
