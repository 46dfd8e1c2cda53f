package main

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// adminDo sends one request to a broker's metrics listener on loopback.
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

// TestAdminOnARealListener (issue 17, defect 5): a real broker's metrics
// listener, on loopback. The admin view used to answer POST; it answers
// GET and HEAD only, and with --admin-token-file, only with the token.
func TestAdminOnARealListener(t *testing.T) {
	metricsAddr := freePort(t)
	startProc(t, "--metrics-listen", metricsAddr)
	gate := "http://" + metricsAddr + AdminGatePath + "?tenant=dev&host=api.example"
	if code := adminDo(t, http.MethodGet, gate, ""); code != http.StatusOK {
		t.Fatalf("GET from loopback = %d, want 200", code)
	}
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		if code := adminDo(t, m, gate, ""); code != http.StatusMethodNotAllowed {
			t.Errorf("%s = %d, want 405", m, code)
		}
	}

	hashFile := filepath.Join(t.TempDir(), "admin.sha256")
	sum := sha256.Sum256([]byte(adminTestToken))
	if err := os.WriteFile(hashFile, []byte(hex.EncodeToString(sum[:])+"  -\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	protectedAddr := freePort(t)
	p := startProc(t, "--metrics-listen", protectedAddr, "--admin-token-file", hashFile)
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
	if code := adminDo(t, http.MethodGet, "http://"+protectedAddr+"/metrics", ""); code != http.StatusOK {
		t.Errorf("GET /metrics = %d, want 200 without a token", code)
	}
	if strings.Contains(p.logs.String(), adminTestToken) {
		t.Error("the broker logged the admin token")
	}

	// A token file without a metrics listener protects nothing: refused.
	out, err := exec.Command(brokerBin, "--listen", freePort(t), "--admin-token-file", hashFile).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--metrics-listen") {
		t.Errorf("--admin-token-file without --metrics-listen: %v, %s", err, out)
	}
}
