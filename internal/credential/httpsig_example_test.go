package credential_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/retrybroker/retrybroker/internal/credential"
)

type exampleHTTPSigClock struct{ now time.Time }

func (c exampleHTTPSigClock) Now() time.Time { return c.now }

// An http_signature credential signs each attempt with RFC 9421: here
// with the RFC's Ed25519 test key, the default components and a body.
func ExampleNew_httpSignature() {
	cred, err := credential.New(credential.Spec{
		Name: "partner-sig",
		Kind: credential.KindHTTPSignature,
		Signature: &credential.SignatureSpec{
			Algorithm: "ed25519",
			KeyID:     "test-key-ed25519",
			Key:       credential.SecretRef{File: filepath.Join("testdata", "httpsig-test-key-ed25519.pem")},
			Expires:   5 * time.Minute,
		},
	}, credential.Deps{Clock: exampleHTTPSigClock{time.Unix(1618884473, 0)}})
	if err != nil {
		fmt.Println(err)
		return
	}
	body := []byte(`{"hello": "world"}`)
	req, _ := http.NewRequest(http.MethodPost, "https://example.com/foo?param=Value&Pet=dog", nil)
	req.Header.Set("Content-Type", "application/json")
	if _, err := cred.Apply(context.Background(), req, credential.NewCall(body)); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(strings.Join(cred.Headers(), ", "))
	fmt.Println("Content-Digest:", req.Header.Get("Content-Digest"))
	fmt.Println("Signature-Input:", req.Header.Get("Signature-Input"))
	// Output:
	// Signature, Signature-Input, Content-Digest
	// Content-Digest: sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:
	// Signature-Input: sig1=("@method" "@target-uri" "content-digest" "content-type");created=1618884473;expires=1618884773;keyid="test-key-ed25519";alg="ed25519"
}
