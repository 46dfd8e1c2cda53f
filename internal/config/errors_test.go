package config

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const (
	hashA = "12e43dbe7404fac122a678d3347840446ef214e68de6361a1089dbacf34478d9" // team-a-secret-key
	hashB = "ee612764d423b3100701813d8aac3dbdbe1e78e1a47270b83df6d8cacc23d47c" // team-b-secret-key
)

// writeConfig writes body to a file in a fresh temporary directory.
func writeConfig(t testing.TB, name, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// markedLine returns the 1-based line of body that holds the "#<" marker.
func markedLine(t *testing.T, body string) int {
	t.Helper()
	for i, l := range strings.Split(body, "\n") {
		if strings.Contains(l, "#<") {
			return i + 1
		}
	}
	t.Fatalf("no #< marker in\n%s", body)
	return 0
}

// TestLoadErrors checks that each broken file is refused with a problem
// that names the file, the line (marked "#<" in the case), the field path
// and what is wrong.
func TestLoadErrors(t *testing.T) {
	tenantA := "  - id: team-a\n    api_key_sha256: [" + hashA + "]\n"
	cases := []struct {
		name string
		body string
		path string // field path in the problem
		msg  string // substring of the message
	}{
		{
			"wrong version", "version: 2 #<\ntenants:\n" + tenantA,
			"version", "unsupported version 2",
		},
		{
			"missing version", "tenants: #<\n" + tenantA,
			"version", "missing: start the file with version: 1",
		},
		{
			"unknown top-level key", "version: 1\ntenant: #<\n" + tenantA + "tenants:\n" + tenantA,
			"tenant", "did you mean tenants?",
		},
		{
			"unknown policy key", "version: 1\ntenants:\n" + tenantA + "    policies:\n      default:\n        max_retry: 3 #<\n",
			"tenants[0].policies.default.max_retry", "did you mean max_retries?",
		},
		{
			"duplicate tenant id", "version: 1\ntenants:\n" + tenantA + "  - id: team-a #<\n    api_key_sha256: [" + hashB + "]\n",
			"tenants[1].id", `duplicate tenant id "team-a" (first defined at line 3)`,
		},
		{
			"tenant id charset", "version: 1\ntenants:\n  - id: team a/1 #<\n    api_key_sha256: [" + hashA + "]\n",
			"tenants[0].id", "invalid tenant id",
		},
		{
			"key hash too short", "version: 1\ntenants:\n  - id: a\n    api_key_sha256:\n      - my-plain-api-key #<\n",
			"tenants[0].api_key_sha256[0]", "got 16 characters; store the hash of the key, never the key",
		},
		{
			"key hash not hex", "version: 1\ntenants:\n  - id: a\n    api_key_sha256:\n      - " + strings.Repeat("zz", 32) + " #<\n",
			"tenants[0].api_key_sha256[0]", "64 hex digits (0-9, a-f)",
		},
		{
			"key hash with sha256sum dash", "version: 1\ntenants:\n  - id: a\n    api_key_sha256:\n      - \"" + hashA + "  -\" #<\n",
			"tenants[0].api_key_sha256[0]", `remove the trailing "  -"`,
		},
		{
			"same key in two tenants", "version: 1\ntenants:\n" + tenantA + "  - id: team-b\n    api_key_sha256:\n      - " + strings.ToUpper(hashA) + " #<\n",
			"tenants[1].api_key_sha256[0]", `also listed for tenant "team-a"`,
		},
		{
			"default policy missing", "version: 1\ntenants:\n" + tenantA + "    default_policy: fast #<\n    policies:\n      slow: {max_retries: 1}\n",
			"tenants[0].default_policy", `no policy named "fast" in this tenant (it has: slow)`,
		},
		{
			"no default policy", "version: 1\ntenants:\n  - id: a #<\n    api_key_sha256: [" + hashA + "]\n    policies:\n      slow: {max_retries: 1}\n",
			"tenants[0].default_policy", `no policy named "default"`,
		},
		{
			"unknown provider", "version: 1\ntenants:\n" + tenantA + "    policies:\n      default:\n        provider: githab #<\n",
			"tenants[0].policies.default.provider", `unknown provider "githab"`,
		},
		{
			"bad CIDR", "version: 1\ntenants:\n" + tenantA + "    policies:\n      default:\n        allow_destinations:\n          - 10.20.0.0/33 #<\n",
			"tenants[0].policies.default.allow_destinations[0]", "not a valid CIDR",
		},
		{
			"CIDR with host bits", "version: 1\ntenants:\n" + tenantA + "    policies:\n      default:\n        allow_destinations: [10.20.1.0/16] #<\n",
			"tenants[0].policies.default.allow_destinations[0]", "did you mean 10.20.0.0/16?",
		},
		{
			"duration without unit", "version: 1\ntenants:\n" + tenantA + "    policies:\n      default:\n        max_delay: 30 #<\n",
			"tenants[0].policies.default.max_delay", "has no unit",
		},
		{
			"bad duration", "version: 1\ntenants:\n" + tenantA + "    policies:\n      default:\n        total_timeout: two minutes #<\n",
			"tenants[0].policies.default.total_timeout", "invalid duration",
		},
		{
			"negative duration", "version: 1\ntenants:\n" + tenantA + "    policies:\n      default:\n        attempt_timeout: -5s #<\n",
			"tenants[0].policies.default.attempt_timeout", "must be positive",
		},
		{
			"negative max_retries", "version: 1\ntenants:\n" + tenantA + "    policies:\n      default:\n        max_retries: -1 #<\n",
			"tenants[0].policies.default.max_retries", "must be between 0 and 100, got -1",
		},
		{
			"backoff factor below 1", "version: 1\ntenants:\n" + tenantA + "  - id: team-b\n    api_key_sha256: [" + hashB + "]\n    policies:\n      default:\n        backoff: {factor: 0.5} #<\n",
			"tenants[1].policies.default.backoff.factor", "must be between 1 and 100, got 0.5",
		},
		{
			"backoff cap below base", "version: 1\ntenants:\n" + tenantA + "    policies:\n      default:\n        backoff: #<\n          base: 1m\n",
			"tenants[0].policies.default.backoff.cap", "must be at least backoff.base",
		},
		{
			"bad jitter", "version: 1\ntenants:\n" + tenantA + "    policies:\n      default:\n        backoff: {jitter: half} #<\n",
			"tenants[0].policies.default.backoff.jitter", `unknown jitter mode "half"`,
		},
		{
			"status out of range", "version: 1\ntenants:\n" + tenantA + "    policies:\n      default:\n        retryable_statuses: [429, 700] #<\n",
			"tenants[0].policies.default.retryable_statuses[1]", "must be between 100 and 599, got 700",
		},
		{
			"port zero", "version: 1\ntenants:\n" + tenantA + "    policies:\n      default:\n        allow_ports: [0] #<\n",
			"tenants[0].policies.default.allow_ports[0]", "must be between 1 and 65535",
		},
		{
			"bad host pattern", "version: 1\ntenants:\n" + tenantA + "    policies:\n      default:\n        allow_hosts: [\"a b\"] #<\n",
			"tenants[0].policies.default.allow_hosts[0]", "not a host name",
		},
		{
			"yes is not a boolean", "version: 1\ntenants:\n" + tenantA + "    policies:\n      default:\n        fail_closed: yes #<\n",
			"tenants[0].policies.default.fail_closed", `want true or false, got the string "yes"`,
		},
		{
			"budget that allows everything", "version: 1\ntenants:\n" + tenantA + "    policies:\n      default:\n        budget: {ratio: 0, floor_per_second: 0} #<\n",
			"tenants[0].policies.default.budget", "write budget: {disabled: true}",
		},
		{
			"negative budget ratio", "version: 1\ntenants:\n" + tenantA + "    policies:\n      default:\n        budget:\n          ratio: -0.1 #<\n",
			"tenants[0].policies.default.budget.ratio", "must be between 0 and 100",
		},
		{
			"pacing without rate", "version: 1\ntenants:\n" + tenantA + "    policies:\n      default:\n        pacing: {burst: 5} #<\n",
			"tenants[0].policies.default.pacing.rate", "pacing needs a rate",
		},
		{
			"pacing rate zero", "version: 1\ntenants:\n" + tenantA + "    policies:\n      default:\n        pacing: {rate: 0} #<\n",
			"tenants[0].policies.default.pacing.rate", "must be above 0",
		},
		{
			"custom reader format", "version: 1\ntenants:\n" + tenantA + "    policies:\n      default:\n        custom_readers:\n          - {header: X-Wait, format: minutes} #<\n",
			"tenants[0].policies.default.custom_readers[0].format", `unknown format "minutes"`,
		},
		{
			"custom reader position", "version: 1\ntenants:\n" + tenantA + "    policies:\n      default:\n        custom_readers:\n          - {header: X-Wait, format: seconds, position: middle} #<\n",
			"tenants[0].policies.default.custom_readers[0].position", "want before or after",
		},
		{
			"custom reader header", "version: 1\ntenants:\n" + tenantA + "    policies:\n      default:\n        custom_readers:\n          - {header: \"X Wait\", format: seconds} #<\n",
			"tenants[0].policies.default.custom_readers[0].header", "not a valid header name",
		},
		{
			"body size unit", "version: 1\ntenants:\n" + tenantA + "    policies:\n      default:\n        max_request_body: 1XB #<\n",
			"tenants[0].policies.default.max_request_body", `unknown unit "XB"`,
		},
		{
			"body size too large", "version: 1\ntenants:\n" + tenantA + "    policies:\n      default:\n        max_response_body: 128MiB #<\n",
			"tenants[0].policies.default.max_response_body", "between 1 byte and 64 MiB",
		},
		{
			"idempotency header", "version: 1\ntenants:\n" + tenantA + "    policies:\n      default:\n        idempotency_header: \"Idem Key\" #<\n",
			"tenants[0].policies.default.idempotency_header", "not a valid header name",
		},
		{
			"unknown shared policy", "version: 1\npolicies:\n  standard: {}\ntenants:\n" + tenantA + "    policies:\n      default: standrd #<\n",
			"tenants[0].policies.default", `no shared policy named "standrd" under the top-level policies (there are: standard)`,
		},
		{
			"extends unknown", "version: 1\ntenants:\n" + tenantA + "    policies:\n      default:\n        extends: base #<\n",
			"tenants[0].policies.default.extends", `no shared policy named "base"`,
		},
		{
			"shared policy error", "version: 1\npolicies:\n  standard:\n    max_redirects: 99 #<\ntenants:\n" + tenantA,
			"policies.standard.max_redirects", "must be between 0 and 20",
		},
		{
			"host provider unknown", "version: 1\nhost_providers:\n  api.example.com: githab #<\ntenants:\n" + tenantA,
			`host_providers["api.example.com"]`, `unknown provider "githab"`,
		},
		{
			"host pattern invalid", "version: 1\nhost_providers:\n  \"*.*.example.com\": github #<\ntenants:\n" + tenantA,
			`host_providers["*.*.example.com"]`, "not a host name or a *.suffix wildcard",
		},
		{
			"policy host provider", "version: 1\ntenants:\n" + tenantA + "    policies:\n      default:\n        host_providers:\n          api.example.com: nope #<\n",
			`tenants[0].policies.default.host_providers["api.example.com"]`, `unknown provider "nope"`,
		},
		{
			"mtls identity", "version: 1\ntenants:\n  - id: a\n    mtls_identities: [team-a] #<\n",
			"tenants[0].mtls_identities[0]", "neither a URI SAN",
		},
		{
			"mtls identity twice", "version: 1\ntenants:\n  - id: a\n    mtls_identities: [CN=x]\n  - id: b\n    mtls_identities: [CN=x] #<\n",
			"tenants[1].mtls_identities[0]", `also mapped to tenant "a"`,
		},
		{
			"no credentials", "version: 1\ntenants:\n  - id: lonely #<\n",
			"tenants[0]", "has no credentials",
		},
		{
			"no tenants", "version: 1\ntenants: [] #<\n",
			"tenants", "list at least one tenant",
		},
		{
			"duplicate key", "version: 1\ntenants:\n" + tenantA + "    policies:\n      default:\n        max_retries: 1\n        max_retries: 2 #<\n",
			"tenants[0].policies.default.max_retries", "duplicate key (first at line 7)",
		},
		{
			"alias", "version: 1\ntenants:\n  - id: a\n    api_key_sha256: &keys [" + hashA + "]\n  - id: b\n    api_key_sha256: *keys #<\n",
			"tenants[1].api_key_sha256", "aliases (*keys) are not supported",
		},
		{
			"wrong kind", "version: 1\ntenants:\n  team-a: {} #<\n",
			"tenants", "want a list, got a mapping",
		},
		{
			"syntax error", "version: 1\ntenants:\n  - id: a\n    api_key_sha256: a: b #<\n",
			"", "invalid YAML",
		},
		{
			"two documents", "version: 1\ntenants:\n" + tenantA + "--- #<\nversion: 1\n",
			"", "more than one YAML document",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := writeConfig(t, "broker.yaml", tc.body)
			_, err := Load(path)
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("Load: got %v, want *config.Error", err)
			}
			line := markedLine(t, tc.body)
			var found *Problem
			for _, p := range ce.Problems {
				if p.Path == tc.path && strings.Contains(p.Message, tc.msg) {
					found = p
					break
				}
			}
			if found == nil {
				t.Fatalf("no problem at path %q containing %q; got:\n%v", tc.path, tc.msg, err)
			}
			if found.Line != line {
				t.Errorf("problem %v: line %d, want %d", found, found.Line, line)
			}
			s := found.Error()
			prefix := path + ":" + strconv.Itoa(line) + ":"
			if !strings.HasPrefix(s, prefix) {
				t.Errorf("problem %q does not start with %q", s, prefix)
			}
			if tc.path != "" && !strings.Contains(s, ": "+tc.path+": ") {
				t.Errorf("problem %q does not name the field %q", s, tc.path)
			}
		})
	}
}

