package admin_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/internal/admin"
	"github.com/retrybroker/retrybroker/internal/providers"
	"github.com/retrybroker/retrybroker/internal/store"
	"github.com/retrybroker/retrybroker/internal/store/memstore"
	"github.com/retrybroker/retrybroker/internal/store/storetest"
)

// tenants is the configuration of these tests: acme and globex, with the
// built-in catalog.
type tenants struct{}

func (tenants) TenantIDs() []string { return []string{"acme", "globex"} }

func (tenants) Catalog(id string) (*providers.Catalog, bool) {
	if id == "acme" || id == "globex" {
		return providers.Builtin(), true
	}
	return nil, false
}

const testToken = "s3cret-admin-token"

var now = storetest.T0.Add(time.Second)

// newAdmin returns the admin handler over a fresh memory store.
func newAdmin(t *testing.T, opts ...admin.Option) (http.Handler, *memstore.Store) {
	t.Helper()
	return newAdminTB(t, opts...)
}

func newAdminF(f *testing.F) (http.Handler, *memstore.Store) { return newAdminTB(f) }

func newAdminTB(t testing.TB, opts ...admin.Option) (http.Handler, *memstore.Store) {
	t.Helper()
	st := memstore.New()
	t.Cleanup(func() { _ = st.Close() })
	h, err := admin.New(st, tenants{}, append([]admin.Option{admin.WithClock(func() time.Time { return now })}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return h, st
}

// do runs one request through h as the listener would, from remote. No
// connection is made: a non-loopback peer is only a RemoteAddr.
func do(h http.Handler, method, target, remote, auth string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, "http://admin.test"+target, nil)
	r.RemoteAddr = remote
	if auth != "" {
		r.Header.Set("Authorization", auth)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

const local = "127.0.0.1:4321"

var everyPath = []string{
	admin.PagePath, admin.GatesPath + "?tenant=acme", admin.GatePath + "?tenant=acme&host=api.example",
	admin.CatalogPath + "?tenant=acme", admin.TenantsPath, admin.PprofPath, admin.PprofPath + "cmdline",
}

// TestGuardRefusesRemotePeers: without a token, every path, pprof
// included, answers loopback peers only.
func TestGuardRefusesRemotePeers(t *testing.T) {
	h, _ := newAdmin(t)
	for _, p := range everyPath {
		for _, remote := range []string{"10.0.0.1:1234", "[2001:db8::1]:1234", "[::ffff:10.0.0.1]:1234", "garbage"} {
			if w := do(h, http.MethodGet, p, remote, ""); w.Code != http.StatusForbidden {
				t.Errorf("GET %s from %s = %d, want 403", p, remote, w.Code)
			}
		}
		for _, remote := range []string{local, "127.8.9.10:1", "[::1]:1234", "[::ffff:127.0.0.1]:1234"} {
			if w := do(h, http.MethodGet, p, remote, ""); w.Code != http.StatusOK {
				t.Errorf("GET %s from %s = %d, want 200", p, remote, w.Code)
			}
		}
	}
}

// TestGuardIsReadOnly: GET and HEAD only, checked after the peer.
func TestGuardIsReadOnly(t *testing.T) {
	h, _ := newAdmin(t)
	for _, p := range everyPath {
		for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch, "PURGE"} {
			w := do(h, m, p, local, "")
			if w.Code != http.StatusMethodNotAllowed || w.Header().Get("Allow") != "GET, HEAD" {
				t.Errorf("%s %s = %d (Allow %q), want 405", m, p, w.Code, w.Header().Get("Allow"))
			}
		}
		if w := do(h, http.MethodHead, p, local, ""); w.Code != http.StatusOK {
			t.Errorf("HEAD %s = %d", p, w.Code)
		}
	}
	if w := do(h, http.MethodPost, admin.PagePath, "10.0.0.1:1", ""); w.Code != http.StatusForbidden {
		t.Errorf("POST from a remote peer = %d, want 403 (the peer first)", w.Code)
	}
}

// TestGuardToken: with a token, every peer, loopback included, needs it.
func TestGuardToken(t *testing.T) {
	sum := sha256.Sum256([]byte(testToken))
	h, _ := newAdmin(t, admin.WithToken(admin.TokenFromHash(sum)))
	for _, p := range everyPath {
		for _, tc := range []struct {
			remote, auth string
			want         int
		}{
			{"10.0.0.1:1234", "Bearer " + testToken, http.StatusOK},
			{local, "Bearer " + testToken, http.StatusOK},
			{"10.0.0.1:1234", "", http.StatusUnauthorized},
			{local, "", http.StatusUnauthorized},
			{local, "Bearer wrong", http.StatusUnauthorized},
			{local, "Basic " + testToken, http.StatusUnauthorized},
			{local, "Bearer " + fmt.Sprintf("%x", sum), http.StatusUnauthorized}, // the hash is not the token
		} {
			w := do(h, http.MethodGet, p, tc.remote, tc.auth)
			if w.Code != tc.want {
				t.Errorf("GET %s from %s with %q = %d, want %d", p, tc.remote, tc.auth, w.Code, tc.want)
			}
			if strings.Contains(w.Body.String(), testToken) {
				t.Errorf("the answer repeats the token")
			}
		}
	}
}

// TestHostileQueries: a query the view does not take is a 400 with a
// message, an unknown tenant a 404; nothing is listed for either.
func TestHostileQueries(t *testing.T) {
	h, st := newAdmin(t)
	storetest.FillGates(t, st, "acme", 3)
	long := strings.Repeat("a", admin.MaxValue+1)
	for _, q := range []string{
		"", "tenant=", "state=closed",
		"tenant=acme&state=open", "tenant=acme&state=CLOSED", "tenant=acme&state=closed&state=learning",
		"tenant=acme&tenant=globex", "tenant=acme&page_size=0", "tenant=acme&page_size=1001", "tenant=acme&page_size=-1",
		"tenant=acme&page_size=1e3", "tenant=acme&page_size=10&page_size=20", "tenant=acme&page_size=99999999999999999999",
		"tenant=acme&page_token=", "tenant=acme&page_token=!!!", "tenant=acme&page_token=" + base64.RawURLEncoding.EncodeToString([]byte("host-0000001.example:")),
		"tenant=acme&page_token=" + long, "tenant=" + long, "tenant=acme&bogus=1", "tenant=acme&" + strings.Repeat("x=1&", 2000),
		"tenant=%zz", "tenant=acme;state=closed", "tenant=acme&Tenant=acme",
	} {
		w := do(h, http.MethodGet, admin.GatesPath+"?"+q, local, "")
		if w.Code != http.StatusBadRequest {
			t.Errorf("?%.80s = %d %s, want 400", q, w.Code, w.Body.String())
			continue
		}
		var e struct{ Error string }
		if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error == "" || len(e.Error) > 300 {
			t.Errorf("?%.80s: body %.200q is not a short JSON error", q, w.Body.String())
		}
	}
	for _, p := range []string{admin.GatesPath + "?tenant=nobody", admin.GatePath + "?tenant=nobody&host=x", admin.CatalogPath + "?tenant=nobody"} {
		if w := do(h, http.MethodGet, p, local, ""); w.Code != http.StatusNotFound {
			t.Errorf("%s = %d, want 404", p, w.Code)
		}
	}
	for _, p := range []string{admin.GatePath + "?tenant=acme", admin.GatePath + "?tenant=acme&host=a&provider=b", admin.CatalogPath + "?tenant=acme&x=1", admin.TenantsPath + "?x=1", admin.PagePath + "?x=1"} {
		if w := do(h, http.MethodGet, p, local, ""); w.Code != http.StatusBadRequest {
			t.Errorf("%s = %d, want 400", p, w.Code)
		}
	}
	// A token is bound to its tenant and filter.
	p := gates(t, h, "tenant=acme&page_size=1")
	if p.NextPageToken == "" {
		t.Fatal("no next page")
	}
	for _, q := range []string{"tenant=globex", "tenant=acme&state=closed"} {
		if w := do(h, http.MethodGet, admin.GatesPath+"?"+q+"&page_token="+p.NextPageToken, local, ""); w.Code != http.StatusBadRequest {
			t.Errorf("acme's token with %s = %d, want 400", q, w.Code)
		}
	}
	if w := do(h, http.MethodGet, admin.TasksPath+"?tenant=acme", local, ""); w.Code != http.StatusNotFound || !strings.Contains(w.Body.String(), "task storage is off") {
		t.Errorf("%s without task storage = %d %s", admin.TasksPath, w.Code, w.Body.String())
	}
}

func gates(t *testing.T, h http.Handler, q string) admin.GatesJSON {
	t.Helper()
	w := do(h, http.MethodGet, admin.GatesPath+"?"+q, local, "")
	if w.Code != http.StatusOK {
		t.Fatalf("?%s = %d %s", q, w.Code, w.Body.String())
	}
	var p admin.GatesJSON
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestGatesPaged: 2,500 closed gates, 1000 a page, are listed in three
// pages, each gate once, closed until when the store says; another
// tenant's gates never.
func TestGatesPaged(t *testing.T) {
	h, st := newAdmin(t)
	storetest.FillGates(t, st, "acme", 2500)
	storetest.FillGates(t, st, "globex", 7)
	seen := map[string]bool{}
	q := "tenant=acme&page_size=1000&state=closed"
	pages := 0
	for {
		p := gates(t, h, q)
		pages++
		for _, g := range p.Gates {
			if g.Tenant != "acme" || seen[g.Scope] || g.ClosedUntil == nil || !g.ClosedUntil.Equal(storetest.T0.Add(time.Hour)) || g.States[0] != admin.StateClosed {
				t.Fatalf("gate %+v: another tenant's, twice, or not closed until T0+1h", g)
			}
			seen[g.Scope] = true
		}
		if p.NextPageToken == "" {
			break
		}
		q = "tenant=acme&page_size=1000&state=closed&page_token=" + url.QueryEscape(p.NextPageToken)
	}
	if len(seen) != 2500 || pages != 3 {
		t.Fatalf("listed %d gates in %d pages, want 2500 in 3", len(seen), pages)
	}
	if p := gates(t, h, "tenant=acme&state=breaker_open"); len(p.Gates) != 0 {
		t.Fatalf("breaker_open lists %d closed gates", len(p.Gates))
	}
	if p := gates(t, h, "tenant=globex"); len(p.Gates) != 7 {
		t.Fatalf("globex has %d gates, want 7", len(p.Gates))
	}
}

// TestNoFingerprintShown: a gate kept per caller credential shows that it
// is, never the fingerprint, in the listing, its page tokens and the one
// gate view; a broker-held credential's gate shows the credential's name.
func TestNoFingerprintShown(t *testing.T) {
	h, st := newAdmin(t)
	const fp = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	for _, g := range []store.GateKey{
		{Tenant: "acme", Scope: "provider:github", Credential: fp},
		{Tenant: "acme", Scope: "provider:github", Credential: "cred:github-app"},
		{Tenant: "acme", Scope: "provider:github"},
	} {
		if _, err := st.Observe(context.Background(), store.ObserveRequest{Gate: g, Obs: store.Observation{CloseUntil: storetest.T0.Add(time.Hour)}, Now: storetest.T0}); err != nil {
			t.Fatal(err)
		}
	}
	var bodies []string
	q := "tenant=acme&page_size=1"
	var got []admin.GateJSON
	for {
		w := do(h, http.MethodGet, admin.GatesPath+"?"+q, local, "")
		bodies = append(bodies, w.Body.String())
		var p admin.GatesJSON
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
			t.Fatal(err)
		}
		got = append(got, p.Gates...)
		if p.NextPageToken == "" {
			break
		}
		raw, _ := base64.RawURLEncoding.DecodeString(p.NextPageToken)
		bodies = append(bodies, string(raw))
		q = "tenant=acme&page_size=1&page_token=" + p.NextPageToken
	}
	w := do(h, http.MethodGet, admin.GatePath+"?tenant=acme&provider=github&credential="+fp, local, "")
	bodies = append(bodies, w.Body.String())
	for _, b := range bodies {
		if strings.Contains(b, fp) || strings.Contains(b, fp[:16]) {
			t.Fatalf("the fingerprint shows: %s", b)
		}
	}
	if len(got) != 3 {
		t.Fatalf("listed %d gates, want 3", len(got))
	}
	var names, per int
	for _, g := range got {
		if g.Credential == "github-app" {
			names++
		}
		if g.PerCallerCredential {
			per++
		}
	}
	if names != 1 || per != 1 {
		t.Fatalf("gates %+v: want one of credential github-app and one per caller credential", got)
	}
	if !strings.Contains(bodies[len(bodies)-1], `"per_caller_credential":true`) {
		t.Fatalf("one gate view: %s", bodies[len(bodies)-1])
	}
	w = do(h, http.MethodGet, admin.GatePath+"?tenant=acme&provider=github&credential=cred:github-app", local, "")
	if !strings.Contains(w.Body.String(), `"credential":"github-app"`) || !strings.Contains(w.Body.String(), `"closed"`) {
		t.Fatalf("a broker-held credential's gate: %s", w.Body.String())
	}
}

// TestPageIsSelfContained: the page loads nothing from elsewhere, and its
// Content-Security-Policy allows exactly its own inline script and style.
func TestPageIsSelfContained(t *testing.T) {
	h, _ := newAdmin(t)
	w := do(h, http.MethodGet, admin.PagePath+"?tenant=acme", local, "")
	if w.Code != http.StatusOK || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/html") {
		t.Fatalf("page = %d %q", w.Code, w.Header().Get("Content-Type"))
	}
	body := w.Body.String()
	csp := w.Header().Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if regexp.MustCompile(`(?i)(src|href)\s*=|https?://|@import|url\(`).MatchString(body) {
		t.Error("the page refers to another resource")
	}
	for _, tag := range []string{"script", "style"} {
		m := regexp.MustCompile(`(?s)<` + tag + `>(.*?)</` + tag + `>`).FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("no inline %s", tag)
		}
		sum := sha256.Sum256([]byte(m[1]))
		if !strings.Contains(csp, tag+"-src 'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'") {
			t.Errorf("the CSP does not allow the page's %s by its hash", tag)
		}
	}
	if strings.Contains(body, "innerHTML") {
		t.Error("the page's script writes markup")
	}
}

