package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retrybroker/retrybroker/internal/store/memstore"
)

// adminTestToken is the admin token of these tests, and its hash.
const adminTestToken = "s3cret-admin-token"

func adminTestHash() adminToken {
	return adminToken{hash: sha256.Sum256([]byte(adminTestToken)), set: true}
}

// serveAdmin runs one request through the metrics listener's handler, as
// the listener would, with the peer address remote. No connection is made:
// a non-loopback peer is only a RemoteAddr.
func serveAdmin(t *testing.T, tok adminToken, method, path, remote, auth string) *httptest.ResponseRecorder {
	t.Helper()
	st := memstore.New()
	t.Cleanup(func() { _ = st.Close() })
	h := metricsMux(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("metrics\n")) }), st, "memory", tok)
	r := httptest.NewRequest(method, path, nil)
	r.RemoteAddr = remote
	if auth != "" {
		r.Header.Set("Authorization", auth)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

const gatePath = AdminGatePath + "?tenant=dev&host=api.example"

// TestAdminRefusesRemotePeers (issue 17, defect 5): the admin view used to
// answer any peer; without a token it answers loopback peers only now,
// while /metrics and /health/shared-state answer anyone.
func TestAdminRefusesRemotePeers(t *testing.T) {
	for _, remote := range []string{"10.0.0.1:1234", "[2001:db8::1]:1234", "[::ffff:10.0.0.1]:1234", "192.168.1.5:80", "garbage"} {
		if w := serveAdmin(t, adminToken{}, http.MethodGet, gatePath, remote, ""); w.Code != http.StatusForbidden {
			t.Errorf("GET %s from %s = %d, want 403", AdminGatePath, remote, w.Code)
		}
		if w := serveAdmin(t, adminToken{}, http.MethodGet, "/admin/anything", remote, ""); w.Code != http.StatusForbidden {
			t.Errorf("GET /admin/anything from %s = %d, want 403", remote, w.Code)
		}
		if w := serveAdmin(t, adminToken{}, http.MethodGet, "/metrics", remote, ""); w.Code != http.StatusOK {
			t.Errorf("GET /metrics from %s = %d, want 200", remote, w.Code)
		}
		if w := serveAdmin(t, adminToken{}, http.MethodGet, SharedStateHealthPath, remote, ""); w.Code != http.StatusOK {
			t.Errorf("GET %s from %s = %d, want 200", SharedStateHealthPath, remote, w.Code)
		}
	}
	for _, remote := range []string{"127.0.0.1:1234", "127.8.9.10:1", "[::1]:1234", "[::ffff:127.0.0.1]:1234"} {
		if w := serveAdmin(t, adminToken{}, http.MethodGet, gatePath, remote, ""); w.Code != http.StatusOK {
			t.Errorf("GET %s from %s = %d, want 200", AdminGatePath, remote, w.Code)
		}
	}
}

// TestAdminIsReadOnly (issue 17, defect 5): the admin view used to answer
// POST as it answers GET.
func TestAdminIsReadOnly(t *testing.T) {
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch, "PURGE"} {
		w := serveAdmin(t, adminToken{}, m, gatePath, "127.0.0.1:1234", "")
		if w.Code != http.StatusMethodNotAllowed || w.Header().Get("Allow") != "GET, HEAD" {
			t.Errorf("%s %s from loopback = %d (Allow %q), want 405 (GET, HEAD)", m, AdminGatePath, w.Code, w.Header().Get("Allow"))
		}
	}
	if w := serveAdmin(t, adminToken{}, http.MethodHead, gatePath, "127.0.0.1:1234", ""); w.Code != http.StatusOK {
		t.Errorf("HEAD = %d, want 200", w.Code)
	}
}

// TestAdminToken: with a token set, every peer, loopback included, needs
// it; a remote peer with it is served.
func TestAdminToken(t *testing.T) {
	tok := adminTestHash()
	for _, tc := range []struct {
		remote, auth string
		want         int
	}{
		{"10.0.0.1:1234", "Bearer " + adminTestToken, http.StatusOK},
		{"127.0.0.1:1234", "Bearer " + adminTestToken, http.StatusOK},
		{"10.0.0.1:1234", "", http.StatusUnauthorized},
		{"127.0.0.1:1234", "", http.StatusUnauthorized},
		{"10.0.0.1:1234", "Bearer wrong", http.StatusUnauthorized},
		{"10.0.0.1:1234", "Basic " + adminTestToken, http.StatusUnauthorized},
		{"10.0.0.1:1234", "Bearer " + hex.EncodeToString(tok.hash[:]), http.StatusUnauthorized}, // the hash is not the token
	} {
		w := serveAdmin(t, tok, http.MethodGet, gatePath, tc.remote, tc.auth)
		if w.Code != tc.want {
			t.Errorf("GET from %s with %q = %d, want %d", tc.remote, tc.auth, w.Code, tc.want)
		}
		if strings.Contains(w.Body.String(), adminTestToken) {
			t.Errorf("the answer repeats the token: %q", w.Body.String())
		}
	}
	if w := serveAdmin(t, tok, http.MethodPost, gatePath, "10.0.0.1:1234", "Bearer "+adminTestToken); w.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST with the token = %d, want 405", w.Code)
	}
}

func TestLoadAdminToken(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	h := adminTestHash()
	hexHash := hex.EncodeToString(h.hash[:])
	for _, ok := range []string{hexHash, hexHash + "\n", hexHash + "  -\n", strings.ToUpper(hexHash)} {
		got, err := loadAdminToken(write("ok", ok))
		if err != nil || got != h {
			t.Errorf("loadAdminToken(%q) = %v, %v", ok, got, err)
		}
	}
	for _, bad := range []string{"", adminTestToken, hexHash[:63], hexHash + "0", strings.Repeat("z", 64), strings.Repeat("a", 5000)} {
		_, err := loadAdminToken(write("bad", bad))
		if err == nil || !strings.Contains(err.Error(), "SHA-256") {
			t.Errorf("loadAdminToken(%q): %v, want an error naming the SHA-256", bad, err)
		}
		if bad != "" && err != nil && strings.Contains(err.Error(), bad) {
			t.Errorf("the error repeats the file's content: %v", err)
		}
	}
	if _, err := loadAdminToken(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing file loaded")
	}
	if got, err := loadAdminToken(""); err != nil || got.set {
		t.Errorf("no file: %v, %v", got, err)
	}
}

// TestWarnOpenMetrics (issue 17, defect 5): a non-loopback metrics
// listener used to start without a word. The address is only a value
// here: nothing listens on it.
func TestWarnOpenMetrics(t *testing.T) {
	for _, tc := range []struct {
		addr net.Addr
		tok  adminToken
		want string
	}{
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9090}, adminToken{}, ""},
		{&net.TCPAddr{IP: net.IPv6loopback, Port: 9090}, adminToken{}, ""},
		{&net.TCPAddr{IP: net.IPv4zero, Port: 9095}, adminToken{}, "answers loopback peers only"},
		{&net.TCPAddr{IP: net.IPv6unspecified, Port: 9095}, adminToken{}, "answers loopback peers only"},
		{&net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 9095}, adminTestHash(), "needs the admin token"},
	} {
		var buf bytes.Buffer
		warnOpenMetrics(slog.New(slog.NewTextHandler(&buf, nil)), tc.addr, tc.tok)
		got := buf.String()
		if tc.want == "" && got != "" || tc.want != "" && (!strings.Contains(got, "level=WARN") || !strings.Contains(got, tc.want)) {
			t.Errorf("listener %s: logged %q, want %q", tc.addr, got, tc.want)
		}
	}
}
