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

	"github.com/retrybroker/retrybroker/internal/admin"
	"github.com/retrybroker/retrybroker/internal/store/memstore"
)

// adminTestToken is the admin token of these tests, and its hash.
const adminTestToken = "s3cret-admin-token"

func adminTestHash() admin.Token {
	return admin.TokenFromHash(sha256.Sum256([]byte(adminTestToken)))
}

// TestMetricsListenerHasNoAdmin (issue 21): the admin view moved to its
// own listener; the metrics listener, which answers any peer, no longer
// serves it.
func TestMetricsListenerHasNoAdmin(t *testing.T) {
	st := memstore.New()
	defer st.Close()
	h := metricsMux(http.NotFoundHandler(), st, "memory")
	for _, p := range []string{AdminGatePath + "?tenant=dev&host=api.example", admin.GatesPath + "?tenant=dev", "/debug/pprof/"} {
		r := httptest.NewRequest(http.MethodGet, p, nil)
		r.RemoteAddr = "127.0.0.1:1234"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusNotFound {
			t.Errorf("GET %s on the metrics listener = %d, want 404", p, w.Code)
		}
	}
}

// TestCheckAdminListen: off loopback, the admin listener needs a token;
// a token needs the listener.
func TestCheckAdminListen(t *testing.T) {
	tok := adminTestHash()
	for _, tc := range []struct {
		addr       string
		tok        admin.Token
		configured int
		ok         bool
	}{
		{"", admin.Token{}, 0, true},
		{"", tok, 0, false},
		{"127.0.0.1:9091", admin.Token{}, 0, true},
		{"[::1]:9091", admin.Token{}, 0, true},
		{"localhost:9091", admin.Token{}, 0, true},
		{"0.0.0.0:9091", admin.Token{}, 0, false},
		{":9091", admin.Token{}, 0, false},
		{"10.0.0.1:9091", admin.Token{}, 0, false},
		{"0.0.0.0:9091", tok, 0, true},
		{"nonsense", tok, 0, false},
		{"0.0.0.0:9091", admin.Token{}, 1, true}, // the configuration's admin.token_sha256
	} {
		if err := checkAdminListen(tc.addr, tc.tok, tc.configured); (err == nil) != tc.ok {
			t.Errorf("checkAdminListen(%q, token %v, %d configured) = %v", tc.addr, tc.tok.Set(), tc.configured, err)
		}
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
	sum := sha256.Sum256([]byte(adminTestToken))
	hexHash := hex.EncodeToString(sum[:])
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
	if got, err := loadAdminToken(""); err != nil || got.Set() {
		t.Errorf("no file: %v, %v", got, err)
	}
}

// TestWarnOpenMetrics (issue 17, defect 5): a non-loopback metrics
// listener used to start without a word. The address is only a value
// here: nothing listens on it.
func TestWarnOpenMetrics(t *testing.T) {
	for _, tc := range []struct {
		addr net.Addr
		want string
	}{
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9090}, ""},
		{&net.TCPAddr{IP: net.IPv6loopback, Port: 9090}, ""},
		{&net.TCPAddr{IP: net.IPv4zero, Port: 9095}, "answer any peer"},
		{&net.TCPAddr{IP: net.IPv6unspecified, Port: 9095}, "answer any peer"},
	} {
		var buf bytes.Buffer
		warnOpenMetrics(slog.New(slog.NewTextHandler(&buf, nil)), tc.addr)
		got := buf.String()
		if tc.want == "" && got != "" || tc.want != "" && (!strings.Contains(got, "level=WARN") || !strings.Contains(got, tc.want)) {
			t.Errorf("listener %s: logged %q, want %q", tc.addr, got, tc.want)
		}
	}
}
