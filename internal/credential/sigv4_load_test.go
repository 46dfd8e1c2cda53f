package credential_test

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/internal/credential"
)

const (
	testAK = "AKIDEXAMPLE"
	testSK = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
)

// writeFile writes v to dir/name and returns its path.
func writeFile(t testing.TB, dir, name, v string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(v), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSigV4LoadErrors: each bad setting is refused at load with the
// setting's name, and never with a secret's value.
func TestSigV4LoadErrors(t *testing.T) {
	dir := t.TempDir()
	ak := writeFile(t, dir, "ak", testAK+"\n")
	sk := writeFile(t, dir, "sk", testSK+"\n")
	badAK := writeFile(t, dir, "bad-ak", "AKID\r\nX-Evil: "+testSK)
	files := func(s *credential.SigV4Spec) *credential.SigV4Spec {
		s.AccessKeyID, s.SecretAccessKey = credential.SecretRef{File: ak}, credential.SecretRef{File: sk}
		return s
	}
	for _, tc := range []struct {
		name string
		spec *credential.SigV4Spec
		want string
	}{
		{"no region", files(&credential.SigV4Spec{Service: "s3"}), "credentials.c.region: required"},
		{"bad region", files(&credential.SigV4Spec{Region: "us east/1", Service: "s3"}), "credentials.c.region:"},
		{"no service", files(&credential.SigV4Spec{Region: "us-east-1"}), "credentials.c.service: required"},
		{"key id alone", &credential.SigV4Spec{Region: "us-east-1", Service: "s3", AccessKeyID: credential.SecretRef{File: ak}}, "credentials.c.secret_access_key: required"},
		{"secret alone", &credential.SigV4Spec{Region: "us-east-1", Service: "s3", SecretAccessKey: credential.SecretRef{File: sk}}, "credentials.c.access_key_id: required"},
		{"token alone", &credential.SigV4Spec{Region: "us-east-1", Service: "s3", SessionToken: credential.SecretRef{File: sk}}, "credentials.c.session_token"},
		{"missing file", &credential.SigV4Spec{Region: "us-east-1", Service: "s3", AccessKeyID: credential.SecretRef{File: ak}, SecretAccessKey: credential.SecretRef{File: filepath.Join(dir, "nope")}}, "credentials.c.secret_access_key: open " + filepath.Join(dir, "nope")},
		{"key id with a line break", &credential.SigV4Spec{Region: "us-east-1", Service: "s3", AccessKeyID: credential.SecretRef{File: badAK}, SecretAccessKey: credential.SecretRef{File: sk}}, "not a valid key id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := credential.New(credential.Spec{Name: "c", Kind: credential.KindAWSSigV4, SigV4: tc.spec}, credential.Deps{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v (want %q)", err, tc.want)
			}
			if strings.Contains(err.Error(), testSK) || strings.Contains(err.Error(), testAK) {
				t.Fatalf("the error shows a secret: %v", err)
			}
		})
	}
}

