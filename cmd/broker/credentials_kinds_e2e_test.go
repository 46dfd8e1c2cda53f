package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
	"github.com/retrybroker/retrybroker/internal/credential/credtest"
)

// The tests in this file hold issue 19's targets for the renewable and
// signing credential kinds through a real broker process, against real
// servers where users have them: ory/hydra (OAuth2, credtest.StartHydra)
// and versitygw (an S3 server that verifies SigV4, credtest.StartS3).

// tokenCounter is a loopback reverse proxy in front of hydra's public
// listener that counts the requests to its token endpoint.
type tokenCounter struct {
	*httptest.Server
	n atomic.Int64
	// delay holds each token request this long before forwarding it, as
	// a remote token endpoint would: the window in which concurrent
	// callers find the cache empty.
	delay time.Duration
}

// TokenURL is the token endpoint through the proxy.
func (c *tokenCounter) TokenURL() string { return c.URL + "/oauth2/token" }

func newTokenCounter(t *testing.T, h *credtest.Hydra, delay time.Duration) *tokenCounter {
	t.Helper()
	target, err := url.Parse(strings.TrimSuffix(h.TokenURL, "/oauth2/token"))
	if err != nil {
		t.Fatal(err)
	}
	c := &tokenCounter{delay: delay}
	rp := &httputil.ReverseProxy{
		Rewrite:   func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport: credtest.LoopbackClient().Transport,
	}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/oauth2/token" {
			c.n.Add(1)
			time.Sleep(c.delay)
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(c.Close)
	return c
}

// introspected is one bearer token an introspecting upstream received and
// what hydra said of it then.
type introspected struct {
	token  string
	active bool
}

// introspectingUpstream is a loopback resource server that asks hydra
// about every bearer token it receives (RFC 7662), answers 401 to an
// inactive one, and otherwise answers first[i] to its i-th request (then
// 200).
type introspectingUpstream struct {
	*httptest.Server
	mu   sync.Mutex
	seen []introspected
}

func newIntrospectingUpstream(t *testing.T, h *credtest.Hydra, first ...func(w http.ResponseWriter)) *introspectingUpstream {
	t.Helper()
	u := &introspectingUpstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		in, err := h.Introspect(tok)
		active := err == nil && in.Active
		u.mu.Lock()
		i := len(u.seen)
		u.seen = append(u.seen, introspected{tok, active})
		u.mu.Unlock()
		switch {
		case !active:
			w.WriteHeader(http.StatusUnauthorized)
		case i < len(first):
			first[i](w)
		default:
			w.WriteHeader(http.StatusOK)
		}
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *introspectingUpstream) tokens() []introspected {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]introspected(nil), u.seen...)
}

// unavailableFor answers 503 with Retry-After: secs.
func unavailableFor(secs int) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		w.WriteHeader(http.StatusServiceUnavailable)
	}
}

// oauth2Creds is an oauth2_client_credentials credential named api for
// hydra's client, at tokenURL.
func oauth2Creds(h *credtest.Hydra, tokenURL string) string {
	return "      api: {kind: oauth2_client_credentials, token_url: " + tokenURL + ", client_id: " + h.ClientID +
		", client_secret_file: " + h.ClientSecretFile + ", scopes: [" + credtest.HydraScope + "], auth_style: header," +
		" allow_destinations: [\"127.0.0.1/32\"]}\n"
}

const loopbackPolicy = "      default: {credential: api, allow_destinations: [\"127.0.0.1/32\"]}\n"

