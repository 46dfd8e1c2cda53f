package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retrybroker/retrybroker/internal/providers"
)

// TestProvidersDocsUpToDate fails when docs/providers.md drifts from the
// catalog: run `make generate`.
func TestProvidersDocsUpToDate(t *testing.T) {
	want, err := os.ReadFile(filepath.Join("..", "..", "docs", "providers.md"))
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if code := providersCommand([]string{"docs"}, &got, &bytes.Buffer{}); code != 0 {
		t.Fatalf("providers docs exited %d", code)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatal("docs/providers.md is not what `broker providers docs` prints; run `make generate`")
	}
}

func runProviders(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := providersCommand(args, &out, &errOut)
	return out.String(), errOut.String(), code
}

func TestProvidersList(t *testing.T) {
	out, _, code := runProviders(t, "list")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	if !strings.Contains(out, providers.Builtin().Version()) {
		t.Errorf("list does not show the catalog version:\n%s", out)
	}
	for _, n := range providers.Names() {
		if !strings.Contains(out, "\n"+n+" ") {
			t.Errorf("list misses %s:\n%s", n, out)
		}
	}
	if !strings.Contains(out, "secondary_rate_limit") {
		t.Errorf("list does not name rules:\n%s", out)
	}
}

func TestProvidersShow(t *testing.T) {
	out, _, code := runProviders(t, "show", "shopify")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"name: shopify", "graphql_throttled", "restoreRate", "# reads the body of: 200"} {
		if !strings.Contains(out, want) {
			t.Errorf("show misses %q:\n%s", want, out)
		}
	}
	if _, errOut, code := runProviders(t, "show", "nope"); code != 1 || !strings.Contains(errOut, "unknown provider") {
		t.Errorf("unknown provider: exit %d, %q", code, errOut)
	}
}

