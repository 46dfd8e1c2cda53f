package config

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// exampleKindsBuilt says which credential kinds are built in this tree:
// the example of a kind that is not yet refuses to load (its placeholder
// says "not built yet"). Set a kind to true once it is merged; every entry
// must end up true.
var exampleKindsBuilt = map[string]bool{
	"header":         true,
	"oauth2":         false, // enable after merging internal/credential/oauth2.go
	"sigv4":          false, // enable after merging internal/credential/sigv4.go
	"http-signature": false, // enable after merging internal/credential/httpsig.go
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
	for kind, built := range exampleKindsBuilt {
		t.Run(kind, func(t *testing.T) {
			if !built {
				t.Skipf("kind %s is not merged yet: set exampleKindsBuilt[%q] = true after merging", kind, kind)
			}
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