// TestCredentialKindsOAuth2RetryCarriesNewToken: with hydra's tokens
// living 2 s, a retry after a 3 s Retry-After carries a new token, which
// hydra said was active when the upstream asked; the first attempt's
// token is inactive by then.
func TestCredentialKindsOAuth2RetryCarriesNewToken(t *testing.T) {
	h := credtest.StartHydra(t, credtest.HydraConfig{AccessTokenTTL: 2 * time.Second})
	tc := newTokenCounter(t, h, 0)
	up := newIntrospectingUpstream(t, h, unavailableFor(3))
	p := startProc(t, "--config", writeConfig(t, credBrokerConfig(oauth2Creds(h, tc.TokenURL()), loopbackPolicy)))

	res, err := p.executeCred(t, "", up.URL+"/r")
	if err != nil || res.GetOutcome() != rbv1.Outcome_OUTCOME_SUCCESS {
		t.Fatalf("execute: %v %v", err, res.GetOutcome())
	}
	a := res.GetAttempts()
	seen := up.tokens()
	if len(a) != 2 || a[0].GetStatusCode() != http.StatusServiceUnavailable || a[1].GetStatusCode() != http.StatusOK || len(seen) != 2 {
		t.Fatalf("attempts %v, upstream saw %d requests: want 503 then 200", a, len(seen))
	}
	if waited := a[1].GetWaited().AsDuration(); waited < 3*time.Second {
		t.Fatalf("the retry waited %v, want Retry-After's 3s", waited)
	}
	if !seen[0].active || !seen[1].active {
		t.Fatalf("hydra said %+v: every attempt's token should have been active when sent", []bool{seen[0].active, seen[1].active})
	}
	if seen[0].token == "" || seen[0].token == seen[1].token {
		t.Fatal("the retry carried the first attempt's token")
	}
	if in, err := h.Introspect(seen[0].token); err != nil || in.Active {
		t.Fatalf("the first token: %+v %v, want inactive (expired) by now", in, err)
	}
	if n := tc.n.Load(); n != 2 {
		t.Fatalf("%d token requests, want 2 (one per token)", n)
	}
}

// TestCredentialKindsOAuth2ThousandConcurrentOneFetch: 1,000 concurrent
// Executes, released together behind a barrier, with an empty token
// cache, make exactly one token request at hydra, and all succeed. The
// token endpoint is held 500 ms (a remote one's round trip), and the
// policy lets all 1,000 reach the credential at once: learning off (its
// first-window scout and slow start would otherwise send them a few at a
// time) and a 64 KiB max_response_body (the body budget then admits 4,096
// calls at once, not 64). With every caller starting its own request
// instead of sharing one, this test fails (checked: 64+ requests).
func TestCredentialKindsOAuth2ThousandConcurrentOneFetch(t *testing.T) {
	const calls = 1000
	h := credtest.StartHydra(t, credtest.HydraConfig{})
	tc := newTokenCounter(t, h, 500*time.Millisecond)
	var served atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
			served.Add(1)
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(up.Close)
	p := startProc(t, "--config", writeConfig(t, credBrokerConfig(oauth2Creds(h, tc.TokenURL()),
		"      default: {credential: api, max_retries: 0, attempt_timeout: 2m, total_timeout: 5m, budget: {disabled: true}, learning: {disabled: true}, max_response_body: 64KiB, allow_destinations: [\"127.0.0.1/32\"]}\n")))

	ctx, cancel := context.WithTimeout(withKey(context.Background(), credTenantKey), 5*time.Minute)
	defer cancel()
	start := make(chan struct{})
	errs := make(chan error, calls)
	var wg sync.WaitGroup
	for range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, err := p.client.Execute(ctx, &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Method: "GET", Url: up.URL + "/c"}})
			if err == nil && res.GetOutcome() != rbv1.Outcome_OUTCOME_SUCCESS {
				err = fmt.Errorf("outcome %v, attempts %v", res.GetOutcome(), res.GetAttempts())
			}
			errs <- err
		}()
	}
	began := time.Now()
	close(start)
	wg.Wait()
	close(errs)
	failed := 0
	var first error
	for err := range errs {
		if err != nil {
			if failed == 0 {
				first = err
			}
			failed++
		}
	}
	t.Logf("%d concurrent Executes took %v", calls, time.Since(began))
	if failed > 0 {
		t.Fatalf("%d of %d calls failed; first: %v", failed, calls, first)
	}
	if n := tc.n.Load(); n != 1 {
		t.Fatalf("%d token requests for %d concurrent calls, want 1", n, calls)
	}
	if n := served.Load(); n != calls {
		t.Fatalf("the upstream served %d bearer requests, want %d", n, calls)
	}
}

