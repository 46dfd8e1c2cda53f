package credential

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/internal/credential/credtest"
)

// These tests run against a real OAuth 2.0 server, ory/hydra (bin/hydra,
// built by make deps), on loopback. The upstream is a loopback server
// that checks each bearer token with hydra's introspection endpoint, as a
// resource server does.

// hydraUpstream answers each request after asking hydra whether its
// bearer token is active: 401 when it is not; otherwise next decides.
type hydraUpstream struct {
	*httptest.Server
	mu     sync.Mutex
	tokens []string // the active tokens it saw, in order
}

func newHydraUpstream(t *testing.T, h *credtest.Hydra, next func(w http.ResponseWriter, n int)) *hydraUpstream {
	t.Helper()
	u := &hydraUpstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok {
			http.Error(w, "no bearer token", http.StatusUnauthorized)
			return
		}
		in, err := h.Introspect(tok)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		if !in.Active || in.ClientID != h.ClientID || in.Scope != credtest.HydraScope {
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			http.Error(w, "inactive token", http.StatusUnauthorized)
			return
		}
		u.mu.Lock()
		u.tokens = append(u.tokens, tok)
		n := len(u.tokens)
		u.mu.Unlock()
		next(w, n)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *hydraUpstream) seen() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.tokens...)
}

func newHydraCred(t *testing.T, h *credtest.Hydra, tokenURL string) *testCred {
	t.Helper()
	return newTestCred(t, tokenURL, SystemClock, func(s *OAuth2Spec) {
		s.ClientID = h.ClientID
		s.ClientSecret = SecretRef{File: h.ClientSecretFile}
		s.Scopes = []string{credtest.HydraScope}
		s.AuthStyle = "header"
	})
}

// sendLoop mimics the engine's attempt loop without the engine: apply the
// credential, send, and on 503 wait the Retry-After seconds and go again;
// on 401 ask Rejected and repeat once. It returns the final status and
// the Authorization header of each attempt.
func sendLoop(t *testing.T, c Credential, target string) (int, []string) {
	t.Helper()
	client := credtest.LoopbackClient()
	defer client.CloseIdleConnections()
	var sent []string
	repeated := false
	for attempt := 1; attempt <= 4; attempt++ {
		req, err := http.NewRequest(http.MethodGet, target, nil)
		if err != nil {
			t.Fatal(err)
		}
		st, err := c.Apply(context.Background(), req, NewCall(nil))
		if err != nil {
			t.Fatalf("attempt %d: Apply: %v", attempt, err)
		}
		sent = append(sent, req.Header.Get("Authorization"))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("attempt %d: %v", attempt, err)
		}
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusServiceUnavailable:
			secs, err := strconv.Atoi(resp.Header.Get("Retry-After"))
			if err != nil || secs < 0 || secs > 10 {
				t.Fatalf("attempt %d: Retry-After %q", attempt, resp.Header.Get("Retry-After"))
			}
			// The wait of a retry, in real time: hydra's tokens expire in
			// real time, which is what this test is about.
			time.Sleep(time.Duration(secs) * time.Second)
		case resp.StatusCode == http.StatusUnauthorized && !repeated && c.Rejected(st):
			repeated = true
		default:
			return resp.StatusCode, sent
		}
	}
	t.Fatal("no final answer in 4 attempts")
	return 0, nil
}