// TestCatalog: a tenant's catalog lists its providers and readers.
func TestCatalog(t *testing.T) {
	h, _ := newAdmin(t)
	w := do(h, http.MethodGet, admin.CatalogPath+"?tenant=acme", local, "")
	var c admin.CatalogJSON
	if err := json.Unmarshal(w.Body.Bytes(), &c); err != nil || w.Code != http.StatusOK {
		t.Fatalf("%d %v", w.Code, err)
	}
	found := false
	for _, p := range c.Providers {
		if p.Name == "github" && len(p.Hints) > 0 {
			found = true
		}
	}
	if c.Tenant != "acme" || c.Version == "" || !found {
		t.Fatalf("catalog %+v lacks github's readers", c)
	}
}

// blockingStore is a memory store whose listings wait for release, or
// fail.
type blockingStore struct {
	*memstore.Store
	entered chan struct{}
	release chan struct{}
	fail    bool
}

func (b *blockingStore) ListGates(ctx context.Context, req store.ListGatesRequest) (store.GatePage, error) {
	if b.fail {
		return store.GatePage{}, fmt.Errorf("redis: connection refused to 10.1.2.3:6379")
	}
	b.entered <- struct{}{}
	select {
	case <-b.release:
	case <-ctx.Done():
		return store.GatePage{}, ctx.Err()
	}
	return b.Store.ListGates(ctx, req)
}