// TestCredentialKindsOAuth2RevokedTokenRepeatsOnce: a token revoked at
// hydra between calls gets a 401 from the introspecting upstream; the
// broker invalidates it and repeats the attempt once with a new token,
// which succeeds: 2 attempts (the first REASON_CREDENTIAL_REJECTED), one
// more token request.
func TestCredentialKindsOAuth2RevokedTokenRepeatsOnce(t *testing.T) {
	h := credtest.StartHydra(t, credtest.HydraConfig{})
	tc := newTokenCounter(t, h, 0)
	up := newIntrospectingUpstream(t, h)
	p := startProc(t, "--config", writeConfig(t, credBrokerConfig(oauth2Creds(h, tc.TokenURL()), loopbackPolicy)))

	if res, err := p.executeCred(t, "", up.URL+"/1"); err != nil || res.GetOutcome() != rbv1.Outcome_OUTCOME_SUCCESS || len(res.GetAttempts()) != 1 {
		t.Fatalf("first call: %v %v", err, res)
	}
	fetches := tc.n.Load()
	old := up.tokens()[0].token
	if err := h.Revoke(old); err != nil {
		t.Fatal(err)
	}
	if in, err := h.Introspect(old); err != nil || in.Active {
		t.Fatalf("revoked token: %+v %v, want inactive", in, err)
	}

	res, err := p.executeCred(t, "", up.URL+"/2")
	if err != nil || res.GetOutcome() != rbv1.Outcome_OUTCOME_SUCCESS {
		t.Fatalf("after the revocation: %v %v", err, res)
	}
	a := res.GetAttempts()
	if len(a) != 2 || a[0].GetStatusCode() != http.StatusUnauthorized ||
		a[0].GetDecision().GetReason() != rbv1.Reason_REASON_CREDENTIAL_REJECTED || a[1].GetStatusCode() != http.StatusOK {
		t.Fatalf("attempts %v: want 401 (REASON_CREDENTIAL_REJECTED) then 200", a)
	}
	seen := up.tokens()
	if len(seen) != 3 || seen[1] != (introspected{old, false}) || !seen[2].active || seen[2].token == old {
		t.Fatalf("upstream saw %+v: want the revoked token, then a new active one", seen)
	}
	if n := tc.n.Load(); n != fetches+1 {
		t.Fatalf("token requests %d, want exactly one more than %d", n, fetches)
	}
}

// TestCredentialKindsOAuth2TokenEndpointDown: a token_url at a closed
// loopback port ends the call with OUTCOME_CREDENTIALS_UNAVAILABLE
// quickly, nothing reaches the upstream, the error names the credential
// and not the secret, and /metrics counts the failed fetch and the
// unavailable call.
func TestCredentialKindsOAuth2TokenEndpointDown(t *testing.T) {
	const secret = "client-secret-never-shown-4d1e"
	dir := t.TempDir()
	writeFileAtomic(t, filepath.Join(dir, "client"), secret)
	up := newHeaderUpstream(t)
	closed := "http://" + freePort(t) + "/oauth2/token"
	metricsAddr := freePort(t)
	p := startProc(t, "--metrics-listen", metricsAddr, "--config", writeConfig(t, credBrokerConfig(
		"      api: {kind: oauth2_client_credentials, token_url: "+closed+", client_id: broker, client_secret_file: "+
			filepath.Join(dir, "client")+", allow_destinations: [\"127.0.0.1/32\"]}\n", loopbackPolicy)))

	began := time.Now()
	res, err := p.executeCred(t, "", up.URL+"/x")
	took := time.Since(began)
	if err != nil || res.GetOutcome() != rbv1.Outcome_OUTCOME_CREDENTIALS_UNAVAILABLE {
		t.Fatalf("%v %v, want OUTCOME_CREDENTIALS_UNAVAILABLE", err, res)
	}
	if took > 5*time.Second {
		t.Fatalf("the call took %v with the token endpoint refusing connections", took)
	}
	t.Logf("unavailable after %v", took)
	if up.count() != 0 {
		t.Fatalf("the upstream received %d requests", up.count())
	}
	a := res.GetAttempts()
	if len(a) != 1 || a[0].GetDecision().GetReason() != rbv1.Reason_REASON_CREDENTIALS_UNAVAILABLE ||
		!strings.Contains(a[0].GetErrorMessage(), "credential api") || strings.Contains(res.String(), secret) {
		t.Fatalf("attempts %v: want one, naming the credential, without the secret", a)
	}
	m := metricsText(t, metricsAddr)
	for _, want := range []string{
		`retrybroker_credential_token_fetches_total{credential="api",result="error",tenant="t1"}`,
		`retrybroker_credential_unavailable_total{credential="api",tenant="t1"}`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(m, secret) || strings.Contains(p.logs.String(), secret) {
		t.Fatal("the client secret reached the metrics or the logs")
	}
}

// amzDateProxy is a loopback reverse proxy in front of the S3 server that
// keeps the Host the broker signed, records every request's X-Amz-Date,
// and answers the first request 503 with Retry-After: 2 itself.
type amzDateProxy struct {
	*httptest.Server
	mu    sync.Mutex
	dates []string
}

func newAmzDateProxy(t *testing.T, s3 *credtest.S3) *amzDateProxy {
	t.Helper()
	target, err := url.Parse(s3.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	p := &amzDateProxy{}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = r.In.Host // the signed host
		},
		Transport: credtest.LoopbackClient().Transport,
	}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.dates = append(p.dates, r.Header.Get("X-Amz-Date"))
		n := len(p.dates)
		p.mu.Unlock()
		if n == 1 {
			_, _ = io.Copy(io.Discard, r.Body)
			unavailableFor(2)(w)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.Close)
	return p
}