// TestSigV4ApplySetsItsHeadersOnly: Apply sets exactly its headers,
// replacing earlier values (a caller's, with overwrite) and dropping a
// stale security token and a Host header; the call's URL is not changed;
// the stamp's generation follows the key files.
func TestSigV4ApplySetsItsHeadersOnly(t *testing.T) {
	dir := t.TempDir()
	sk := writeFile(t, dir, "sk", testSK)
	clock := newFakeClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	c, err := credential.New(credential.Spec{
		Name: "c", Kind: credential.KindAWSSigV4, Overwrite: true,
		SigV4: &credential.SigV4Spec{
			Region: "eu-central-1", Service: "execute-api",
			AccessKeyID:     credential.SecretRef{File: writeFile(t, dir, "ak", testAK+"\n")},
			SecretAccessKey: credential.SecretRef{File: sk},
		},
	}, credential.Deps{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"Authorization", "X-Amz-Date", "X-Amz-Security-Token", "X-Amz-Content-Sha256"}
	if got := c.Headers(); !slices.Equal(got, want) || c.Kind() != credential.KindAWSSigV4 || c.Name() != "c" || !c.Overwrite() {
		t.Fatalf("Headers %q Kind %s Name %s Overwrite %v", got, c.Kind(), c.Name(), c.Overwrite())
	}
	u, _ := url.Parse("https://api.example.com/prod/a%20b=c?z=1&a=2")
	orig := *u
	req := &http.Request{Method: http.MethodPost, URL: u, Host: u.Host, Header: http.Header{
		"Authorization":        {"Bearer caller"},
		"X-Amz-Date":           {"20000101T000000Z"},
		"X-Amz-Security-Token": {"caller-token"},
		"Host":                 {"evil.example"},
		"Content-Type":         {"application/json"},
	}}
	stamp, err := c.Apply(context.Background(), req, credential.NewCall([]byte(`{}`)))
	if err != nil {
		t.Fatal(err)
	}
	if *u != orig {
		t.Fatalf("the call's URL changed: %v", u)
	}
	if got := req.URL.String(); got != "https://api.example.com/prod/a%20b%3Dc?a=2&z=1" {
		t.Fatalf("sent URL %s", got)
	}
	h := req.Header
	if h.Get("X-Amz-Date") != "20261201T100000Z" || h.Get("X-Amz-Security-Token") != "" || h.Get("Host") != "" ||
		h.Get("X-Amz-Content-Sha256") != "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a" {
		t.Fatalf("headers %v", h)
	}
	auth := h.Get("Authorization")
	wantAuth := "AWS4-HMAC-SHA256 Credential=" + testAK + "/20261201/eu-central-1/execute-api/aws4_request, SignedHeaders=content-type;host;x-amz-content-sha256;x-amz-date, Signature="
	if !strings.HasPrefix(auth, wantAuth) || len(h["Authorization"]) != 1 {
		t.Fatalf("Authorization %q", h["Authorization"])
	}

	// A new signing time at each Apply; a rotated file, a new generation.
	clock.Advance(2 * time.Second)
	writeFile(t, dir, "sk", testSK+"rotated")
	stamp2, err := c.Apply(context.Background(), req, credential.NewCall([]byte(`{}`)))
	if err != nil {
		t.Fatal(err)
	}
	if h.Get("X-Amz-Date") != "20261201T100002Z" || h.Get("Authorization") == auth || stamp2.Generation == stamp.Generation {
		t.Fatalf("second Apply: date %s, generation %d then %d", h.Get("X-Amz-Date"), stamp.Generation, stamp2.Generation)
	}
	if c.Rejected(stamp2) {
		t.Fatal("Rejected: a signature has nothing to renew")
	}
}

// TestSigV4SessionTokenSigned: with a session token file, the token is
// sent in X-Amz-Security-Token and signed.
func TestSigV4SessionTokenSigned(t *testing.T) {
	dir := t.TempDir()
	c, err := credential.New(credential.Spec{
		Name: "c", Kind: credential.KindAWSSigV4,
		SigV4: &credential.SigV4Spec{
			Region: "us-east-1", Service: "sqs",
			AccessKeyID:     credential.SecretRef{File: writeFile(t, dir, "ak", testAK)},
			SecretAccessKey: credential.SecretRef{File: writeFile(t, dir, "sk", testSK)},
			SessionToken:    credential.SecretRef{File: writeFile(t, dir, "tok", "session-token\n")},
		},
	}, credential.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, "https://sqs.us-east-1.amazonaws.com/", nil)
	if _, err := c.Apply(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	if req.Header.Get("X-Amz-Security-Token") != "session-token" ||
		!strings.Contains(req.Header.Get("Authorization"), "SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token,") {
		t.Fatalf("headers %v", req.Header)
	}
}

// TestSigV4RefusesAQueryItWouldChange: a query the signer would send
// changed (a ';' separator, a bad escape) is not signed: a caller's error
// (ComponentError, INVALID_ARGUMENT at the RPC), not an unavailable
// credential.
func TestSigV4RefusesAQueryItWouldChange(t *testing.T) {
	dir := t.TempDir()
	c, err := credential.New(credential.Spec{Name: "c", Kind: credential.KindAWSSigV4, SigV4: &credential.SigV4Spec{
		Region: "us-east-1", Service: "s3",
		AccessKeyID:     credential.SecretRef{File: writeFile(t, dir, "ak", testAK)},
		SecretAccessKey: credential.SecretRef{File: writeFile(t, dir, "sk", testSK)},
	}}, credential.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"a=1;b=2", "a=%zz"} {
		req := &http.Request{Method: http.MethodGet, URL: &url.URL{Scheme: "https", Host: "h.example", Path: "/", RawQuery: q}, Header: http.Header{}}
		_, err := c.Apply(context.Background(), req, nil)
		if !credential.IsComponentError(err) || credential.IsUnavailable(err) || req.Header.Get("Authorization") != "" {
			t.Fatalf("query %q: %v, Authorization %q", q, err, req.Header.Get("Authorization"))
		}
		if req.URL.RawQuery != q {
			t.Fatalf("query %q became %q", q, req.URL.RawQuery)
		}
	}
}
