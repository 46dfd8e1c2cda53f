package engine_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/retrybroker/retrybroker/internal/credential"
	"github.com/retrybroker/retrybroker/internal/egress"
	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/store/memstore"
)

// BenchmarkRunCredential runs Execute calls against a loopback upstream at
// concurrency 16, side by side: "caller" sends its own Authorization
// header, "header" has the broker apply the same header from a file (the
// target: header ≥ 97% of caller's throughput: the same bytes on the
// wire), and "none" sends no credential at all (one header less on the
// wire, client and server alike). Compare the ns/op of one run.
func BenchmarkRunCredential(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	b.Cleanup(up.Close)
	u, _ := url.Parse(up.URL + "/v1/x")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	b.Cleanup(client.CloseIdleConnections)
	path := filepath.Join(b.TempDir(), "token")
	if err := os.WriteFile(path, []byte("bench-secret\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	cred, err := credential.New(credential.Spec{Name: "api", Kind: credential.KindHeader, Header: &credential.HeaderSpec{
		Name: "Authorization", Prefix: "Bearer ", Value: credential.SecretRef{File: path},
	}}, credential.Deps{Tenant: "t1"})
	if err != nil {
		b.Fatal(err)
	}
	r := engine.NewRunner(memstore.New())
	for _, c := range []struct {
		name   string
		cred   credential.Credential
		header http.Header
	}{{"caller", nil, http.Header{"Authorization": {"Bearer bench-secret"}}}, {"header", cred, http.Header{}}, {"none", nil, http.Header{}}} {
		p := mustPolicy(b, func(p *engine.Policy) { p.Credential = c.cred })
		b.Run(c.name, func(b *testing.B) {
			runAt16(b, r, func() *engine.Call {
				return &engine.Call{
					Policy: p, Method: "GET", URL: u, Header: c.header, RedactedURL: up.URL,
					Client: client, Classify: egress.Classify, Tenant: "t1",
				}
			})
		})
	}
}

// runAt16 runs the calls newCall makes through r at concurrency 16, each
// expected to succeed, reporting allocations.
func runAt16(b *testing.B, r *engine.Runner, newCall func() *engine.Call) {
	b.ReportAllocs()
	b.SetParallelism(max(1, 16/runtime.GOMAXPROCS(0)))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			res, err := r.Run(b.Context(), newCall())
			if err != nil || res.Outcome != engine.OutcomeSuccess {
				b.Errorf("%v %v", err, res.Outcome)
				return
			}
		}
	})
}

// BenchmarkRunCredentialSigV4 is the suite's aws_sigv4 row in one process:
// Execute calls of a PUT with a 1 KiB body at concurrency 16 against a
// loopback upstream that reads the body, "none" without a credential and
// "sigv4" signed on every attempt (the body's hash made once per call).
// Compare the ns/op and allocations of one run; docs/architecture.md
// ("What SigV4 costs") gives the figures and the profile.
func BenchmarkRunCredentialSigV4(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
	}))
	b.Cleanup(up.Close)
	u, _ := url.Parse(up.URL + "/v1/items")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	b.Cleanup(client.CloseIdleConnections)
	dir := b.TempDir()
	ak, sk := filepath.Join(dir, "access-key-id"), filepath.Join(dir, "secret-access-key")
	for p, v := range map[string]string{ak: "AKIABENCHSUITE000000\n", sk: "benchsuite/secret/access/key/000000000000\n"} {
		if err := os.WriteFile(p, []byte(v), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	cred, err := credential.New(credential.Spec{Name: "aws", Kind: credential.KindAWSSigV4, SigV4: &credential.SigV4Spec{
		Region: "eu-west-1", Service: "s3", AccessKeyID: credential.SecretRef{File: ak}, SecretAccessKey: credential.SecretRef{File: sk},
	}}, credential.Deps{Tenant: "t1"})
	if err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 1024)
	r := engine.NewRunner(memstore.New())
	for _, c := range []struct {
		name string
		cred credential.Credential
	}{{"none", nil}, {"sigv4", cred}} {
		p := mustPolicy(b, func(p *engine.Policy) { p.Credential = c.cred })
		b.Run(c.name, func(b *testing.B) {
			runAt16(b, r, func() *engine.Call {
				return &engine.Call{
					Policy: p, Method: http.MethodPut, URL: u, Body: body, RedactedURL: up.URL,
					Header: http.Header{"Content-Type": {"application/octet-stream"}},
					Client: client, Classify: egress.Classify, Tenant: "t1",
				}
			})
		})
	}
}