// TestCredentialKindsSigV4RetryAfterTwoSeconds: a PUT of 1 KiB to a real
// S3 server (versitygw, which verifies every signature and the payload
// hash) through a broker with an aws_sigv4 credential: the first attempt
// gets 503 with Retry-After: 2, the retry carries a new X-Amz-Date at
// least 2 s later and is accepted; a GET through the broker reads the same
// bytes back.
func TestCredentialKindsSigV4RetryAfterTwoSeconds(t *testing.T) {
	s3 := credtest.StartS3(t)
	s3.CreateBucket(t, "bkt")
	px := newAmzDateProxy(t, s3)
	p := startProc(t, "--config", writeConfig(t, credBrokerConfig(
		"      api: {kind: aws_sigv4, service: s3, region: "+s3.Region+", access_key_id_file: "+s3.AccessKeyFile+
			", secret_access_key_file: "+s3.SecretKeyFile+"}\n",
		"      default: {credential: api, retry_unsafe_methods: true, allow_destinations: [\"127.0.0.1/32\"]}\n")))

	body := make([]byte, 1024)
	_, _ = rand.Read(body)
	res, err := p.client.Execute(withKey(t.Context(), credTenantKey), &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{
		Method: "PUT", Url: px.URL + "/bkt/obj.bin", Body: body,
	}})
	if err != nil || res.GetOutcome() != rbv1.Outcome_OUTCOME_SUCCESS {
		t.Fatalf("PUT: %v %v", err, res)
	}
	a := res.GetAttempts()
	if len(a) != 2 || a[0].GetStatusCode() != http.StatusServiceUnavailable || a[1].GetStatusCode() != http.StatusOK {
		t.Fatalf("attempts %v: want 503 then 200 from versitygw", a)
	}
	px.mu.Lock()
	dates := append([]string(nil), px.dates...)
	px.mu.Unlock()
	if len(dates) != 2 {
		t.Fatalf("X-Amz-Date values %q, want two", dates)
	}
	d0, err0 := time.Parse("20060102T150405Z", dates[0])
	d1, err1 := time.Parse("20060102T150405Z", dates[1])
	if err0 != nil || err1 != nil || d1.Sub(d0) < 2*time.Second {
		t.Fatalf("X-Amz-Date %q then %q: want a new one at least 2s later", dates[0], dates[1])
	}

	res, err = p.executeCred(t, "", px.URL+"/bkt/obj.bin")
	if err != nil || res.GetOutcome() != rbv1.Outcome_OUTCOME_SUCCESS || res.GetResponse().GetStatusCode() != http.StatusOK {
		t.Fatalf("GET: %v %v", err, res)
	}
	if !bytes.Equal(res.GetResponse().GetBody(), body) {
		t.Fatalf("GET returned %d bytes, not the %d bytes put", len(res.GetResponse().GetBody()), len(body))
	}
	// Independent check: versitygw read back the object the broker put.
	if code, got, err := s3.Do(http.MethodGet, "/bkt/obj.bin", nil); err != nil || code != http.StatusOK || !bytes.Equal(got, body) {
		t.Fatalf("versitygw directly: %d %v, %d bytes", code, err, len(got))
	}
}

