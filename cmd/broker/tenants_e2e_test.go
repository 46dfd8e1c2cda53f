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
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
)

const exampleConfig = "../../testdata/config/two-tenants.yaml"

func withKey(ctx context.Context, key string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+key)
}

var classify503 = &rbv1.ClassifyResponseRequest{StatusCode: 503}

func TestConfigAuthentication(t *testing.T) {
	p := startProc(t, "--config", exampleConfig)
	cases := []struct {
		name string
		ctx  context.Context
		code codes.Code
	}{
		{"no key", t.Context(), codes.Unauthenticated},
		{"unknown key", withKey(t.Context(), "not-a-key"), codes.Unauthenticated},
		{"basic scheme", metadata.AppendToOutgoingContext(t.Context(), "authorization", "Basic dGVhbS1h"), codes.Unauthenticated},
		{"team-a", withKey(t.Context(), "team-a-secret-key"), codes.OK},
		{"team-b", withKey(t.Context(), "team-b-secret-key"), codes.OK},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := p.client.ClassifyResponse(c.ctx, classify503)
			if status.Code(err) != c.code {
				t.Fatalf("code %s (%v), want %s", status.Code(err), err, c.code)
			}
			if err != nil && strings.Contains(status.Convert(err).Message(), "not-a-key") {
				t.Fatal("the key is echoed back")
			}
		})
	}
	if strings.Contains(p.logs.String(), "team-a-secret-key") {
		t.Fatal("an API key reached the logs")
	}
}

func TestCrossTenantPolicies(t *testing.T) {
	p := startProc(t, "--config", exampleConfig)
	b := withKey(t.Context(), "team-b-secret-key")
	for _, c := range []struct {
		policy string
		code   codes.Code
	}{
		{"reports", codes.FailedPrecondition},             // team-a's policy name, unknown to team-b
		{"team-a/reports", codes.PermissionDenied},        // explicitly another tenant's
		{"team-a/does-not-exist", codes.PermissionDenied}, // same answer: existence is not revealed
		{"team-b/bulk", codes.OK},
		{"bulk", codes.OK},
	} {
		req := &rbv1.ClassifyResponseRequest{StatusCode: 503, Policy: c.policy}
		_, err := p.client.ClassifyResponse(b, req)
		if status.Code(err) != c.code {
			t.Errorf("policy %q: code %s (%v), want %s", c.policy, status.Code(err), err, c.code)
		}
	}
}

// TestTenantIsolation: team-a's closed gate for a provider does not affect
// team-b calling the same upstream with the same provider.
func TestTenantIsolation(t *testing.T) {
	up := newCountingUpstream(t, func(n int32, w http.ResponseWriter) {
		if n == 1 {
			w.Header().Set("Retry-After", "120")
			w.WriteHeader(http.StatusTooManyRequests)
		}
	})
	p := startProc(t, "--config", exampleConfig)
	req := &rbv1.ExecuteRequest{Provider: "github", Request: &rbv1.HttpRequest{Url: up.URL}}
	a, b := withKey(t.Context(), "team-a-secret-key"), withKey(t.Context(), "team-b-secret-key")
	ra, err := p.client.Execute(a, req)
	if err != nil || ra.GetOutcome() != rbv1.Outcome_OUTCOME_HINT_EXCEEDS_MAX_DELAY {
		t.Fatalf("team-a first call: %v %v", err, ra.GetOutcome())
	}
	rb, err := p.client.Execute(b, req)
	if err != nil || rb.GetOutcome() != rbv1.Outcome_OUTCOME_SUCCESS {
		t.Fatalf("team-b is affected by team-a's gate: %v %v", err, rb.GetOutcome())
	}
	ra, err = p.client.Execute(a, req)
	if err != nil || ra.GetOutcome() != rbv1.Outcome_OUTCOME_GATE_CLOSED {
		t.Fatalf("team-a second call: %v %v", err, ra.GetOutcome())
	}
	if n := up.n.Load(); n != 2 {
		t.Fatalf("upstream saw %d calls, want 2 (team-a once, team-b once)", n)
	}
}

func keyHash(k string) string {
	s := sha256.Sum256([]byte(k))
	return hex.EncodeToString(s[:])
}

func TestConfigReload(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "broker.yaml")
	base, err := os.ReadFile(exampleConfig)
	if err != nil {
		t.Fatal(err)
	}
	write := func(content string) {
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write(string(base))
	p := startProc(t, "--config", path)
	c := withKey(t.Context(), "team-c-key")
	if _, err := p.client.ClassifyResponse(c, classify503); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("team-c before reload: %v", err)
	}
	withC := string(base) + "\n  - id: team-c\n    api_key_sha256: [" + keyHash("team-c-key") + "]\n"
	write(withC)
	_ = p.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, 10*time.Second, func() bool {
		_, err := p.client.ClassifyResponse(c, classify503)
		return err == nil
	})
	// A broken file keeps the last good configuration.
	write(withC + "\n  - id: \"bad id\"\n")
	_ = p.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, 10*time.Second, func() bool { return strings.Contains(p.logs.String(), "bad id") })
	if _, err := p.client.ClassifyResponse(c, classify503); err != nil {
		t.Fatalf("after a bad reload team-c lost access: %v", err)
	}
	if _, err := p.client.ClassifyResponse(withKey(t.Context(), "team-a-secret-key"), classify503); err != nil {
		t.Fatalf("after a bad reload team-a lost access: %v", err)
	}
}

func waitFor(t *testing.T, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("condition not met within %v", within)
}

func TestInvalidConfigRefusedAtStart(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("version: 1\ntenants:\n  - id: x\n    api_key_sha256: [nothex]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(brokerBin, "--listen", "127.0.0.1:0", "--config", bad).CombinedOutput()
	if err == nil {
		t.Fatal("broker started with an invalid config")
	}
	if !strings.Contains(string(out), "api_key_sha256") || !strings.Contains(string(out), "bad.yaml:4") {
		t.Fatalf("error does not point at the field and line:\n%s", out)
	}
	out, err = exec.Command(brokerBin, "config", "check", bad).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "tenants[0].api_key_sha256") {
		t.Fatalf("config check: %v\n%s", err, out)
	}
	out, err = exec.Command(brokerBin, "config", "check", exampleConfig).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ok: 2 tenants") {
		t.Fatalf("config check of the example: %v\n%s", err, out)
	}
}

// TestReadmeShowsTheTestedConfig keeps the README's two-tenant example
// identical to the file the tests load.
func TestReadmeShowsTheTestedConfig(t *testing.T) {
	cfg, err := os.ReadFile(exampleConfig)
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "```yaml\n"+string(cfg)+"```") {
		t.Fatal("README.md's two-tenant example differs from testdata/config/two-tenants.yaml")
	}
}