// TestStoreReadsAreBounded: at most MaxStoreReads requests read the store
// at once; one more is a 503 with Retry-After, at once. A store error is a
// 503 that names nothing of the store.
func TestStoreReadsAreBounded(t *testing.T) {
	bs := &blockingStore{Store: memstore.New(), entered: make(chan struct{}, 16), release: make(chan struct{})}
	defer bs.Close()
	h, err := admin.New(bs, tenants{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan int, admin.MaxStoreReads)
	for range admin.MaxStoreReads {
		go func() { done <- do(h, http.MethodGet, admin.GatesPath+"?tenant=acme", local, "").Code }()
		<-bs.entered
	}
	w := do(h, http.MethodGet, admin.GatesPath+"?tenant=acme", local, "")
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("one read past the bound = %d (Retry-After %q), want 503", w.Code, w.Header().Get("Retry-After"))
	}
	close(bs.release)
	for range admin.MaxStoreReads {
		if code := <-done; code != http.StatusOK {
			t.Fatalf("a read within the bound = %d", code)
		}
	}
	if w := do(h, http.MethodGet, admin.GatesPath+"?tenant=acme", local, ""); w.Code != http.StatusOK {
		t.Fatalf("after the reads ended = %d", w.Code)
	}
	bs.fail = true
	w = do(h, http.MethodGet, admin.GatesPath+"?tenant=acme", local, "")
	if w.Code != http.StatusServiceUnavailable || strings.Contains(w.Body.String(), "10.1.2.3") {
		t.Fatalf("a store error = %d %s", w.Code, w.Body.String())
	}
}