// verifyEd25519Signature checks r's RFC 9421 signature sig1 with pub,
// for a request without a body or Content-Type (the default components
// are then "@method" and "@target-uri"), written from the RFC (2.2, 2.5,
// 3.2), not from the signer. It returns the created parameter.
func verifyEd25519Signature(r *http.Request, pub ed25519.PublicKey) (int64, error) {
	rawInput := strings.Join(r.Header.Values("Signature-Input"), ", ")
	params, ok := strings.CutPrefix(rawInput, "sig1=")
	if !ok {
		return 0, fmt.Errorf("Signature-Input %q: no sig1", rawInput)
	}
	inputs, err := httpsfv.UnmarshalDictionary(r.Header.Values("Signature-Input"))
	if err != nil {
		return 0, err
	}
	m, _ := inputs.Get("sig1")
	il, ok := m.(httpsfv.InnerList)
	if !ok || len(inputs.Names()) != 1 {
		return 0, errors.New("Signature-Input is not one inner list")
	}
	var comps []string
	for _, it := range il.Items {
		s, _ := it.Value.(string)
		comps = append(comps, s)
	}
	if strings.Join(comps, " ") != "@method @target-uri" {
		return 0, fmt.Errorf("covered components %q, want the defaults for a GET without a body", comps)
	}
	created, _ := il.Params.Get("created")
	c, ok := created.(int64)
	if !ok {
		return 0, errors.New("no created parameter")
	}
	if alg, _ := il.Params.Get("alg"); alg != "ed25519" {
		return 0, fmt.Errorf("alg %v", alg)
	}
	sigs, err := httpsfv.UnmarshalDictionary(r.Header.Values("Signature"))
	if err != nil {
		return 0, err
	}
	sm, _ := sigs.Get("sig1")
	sigItem, ok := sm.(httpsfv.Item)
	if !ok {
		return 0, errors.New("Signature sig1 is not an item")
	}
	sig, ok := sigItem.Value.([]byte)
	if !ok {
		return 0, errors.New("Signature sig1 is not a byte sequence")
	}
	base := "\"@method\": " + r.Method + "\n" +
		"\"@target-uri\": http://" + r.Host + r.RequestURI + "\n" +
		"\"@signature-params\": " + params
	if !ed25519.Verify(pub, []byte(base), sig) {
		return 0, fmt.Errorf("the signature does not verify over\n%s", base)
	}
	return c, nil
}

// TestCredentialKindsHTTPSignatureRetry: an ed25519 http_signature
// credential; the upstream verifies every request's signature with the
// public key and answers the first 503 with Retry-After: 2: both attempts
// verify, and their created parameters differ.
func TestCredentialKindsHTTPSignatureRetry(t *testing.T) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "ed25519.pem")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var created []int64
	var failures []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := verifyEd25519Signature(r, pub)
		mu.Lock()
		n := len(created) + len(failures)
		if err != nil {
			failures = append(failures, err.Error())
		} else {
			created = append(created, c)
		}
		mu.Unlock()
		switch {
		case err != nil:
			w.WriteHeader(http.StatusUnauthorized)
		case n == 0:
			unavailableFor(2)(w)
		default:
			w.WriteHeader(http.StatusOK)
		}
	}))
	t.Cleanup(up.Close)
	p := startProc(t, "--config", writeConfig(t, credBrokerConfig(
		"      api: {kind: http_signature, algorithm: ed25519, key_id: k-ed, key_file: "+keyFile+"}\n", loopbackPolicy)))

	res, err := p.executeCred(t, "", up.URL+"/hook?x=1")
	if err != nil || res.GetOutcome() != rbv1.Outcome_OUTCOME_SUCCESS {
		t.Fatalf("execute: %v %v", err, res)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(failures) > 0 {
		t.Fatalf("the upstream could not verify: %q", failures)
	}
	if a := res.GetAttempts(); len(a) != 2 || len(created) != 2 {
		t.Fatalf("attempts %v, verified %d", a, len(created))
	}
	if created[1] < created[0]+2 {
		t.Fatalf("created %d then %d: want a fresh one at least 2s later", created[0], created[1])
	}
}

