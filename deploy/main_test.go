package deploy_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// brokerBin is the broker binary TestMain builds for the tests that run
// it (config check, the metric-existence test).
var brokerBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "deploy-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	brokerBin = filepath.Join(dir, "broker")
	cmd := exec.Command("go", "build", "-o", brokerBin, "../cmd/broker")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build broker: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// tool returns the path of a pinned tool in the repository's ./bin (make
// tools installs helm and promtool there), failing the test with how to
// get it when it is missing.
func tool(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "bin", name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s not found in ./bin: run make tools (it pins helm and promtool): %v", name, err)
	}
	return p
}

// run runs a command and returns its combined output, failing the test on
// a non-zero exit.
func run(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", filepath.Base(name), args, err, out)
	}
	return out
}