// TestLoadReportsEveryProblem checks that one file with several mistakes
// gets them all, in file order.
func TestLoadReportsEveryProblem(t *testing.T) {
	body := `version: 1
tenants:
  - id: team-a
    api_key_sha256: [` + hashA + `]
    policies:
      default:
        max_retries: many
        backoff: {factor: 0}
        pacing: {rate: -1}
  - id: team-a
    api_key_sha256: [` + hashA + `]
`
	_, err := Parse("multi.yaml", []byte(body))
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("got %v", err)
	}
	want := []string{
		"multi.yaml:7:22: tenants[0].policies.default.max_retries: want a whole number",
		"multi.yaml:8:19: tenants[0].policies.default.backoff.factor: must be between 1 and 100, got 0",
		"multi.yaml:9:24: tenants[0].policies.default.pacing.rate: must be above 0",
		"multi.yaml:10:9: tenants[1].id: duplicate tenant id",
		"multi.yaml:11:22: tenants[1].api_key_sha256[0]: this API key hash is also listed for tenant",
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%v", len(lines), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("problem %d = %q, want prefix %q", i, lines[i], w)
		}
	}
}

// TestKeyNeverEchoed checks that a plain key pasted into api_key_sha256 is
// not repeated in the problem (logs and CI output would leak it).
func TestKeyNeverEchoed(t *testing.T) {
	for _, secret := range []string{"sk-live-verysecretvalue", strings.Repeat("s3cr3t!", 10)} {
		body := "version: 1\ntenants:\n  - id: a\n    api_key_sha256: [\"" + secret + "\"]\n"
		_, err := Parse("k.yaml", []byte(body))
		if err == nil {
			t.Fatal("no error")
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), secret[:10]) {
			t.Errorf("problem echoes the key: %v", err)
		}
	}
}

func TestEmptyFile(t *testing.T) {
	for _, body := range []string{"", "# only a comment\n", "---\n"} {
		_, err := Parse("empty.yaml", []byte(body))
		if err == nil || !strings.HasPrefix(err.Error(), "empty.yaml:") || !strings.Contains(err.Error(), "empty") {
			t.Errorf("Parse(%q) = %v, want an empty-file problem", body, err)
		}
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("got %v, want ErrNotExist", err)
	}
}