// TestCredentialKindsHTTPSignatureMissingComponent: an http_signature
// credential whose configured components include content-type refuses a
// call without that header with INVALID_ARGUMENT naming the credential
// and the component (RFC 9421 2.5: the signer fails rather than leave it
// out); nothing is sent. With the header the call is signed and sent.
func TestCredentialKindsHTTPSignatureMissingComponent(t *testing.T) {
	key := filepath.Join(t.TempDir(), "hmac")
	writeFileAtomic(t, key, "0123456789abcdef0123456789abcdef")
	up := newHeaderUpstream(t)
	p := startProc(t, "--config", writeConfig(t, credBrokerConfig(
		"      api: {kind: http_signature, algorithm: hmac-sha256, key_id: k1, key_file: "+key+
			", components: [\"@method\", \"@target-uri\", \"content-type\"]}\n", loopbackPolicy)))

	_, err := p.executeCred(t, "", up.URL+"/x")
	msg := status.Convert(err).Message()
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(msg, "credential api") || !strings.Contains(msg, `"content-type"`) {
		t.Fatalf("without Content-Type: %v; want INVALID_ARGUMENT naming the credential and the component", err)
	}
	if up.count() != 0 {
		t.Fatalf("the upstream received %d requests", up.count())
	}
	res, err := p.executeCred(t, "", up.URL+"/x", "Content-Type", "application/json")
	if err != nil || res.GetOutcome() != rbv1.Outcome_OUTCOME_SUCCESS || !strings.Contains(up.last("Signature-Input"), `"content-type"`) {
		t.Fatalf("with Content-Type: %v %v, Signature-Input %q", err, res.GetOutcome(), up.last("Signature-Input"))
	}
}

// TestCredentialKindsSigV4UnsignableQuery: a query the SigV4 signer would
// send changed (a ';' separator) is the caller's error, INVALID_ARGUMENT
// naming the credential, and nothing is sent; the same call with '&' is
// signed and sent.
func TestCredentialKindsSigV4UnsignableQuery(t *testing.T) {
	dir := t.TempDir()
	ak, sk := filepath.Join(dir, "ak"), filepath.Join(dir, "sk")
	writeFileAtomic(t, ak, "AKIDQUERYTEST\n")
	writeFileAtomic(t, sk, "query-test-secret\n")
	up := newHeaderUpstream(t)
	p := startProc(t, "--config", writeConfig(t, credBrokerConfig(
		"      api: {kind: aws_sigv4, region: eu-west-1, service: execute-api, access_key_id_file: "+ak+
			", secret_access_key_file: "+sk+"}\n", loopbackPolicy)))

	_, err := p.executeCred(t, "", up.URL+"/x?a=1;b=2")
	msg := status.Convert(err).Message()
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(msg, "credential api") || strings.Contains(msg, "query-test-secret") {
		t.Fatalf("a query with ';': %v; want INVALID_ARGUMENT naming the credential and no secret", err)
	}
	if up.count() != 0 {
		t.Fatalf("the upstream received %d requests", up.count())
	}
	res, err := p.executeCred(t, "", up.URL+"/x?a=1&b=2")
	if err != nil || res.GetOutcome() != rbv1.Outcome_OUTCOME_SUCCESS || !strings.HasPrefix(up.last("Authorization"), "AWS4-HMAC-SHA256 ") {
		t.Fatalf("a query with '&': %v %v, Authorization %q", err, res.GetOutcome(), up.last("Authorization"))
	}
}
