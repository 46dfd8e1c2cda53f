package suite

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
)

// benchAPIKey is the API key of the one tenant of the suite's configured
// brokers. It is not a secret: the brokers listen on 127.0.0.1 only, for
// the length of a scenario.
const benchAPIKey = "benchsuite-loopback-key"

// benchTenant is that tenant's id.
const benchTenant = "bench"

// brokerConfig is a --config file of the suite: one tenant (benchTenant,
// key benchAPIKey) whose default policy may call 127.0.0.1 and sets the
// options in policy, one YAML mapping entry per element, written as they
// appear in docs/policy.md (for example "learning: {idle_expiry: 1h}" or
// "breaker: {disabled: true}").
type brokerConfig struct {
	// Name names the file and the configuration in errors.
	Name   string
	Policy []string
}

// YAML renders the configuration file.
func (c brokerConfig) YAML() []byte {
	var b strings.Builder
	sum := sha256.Sum256([]byte(benchAPIKey))
	fmt.Fprintf(&b, "# %s: written by bench/suite for one scenario of the benchmark suite.\nversion: 1\ntenants:\n", c.Name)
	fmt.Fprintf(&b, "  - id: %s\n    api_key_sha256: [%s]\n    policies:\n      default:\n", benchTenant, hex.EncodeToString(sum[:]))
	b.WriteString("        allow_destinations: [\"127.0.0.1/32\"]\n")
	for _, line := range c.Policy {
		fmt.Fprintf(&b, "        %s\n", line)
	}
	return []byte(b.String())
}

// quotaBrokerConfig is the policy of the quota-citizenship brokers (rows
// b, c and d): the standard policy with learned quotas on, said
// explicitly, so that a broker that does not know the option refuses the
// file instead of measuring something else.
var quotaBrokerConfig = brokerConfig{Name: "quota", Policy: []string{"learning: {idle_expiry: 1h}"}}

// writeBrokerConfig writes c into the suite's temporary directory and has
// the broker binary check it (broker config check). A file the broker
// refuses is an error that quotes the broker's own positioned messages:
// the scenario fails loudly rather than run a broker on a configuration it
// does not understand.
func (s *suite) writeBrokerConfig(ctx context.Context, c brokerConfig) (string, error) {
	dir := filepath.Join(s.tmp, "configs")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	path := filepath.Join(dir, c.Name+".yaml")
	if err := os.WriteFile(path, c.YAML(), 0o600); err != nil {
		return "", err
	}
	if err := checkBrokerConfig(ctx, s.brokerBin, path); err != nil {
		return "", fmt.Errorf("configuration %q (%s): %w", c.Name, strings.Join(c.Policy, "; "), err)
	}
	return path, nil
}

// checkBrokerConfig runs `broker config check path`, killed after 30 s.
func checkBrokerConfig(ctx context.Context, bin, path string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "config", "check", path)
	cmd.Env = cleanEnv()
	setParentDeathSignal(cmd)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("the broker refuses it (%w): %s", err, strings.TrimSpace(out.String()))
	}
	return nil
}

// tenantClient dials a broker started with a brokerConfig: every call
// carries the tenant's API key.
func tenantClient(addr string, extra ...grpc.DialOption) (rbv1.BrokerServiceClient, *grpc.ClientConn, error) {
	conn, err := dial(addr, append(extra, grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return invoker(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+benchAPIKey), method, req, reply, cc, opts...)
	}))...)
	if err != nil {
		return nil, nil, err
	}
	return rbv1.NewBrokerServiceClient(conn), conn, nil
}
