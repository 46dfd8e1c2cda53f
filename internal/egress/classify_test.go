package egress_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/internal/egress"
	"github.com/retrybroker/retrybroker/internal/engine"
)

// allowLoopback is a client config whose guard allows 127.0.0.1 only.
func allowLoopback(t *testing.T) egress.ClientConfig {
	return egress.ClientConfig{Guard: mustGuard(t, egress.AllowPrefixes(loopback32))}
}

func assertKind(t *testing.T, err error, want engine.TransportError) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %v", want)
	}
	if got := egress.Classify(err); got != want {
		t.Errorf("Classify(%v) = %v, want %v", err, got, want)
	}
}

func TestClassifyConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing listens there now
	c := newTestClient(t, allowLoopback(t), nil, nil)
	_, err = get(context.Background(), c, "http://"+addr+"/", nil)
	assertKind(t, err, engine.TransportConnectionRefused)
}

// hijacker answers by hijacking the connection and handing it to f.
func hijacker(t *testing.T, f func(net.Conn)) *upstream {
	return newUpstream(t, func(w http.ResponseWriter, _ *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		f(conn)
	})
}

func TestClassifyConnectionReset(t *testing.T) {
	srv := hijacker(t, func(conn net.Conn) {
		_ = conn.(*net.TCPConn).SetLinger(0) // close sends RST
		_ = conn.Close()
	})
	c := newTestClient(t, allowLoopback(t), nil, nil)
	_, err := get(context.Background(), c, srv.URL, nil)
	assertKind(t, err, engine.TransportConnectionReset)
}

func TestClassifyEOF(t *testing.T) {
	srv := hijacker(t, func(conn net.Conn) { _ = conn.Close() })
	c := newTestClient(t, allowLoopback(t), nil, nil)
	_, err := get(context.Background(), c, srv.URL, nil)
	assertKind(t, err, engine.TransportEOF)
}

func TestClassifyTruncatedBodyIsEOF(t *testing.T) {
	srv := hijacker(t, func(conn net.Conn) {
		_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort")
		_ = conn.Close()
	})
	c := newTestClient(t, allowLoopback(t), nil, nil)
	resp := mustGet(t, context.Background(), c, srv.URL, nil)
	_, err := io.ReadAll(resp.Body)
	assertKind(t, err, engine.TransportEOF)
}

// slowServer holds every request until the test ends.
func slowServer(t *testing.T) *upstream {
	release := make(chan struct{})
	srv := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	t.Cleanup(func() { close(release) }) // runs before srv.Close
	return srv
}

func TestClassifyResponseHeaderTimeout(t *testing.T) {
	srv := slowServer(t)
	cfg := allowLoopback(t)
	cfg.ResponseHeaderTimeout = 50 * time.Millisecond
	c := newTestClient(t, cfg, nil, nil)
	_, err := get(context.Background(), c, srv.URL, nil)
	assertKind(t, err, engine.TransportTimeout)
}

func TestClassifyContextDeadlineAndCancel(t *testing.T) {
	srv := slowServer(t)
	c := newTestClient(t, allowLoopback(t), nil, nil)

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := get(ctx, c, srv.URL, nil)
	assertKind(t, err, engine.TransportTimeout)

	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	_, err = get(ctx, c, srv.URL, nil)
	assertKind(t, err, engine.TransportCanceled)
}

func TestClassifyClientTimeout(t *testing.T) {
	srv := slowServer(t)
	cfg := allowLoopback(t)
	cfg.Timeout = 50 * time.Millisecond
	c := newTestClient(t, cfg, nil, nil)
	_, err := get(context.Background(), c, srv.URL, nil)
	assertKind(t, err, engine.TransportTimeout)
}

func TestClassifyTLSCertificate(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // expected handshake failures
	srv.StartTLS()
	t.Cleanup(srv.Close)
	port := srv.Listener.Addr().(*net.TCPAddr).Port

	// Untrusted: the test certificate is not in the client's roots.
	pool := x509.NewCertPool()
	cfg := allowLoopback(t)
	cfg.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	c := newTestClient(t, cfg, nil, nil)
	_, err := get(context.Background(), c, srv.URL, nil)
	assertKind(t, err, engine.TransportTLSCertificate)

	// Trusted, but the name does not match the certificate.
	trusted := srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	cfg.TLSClientConfig = trusted
	res := newFakeResolver().Map("wrong-name.test", "127.0.0.1")
	c = newTestClient(t, cfg, res, nil)
	_, err = get(context.Background(), c, fmt.Sprintf("https://wrong-name.test:%d/", port), nil)
	assertKind(t, err, engine.TransportTLSCertificate)
	var he x509.HostnameError
	if !errors.As(err, &he) {
		t.Errorf("want an x509.HostnameError in %v", err)
	}

	// Trusted and matching: succeeds.
	mustGet(t, context.Background(), c, srv.URL, nil)
}

