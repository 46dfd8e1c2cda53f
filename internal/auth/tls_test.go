package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/retrybroker/retrybroker/internal/config"
	"github.com/retrybroker/retrybroker/internal/tenant"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

var serials atomic.Int64

func nextSerial() *big.Int { return big.NewInt(serials.Add(1)) }

func newCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          nextSerial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue signs a leaf certificate; it returns the PEM pair and the parsed
// tls.Certificate.
func (ca *testCA) issue(t *testing.T, subject pkix.Name, uris []string, ips []net.IP, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte, pair tls.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: nextSerial(),
		Subject:      subject,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		IPAddresses:  ips,
	}
	for _, s := range uris {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.URIs = append(tmpl.URIs, u)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	pair, err = tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return certPEM, keyPEM, pair
}

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// tlsServer is a gRPC server on 127.0.0.1 with ServerTLS credentials whose
// interceptor runs the authenticator and records the tenant.
type tlsServer struct {
	addr   string
	ca     *testCA
	tenant chan string
}

func startTLSServer(t *testing.T, ca *testCA, requireClientCert bool, authFn func(context.Context) (context.Context, error)) *tlsServer {
	t.Helper()
	dir := t.TempDir()
	certPEM, keyPEM, _ := ca.issue(t, pkix.Name{CommonName: "broker"}, nil, []net.IP{net.IPv4(127, 0, 0, 1)}, x509.ExtKeyUsageServerAuth)
	creds, err := ServerTLS(writeFile(t, dir, "server.pem", certPEM), writeFile(t, dir, "server.key", keyPEM), writeFile(t, dir, "ca.pem", ca.pem), requireClientCert)
	if err != nil {
		t.Fatal(err)
	}
	s := &tlsServer{ca: ca, tenant: make(chan string, 1)}
	gs := grpc.NewServer(grpc.Creds(creds), grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		ctx, err := authFn(ctx)
		if err != nil {
			return nil, err
		}
		tn, _ := tenant.FromContext(ctx)
		s.tenant <- tn.ID
		return h(ctx, req)
	}))
	healthpb.RegisterHealthServer(gs, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = lis.Addr().String()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = gs.Serve(lis)
	}()
	t.Cleanup(func() {
		gs.Stop()
		<-done
	})
	return s
}

// call makes one RPC with an optional client certificate and API key and
// returns the tenant the server saw.
func (s *tlsServer) call(t *testing.T, cert *tls.Certificate, key string) (string, error) {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AddCert(s.ca.cert)
	cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if cert != nil {
		// Always send it, even when its issuer is not one the server
		// asks for (the rogue CA case).
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	}
	conn, err := grpc.NewClient(s.addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if key != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+key)
	}
	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return "", err
	}
	return <-s.tenant, nil
}

func TestMTLS(t *testing.T) {
	ca := newCA(t, "client CA")
	d := testConfig(t)
	srv := startTLSServer(t, ca, false, New(func() *config.Directory { return d }))

	_, _, spiffeA := ca.issue(t, pkix.Name{CommonName: "caller"}, []string{"spiffe://corp.example/ns/team-a/sa/caller"}, nil, x509.ExtKeyUsageClientAuth)
	_, _, cnB := ca.issue(t, pkix.Name{CommonName: "team-b", Organization: []string{"Whatever"}}, nil, nil, x509.ExtKeyUsageClientAuth)
	_, _, subjectC := ca.issue(t, pkix.Name{CommonName: "team-c", Organization: []string{"Corp"}}, nil, nil, x509.ExtKeyUsageClientAuth)
	_, _, stranger := ca.issue(t, pkix.Name{CommonName: "stranger"}, []string{"spiffe://corp.example/ns/x/sa/y"}, nil, x509.ExtKeyUsageClientAuth)
	rogueCA := newCA(t, "rogue")
	_, _, rogueA := rogueCA.issue(t, pkix.Name{CommonName: "team-a"}, []string{"spiffe://corp.example/ns/team-a/sa/caller"}, nil, x509.ExtKeyUsageClientAuth)

	cases := []struct {
		name   string
		cert   *tls.Certificate
		key    string
		tenant string
		code   codes.Code
		msg    string
	}{
		{"URI SAN", &spiffeA, "", "team-a", codes.OK, ""},
		{"CN", &cnB, "", "team-b", codes.OK, ""},
		{"full subject", &subjectC, "", "team-c", codes.OK, ""},
		{"cert and matching key", &spiffeA, keyA, "team-a", codes.OK, ""},
		{"cert and key of another tenant", &spiffeA, keyB, "", codes.PermissionDenied, MsgKeyCertMismatch},
		{"unmapped cert", &stranger, "", "", codes.Unauthenticated, MsgUnmappedCert + " (certificate identities: spiffe://corp.example/ns/x/sa/y, CN=stranger)"},
		{"unmapped cert with key", &stranger, keyB, "team-b", codes.OK, ""},
		{"cert with unknown key", &cnB, "nope", "", codes.Unauthenticated, MsgUnknownKey},
		{"key only over TLS", nil, keyA, "team-a", codes.OK, ""},
		{"nothing", nil, "", "", codes.Unauthenticated, MsgMissingCredentials},
		{"cert from another CA", &rogueA, "", "", codes.Unavailable, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := srv.call(t, tc.cert, tc.key)
			if status.Code(err) != tc.code {
				t.Fatalf("code %v (%v), want %v", status.Code(err), err, tc.code)
			}
			if tc.msg != "" && !strings.HasPrefix(status.Convert(err).Message(), tc.msg) {
				t.Errorf("message %q, want %q", status.Convert(err).Message(), tc.msg)
			}
			if got != tc.tenant {
				t.Errorf("tenant %q, want %q", got, tc.tenant)
			}
		})
	}
}

