package credential_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/internal/credential"
	"github.com/retrybroker/retrybroker/internal/credential/credtest"
	"github.com/retrybroker/retrybroker/internal/egress"
)

// fakeClock is a settable clock for signing times.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock(t time.Time) *fakeClock { return &fakeClock{now: t} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// sigv4FromFiles builds an aws_sigv4 credential for s3 with its key files.
func sigv4FromFiles(t testing.TB, s *credtest.S3, clock credential.Clock, mod func(*credential.SigV4Spec)) credential.Credential {
	t.Helper()
	spec := &credential.SigV4Spec{
		Region: s.Region, Service: "s3",
		AccessKeyID:     credential.SecretRef{File: s.AccessKeyFile},
		SecretAccessKey: credential.SecretRef{File: s.SecretKeyFile},
	}
	if mod != nil {
		mod(spec)
	}
	c, err := credential.New(credential.Spec{Name: "s3", Kind: credential.KindAWSSigV4, SigV4: spec}, credential.Deps{Tenant: "t", Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// attempt builds one attempt's request as the engine does (URL, Host,
// ContentLength, a replayable body, the other headers already set) and
// applies the credential last.
func attempt(t testing.TB, c credential.Credential, call *credential.Call, method, rawURL string) *http.Request {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	body := call.Body()
	req := &http.Request{
		Method: method, URL: u, Host: u.Host, Header: http.Header{},
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Body: http.NoBody,
	}
	if len(body) > 0 {
		req.ContentLength = int64(len(body))
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("Traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	req.Header.Set("X-Retry-Attempt", "1")
	if _, err := c.Apply(context.Background(), req, call); err != nil {
		t.Fatal(err)
	}
	return req
}

// send sends req and returns the status and the body.
func send(t testing.TB, client *http.Client, req *http.Request) (int, string) {
	t.Helper()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func kib(t testing.TB) []byte {
	b := make([]byte, 1024)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSigV4VersitygwAcceptsPutAndGet: versitygw, which verifies every
// signature, accepts a 1 KiB PUT signed by Apply and a GET of it, with a
// key that needs escaping and a query string.
func TestSigV4VersitygwAcceptsPutAndGet(t *testing.T) {
	s := credtest.StartS3(t)
	s.CreateBucket(t, "bucket")
	c := sigv4FromFiles(t, s, credential.SystemClock, nil)
	client := s.Client()
	body := kib(t)
	obj := s.Endpoint + "/bucket/dir/a%20b%2Bc=d.bin"

	req := attempt(t, c, credential.NewCall(body), http.MethodPut, obj)
	if code, out := send(t, client, req); code != http.StatusOK {
		t.Fatalf("PUT: %d %s", code, out)
	}
	req = attempt(t, c, credential.NewCall(nil), http.MethodGet, obj)
	code, out := send(t, client, req)
	if code != http.StatusOK || out != string(body) {
		t.Fatalf("GET: %d, %d bytes (want 200 and the %d bytes put)", code, len(out), len(body))
	}
	req = attempt(t, c, credential.NewCall(nil), http.MethodGet, s.Endpoint+"/bucket?prefix=dir%2F&list-type=2&delimiter=%2F")
	if code, out := send(t, client, req); code != http.StatusOK || !strings.Contains(out, "<Prefix>dir/</Prefix>") {
		t.Fatalf("list: %d %s", code, out)
	}
}

// TestSigV4ThroughTheBrokersEgressTransport: the broker's own egress
// client (the destination guard's transport, here allowing loopback) sends
// the signed request unchanged: versitygw accepts it.
func TestSigV4ThroughTheBrokersEgressTransport(t *testing.T) {
	s := credtest.StartS3(t)
	s.CreateBucket(t, "bucket")
	g, err := egress.NewGuard(egress.AllowPrefixes(netip.MustParsePrefix("127.0.0.1/32")))
	if err != nil {
		t.Fatal(err)
	}
	client := egress.NewClient(egress.ClientConfig{Guard: g})
	defer client.CloseIdleConnections()
	c := sigv4FromFiles(t, s, credential.SystemClock, nil)
	body := kib(t)
	obj := s.Endpoint + "/bucket/egress/a%2Fb%20c?x-id=PutObject" // sent as a/b%20c: the same S3 key
	if code, out := send(t, client, attempt(t, c, credential.NewCall(body), http.MethodPut, obj)); code != http.StatusOK {
		t.Fatalf("PUT through egress: %d %s", code, out)
	}
	code, out := send(t, client, attempt(t, c, credential.NewCall(nil), http.MethodGet, s.Endpoint+"/bucket/egress/a%2Fb%20c"))
	if code != http.StatusOK || out != string(body) {
		t.Fatalf("GET through egress: %d, %d bytes", code, len(out))
	}
}

// TestSigV4VersitygwRefusesTampering proves the verifier checks: without a
// signature, with a changed signature, with a header changed after
// signing, and with a body changed after signing, versitygw refuses.
func TestSigV4VersitygwRefusesTampering(t *testing.T) {
	s := credtest.StartS3(t)
	s.CreateBucket(t, "bucket")
	c := sigv4FromFiles(t, s, credential.SystemClock, nil)
	client := s.Client()
	obj := s.Endpoint + "/bucket/object"
	body := kib(t)

	t.Run("unsigned", func(t *testing.T) {
		req, err := http.NewRequest(http.MethodPut, obj, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if code, out := send(t, client, req); code != http.StatusForbidden {
			t.Fatalf("%d %s (want 403)", code, out)
		}
	})
	t.Run("signature", func(t *testing.T) {
		req := attempt(t, c, credential.NewCall(body), http.MethodPut, obj)
		auth := req.Header.Get("Authorization")
		last := auth[len(auth)-1]
		flip := byte('0')
		if last == '0' {
			flip = '1'
		}
		req.Header.Set("Authorization", auth[:len(auth)-1]+string(flip))
		if code, out := send(t, client, req); code != http.StatusForbidden || !strings.Contains(out, "SignatureDoesNotMatch") {
			t.Fatalf("%d %s (want 403 SignatureDoesNotMatch)", code, out)
		}
	})
	t.Run("header", func(t *testing.T) {
		req := attempt(t, c, credential.NewCall(body), http.MethodPut, obj)
		req.Header.Set("Content-Type", "text/plain") // signed: must not change after Apply
		if code, out := send(t, client, req); code != http.StatusForbidden || !strings.Contains(out, "SignatureDoesNotMatch") {
			t.Fatalf("%d %s (want 403 SignatureDoesNotMatch)", code, out)
		}
	})
	t.Run("body", func(t *testing.T) {
		req := attempt(t, c, credential.NewCall(body), http.MethodPut, obj)
		other := bytes.Clone(body)
		other[0] ^= 0xff // same length, other bytes
		req.Body = io.NopCloser(bytes.NewReader(other))
		req.GetBody = nil
		if code, out := send(t, client, req); code == http.StatusOK || !strings.Contains(out, "XAmzContentSHA256Mismatch") {
			t.Fatalf("%d %s (want XAmzContentSHA256Mismatch)", code, out)
		}
	})
}

// retryProxy is a loopback reverse proxy in front of the S3 server that
// answers its first request 503 with Retry-After: 2 and forwards the rest,
// keeping the Host header the client signed. It records the X-Amz-Date of
// every request.
type retryProxy struct {
	srv   *httptest.Server
	n     atomic.Int32
	mu    sync.Mutex
	dates []string
}

func startRetryProxy(t *testing.T, s *credtest.S3) *retryProxy {
	t.Helper()
	target, err := url.Parse(s.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target) // keeps the incoming Host
	rp.Transport = s.Client().Transport
	p := &retryProxy{}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.dates = append(p.dates, r.Header.Get("X-Amz-Date"))
		p.mu.Unlock()
		if p.n.Add(1) == 1 {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// TestSigV4RetryAfterWaitIsSignedAgain is the target: a retry
// after a 2 s wait carries a new X-Amz-Date and a signature the verifier
// accepts. It runs the engine's loop at this level (apply, send, wait as
// told, apply, send); the wait is the signing clock's, advanced by the
// Retry-After the proxy sent, not a sleep.
func TestSigV4RetryAfterWaitIsSignedAgain(t *testing.T) {
	s := credtest.StartS3(t)
	s.CreateBucket(t, "bucket")
	p := startRetryProxy(t, s)
	clock := newFakeClock(time.Now())
	c := sigv4FromFiles(t, s, clock, nil)
	client := s.Client()
	call := credential.NewCall(kib(t))
	obj := p.srv.URL + "/bucket/retried"

	first := attempt(t, c, call, http.MethodPut, obj)
	resp, err := client.Do(first)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("first attempt: %d (want the proxy's 503)", resp.StatusCode)
	}
	wait, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if err != nil || wait != 2 {
		t.Fatalf("Retry-After %q", resp.Header.Get("Retry-After"))
	}
	clock.Advance(time.Duration(wait) * time.Second)

	second := attempt(t, c, call, http.MethodPut, obj)
	if code, out := send(t, client, second); code != http.StatusOK {
		t.Fatalf("second attempt: %d %s (want 200 from versitygw)", code, out)
	}
	p.mu.Lock()
	dates := p.dates
	p.mu.Unlock()
	if len(dates) != 2 || dates[0] == "" || dates[0] == dates[1] {
		t.Fatalf("X-Amz-Date of the attempts %q: want two, different", dates)
	}
	d0, err0 := time.Parse("20060102T150405Z", dates[0])
	d1, err1 := time.Parse("20060102T150405Z", dates[1])
	if err0 != nil || err1 != nil || d1.Sub(d0) != 2*time.Second {
		t.Fatalf("X-Amz-Date %q then %q: want 2 s apart", dates[0], dates[1])
	}
	if first.Header.Get("Authorization") == second.Header.Get("Authorization") {
		t.Fatal("the retry re-sent the first attempt's signature")
	}
}

// TestSigV4StaleSignatureRefused is the bug the issue fixes: a signature
// made once per call and re-sent after a wait longer than the verifier's
// window (15 minutes for S3) is refused; signing again at the attempt is
// accepted.
func TestSigV4StaleSignatureRefused(t *testing.T) {
	s := credtest.StartS3(t)
	s.CreateBucket(t, "bucket")
	clock := newFakeClock(time.Now().Add(-20 * time.Minute)) // the first attempt, 20 minutes ago
	c := sigv4FromFiles(t, s, clock, nil)
	client := s.Client()
	call := credential.NewCall(kib(t))
	obj := s.Endpoint + "/bucket/stale"

	stale := attempt(t, c, call, http.MethodPut, obj)
	if code, out := send(t, client, stale); code != http.StatusForbidden || !strings.Contains(out, "RequestTimeTooSkewed") {
		t.Fatalf("re-sent 20-minute-old signature: %d %s (want 403 RequestTimeTooSkewed)", code, out)
	}
	clock.Advance(20 * time.Minute)
	fresh := attempt(t, c, call, http.MethodPut, obj)
	if code, out := send(t, client, fresh); code != http.StatusOK {
		t.Fatalf("signed at the attempt: %d %s", code, out)
	}
}

// TestSigV4RotatedKeyFileUsedByNextAttempt: a secret key file rewritten
// with another value is used by the next attempt after the file check.
func TestSigV4RotatedKeyFileUsedByNextAttempt(t *testing.T) {
	s := credtest.StartS3(t)
	s.CreateBucket(t, "bucket")
	dir := t.TempDir()
	sk := filepath.Join(dir, "secret")
	if err := os.WriteFile(sk, []byte("not-the-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	clock := newFakeClock(time.Now())
	c := sigv4FromFiles(t, s, clock, func(spec *credential.SigV4Spec) { spec.SecretAccessKey = credential.SecretRef{File: sk} })
	client := s.Client()
	obj := s.Endpoint + "/bucket/rotated"

	req := attempt(t, c, credential.NewCall(kib(t)), http.MethodPut, obj)
	if code, out := send(t, client, req); code != http.StatusForbidden || !strings.Contains(out, "SignatureDoesNotMatch") {
		t.Fatalf("wrong secret: %d %s (want 403)", code, out)
	}
	if err := os.WriteFile(sk+".new", []byte(s.SecretAccessKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(sk+".new", sk); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	req = attempt(t, c, credential.NewCall(kib(t)), http.MethodPut, obj)
	if code, out := send(t, client, req); code != http.StatusOK {
		t.Fatalf("rotated secret: %d %s", code, out)
	}
}

// TestSigV4UnsignedPayload: with unsigned_payload the hash header says
// UNSIGNED-PAYLOAD and S3 accepts the request.
func TestSigV4UnsignedPayload(t *testing.T) {
	s := credtest.StartS3(t)
	s.CreateBucket(t, "bucket")
	c := sigv4FromFiles(t, s, credential.SystemClock, func(spec *credential.SigV4Spec) { spec.UnsignedPayload = true })
	req := attempt(t, c, credential.NewCall(kib(t)), http.MethodPut, s.Endpoint+"/bucket/unsigned")
	if got := req.Header.Get("X-Amz-Content-Sha256"); got != "UNSIGNED-PAYLOAD" {
		t.Fatalf("X-Amz-Content-Sha256 %q", got)
	}
	if code, out := send(t, s.Client(), req); code != http.StatusOK {
		t.Fatalf("%d %s", code, out)
	}
}

// TestSigV4ChainFromEnvironment: with no key files, keys come from the
// SDK's chain (here the environment) and versitygw accepts the signature.
func TestSigV4ChainFromEnvironment(t *testing.T) {
	s := credtest.StartS3(t)
	s.CreateBucket(t, "bucket")
	env := awsEnv(t)
	env["AWS_ACCESS_KEY_ID"] = s.AccessKeyID
	env["AWS_SECRET_ACCESS_KEY"] = s.SecretAccessKey
	dials := &recordingDialer{}
	c := sigv4FromChain(t, s.Region, env, dials)
	req := attempt(t, c, credential.NewCall(kib(t)), http.MethodPut, s.Endpoint+"/bucket/env")
	if code, out := send(t, s.Client(), req); code != http.StatusOK {
		t.Fatalf("%d %s", code, out)
	}
	if got := dials.addrs(); len(got) != 0 {
		t.Fatalf("the chain dialled %q", got)
	}
}

// TestSigV4ChainFromSharedCredentialsFile: keys from the shared
// credentials file (AWS_SHARED_CREDENTIALS_FILE, profile AWS_PROFILE).
func TestSigV4ChainFromSharedCredentialsFile(t *testing.T) {
	s := credtest.StartS3(t)
	s.CreateBucket(t, "bucket")
	env := awsEnv(t)
	file := filepath.Join(t.TempDir(), "credentials")
	ini := "[broker]\naws_access_key_id = " + s.AccessKeyID + "\naws_secret_access_key = " + s.SecretAccessKey + "\n"
	if err := os.WriteFile(file, []byte(ini), 0o600); err != nil {
		t.Fatal(err)
	}
	env["AWS_SHARED_CREDENTIALS_FILE"] = file
	env["AWS_PROFILE"] = "broker"
	dials := &recordingDialer{}
	c := sigv4FromChain(t, s.Region, env, dials)
	req := attempt(t, c, credential.NewCall(kib(t)), http.MethodPut, s.Endpoint+"/bucket/shared")
	if code, out := send(t, s.Client(), req); code != http.StatusOK {
		t.Fatalf("%d %s", code, out)
	}
	if got := dials.addrs(); len(got) != 0 {
		t.Fatalf("the chain dialled %q", got)
	}
}

// TestSigV4ChainWithoutCredentialsFailsAtLoad: with nothing in the
// environment or the shared files, loading fails with a clear error and
// nothing is dialled: no EC2 metadata service (169.254.169.254), no
// container endpoint. The dialer given to the chain records and refuses.
func TestSigV4ChainWithoutCredentialsFailsAtLoad(t *testing.T) {
	env := awsEnv(t)
	env["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = "http://169.254.170.23/v1/credentials"
	env["AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"] = "/v2/credentials/x"
	dials := &recordingDialer{}
	_, err := newSigV4Chain("us-east-1", env, dials)
	if err == nil || !strings.Contains(err.Error(), "no keys in the environment") {
		t.Fatalf("New: %v (want no keys)", err)
	}
	if got := dials.addrs(); len(got) != 0 {
		t.Fatalf("the chain dialled %q", got)
	}
}

// TestSigV4ChainRefusesCredentialProcess: a profile whose keys come from
// credential_process is refused at load; the process is never run.
func TestSigV4ChainRefusesCredentialProcess(t *testing.T) {
	env := awsEnv(t)
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	ini := "[default]\ncredential_process = /usr/bin/touch " + marker + "\n"
	if err := os.WriteFile(env["AWS_CONFIG_FILE"], []byte(ini), 0o600); err != nil {
		t.Fatal(err)
	}
	dials := &recordingDialer{}
	_, err := newSigV4Chain("us-east-1", env, dials)
	if err == nil || !strings.Contains(err.Error(), "not supported") {
		t.Fatalf("New: %v (want not supported)", err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("credential_process was run")
	}
}

// TestSigV4ChainWebIdentityGoesThroughTheTokenClient: a web identity token
// file with a role makes the chain ask STS through the client the broker
// gave (the destination guard); here it records and refuses, so the
// attempt is not signed and says why, without the token.
func TestSigV4ChainWebIdentityGoesThroughTheTokenClient(t *testing.T) {
	env := awsEnv(t)
	tokenFile := filepath.Join(t.TempDir(), "token")
	const token = "eyJhbGciOiJub25lIn0.web-identity-secret.x"
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	env["AWS_WEB_IDENTITY_TOKEN_FILE"] = tokenFile
	env["AWS_ROLE_ARN"] = "arn:aws:iam::123456789012:role/broker"
	dials := &recordingDialer{}
	c := sigv4FromChain(t, "eu-west-1", env, dials)
	req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1:1/x", nil)
	_, err := c.Apply(context.Background(), req, credential.NewCall(nil))
	if !credential.IsUnavailable(err) {
		t.Fatalf("Apply: %v (want unavailable)", err)
	}
	if strings.Contains(err.Error(), token) {
		t.Fatalf("the error shows the token: %v", err)
	}
	got := dials.addrs()
	if len(got) == 0 || !strings.HasPrefix(got[0], "sts.eu-west-1.amazonaws.com:") {
		t.Fatalf("dials %q: want STS, through the token client", got)
	}
}

// TestSigV4ChainWebIdentityExchangedAtSTS: the web identity token is
// exchanged at STS (a loopback stand-in, AWS_ENDPOINT_URL_STS) for session
// keys, which sign the attempt with X-Amz-Security-Token; the exchange is
// cached. (versitygw refuses session tokens for its root account, so the
// signature itself is verified by the tests with static keys.)
func TestSigV4ChainWebIdentityExchangedAtSTS(t *testing.T) {
	const ak, sk = "ASIAEXAMPLEWEBIDENTITY", "web-identity-session-secret"
	const token, role, session = "eyJhbGciOiJub25lIn0.web-identity.x", "arn:aws:iam::123456789012:role/broker", "FwoGZXIvYXdzEXAMPLESESSION"
	var exchanges atomic.Int32
	sts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil || r.Form.Get("Action") != "AssumeRoleWithWebIdentity" ||
			r.Form.Get("WebIdentityToken") != token || r.Form.Get("RoleArn") != role {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		exchanges.Add(1)
		w.Header().Set("Content-Type", "text/xml")
		_, _ = io.WriteString(w, `<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><AssumeRoleWithWebIdentityResult>`+
			`<Credentials><AccessKeyId>`+ak+`</AccessKeyId><SecretAccessKey>`+sk+`</SecretAccessKey>`+
			`<SessionToken>`+session+`</SessionToken><Expiration>`+time.Now().Add(time.Hour).UTC().Format(time.RFC3339)+`</Expiration></Credentials>`+
			`<AssumedRoleUser><Arn>`+role+`/x</Arn><AssumedRoleId>AROA:x</AssumedRoleId></AssumedRoleUser>`+
			`</AssumeRoleWithWebIdentityResult><ResponseMetadata><RequestId>1</RequestId></ResponseMetadata></AssumeRoleWithWebIdentityResponse>`)
	}))
	defer sts.Close()
	env := awsEnv(t)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	env["AWS_WEB_IDENTITY_TOKEN_FILE"] = tokenFile
	env["AWS_ROLE_ARN"] = role
	env["AWS_ENDPOINT_URL_STS"] = sts.URL
	dials := &recordingDialer{}
	c := sigv4FromChain(t, "us-east-1", env, dials)
	for range 2 {
		req := attempt(t, c, credential.NewCall(kib(t)), http.MethodPut, "http://127.0.0.1:1/bucket/web-identity")
		if got := req.Header.Get("X-Amz-Security-Token"); got != session {
			t.Fatalf("X-Amz-Security-Token %q", got)
		}
		auth := req.Header.Get("Authorization")
		if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential="+ak+"/") || !strings.Contains(auth, "x-amz-security-token") {
			t.Fatalf("not signed with the session keys and token: %s", auth)
		}
	}
	if n := exchanges.Load(); n != 1 {
		t.Fatalf("%d exchanges at STS for two attempts (want 1, cached)", n)
	}
	if got := dials.addrs(); len(got) != 0 {
		t.Fatalf("the chain dialled %q", got)
	}
}

// recordingDialer dials loopback IP addresses; it records every other
// address it is asked to dial and refuses it (before any DNS lookup): no
// test connection leaves the machine.
type recordingDialer struct {
	mu   sync.Mutex
	seen []string
}

func (d *recordingDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if host, _, err := net.SplitHostPort(addr); err == nil {
		if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
			var nd net.Dialer
			return nd.DialContext(ctx, network, addr)
		}
	}
	d.mu.Lock()
	d.seen = append(d.seen, addr)
	d.mu.Unlock()
	return nil, errors.New("test dialer: refused " + addr)
}

func (d *recordingDialer) addrs() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.seen...)
}

// sigv4FromChain builds an aws_sigv4 credential on the SDK's chain, whose
// token client dials through d.
func sigv4FromChain(t *testing.T, region string, env map[string]string, d *recordingDialer) credential.Credential {
	t.Helper()
	c, err := newSigV4Chain(region, env, d)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// newSigV4Chain is New for an aws_sigv4 credential on the chain.
func newSigV4Chain(region string, env map[string]string, d *recordingDialer) (credential.Credential, error) {
	deps := credential.Deps{
		Tenant: "t",
		Getenv: func(k string) string { return env[k] },
		TokenClient: func([]string) (*http.Client, error) {
			return &http.Client{Transport: &http.Transport{Proxy: nil, DialContext: d.dial}}, nil
		},
	}
	return credential.New(credential.Spec{
		Name: "s3", Kind: credential.KindAWSSigV4,
		SigV4: &credential.SigV4Spec{Region: region, Service: "s3"},
	}, deps)
}

// awsEnv is an environment for the chain with nothing set but shared
// files that do not exist, so the machine's own ~/.aws is never read.
func awsEnv(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	return map[string]string{
		"AWS_CONFIG_FILE":             filepath.Join(dir, "no-config"),
		"AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "no-credentials"),
	}
}

// BenchmarkApplySigV4_1KiB is one attempt's SigV4 signature over a 1 KiB
// body, in parallel, side by side with the header kind: "attempt" reuses
// the call (the body's hash is made once per call, as in the engine);
// "call" makes a new call each time (hash included).
func BenchmarkApplySigV4_1KiB(b *testing.B) {
	dir := b.TempDir()
	ak, sk := writeFile(b, dir, "ak", testAK), writeFile(b, dir, "sk", testSK)
	sig, err := credential.New(credential.Spec{Name: "s", Kind: credential.KindAWSSigV4, SigV4: &credential.SigV4Spec{
		Region: "us-east-1", Service: "s3",
		AccessKeyID: credential.SecretRef{File: ak}, SecretAccessKey: credential.SecretRef{File: sk},
	}}, credential.Deps{Tenant: "t"})
	if err != nil {
		b.Fatal(err)
	}
	header, err := credential.New(credential.Spec{Name: "h", Kind: credential.KindHeader, Header: &credential.HeaderSpec{
		Name: "Authorization", Prefix: "Bearer ", Value: credential.SecretRef{File: sk},
	}}, credential.Deps{Tenant: "t"})
	if err != nil {
		b.Fatal(err)
	}
	body := bytes.Repeat([]byte("x"), 1024)
	for _, bc := range []struct {
		name    string
		cred    credential.Credential
		perCall bool
	}{{"sigv4/attempt", sig, false}, {"sigv4/call", sig, true}, {"header/attempt", header, false}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				req, _ := http.NewRequest(http.MethodPut, "https://bucket.s3.us-east-1.amazonaws.com/dir/object.bin?x-id=PutObject", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/octet-stream")
				req.Header.Set("Traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
				call := credential.NewCall(body)
				ctx := context.Background()
				for pb.Next() {
					if bc.perCall {
						call = credential.NewCall(body)
					}
					if _, err := bc.cred.Apply(ctx, req, call); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