func TestProvidersTest(t *testing.T) {
	dir := t.TempDir()
	body := filepath.Join(dir, "body.json")
	if err := os.WriteFile(body, []byte(`{"message":"You have exceeded a secondary rate limit."}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args []string
		want []string
	}{
		{
			[]string{"test", "retry-after", "--status", "429", "--header", "Retry-After: 5"},
			[]string{"action:       retry", "delay:        5s", "REASON_SERVER_HINT", "hint source:  retry-after", "rule:         -", "header retry-after (retry_after)"},
		},
		{
			[]string{"test", "github", "--status", "403", "--header", "x-ratelimit-remaining: 4990", "--header", "x-ratelimit-reset: 1796126445", "--body", body, "--now", "2026-12-01T12:00:00Z"},
			[]string{"delay:        1m0s", "rule:         github/secondary_rate_limit", "hint source:  rule:github/secondary_rate_limit", "4990 left", "(in 45s)", "github/secondary_rate_limit: matched"},
		},
		{
			[]string{"test", "github", "--status", "403", "--attempt", "2", "--body", body},
			[]string{"action:       do_not_retry", "REASON_HINT_EXCEEDS_MAX_DELAY", "hint:         2m0s"},
		},
		{
			[]string{"test", "openai", "--status", "503", "--header", "x-should-retry: false"},
			[]string{"REASON_PROVIDER_FORBIDS_RETRY", "verdict:      should_retry x-should-retry: do_not_retry"},
		},
		{
			[]string{"test", "aws", "--status", "400", "--header", "x-amzn-ErrorType: ValidationException"},
			[]string{"REASON_STATUS_NOT_RETRYABLE", "aws/throttling_error_code: no match"},
		},
	}
	for _, tt := range tests {
		out, errOut, code := runProviders(t, tt.args...)
		if code != 0 {
			t.Errorf("%v: exit %d: %s", tt.args, code, errOut)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: output misses %q:\n%s", tt.args, w, out)
			}
		}
	}
	for _, bad := range [][]string{
		{"test"},
		{"test", "github"},
		{"test", "github", "--status", "42"},
		{"test", "github", "--status", "429", "--header", "no colon"},
		{"test", "github", "--status", "429", "extra"},
		{"frobnicate"},
		{},
	} {
		if _, _, code := runProviders(t, bad...); code != 2 {
			t.Errorf("%v: exit %d, want 2 (usage)", bad, code)
		}
	}
	if _, errOut, code := runProviders(t, "test", "github", "--status", "429", "--body", filepath.Join(dir, "missing")); code != 1 || !strings.Contains(errOut, "--body") {
		t.Errorf("missing body file: exit %d, %q", code, errOut)
	}
}

// TestProvidersWithConfig: list, show and test print the catalog as the
// configuration loads it, a tenant's view with --tenant, and the operator's
// rule decides test's response.
func TestProvidersWithConfig(t *testing.T) {
	const cfg = "../../testdata/config/providers.yaml"
	out, errOut, code := runProviders(t, "list", "--config", cfg)
	if code != 0 {
		t.Fatalf("list: exit %d: %s", code, errOut)
	}
	for _, want := range []string{"the catalog of " + cfg, "corp-api     api.corp.example", "slow_down", cfg + ":14", "aws "} {
		if !strings.Contains(out, want) {
			t.Errorf("list misses %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "corp-batch") {
		t.Errorf("the file's catalog shows team-b's provider:\n%s", out)
	}
	out, _, code = runProviders(t, "list", "--config", cfg, "--tenant", "team-b")
	if code != 0 || !strings.Contains(out, "corp-batch") || !strings.Contains(out, "tenant team-b, extends corp-api") {
		t.Errorf("list --tenant team-b: exit %d\n%s", code, out)
	}
	out, _, code = runProviders(t, "show", "corp-batch", "--config", cfg, "--tenant", "team-b")
	if code != 0 {
		t.Fatalf("show: exit %d", code)
	}
	// As loaded: the inherited slow_down rule after the tenant's own.
	daily, slow := strings.Index(out, "name: daily_quota"), strings.Index(out, "name: slow_down")
	if daily < 0 || slow < daily || !strings.Contains(out, "# reads the body of: 400, 429") || strings.Contains(out, "api.corp.example") {
		t.Errorf("show corp-batch:\n%s", out)
	}
	if _, errOut, code := runProviders(t, "show", "corp-batch", "--config", cfg, "--tenant", "team-a"); code != 1 || !strings.Contains(errOut, `unknown provider "corp-batch"`) {
		t.Errorf("team-a sees corp-batch: exit %d %s", code, errOut)
	}

	body := filepath.Join(t.TempDir(), "slow.json")
	if err := os.WriteFile(body, []byte(`{"error":"slow_down","wait_ms":1500}`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = runProviders(t, "test", "corp-api", "--config", cfg, "--status", "400", "--body", body)
	if code != 0 {
		t.Fatalf("test: exit %d: %s", code, errOut)
	}
	for _, want := range []string{"policy: the standard policy", "action:       retry", "delay:        1.5s", "rule:         corp-api/slow_down", "hint source:  body:wait_ms", "corp-api/slow_down: matched"} {
		if !strings.Contains(out, want) {
			t.Errorf("test misses %q:\n%s", want, out)
		}
	}
	out, _, code = runProviders(t, "test", "corp-batch", "--status", "429", "--config", cfg, "--tenant", "team-b", "--body", body)
	if code != 0 || !strings.Contains(out, "policy: team-b/default") || !strings.Contains(out, "corp-batch/daily_quota: no match") {
		t.Errorf("test --tenant team-b: exit %d\n%s", code, out)
	}

	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("version: 1\nproviders:\n  corp:\n    rules: [{name: r, when: 'stauts == 1', action: retry}]\ntenants: [{id: a, api_key_sha256: ["+strings.Repeat("ab", 32)+"]}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := runProviders(t, "list", "--config", bad); code != 1 || !strings.Contains(errOut, "bad.yaml:4:30: providers.corp.rules[0].when: undeclared reference to 'stauts'") {
		t.Errorf("a bad file: exit %d\n%s", code, errOut)
	}
	for _, usage := range [][]string{
		{"list", "--tenant", "team-a"},
		{"test", "corp-api", "--status", "400", "--policy", "default"},
		{"show"},
		{"list", "extra", "--config", cfg},
	} {
		_, _, code := runProviders(t, usage...)
		if usage[0] == "list" && usage[1] == "--tenant" {
			if code != 1 {
				t.Errorf("%v: exit %d, want 1", usage, code)
			}
			continue
		}
		if code != 2 {
			t.Errorf("%v: exit %d, want 2 (usage)", usage, code)
		}
	}
}

// TestProvidersDocsShowTheTestedExample keeps the example of
// docs/providers.md identical to the providers of
// testdata/config/providers.yaml, which the end-to-end tests load.
func TestProvidersDocsShowTheTestedExample(t *testing.T) {
	cfg, err := os.ReadFile(filepath.Join("..", "..", "testdata", "config", "providers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	start := bytes.Index(cfg, []byte("providers:\n"))
	end := bytes.Index(cfg, []byte("\ntenants:\n"))
	if start < 0 || end < start {
		t.Fatal("testdata/config/providers.yaml has no providers section before its tenants")
	}
	docs, err := os.ReadFile(filepath.Join("..", "..", "docs", "providers.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(docs, append(append([]byte("```yaml\n"), cfg[start:end]...), []byte("```")...)) {
		t.Fatal("docs/providers.md does not show the providers section of testdata/config/providers.yaml (edit internal/providers/docs.md.tmpl and run make generate)")
	}
}