func TestMTLSRequired(t *testing.T) {
	ca := newCA(t, "client CA")
	d := testConfig(t)
	srv := startTLSServer(t, ca, true, New(func() *config.Directory { return d }))
	if _, err := srv.call(t, nil, keyA); status.Code(err) != codes.Unavailable {
		t.Errorf("without a client certificate: %v, want a failed handshake (UNAVAILABLE)", err)
	}
	_, _, cnB := ca.issue(t, pkix.Name{CommonName: "team-b"}, nil, nil, x509.ExtKeyUsageClientAuth)
	if got, err := srv.call(t, &cnB, ""); err != nil || got != "team-b" {
		t.Errorf("with a certificate: %q, %v", got, err)
	}
}

func TestCertificateIdentities(t *testing.T) {
	ca := newCA(t, "ca")
	_, _, pair := ca.issue(t, pkix.Name{CommonName: "team-a", Organization: []string{"Corp"}, OrganizationalUnit: []string{"payments"}},
		[]string{"spiffe://corp/ns/a/sa/x", "https://id.example/a"}, nil, x509.ExtKeyUsageClientAuth)
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(CertificateIdentities(leaf), " | ")
	want := "spiffe://corp/ns/a/sa/x | https://id.example/a | CN=team-a,OU=payments,O=Corp | CN=team-a"
	if got != want {
		t.Errorf("identities %q, want %q", got, want)
	}
}

func TestServerTLSErrors(t *testing.T) {
	ca := newCA(t, "ca")
	dir := t.TempDir()
	certPEM, keyPEM, _ := ca.issue(t, pkix.Name{CommonName: "broker"}, nil, nil, x509.ExtKeyUsageServerAuth)
	cert, key := writeFile(t, dir, "c.pem", certPEM), writeFile(t, dir, "k.pem", keyPEM)
	garbage := writeFile(t, dir, "garbage.pem", []byte("not pem"))
	cases := []struct {
		name                string
		cert, key, clientCA string
		require             bool
		want                string
	}{
		{"missing cert", filepath.Join(dir, "none.pem"), key, "", false, "no such file"},
		{"key does not match", cert, garbage, "", false, "TLS certificate"},
		{"bad client CA", cert, key, garbage, false, "no PEM certificates"},
		{"missing client CA", cert, key, filepath.Join(dir, "none.pem"), false, "client CA"},
		{"require without CA", cert, key, "", true, "needs a client CA"},
	}
	for _, c := range cases {
		if _, err := ServerTLS(c.cert, c.key, c.clientCA, c.require); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	cfg, _, err := serverTLSConfig(cert, key, writeFile(t, dir, "ca.pem", ca.pem), false)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MinVersion != tls.VersionTLS12 || cfg.ClientAuth != tls.VerifyClientCertIfGiven {
		t.Errorf("config: min version %x, client auth %v", cfg.MinVersion, cfg.ClientAuth)
	}
}

// TestCertificateRotation checks that a renewed pair is served without a
// restart and that a broken one is ignored.
func TestCertificateRotation(t *testing.T) {
	ca := newCA(t, "ca")
	dir := t.TempDir()
	c1, k1, _ := ca.issue(t, pkix.Name{CommonName: "one"}, nil, nil, x509.ExtKeyUsageServerAuth)
	cert, key := writeFile(t, dir, "c.pem", c1), writeFile(t, dir, "k.pem", k1)
	cfg, kp, err := serverTLSConfig(cert, key, "", false)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	kp.now = func() time.Time { return now }
	serving := func() string {
		c, err := cfg.GetCertificate(nil)
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := x509.ParseCertificate(c.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return leaf.Subject.CommonName
	}
	if got := serving(); got != "one" {
		t.Fatalf("serving %q", got)
	}
	c2, k2, _ := ca.issue(t, pkix.Name{CommonName: "two"}, nil, nil, x509.ExtKeyUsageServerAuth)
	writeFile(t, dir, "c.pem", c2)
	writeFile(t, dir, "k.pem", k2)
	later := now.Add(time.Minute)
	for _, f := range []string{cert, key} {
		if err := os.Chtimes(f, later, later); err != nil {
			t.Fatal(err)
		}
	}
	if got := serving(); got != "one" {
		t.Errorf("reloaded before the check interval: %q", got)
	}
	now = now.Add(CertCheckInterval)
	if got := serving(); got != "two" {
		t.Errorf("after rotation serving %q, want two", got)
	}
	// A broken pair (key not yet written) keeps the old one.
	writeFile(t, dir, "c.pem", c1)
	even := later.Add(time.Minute)
	if err := os.Chtimes(cert, even, even); err != nil {
		t.Fatal(err)
	}
	now = now.Add(CertCheckInterval)
	if got := serving(); got != "two" {
		t.Errorf("broken pair replaced the certificate: %q", got)
	}
}
