package config

import (
	"bytes"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retrybroker/retrybroker/internal/credential"
)

const credKeyHash = "12e43dbe7404fac122a678d3347840446ef214e68de6361a1089dbacf34478d9"

// credConfig is a one-tenant file with the given credentials and policies
// sections (indented under the tenant), and shared policies.
func credConfig(shared, creds, policies string) string {
	return "version: 1\n" + shared + "tenants:\n  - id: t1\n    api_key_sha256: [" + credKeyHash + "]\n" + creds + policies
}

func writeSecret(t *testing.T, value string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(p, []byte(value+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCredentialsHeaderBound: a header credential from a file is built at
// load and bound to the policy that names it, own or shared (each tenant
// gets its own copy of a shared policy that names a credential).
func TestCredentialsHeaderBound(t *testing.T) {
	secret := writeSecret(t, "s3cr3t-value")
	data := "version: 1\npolicies:\n  std: {max_retries: 2, credential: api}\ntenants:\n" +
		"  - id: t1\n    api_key_sha256: [" + credKeyHash + "]\n" +
		"    credentials:\n      api: {kind: header, name: authorization, value_file: " + secret + ", prefix: \"Bearer \"}\n" +
		"    policies:\n      default: {credential: api}\n      shared: std\n      plain: {extends: std, credential: \"\"}\n" +
		"  - id: t2\n    api_key_sha256: [" + strings.Repeat("ab", 32) + "]\n" +
		"    credentials:\n      api: {kind: header, name: x-api-key, value_env: T2_KEY, overwrite: true}\n" +
		"    default_policy: shared\n    policies:\n      shared: std\n"
	t.Setenv("T2_KEY", "env-secret")
	d, err := Parse("creds.yaml", []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	t1, _ := d.Tenant("t1")
	t2, _ := d.Tenant("t2")
	def, shared, plain := t1.Policies["default"], t1.Policies["shared"], t1.Policies["plain"]
	if def.Credential == nil || def.Credential.Name() != "api" || shared.Credential != def.Credential || plain.Credential != nil || plain.MaxRetries != 2 {
		t.Fatalf("t1 bindings: default %v shared %v plain %v", def.Credential, shared.Credential, plain.Credential)
	}
	if got := def.Credential.Headers(); len(got) != 1 || got[0] != "Authorization" || def.Credential.Overwrite() {
		t.Fatalf("t1 api headers %v overwrite %v", got, def.Credential.Overwrite())
	}
	if s2 := t2.Policies["shared"]; s2.Credential == nil || s2.Credential == shared.Credential || !s2.Credential.Overwrite() || s2.MaxRetries != 2 {
		t.Fatalf("t2's shared policy must bind t2's own credential: %+v", s2.Credential)
	}
	req, _ := http.NewRequest("GET", "http://127.0.0.1/", nil)
	if _, err := def.Credential.Apply(t.Context(), req, credential.NewCall(nil)); err != nil || req.Header.Get("Authorization") != "Bearer s3cr3t-value" {
		t.Fatalf("apply: %v, %q", err, req.Header.Get("Authorization"))
	}
}

// TestCredentialsProblems: every way to get a credential wrong is a
// positioned problem, and no message repeats a secret.
func TestCredentialsProblems(t *testing.T) {
	secret := writeSecret(t, "marker-secret-123")
	missing := filepath.Join(t.TempDir(), "gone")
	tests := []struct {
		name, creds, policies, want string
	}{
		{
			"inline value", "    credentials:\n      api: {kind: header, name: Authorization, value: marker-secret-123}\n", "",
			"6:48: tenants[0].credentials.api.value: a secret is never written in the configuration: secrets are read from files or the environment: use value_file or value_env",
		},
		{
			"inline client secret", "    credentials:\n      o: {kind: oauth2_client_credentials, token_url: https://x.example/t, client_id: a, client_secret: marker-secret-123}\n", "",
			"use client_secret_file or client_secret_env",
		},
		{
			"inline aws key", "    credentials:\n      a: {kind: aws_sigv4, region: us-east-1, service: s3, secret_access_key: marker-secret-123}\n", "",
			"use secret_access_key_file",
		},
		{
			"missing file", "    credentials:\n      api: {kind: header, name: Authorization, value_file: " + missing + "}\n", "",
			"tenants[0].credentials.api: credentials.api.value: open " + missing + ": no such file or directory",
		},
		{
			"unset env", "    credentials:\n      api: {kind: header, name: Authorization, value_env: RB_TEST_UNSET_VAR}\n", "",
			"environment variable RB_TEST_UNSET_VAR is empty or unset",
		},
		{
			"key of another kind", "    credentials:\n      api: {kind: header, name: Authorization, value_file: " + secret + ", token_url: https://x.example}\n", "",
			"tenants[0].credentials.api.token_url: not a key of kind header (its keys: kind, overwrite, name, value_file, value_env, prefix)",
		},
		{
			"no kind", "    credentials:\n      api: {name: Authorization, value_file: " + secret + "}\n", "",
			"tenants[0].credentials.api: missing kind",
		},
		{
			"unknown kind", "    credentials:\n      api: {kind: basic, value_file: " + secret + "}\n", "",
			"unknown kind \"basic\"",
		},
		{
			"unknown credential", "    credentials:\n      api: {kind: header, name: Authorization, value_file: " + secret + "}\n",
			"    policies:\n      default: {credential: other}\n",
			"8:29: tenants[0].policies.default.credential: policy \"default\" names credential \"other\", which is not one of this tenant's credentials (it defines: api)",
		},
		{
			"no credentials", "", "    policies:\n      default: {credential: other}\n",
			"(the tenant defines none)",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("c.yaml", []byte(credConfig("", tc.creds, tc.policies)))
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want problems", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("problems:\n%v\nwant one containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "marker-secret-123") {
				t.Fatalf("a problem repeats the secret:\n%v", err)
			}
		})
	}
}

// TestCredentialsCheckPrintsNoSecret: config check reads every secret
// (a missing one fails it) and prints none.
func TestCredentialsCheckPrintsNoSecret(t *testing.T) {
	secret := writeSecret(t, "marker-secret-456")
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	creds := "    credentials:\n      api: {kind: header, name: Authorization, value_file: " + secret + ", prefix: \"Bearer \"}\n"
	if err := os.WriteFile(good, []byte(credConfig("", creds, "    policies:\n      default: {credential: api}\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := Check(good, &out); err != nil || !strings.HasPrefix(out.String(), "ok: 1 tenants") {
		t.Fatalf("check: %v\n%s", err, out.String())
	}
	if err := os.Remove(secret); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := Check(good, &out); !errors.Is(err, ErrInvalid) || !strings.Contains(out.String(), secret) {
		t.Fatalf("check with the secret file gone: %v\n%s", err, out.String())
	}
	if strings.Contains(out.String(), "marker-secret-456") {
		t.Fatalf("check printed the secret:\n%s", out.String())
	}
}

// TestReloadKeepsUnchangedCredentials: a reload keeps each credential
// whose configuration did not change (the same instance: its cached token
// and its secret file's state survive), and builds a changed one anew.
func TestReloadKeepsUnchangedCredentials(t *testing.T) {
	secret := writeSecret(t, "s")
	path := filepath.Join(t.TempDir(), "broker.yaml")
	creds := "    credentials:\n      a: {kind: header, name: X-A, value_file: " + secret + "}\n      b: {kind: header, name: X-B, value_file: " + secret + "}\n"
	write := func(c string) {
		if err := os.WriteFile(path+".tmp", []byte(credConfig("", c, "    policies:\n      default: {credential: a}\n")), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	write(creds)
	h, err := NewHolder(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t1, _ := h.Directory().Tenant("t1")
	a, b := t1.Credentials["a"], t1.Credentials["b"]
	write(strings.Replace(creds, "name: X-B", "name: X-B2", 1) + "      c: {kind: header, name: X-C, value_file: " + secret + "}\n")
	if err := h.Reload(); err != nil {
		t.Fatal(err)
	}
	t1, _ = h.Directory().Tenant("t1")
	if t1.Credentials["a"] != a || t1.Policies["default"].Credential != a {
		t.Error("an unchanged credential was built anew")
	}
	if t1.Credentials["b"] == b || t1.Credentials["b"].Headers()[0] != "X-B2" || t1.Credentials["c"] == nil {
		t.Error("a changed or new credential was not built")
	}
}