// TestGuardTokensFromConfig: tokens read on every request (the
// configuration's, which a reload changes) open the view as a token file
// does; once none is left, the view is loopback-only again.
func TestGuardTokensFromConfig(t *testing.T) {
	var current []admin.Token
	h, _ := newAdmin(t, admin.WithTokens(func() []admin.Token { return current }))
	if w := do(h, http.MethodGet, admin.TenantsPath, "10.0.0.1:1", ""); w.Code != http.StatusForbidden {
		t.Fatalf("no token, remote = %d, want 403", w.Code)
	}
	current = []admin.Token{admin.TokenFromHash(sha256.Sum256([]byte("other"))), admin.TokenFromHash(sha256.Sum256([]byte(testToken)))}
	for _, tc := range []struct {
		remote, auth string
		want         int
	}{
		{"10.0.0.1:1", "Bearer " + testToken, http.StatusOK},
		{"10.0.0.1:1", "Bearer other", http.StatusOK},
		{local, "", http.StatusUnauthorized},
		{"10.0.0.1:1", "Bearer nope", http.StatusUnauthorized},
	} {
		if w := do(h, http.MethodGet, admin.TenantsPath, tc.remote, tc.auth); w.Code != tc.want {
			t.Errorf("from %s with %q = %d, want %d", tc.remote, tc.auth, w.Code, tc.want)
		}
	}
	current = nil
	if w := do(h, http.MethodGet, admin.TenantsPath, "10.0.0.1:1", "Bearer "+testToken); w.Code != http.StatusForbidden {
		t.Fatalf("after the tokens left, remote = %d, want 403", w.Code)
	}
}