func TestClassifyDNS(t *testing.T) {
	res := newFakeResolver().
		Fail("temp.example", &net.DNSError{Err: "server misbehaving", Name: "temp.example", IsTemporary: true}).
		Fail("slow.example", &net.DNSError{Err: "i/o timeout", Name: "slow.example", IsTimeout: true})
	c := newTestClient(t, egress.ClientConfig{}, res, &recordingDialer{})
	for host, want := range map[string]engine.TransportError{
		"missing.example": engine.TransportDNSNotFound,
		"temp.example":    engine.TransportDNSTemporary,
		"slow.example":    engine.TransportDNSTemporary,
	} {
		_, err := get(context.Background(), c, "http://"+host+"/", nil)
		assertKind(t, err, want)
	}
}

func TestClassifyInvalidURL(t *testing.T) {
	//lint:ignore SA1007 the URL is invalid on purpose
	_, err := url.Parse("http://[::1")
	assertKind(t, err, engine.TransportInvalidURL)
	_, err = http.NewRequest(http.MethodGet, "http://a b/", nil)
	assertKind(t, err, engine.TransportInvalidURL)

	// net/http's own errors, from a plain client that never dials here.
	plain := &http.Client{Transport: &http.Transport{DialContext: (&recordingDialer{}).Dial}}
	t.Cleanup(plain.CloseIdleConnections)
	for _, u := range []string{"ftp://example.com/", "http:///path"} {
		_, err := get(context.Background(), plain, u, nil)
		assertKind(t, err, engine.TransportInvalidURL)
	}
}

func TestClassifyRefused(t *testing.T) {
	c := newTestClient(t, egress.ClientConfig{}, nil, &recordingDialer{})
	_, err := get(context.Background(), c, "http://10.0.0.1/", nil)
	assertKind(t, err, engine.TransportDestinationRefused)
}

// TestClassifyTable covers the rules with constructed errors, shaped as
// net and net/http produce them.
func TestClassifyTable(t *testing.T) {
	opErr := func(err error) error {
		return &url.Error{Op: "Get", URL: "http://x/", Err: &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", err)}}
	}
	for name, tc := range map[string]struct {
		err  error
		want engine.TransportError
	}{
		"nil":              {nil, engine.TransportNone},
		"refused wrapped":  {fmt.Errorf("x: %w", &egress.RefusedError{Reason: "r"}), engine.TransportDestinationRefused},
		"refused over ctx": {errors.Join(context.Canceled, &egress.RefusedError{}), engine.TransportDestinationRefused},
		"canceled":         {&url.Error{Op: "Get", Err: context.Canceled}, engine.TransportCanceled},
		"deadline":         {fmt.Errorf("x: %w", context.DeadlineExceeded), engine.TransportTimeout},
		"econnrefused":     {opErr(syscall.ECONNREFUSED), engine.TransportConnectionRefused},
		"econnreset":       {opErr(syscall.ECONNRESET), engine.TransportConnectionReset},
		"econnaborted":     {opErr(syscall.ECONNABORTED), engine.TransportConnectionReset},
		"epipe":            {opErr(syscall.EPIPE), engine.TransportConnectionReset},
		"eof":              {&url.Error{Op: "Get", Err: io.EOF}, engine.TransportEOF},
		"unexpected eof":   {fmt.Errorf("body: %w", io.ErrUnexpectedEOF), engine.TransportEOF},
		"dns not found":    {&net.DNSError{IsNotFound: true}, engine.TransportDNSNotFound},
		"dns temporary":    {&net.DNSError{IsTemporary: true}, engine.TransportDNSTemporary},
		"dns timeout":      {&net.DNSError{IsTimeout: true}, engine.TransportDNSTemporary},
		"dns other":        {&net.DNSError{Err: "lame"}, engine.TransportDNSTemporary},
		"unknown CA":       {&url.Error{Op: "Get", Err: x509.UnknownAuthorityError{}}, engine.TransportTLSCertificate},
		"invalid cert":     {x509.CertificateInvalidError{Reason: x509.Expired}, engine.TransportTLSCertificate},
		"hostname":         {x509.HostnameError{Host: "x"}, engine.TransportTLSCertificate},
		"verification":     {&tls.CertificateVerificationError{Err: errors.New("bad")}, engine.TransportTLSCertificate},
		"invalid url":      {fmt.Errorf("x: %w", egress.ErrInvalidURL), engine.TransportInvalidURL},
		"invalid host":     {url.InvalidHostError("%"), engine.TransportInvalidURL},
		"net timeout":      {&net.OpError{Op: "dial", Err: timeoutErr{}}, engine.TransportTimeout},
		"too many redirs":  {&url.Error{Op: "Get", Err: egress.ErrTooManyRedirects}, engine.TransportOther},
		"other":            {errors.New("mystery"), engine.TransportOther},
	} {
		if got := egress.Classify(tc.err); got != tc.want {
			t.Errorf("%s: Classify(%v) = %v, want %v", name, tc.err, got, tc.want)
		}
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }
