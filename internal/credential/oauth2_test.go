package credential

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/retrybroker/retrybroker/internal/credential/credtest"
	"github.com/retrybroker/retrybroker/internal/proctest"
)

// testSecret is the client secret of the tests; no error or log may hold it.
const testSecret = "s3cr3t-client-secret-0123456789"

// fakeClock is a settable Clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

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

// recObserver records the credential metrics.
type recObserver struct {
	mu      sync.Mutex
	fetches []string
	expiry  []time.Duration
	fetched chan string // each TokenFetch result, when not nil
}

func (o *recObserver) TokenFetch(tenant, cred, result string) {
	o.mu.Lock()
	o.fetches = append(o.fetches, result)
	ch := o.fetched
	o.mu.Unlock()
	if ch != nil {
		ch <- result
	}
}

func (o *recObserver) TokenExpiry(_, _ string, left time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.expiry = append(o.expiry, left)
}
func (o *recObserver) FileReload(string, string, string) {}
func (o *recObserver) Unavailable(string, string)        {}

func (o *recObserver) results() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.fetches...)
}

// tokenServer is a loopback token endpoint that counts its requests and
// answers with respond (by default: a new token "tok-N", expires_in 3600).
type tokenServer struct {
	*httptest.Server
	requests atomic.Int64
	mu       sync.Mutex
	respond  func(w http.ResponseWriter, r *http.Request, n int64)
	forms    []string // each request's form, with the Authorization header
}

func newTokenServer(t *testing.T) *tokenServer {
	t.Helper()
	ts := &tokenServer{}
	ts.respond = func(w http.ResponseWriter, _ *http.Request, n int64) { writeToken(w, fmt.Sprintf("tok-%d", n), 3600) }
	ts.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := ts.requests.Add(1)
		_ = r.ParseForm()
		ts.mu.Lock()
		ts.forms = append(ts.forms, r.Form.Encode()+" auth="+r.Header.Get("Authorization"))
		respond := ts.respond
		ts.mu.Unlock()
		respond(w, r, n)
	}))
	t.Cleanup(ts.Close)
	return ts
}

func (ts *tokenServer) set(f func(w http.ResponseWriter, r *http.Request, n int64)) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.respond = f
}

func (ts *tokenServer) form(i int) string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if i >= len(ts.forms) {
		return ""
	}
	return ts.forms[i]
}

// verifyNoLeaks checks, after every other cleanup of t, that t left no
// goroutine running.
func verifyNoLeaks(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, opt) })
}

func writeToken(w http.ResponseWriter, token string, expiresIn int) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": token, "token_type": "bearer", "expires_in": expiresIn})
}

// testCred builds an oauth2_client_credentials credential against
// tokenURL with a secret file, a loopback-only client and clock.
type testCred struct {
	*oauth2Cred
	obs        *recObserver
	secretFile string
}

func newTestCred(t testing.TB, tokenURL string, clock Clock, edit func(*OAuth2Spec)) *testCred {
	t.Helper()
	file := filepath.Join(t.TempDir(), "client_secret")
	if err := os.WriteFile(file, []byte(testSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	spec := &OAuth2Spec{
		TokenURL:     tokenURL,
		ClientID:     "client-1",
		ClientSecret: SecretRef{File: file},
		Scopes:       []string{"upstream.read"},
		AuthStyle:    "header",
	}
	if edit != nil {
		edit(spec)
	}
	obs := &recObserver{}
	client := credtest.LoopbackClient()
	t.Cleanup(client.CloseIdleConnections)
	logs := &proctest.Buffer{}
	t.Cleanup(func() {
		if strings.Contains(logs.String(), testSecret) {
			t.Errorf("the log holds the client secret:\n%s", logs.String())
		}
	})
	c, err := New(Spec{Name: "api", Kind: KindOAuth2, OAuth2: spec}, Deps{
		Tenant:      "t1",
		TokenClient: func([]string) (*http.Client, error) { return client, nil },
		Clock:       clock,
		Observer:    obs,
		Log:         slog.New(slog.NewTextHandler(logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return &testCred{oauth2Cred: c.(*oauth2Cred), obs: obs, secretFile: file}
}

func newReq(t testing.TB) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://127.0.0.1:1/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// apply applies c to a new request and returns its Authorization header.
func (c *testCred) apply(t testing.TB, ctx context.Context) (string, Stamp, error) {
	t.Helper()
	req := newReq(t)
	st, err := c.Apply(ctx, req, NewCall(nil))
	return req.Header.Get("Authorization"), st, err
}

func (c *testCred) mustApply(t testing.TB) (string, Stamp) {
	t.Helper()
	h, st, err := c.apply(t, context.Background())
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return h, st
}

// waitFlight waits, bounded, until no token request is in flight.
func (c *testCred) waitFlight(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.mu.Lock()
		f := c.flight
		c.mu.Unlock()
		if f == nil {
			return
		}
		select {
		case <-f.done:
		case <-time.After(time.Until(deadline)):
			t.Fatal("the token request did not end within 10s")
		}
	}
}

// checkUnavailable checks err is an *UnavailableError naming the
// credential, without the secret, and returns its text.
func checkUnavailable(t *testing.T, err error) string {
	t.Helper()
	var u *UnavailableError
	if !errors.As(err, &u) {
		t.Fatalf("err = %v (%T), want *UnavailableError", err, err)
	}
	if u.Credential != "api" {
		t.Errorf("UnavailableError.Credential = %q", u.Credential)
	}
	if strings.Contains(err.Error(), testSecret) {
		t.Errorf("the error holds the client secret: %v", err)
	}
	return err.Error()
}

func TestOAuth2AppliesBearerToken(t *testing.T) {
	verifyNoLeaks(t)
	ts := newTokenServer(t)
	c := newTestCred(t, ts.URL+"/token", SystemClock, nil)
	if got := c.Headers(); len(got) != 1 || got[0] != "Authorization" {
		t.Errorf("Headers() = %v", got)
	}
	if c.Kind() != KindOAuth2 || c.Name() != "api" || c.Overwrite() {
		t.Errorf("Kind, Name, Overwrite = %v %v %v", c.Kind(), c.Name(), c.Overwrite())
	}
	h, st := c.mustApply(t)
	if h != "Bearer tok-1" || st.Generation != 1 {
		t.Errorf("Apply set %q, stamp %+v; want Bearer tok-1, generation 1", h, st)
	}
	req := newReq(t)
	req.Header.Add("Authorization", "Basic caller")
	if _, err := c.Apply(context.Background(), req, NewCall(nil)); err != nil {
		t.Fatal(err)
	}
	if got := req.Header.Values("Authorization"); len(got) != 1 || got[0] != "Bearer tok-1" {
		t.Errorf("Authorization after Apply = %q: set, not appended", got)
	}
	if n := ts.requests.Load(); n != 1 {
		t.Errorf("%d token requests, want 1 (cached)", n)
	}
	form := ts.form(0)
	for _, want := range []string{"grant_type=client_credentials", "scope=upstream.read", "auth=Basic "} {
		if !strings.Contains(form, want) {
			t.Errorf("token request %q lacks %q", form, want)
		}
	}
	if got := c.obs.results(); len(got) != 1 || got[0] != fetchOK {
		t.Errorf("TokenFetch results %v, want [ok]", got)
	}
	c.obs.mu.Lock()
	if len(c.obs.expiry) == 0 || c.obs.expiry[0] <= 3500*time.Second || c.obs.expiry[0] > 3600*time.Second {
		t.Errorf("TokenExpiry %v, want about 3600s", c.obs.expiry)
	}
	c.obs.mu.Unlock()
}

func TestOAuth2AuthStyleParamsAndEndpointParams(t *testing.T) {
	ts := newTokenServer(t)
	c := newTestCred(t, ts.URL+"/token", SystemClock, func(s *OAuth2Spec) {
		s.AuthStyle = "params"
		s.EndpointParams = map[string][]string{"audience": {"https://api.example"}}
	})
	c.mustApply(t)
	form := ts.form(0)
	for _, want := range []string{"client_id=client-1", "client_secret=" + testSecret, "audience=https%3A%2F%2Fapi.example", "auth= "} {
		if !strings.Contains(form+" ", want) {
			t.Errorf("token request %q lacks %q", form, want)
		}
	}
}

// A token is used until expiry − margin; the margin is ExpiryMargin
// (default 30s), at most half the lifetime; a token in its margin is
// still used while the refresh runs.
func TestOAuth2RefreshesBeforeExpiry(t *testing.T) {
	for _, tc := range []struct {
		name      string
		expiresIn int
		margin    time.Duration
		refreshAt time.Duration // from the fetch
	}{
		{"default margin", 3600, 0, 3600*time.Second - DefaultExpiryMargin},
		{"configured margin", 3600, 5 * time.Minute, 3600*time.Second - 5*time.Minute},
		{"half of a 2s token", 2, 0, time.Second},
		{"half of a 40s token", 40, 0, 20 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := newFakeClock()
			ts := newTokenServer(t)
			ts.set(func(w http.ResponseWriter, _ *http.Request, n int64) {
				writeToken(w, fmt.Sprintf("tok-%d", n), tc.expiresIn)
			})
			c := newTestCred(t, ts.URL+"/token", clock, func(s *OAuth2Spec) { s.ExpiryMargin = tc.margin })
			c.mustApply(t)
			clock.Advance(tc.refreshAt - time.Millisecond)
			h, _ := c.mustApply(t)
			c.waitFlight(t) // a refresh started too early would be counted
			if h != "Bearer tok-1" || ts.requests.Load() != 1 {
				t.Fatalf("just before the refresh time: %q after %d requests, want the cached token", h, ts.requests.Load())
			}
			clock.Advance(time.Millisecond)
			// In the margin: the old token is still good and is used while
			// the refresh runs.
			if h, _ := c.mustApply(t); h != "Bearer tok-1" {
				t.Fatalf("in the margin: %q, want the still valid tok-1", h)
			}
			c.waitFlight(t)
			if h, st := c.mustApply(t); h != "Bearer tok-2" || st.Generation != 2 {
				t.Fatalf("after the refresh: %q %+v, want tok-2, generation 2", h, st)
			}
			if n := ts.requests.Load(); n != 2 {
				t.Errorf("%d token requests, want 2", n)
			}
		})
	}
}

// A token at or past its expiry is never put on a request: when the
// refresh fails, the old token is used until its expiry and not after.
func TestOAuth2NeverSendsAnExpiredToken(t *testing.T) {
	clock := newFakeClock()
	ts := newTokenServer(t)
	ts.set(func(w http.ResponseWriter, _ *http.Request, n int64) { writeToken(w, "tok-1", 2) })
	c := newTestCred(t, ts.URL+"/token", clock, nil)
	c.mustApply(t)
	ts.set(func(w http.ResponseWriter, _ *http.Request, _ int64) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	})

	clock.Advance(1500 * time.Millisecond) // in the margin: refresh fails
	if h, _ := c.mustApply(t); h != "Bearer tok-1" {
		t.Fatalf("in the margin: %q", h)
	}
	c.waitFlight(t)
	clock.Advance(499 * time.Millisecond) // 1 ms before expiry, in the backoff
	if h, _ := c.mustApply(t); h != "Bearer tok-1" {
		t.Fatalf("1 ms before expiry: %q", h)
	}
	clock.Advance(time.Millisecond) // at expiry
	h, _, err := c.apply(t, context.Background())
	if h != "" {
		t.Fatalf("at expiry Apply set Authorization %q", h)
	}
	checkUnavailable(t, err)
	clock.Advance(10 * time.Second) // after the backoff: a new request, failing
	h, _, err = c.apply(t, context.Background())
	if h != "" || err == nil {
		t.Fatalf("after expiry with the endpoint down: %q, %v", h, err)
	}
	if msg := checkUnavailable(t, err); !strings.Contains(msg, "503") {
		t.Errorf("error %q does not give the endpoint's status", msg)
	}
}

// A token that has expired by the time its request ends (here: the
// endpoint took longer than the token's lifetime) is not used either.
func TestOAuth2TokenExpiredOnArrivalIsNotUsed(t *testing.T) {
	clock := newFakeClock()
	ts := newTokenServer(t)
	ts.set(func(w http.ResponseWriter, _ *http.Request, n int64) {
		clock.Advance(3 * time.Second)
		writeToken(w, fmt.Sprintf("tok-%d", n), 2)
	})
	c := newTestCred(t, ts.URL+"/token", clock, nil)
	h, _, err := c.apply(t, context.Background())
	if h != "" {
		t.Fatalf("Apply set %q, a token past its expiry", h)
	}
	checkUnavailable(t, err)
	if n := ts.requests.Load(); n != maxFetchRounds {
		t.Errorf("%d token requests, want %d", n, maxFetchRounds)
	}
}

// 1,000 concurrent Applys with an empty cache make one token request.
func TestOAuth2SingleFlight(t *testing.T) {
	verifyNoLeaks(t)
	ts := newTokenServer(t)
	release := make(chan struct{})
	ts.set(func(w http.ResponseWriter, _ *http.Request, n int64) {
		<-release
		writeToken(w, fmt.Sprintf("tok-%d", n), 3600)
	})
	c := newTestCred(t, ts.URL+"/token", SystemClock, nil)
	const callers = 1000
	var started, done sync.WaitGroup
	started.Add(callers)
	done.Add(callers)
	errs := make(chan error, callers)
	for range callers {
		go func() {
			defer done.Done()
			req := newReq(t)
			started.Done()
			st, err := c.Apply(context.Background(), req, NewCall(nil))
			if err == nil && (req.Header.Get("Authorization") != "Bearer tok-1" || st.Generation != 1) {
				err = fmt.Errorf("got %q %+v", req.Header.Get("Authorization"), st)
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	started.Wait()
	close(release)
	done.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := ts.requests.Load(); n != 1 {
		t.Errorf("%d token requests for %d concurrent Applys, want 1", n, callers)
	}
}

// A waiter leaves when its own ctx ends; the request goes on for the
// others and its token is cached.
func TestOAuth2WaitersHonourTheirContext(t *testing.T) {
	verifyNoLeaks(t)
	ts := newTokenServer(t)
	release := make(chan struct{})
	ts.set(func(w http.ResponseWriter, _ *http.Request, n int64) {
		<-release
		writeToken(w, fmt.Sprintf("tok-%d", n), 3600)
	})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock) // the server's Close waits for its handler, even when the test failed
	c := newTestCred(t, ts.URL+"/token", SystemClock, nil)
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() { _, _, err := c.apply(t, ctx); first <- err }()
	for deadline := time.Now().Add(10 * time.Second); ts.requests.Load() == 0; { // until the request is in flight
		if time.Now().After(deadline) {
			t.Fatal("no token request within 10s")
		}
		time.Sleep(time.Millisecond)
	}
	other := make(chan string, 1)
	go func() {
		h, _, err := c.apply(t, context.Background())
		if err != nil {
			h = err.Error()
		}
		other <- h
	}()
	cancel()
	select {
	case err := <-first:
		checkUnavailable(t, err)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want it to wrap context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a cancelled waiter did not return")
	}
	unblock()
	select {
	case h := <-other:
		if h != "Bearer tok-1" {
			t.Errorf("the other waiter got %q", h)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the other waiter did not get the token")
	}
	if n := ts.requests.Load(); n != 1 {
		t.Errorf("%d token requests, want 1", n)
	}
}

func TestOAuth2EndpointDown(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // connection refused from now on
	c := newTestCred(t, "http://"+addr+"/token", SystemClock, nil)
	start := time.Now()
	_, _, err = c.apply(t, context.Background())
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("a refused connection took %v", d)
	}
	if msg := checkUnavailable(t, err); !strings.Contains(msg, "refused") {
		t.Errorf("error %q does not say the connection was refused", msg)
	}
	if got := c.obs.results(); len(got) != 1 || got[0] != fetchError {
		t.Errorf("TokenFetch results %v, want [error]", got)
	}
}

func TestOAuth2EndpointHangsIsBoundedByTimeout(t *testing.T) {
	verifyNoLeaks(t)
	ts := newTokenServer(t)
	stop := make(chan struct{})
	defer close(stop)
	ts.set(func(_ http.ResponseWriter, r *http.Request, _ int64) {
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	})
	c := newTestCred(t, ts.URL+"/token", SystemClock, func(s *OAuth2Spec) { s.Timeout = 300 * time.Millisecond })
	// The caller's deadline is far: the request's own timeout must end it.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	_, _, err := c.apply(t, ctx)
	d := time.Since(start)
	if d < 300*time.Millisecond || d > 10*time.Second {
		t.Errorf("a hanging endpoint took %v, want about the 300ms timeout", d)
	}
	if msg := checkUnavailable(t, err); !strings.Contains(msg, "did not answer within 300ms") {
		t.Errorf("error %q does not name the timeout", msg)
	}
	if got := c.obs.results(); len(got) != 1 || got[0] != fetchError {
		t.Errorf("TokenFetch results %v, want [error]", got)
	}
}

// After a failure, callers share it for the backoff (1s, 2s, 4s … 30s)
// instead of each asking the endpoint; the endpoint's error body is cut to
// an excerpt and the client secret in it is redacted.
func TestOAuth2FailuresBackOffAndAreShared(t *testing.T) {
	clock := newFakeClock()
	ts := newTokenServer(t)
	ts.set(func(w http.ResponseWriter, _ *http.Request, _ int64) {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, "boom: client_secret="+testSecret+" "+strings.Repeat("x", 10000))
	})
	c := newTestCred(t, ts.URL+"/token", clock, nil)

	var wg sync.WaitGroup
	errs := make([]error, 100)
	for i := range errs {
		wg.Add(1)
		go func() { defer wg.Done(); _, _, errs[i] = c.apply(t, context.Background()) }()
	}
	wg.Wait()
	for _, err := range errs {
		msg := checkUnavailable(t, err)
		if !strings.Contains(msg, "500") || !strings.Contains(msg, "boom") || len(msg) > 300 {
			t.Fatalf("error %q (%d bytes): want the status and a short excerpt", msg, len(msg))
		}
	}
	if n := ts.requests.Load(); n != 1 {
		t.Fatalf("%d token requests for 100 concurrent callers, want 1", n)
	}
	if got := c.obs.results(); got[0] != fetchRefused {
		t.Errorf("TokenFetch results %v, want refused", got)
	}
	for i, step := range []struct {
		advance time.Duration
		want    int64 // requests so far
	}{
		{999 * time.Millisecond, 1}, // in the 1s backoff
		{time.Millisecond, 2},       // after it: one request, failing; 2s backoff
		{1999 * time.Millisecond, 2},
		{time.Millisecond, 3}, // 4s next
		{3999 * time.Millisecond, 3},
		{time.Millisecond, 4},
	} {
		clock.Advance(step.advance)
		for range 10 {
			_, _, err := c.apply(t, context.Background())
			checkUnavailable(t, err)
		}
		if n := ts.requests.Load(); n != step.want {
			t.Fatalf("step %d: %d token requests, want %d", i, n, step.want)
		}
	}
	// Recovery: after the backoff a good answer is used and resets it.
	ts.set(func(w http.ResponseWriter, _ *http.Request, n int64) { writeToken(w, "tok-ok", 3600) })
	clock.Advance(8 * time.Second)
	if h, _ := c.mustApply(t); h != "Bearer tok-ok" {
		t.Fatalf("after recovery: %q", h)
	}
	c.mu.Lock()
	if c.failures != 0 || !c.failUntil.IsZero() {
		t.Errorf("failures = %d, failUntil %v after a success", c.failures, c.failUntil)
	}
	c.mu.Unlock()
}

// The token endpoint is dialled with the client Deps.TokenClient makes
// for the credential's own allow_destinations.
func TestOAuth2TokenClientGetsItsAllowList(t *testing.T) {
	ts := newTokenServer(t)
	file := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(file, []byte(testSecret), 0o600); err != nil {
		t.Fatal(err)
	}
	var got []string
	client := credtest.LoopbackClient()
	defer client.CloseIdleConnections()
	c, err := New(Spec{Name: "api", Kind: KindOAuth2, OAuth2: &OAuth2Spec{TokenURL: ts.URL, ClientID: "c", ClientSecret: SecretRef{File: file}}}, Deps{
		TokenAllow:  []string{"127.0.0.1/32"},
		TokenClient: func(allow []string) (*http.Client, error) { got = allow; return client, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != "127.0.0.1/32" {
		t.Errorf("TokenClient got %v", got)
	}
	if _, err := c.Apply(context.Background(), newReq(t), NewCall(nil)); err != nil {
		t.Fatal(err)
	}
}

// TokenExpiry is set after a fetch and refreshed by Apply at most once a
// second.
func TestOAuth2TokenExpiryGauge(t *testing.T) {
	clock := newFakeClock()
	ts := newTokenServer(t)
	c := newTestCred(t, ts.URL, clock, nil)
	gauge := func() []time.Duration {
		c.obs.mu.Lock()
		defer c.obs.mu.Unlock()
		return append([]time.Duration(nil), c.obs.expiry...)
	}
	c.mustApply(t)
	if got := gauge(); len(got) != 1 || got[0] != time.Hour {
		t.Fatalf("after the fetch: %v, want [1h]", got)
	}
	clock.Advance(500 * time.Millisecond)
	c.mustApply(t)
	if got := gauge(); len(got) != 1 {
		t.Fatalf("half a second later: %v, want no new value", got)
	}
	clock.Advance(600 * time.Millisecond)
	c.mustApply(t)
	c.mustApply(t)
	if got := gauge(); len(got) != 2 || got[1] != time.Hour-1100*time.Millisecond {
		t.Fatalf("1.1 s later: %v, want one new value of 1h-1.1s", got)
	}
}

func TestTokenBackoff(t *testing.T) {
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second, 30 * time.Second}
	for i, w := range want {
		if got := tokenBackoff(i + 1); got != w {
			t.Errorf("tokenBackoff(%d) = %v, want %v", i+1, got, w)
		}
	}
	if got := tokenBackoff(1000); got != TokenBackoffMax {
		t.Errorf("tokenBackoff(1000) = %v", got)
	}
}

// Responses that are no token are "invalid": the attempt is not sent.
func TestOAuth2InvalidResponses(t *testing.T) {
	for _, tc := range []struct {
		name, contentType, body, want string
	}{
		{"invalid JSON", "application/json", `{"access_token": "abc"`, "cannot parse"},
		{"no access_token", "application/json", `{"token_type":"bearer","expires_in":60}`, "access_token"},
		{"empty access_token", "application/json", `{"access_token":"","expires_in":60}`, "access_token"},
		{"not bearer", "application/json", `{"access_token":"abc","token_type":"mac","expires_in":60}`, "not Bearer"},
		{"header injection", "application/json", `{"access_token":"abc\r\nX-Evil: 1","token_type":"bearer"}`, "not a valid header value"},
		{"negative expires_in", "application/json", `{"access_token":"abc","expires_in":-5}`, "negative"},
		{"expires_in not a number", "application/json", `{"access_token":"abc","expires_in":"soon"}`, ""},
		{"expires_in an object", "application/json", `{"access_token":"abc","expires_in":{}}`, ""},
		{"too long", "application/json", `{"access_token":"` + strings.Repeat("a", MaxAccessToken+1) + `"}`, "longer than"},
		{"secret echoed", "application/json", `{"access_token":"` + testSecret + "\x01" + `"}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := newTokenServer(t)
			ts.set(func(w http.ResponseWriter, _ *http.Request, _ int64) {
				w.Header().Set("Content-Type", tc.contentType)
				_, _ = io.WriteString(w, tc.body)
			})
			c := newTestCred(t, ts.URL+"/token", SystemClock, nil)
			h, _, err := c.apply(t, context.Background())
			if h != "" {
				t.Fatalf("Apply set %q", h)
			}
			if msg := checkUnavailable(t, err); !strings.Contains(msg, tc.want) {
				t.Errorf("error %q lacks %q", msg, tc.want)
			}
			if got := c.obs.results(); len(got) != 1 || got[0] != fetchInvalid {
				t.Errorf("TokenFetch results %v, want [invalid]", got)
			}
		})
	}
}

// The token endpoint's OAuth error (RFC 6749 5.2) is "refused", with its
// code and an excerpt of its description, the secret redacted.
func TestOAuth2RefusedNamesTheOAuthError(t *testing.T) {
	ts := newTokenServer(t)
	ts.set(func(w http.ResponseWriter, _ *http.Request, _ int64) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_ = json.NewEncoder(w).Encode(map[string]string{
			"error":             "invalid_client",
			"error_description": "client secret " + testSecret + " is wrong " + strings.Repeat("y", 5000),
		})
	})
	c := newTestCred(t, ts.URL+"/token", SystemClock, nil)
	_, _, err := c.apply(t, context.Background())
	msg := checkUnavailable(t, err)
	if !strings.Contains(msg, "401") || !strings.Contains(msg, "invalid_client") || !strings.Contains(msg, "[redacted]") || len(msg) > 400 {
		t.Errorf("error %q (%d bytes)", msg, len(msg))
	}
	if got := c.obs.results(); len(got) != 1 || got[0] != fetchRefused {
		t.Errorf("TokenFetch results %v, want [refused]", got)
	}
}

// expires_in is optional (RFC 6749 5.1): without it a token lives
// DefaultTokenLifetime; PayPal quotes it; form-encoded answers work.
func TestOAuth2ExpiresInForms(t *testing.T) {
	for _, tc := range []struct {
		name, contentType, body string
		lifetime                time.Duration
	}{
		{"missing", "application/json", `{"access_token":"abc","token_type":"Bearer"}`, DefaultTokenLifetime},
		{"zero", "application/json", `{"access_token":"abc","expires_in":0}`, DefaultTokenLifetime},
		{"quoted", "application/json", `{"access_token":"abc","expires_in":"120"}`, 120 * time.Second},
		{"huge", "application/json", `{"access_token":"abc","expires_in":99999999999}`, MaxTokenLifetime},
		{"form", "application/x-www-form-urlencoded", `access_token=abc&token_type=bearer&expires_in=90`, 90 * time.Second},
		{"form without expires_in", "text/plain", `access_token=abc`, DefaultTokenLifetime},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := newFakeClock()
			start := clock.Now()
			ts := newTokenServer(t)
			ts.set(func(w http.ResponseWriter, _ *http.Request, _ int64) {
				w.Header().Set("Content-Type", tc.contentType)
				_, _ = io.WriteString(w, tc.body)
			})
			c := newTestCred(t, ts.URL+"/token", clock, nil)
			if h, _ := c.mustApply(t); h != "Bearer abc" {
				t.Fatalf("Apply set %q", h)
			}
			tok := c.cur.Load()
			if got := tok.expiry.Sub(start); got != tc.lifetime {
				t.Errorf("lifetime %v, want %v", got, tc.lifetime)
			}
		})
	}
}

// Rejected invalidates the token it names once, and only while it is
// the current one; a call whose attempt carried an older token is told to
// repeat (with the current token), without invalidating it.
func TestOAuth2Rejected(t *testing.T) {
	ts := newTokenServer(t)
	c := newTestCred(t, ts.URL+"/token", SystemClock, nil)
	if c.Rejected(Stamp{}) {
		t.Error("Rejected(zero stamp) = true")
	}
	_, st1 := c.mustApply(t)
	if !c.Rejected(st1) {
		t.Fatal("Rejected(current token) = false")
	}
	if !c.Rejected(st1) {
		t.Error("a second 401 for the same, invalidated token: Rejected = false, want a repeat too")
	}
	h, st2 := c.mustApply(t)
	if h != "Bearer tok-2" || st2.Generation != 2 {
		t.Fatalf("after Rejected: %q %+v, want tok-2", h, st2)
	}
	if !c.Rejected(st1) {
		t.Error("Rejected(an older token) = false while a newer one is current, want a repeat with it")
	}
	if h, _ := c.mustApply(t); h != "Bearer tok-2" {
		t.Errorf("a stale Rejected invalidated the current token: %q", h)
	}
	if n := ts.requests.Load(); n != 2 {
		t.Errorf("%d token requests, want 2", n)
	}
}

// A rotated client_secret file is used by the next token request.
func TestOAuth2RotatedClientSecret(t *testing.T) {
	clock := newFakeClock()
	ts := newTokenServer(t)
	c := newTestCred(t, ts.URL+"/token", clock, func(s *OAuth2Spec) { s.AuthStyle = "params" })
	c.mustApply(t)
	if err := os.WriteFile(c.secretFile, []byte("rotated-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Second) // past Deps.FileCheck
	_, st := c.mustApply(t)
	c.Rejected(st)
	c.mustApply(t)
	if got := ts.form(1); !strings.Contains(got, "client_secret=rotated-secret&") {
		t.Errorf("the request after the rotation sent %q", got)
	}
}

func TestNewOAuth2Refuses(t *testing.T) {
	file := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(file, []byte(testSecret), 0o600); err != nil {
		t.Fatal(err)
	}
	client := func([]string) (*http.Client, error) { return credtest.LoopbackClient(), nil }
	for _, tc := range []struct {
		name string
		edit func(*OAuth2Spec, *Deps)
		want string
	}{
		{"no token_url", func(s *OAuth2Spec, _ *Deps) { s.TokenURL = "" }, "token_url: required"},
		{"ftp token_url", func(s *OAuth2Spec, _ *Deps) { s.TokenURL = "ftp://h/t" }, "token_url"},
		{"userinfo", func(s *OAuth2Spec, _ *Deps) { s.TokenURL = "https://u:p@h/t" }, "userinfo"},
		{"no client_id", func(s *OAuth2Spec, _ *Deps) { s.ClientID = "" }, "client_id"},
		{"bad scope", func(s *OAuth2Spec, _ *Deps) { s.Scopes = []string{"a b"} }, "scope token"},
		{"grant_type param", func(s *OAuth2Spec, _ *Deps) { s.EndpointParams = map[string][]string{"grant_type": {"x"}} }, "set by the broker"},
		{"auth style", func(s *OAuth2Spec, _ *Deps) { s.AuthStyle = "basic" }, "auth_style"},
		{"negative timeout", func(s *OAuth2Spec, _ *Deps) { s.Timeout = -time.Second }, "timeout"},
		{"huge timeout", func(s *OAuth2Spec, _ *Deps) { s.Timeout = time.Hour }, "timeout"},
		{"negative margin", func(s *OAuth2Spec, _ *Deps) { s.ExpiryMargin = -time.Second }, "expiry_margin"},
		{"no client", func(_ *OAuth2Spec, d *Deps) { d.TokenClient = nil }, "no HTTP client"},
		{"guard refuses", func(_ *OAuth2Spec, d *Deps) {
			d.TokenClient = func([]string) (*http.Client, error) { return nil, errors.New("bad range") }
		}, "allow_destinations: bad range"},
		{"missing secret file", func(s *OAuth2Spec, _ *Deps) { s.ClientSecret = SecretRef{File: file + ".missing"} }, "client_secret"},
		{"no secret", func(s *OAuth2Spec, _ *Deps) { s.ClientSecret = SecretRef{} }, "client_secret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := &OAuth2Spec{TokenURL: "https://auth.example/token", ClientID: "c", ClientSecret: SecretRef{File: file}}
			deps := Deps{TokenClient: client}
			tc.edit(spec, &deps)
			_, err := New(Spec{Name: "api", Kind: KindOAuth2, OAuth2: spec}, deps)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one with %q", err, tc.want)
			}
			if strings.Contains(err.Error(), testSecret) {
				t.Errorf("the error holds the secret: %v", err)
			}
		})
	}
}

// BenchmarkApplyCachedToken is Apply with a cached token (the hot path of
// every attempt), side by side with the header kind, at parallelism.
func BenchmarkApplyCachedToken(b *testing.B) {
	file := filepath.Join(b.TempDir(), "secret")
	if err := os.WriteFile(file, []byte(testSecret), 0o600); err != nil {
		b.Fatal(err)
	}
	header, err := New(Spec{Name: "h", Kind: KindHeader, Header: &HeaderSpec{Name: "Authorization", Prefix: "Bearer ", Value: SecretRef{File: file}}}, Deps{})
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { writeToken(w, "tok", 3600) }))
	defer ts.Close()
	oauth := newTestCred(b, ts.URL+"/token", SystemClock, nil)
	oauth.mustApply(b)
	for _, bc := range []struct {
		name string
		cred Credential
	}{{"oauth2", oauth.oauth2Cred}, {"header", header}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1:1/x", nil)
				call := NewCall(nil)
				ctx := context.Background()
				for pb.Next() {
					if _, err := bc.cred.Apply(ctx, req, call); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
