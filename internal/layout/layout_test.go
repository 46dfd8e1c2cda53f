package layout_test

import (
	"bufio"
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/retrybroker/retrybroker"

// rule forbids packages matching from to import packages matching to
// directly (production imports; tests may use what they need).
type rule struct {
	from, to []string // prefixes below the module path
	why      string
}

var rules = []rule{
	{[]string{"internal/server"}, []string{"internal/store"}, "the gRPC layer translates; shared state belongs to the engine"},
	{[]string{"internal/auth"}, []string{"internal/server"}, "identity is checked before the gRPC layer sees a call"},
	{
		[]string{"internal/engine", "internal/store", "internal/egress", "internal/tenant", "internal/providers"},
		[]string{"gen/"},
		"the core knows nothing of the wire contract",
	},
	{[]string{"internal/engine", "internal/providers", "internal/store", "internal/egress"}, []string{"google.golang.org/grpc"}, "the core knows nothing of gRPC"},
	{[]string{"internal/providers"}, []string{"internal/engine", "internal/store", "internal/tenant", "internal/config"}, "hint readers know nothing of policies"},
	{[]string{"internal/store"}, []string{"internal/engine", "internal/tenant", "internal/config"}, "shared state knows nothing of policies"},
	{
		[]string{"internal/credential"},
		[]string{"internal/engine", "internal/tenant", "internal/config", "internal/store", "internal/server", "gen/", "google.golang.org/grpc"},
		"credentials know nothing of policies, shared state or the wire: they only apply themselves to a request",
	},
	{
		[]string{"internal/admin"},
		[]string{"internal/server", "internal/config", "internal/credential", "gen/", "google.golang.org/grpc"},
		"the admin view reads shared state and the tenants it is given; it knows nothing of the wire or of secrets",
	},
	{[]string{"internal/", "cmd/", "clients/"}, []string{"bench/"}, "no production package depends on the benchmarks"},
	{[]string{"internal/", "cmd/", "gen/", "deploy"}, []string{"k8s.io/", "sigs.k8s.io/"}, "the Kubernetes API types are for the chart's tests only"},
}

// TestImportRules walks `go list` and fails on any forbidden direct import.
func TestImportRules(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, module+"/...").Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go list: %v\n%s", err, stderr)
	}
	pkgs := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		pkgs++
		pkg, imports := rel(fields[0]), fields[1:]
		for _, r := range rules {
			if !hasPrefix(pkg, r.from) {
				continue
			}
			for _, imp := range imports {
				if hasPrefix(rel(imp), r.to) || hasPrefix(imp, r.to) {
					t.Errorf("%s imports %s: %s", pkg, imp, r.why)
				}
			}
		}
	}
	if pkgs < 20 {
		t.Fatalf("go list saw only %d packages", pkgs)
	}
}

func rel(importPath string) string { return strings.TrimPrefix(importPath, module+"/") }

func hasPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if s == strings.TrimSuffix(p, "/") || strings.HasPrefix(s, strings.TrimSuffix(p, "/")+"/") {
			return true
		}
	}
	return false
}

// TestRulesCatchAViolation guards the walker itself: a rule must match the
// import paths it is written for.
func TestRulesCatchAViolation(t *testing.T) {
	if !hasPrefix(rel(module+"/internal/store/memstore"), []string{"internal/store"}) {
		t.Error("internal/store/memstore does not match internal/store")
	}
	if hasPrefix(rel(module+"/internal/storefront"), []string{"internal/store"}) {
		t.Error("internal/storefront matches internal/store")
	}
	if !hasPrefix("google.golang.org/grpc/codes", []string{"google.golang.org/grpc"}) {
		t.Error("grpc subpackages are not matched")
	}
}