// With tokens living 2 s, a retry after a 3 s wait carries a new token
// that hydra says is active, and the first one has expired.
func TestOAuth2HydraRetryAfterWaitCarriesNewToken(t *testing.T) {
	h := credtest.StartHydra(t, credtest.HydraConfig{AccessTokenTTL: 2 * time.Second})
	up := newHydraUpstream(t, h, func(w http.ResponseWriter, n int) {
		if n == 1 {
			w.Header().Set("Retry-After", "3")
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	c := newHydraCred(t, h, h.TokenURL)

	status, sent := sendLoop(t, c, up.URL+"/v1/thing")
	if status != http.StatusOK {
		t.Fatalf("final status %d, attempts sent %d", status, len(sent))
	}
	seen := up.seen()
	if len(sent) != 2 || len(seen) != 2 {
		t.Fatalf("%d attempts sent, %d accepted by the upstream; want 2 and 2 (no 401)", len(sent), len(seen))
	}
	if seen[0] == seen[1] {
		t.Fatal("the retry after 3 s carried the same token as the first attempt")
	}
	// The upstream accepted both because hydra said each was active when
	// it arrived; the first one has expired since.
	in, err := h.Introspect(seen[0])
	if err != nil {
		t.Fatal(err)
	}
	if in.Active {
		t.Errorf("hydra says the first token is still active %v after it was used", 3*time.Second)
	}
	if got := c.obs.results(); len(got) != 2 || got[0] != fetchOK || got[1] != fetchOK {
		t.Errorf("TokenFetch results %v, want [ok ok]", got)
	}
}

// A 401 from the upstream (the token was revoked at hydra) invalidates
// the token once; the repeated attempt carries a new, active token.
func TestOAuth2HydraRevokedTokenIsRenewedOnce(t *testing.T) {
	h := credtest.StartHydra(t, credtest.HydraConfig{})
	up := newHydraUpstream(t, h, func(w http.ResponseWriter, _ int) { _, _ = w.Write([]byte("ok")) })
	c := newHydraCred(t, h, h.TokenURL)

	status, sent := sendLoop(t, c, up.URL)
	if status != http.StatusOK || len(sent) != 1 {
		t.Fatalf("first call: status %d after %d attempts", status, len(sent))
	}
	if err := h.Revoke(strings.TrimPrefix(sent[0], "Bearer ")); err != nil {
		t.Fatal(err)
	}
	status, sent2 := sendLoop(t, c, up.URL)
	if status != http.StatusOK || len(sent2) != 2 {
		t.Fatalf("after the revocation: status %d after %d attempts, want 200 after 2", status, len(sent2))
	}
	if sent2[0] != sent[0] || sent2[1] == sent[0] {
		t.Error("want the revoked token first, then a new one")
	}
	if got := c.obs.results(); len(got) != 2 {
		t.Errorf("TokenFetch results %v, want 2 fetches", got)
	}
}

// 1,000 concurrent Applys with an empty cache: one token request reaches
// hydra (counted at a loopback reverse proxy in front of its token
// endpoint), and the token is one hydra says is active.
func TestOAuth2HydraSingleFlight(t *testing.T) {
	h := credtest.StartHydra(t, credtest.HydraConfig{})
	target, err := url.Parse(strings.TrimSuffix(h.TokenURL, "/oauth2/token"))
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = credtest.LoopbackClient().Transport
	var tokenRequests atomic.Int64
	release := make(chan struct{})
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/oauth2/token" {
			tokenRequests.Add(1)
			<-release // hold it until every caller has started
		}
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	c := newHydraCred(t, h, proxy.URL+"/oauth2/token")

	const callers = 1000
	var started, done sync.WaitGroup
	started.Add(callers)
	done.Add(callers)
	headers := make([]string, callers)
	errs := make([]error, callers)
	for i := range callers {
		go func() {
			defer done.Done()
			req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1:1/", nil)
			started.Done()
			_, errs[i] = c.Apply(context.Background(), req, NewCall(nil))
			headers[i] = req.Header.Get("Authorization")
		}()
	}
	started.Wait()
	close(release)
	done.Wait()
	for i := range callers {
		if errs[i] != nil || headers[i] != headers[0] || headers[0] == "" {
			t.Fatalf("caller %d: %q, %v (caller 0: %q)", i, headers[i], errs[i], headers[0])
		}
	}
	if n := tokenRequests.Load(); n != 1 {
		t.Errorf("%d token requests reached hydra for %d concurrent Applys, want 1", n, callers)
	}
	in, err := h.Introspect(strings.TrimPrefix(headers[0], "Bearer "))
	if err != nil {
		t.Fatal(err)
	}
	if !in.Active || in.ClientID != h.ClientID {
		t.Errorf("hydra says of the token: %+v", in)
	}
}
