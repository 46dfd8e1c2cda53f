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
