package config

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// exampleKindsBuilt lists the example configuration of every kind
// (testdata/config/credentials-KIND.yaml); each must load.
var exampleKindsBuilt = map[string]bool{
	"header":         true,
	"oauth2":         true,
	"sigv4":          true,
	"http-signature": true,
}

var (
	exampleFileKey = regexp.MustCompile(`_file: (/var/run/secrets/\S+)`)
	exampleEnvKey  = regexp.MustCompile(`_env: (\S+)`)
)

// TestCredentialExamples checks each committed example configuration of
// docs/policy.md's "Broker-held credentials" the way config check does,
// with its secret files mounted under a temporary directory (the examples
// name /var/run/secrets/...) and its variables set.
func TestCredentialExamples(t *testing.T) {
	for kind := range exampleKindsBuilt {
		t.Run(kind, func(t *testing.T) {
			data, err := os.ReadFile("../../testdata/config/credentials-" + kind + ".yaml")
			if err != nil {
				t.Fatal(err)
			}
			mount := t.TempDir()
			for _, m := range exampleFileKey.FindAllStringSubmatch(string(data), -1) {
				p := filepath.Join(mount, strings.TrimPrefix(m[1], "/var/run/secrets/"))
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte("example-secret-"+filepath.Base(p)+"\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			for _, m := range exampleEnvKey.FindAllStringSubmatch(string(data), -1) {
				t.Setenv(m[1], "example-secret-env")
			}
			path := filepath.Join(t.TempDir(), "example.yaml")
			mounted := strings.ReplaceAll(string(data), "/var/run/secrets/", mount+"/")
			if err := os.WriteFile(path, []byte(mounted), 0o600); err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := Check(path, &out); err != nil {
				t.Fatalf("config check: %v\n%s", err, out.String())
			}
			if strings.Contains(out.String(), "example-secret") {
				t.Fatalf("config check printed a secret: %s", out.String())
			}
			d, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, tn := range d.Tenants() {
				for name, p := range tn.Policies {
					if p.CredentialName != "" && p.Credential == nil {
						t.Errorf("policy %s names %s but has no credential bound", name, p.CredentialName)
					}
				}
			}
		})
	}
}
