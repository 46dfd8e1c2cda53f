package credential

import (
	"bytes"
	"context"
	"net/http"
	"path/filepath"
	"testing"
)

// BenchmarkApplyHTTPSignature: one attempt's signature (default
// components, 1 KiB body, so Content-Digest too), in parallel, per
// algorithm; the body's hash is made once per call, as in the engine.
func BenchmarkApplyHTTPSignature(b *testing.B) {
	for _, tc := range []struct {
		alg      string
		key      SecretRef
		encoding string
	}{
		{"hmac-sha256", SecretRef{File: filepath.Join("testdata", "httpsig-test-shared-secret.b64")}, "base64"},
		{"ed25519", SecretRef{File: filepath.Join("testdata", "httpsig-test-key-ed25519.pem")}, ""},
	} {
		b.Run(tc.alg, func(b *testing.B) {
			c, err := New(Spec{Name: "bench", Kind: KindHTTPSignature, Signature: &SignatureSpec{
				Algorithm: tc.alg, KeyID: "bench-key", Key: tc.key, KeyEncoding: tc.encoding,
			}}, Deps{Tenant: "t"})
			if err != nil {
				b.Fatal(err)
			}
			body := bytes.Repeat([]byte("x"), 1024)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				req, _ := http.NewRequest(http.MethodPost, "https://api.example.com/v1/charges?expand=customer", nil)
				req.Header.Set("Content-Type", "application/json")
				call := NewCall(body)
				for pb.Next() {
					if _, err := c.Apply(context.Background(), req, call); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
