package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/internal/admin"
)

// adminDo sends one request to a broker's listener on loopback.
func adminDo(t *testing.T, method, url, auth string) int {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// TestAdminOnARealListener (issues 17 and 21): a real broker's admin
// listener, on loopback, answers GET and HEAD only, and with
// --admin-token-file only with the token; the metrics listener no longer
// serves it.
func TestAdminOnARealListener(t *testing.T) {
	adminAddr, metricsAddr := freePort(t), freePort(t)
	startProc(t, "--admin-listen", adminAddr, "--metrics-listen", metricsAddr)
	gate := "http://" + adminAddr + AdminGatePath + "?tenant=dev&host=api.example"
	for _, p := range []string{gate, "http://" + adminAddr + admin.GatesPath + "?tenant=dev", "http://" + adminAddr + admin.PagePath, "http://" + adminAddr + admin.PprofPath} {
		if code := adminDo(t, http.MethodGet, p, ""); code != http.StatusOK {
			t.Fatalf("GET %s from loopback = %d, want 200", p, code)
		}
	}
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		if code := adminDo(t, m, gate, ""); code != http.StatusMethodNotAllowed {
			t.Errorf("%s = %d, want 405", m, code)
		}
	}
	if code := adminDo(t, http.MethodGet, "http://"+metricsAddr+AdminGatePath+"?tenant=dev&host=api.example", ""); code != http.StatusNotFound {
		t.Errorf("the metrics listener's %s = %d, want 404 (moved)", AdminGatePath, code)
	}

	hashFile := filepath.Join(t.TempDir(), "admin.sha256")
	sum := sha256.Sum256([]byte(adminTestToken))
	if err := os.WriteFile(hashFile, []byte(hex.EncodeToString(sum[:])+"  -\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	protectedAddr := freePort(t)
	p := startProc(t, "--admin-listen", protectedAddr, "--admin-token-file", hashFile)
	gate = "http://" + protectedAddr + AdminGatePath + "?tenant=dev&host=api.example"
	for _, tc := range []struct {
		method, auth string
		want         int
	}{
		{http.MethodGet, "", http.StatusUnauthorized},
		{http.MethodGet, "Bearer nope", http.StatusUnauthorized},
		{http.MethodGet, "Bearer " + adminTestToken, http.StatusOK},
		{http.MethodPost, "Bearer " + adminTestToken, http.StatusMethodNotAllowed},
	} {
		if code := adminDo(t, tc.method, gate, tc.auth); code != tc.want {
			t.Errorf("%s with %q = %d, want %d", tc.method, tc.auth, code, tc.want)
		}
	}
	if strings.Contains(p.logs.String(), adminTestToken) {
		t.Error("the broker logged the admin token")
	}

	// A token file without an admin listener protects nothing, and an
	// admin listener off loopback needs a token: both refused at start,
	// before anything listens.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--admin-token-file", hashFile}, "--admin-listen"},
		{[]string{"--admin-listen", "0.0.0.0:0"}, "without an admin token"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a broker that starts anyway is killed
		out, err := exec.CommandContext(ctx, brokerBin, append([]string{"--listen", freePort(t)}, tc.args...)...).CombinedOutput()
		cancel()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("%v: %v, %s", tc.args, err, out)
		}
	}
}

// TestAdminTokenFromConfig (issue 21): the configuration's
// admin.token_sha256 opens the admin listener to the token's holder, as
// --admin-token-file does, and lists the configuration's tenants only.
func TestAdminTokenFromConfig(t *testing.T) {
	sum := sha256.Sum256([]byte(adminTestToken))
	key := sha256.Sum256([]byte("team-a-key"))
	cfg := filepath.Join(t.TempDir(), "broker.yaml")
	body := "version: 1\ntenants:\n  - id: team-a\n    api_key_sha256: [\"" + hex.EncodeToString(key[:]) + "\"]\n" +
		"admin:\n  token_sha256: [\"" + hex.EncodeToString(sum[:]) + "\"]\n"
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	adminAddr := freePort(t)
	startProc(t, "--config", cfg, "--admin-listen", adminAddr)
	base := "http://" + adminAddr
	for _, tc := range []struct {
		path, auth string
		want       int
	}{
		{admin.GatesPath + "?tenant=team-a", "", http.StatusUnauthorized},
		{admin.GatesPath + "?tenant=team-a", "Bearer " + adminTestToken, http.StatusOK},
		{admin.GatesPath + "?tenant=dev", "Bearer " + adminTestToken, http.StatusNotFound},
		{admin.CatalogPath + "?tenant=team-a", "Bearer " + adminTestToken, http.StatusOK},
		{admin.PprofPath, "", http.StatusUnauthorized},
	} {
		if code := adminDo(t, http.MethodGet, base+tc.path, tc.auth); code != tc.want {
			t.Errorf("GET %s with %q = %d, want %d", tc.path, tc.auth, code, tc.want)
		}
	}
}
