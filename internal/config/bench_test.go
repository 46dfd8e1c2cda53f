package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// largeConfig returns a configuration with n tenants: each has one API key
// and uses the shared policies, and one in a hundred also defines a policy
// of its own.
func largeConfig(n int) []byte {
	var b strings.Builder
	b.Grow(n * 160)
	b.WriteString(`version: 1
host_providers:
  api.github.example.com: github
policies:
  standard:
    max_retries: 3
    backoff: {base: 1s, factor: 2, cap: 30s}
  bulk:
    max_retries: 5
    max_delay: 5m
    pacing: {rate: 10, burst: 20}
tenants:
`)
	for i := range n {
		h := sha256.Sum256(fmt.Appendf(nil, "key-%d", i))
		fmt.Fprintf(&b, "  - id: tenant-%06d\n    api_key_sha256: [%s]\n", i, hex.EncodeToString(h[:]))
		if i%100 == 0 {
			b.WriteString("    policies:\n      default: standard\n      bulk: bulk\n      own: {extends: standard, max_retries: 1, allow_destinations: [10.0.0.0/8]}\n")
		} else {
			b.WriteString("    policies: {default: standard, bulk: bulk}\n")
		}
	}
	return []byte(b.String())
}

// BenchmarkLoad100kTenants measures a reload of a 100,000-tenant file:
// read, parse, validate, index and swap in. It reports the heap retained
// by the loaded configuration per tenant as bytes/tenant.
func BenchmarkLoad100kTenants(b *testing.B) {
	const n = 100_000
	path := filepath.Join(b.TempDir(), "large.yaml")
	data := largeConfig(n)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		b.Fatal(err)
	}
	h, err := NewHolder(path, nil, WithLogger(quietLogger()))
	if err != nil {
		b.Fatal(err)
	}
	if h.Directory().Len() != n {
		b.Fatalf("loaded %d tenants", h.Directory().Len())
	}
	retained := retainedPerTenant(b, path, n)

	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := h.Reload(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(retained, "bytes/tenant")
	b.ReportMetric(float64(len(data))/n, "file-bytes/tenant")
}

// retainedPerTenant loads path once and measures the live heap it adds.
func retainedPerTenant(b *testing.B, path string, n int) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	d, err := Load(path)
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(d)
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
}

// BenchmarkYAMLOnly100kTenants is the floor under BenchmarkLoad100kTenants:
// yaml.v3 parsing the same file into nodes, with no validation.
func BenchmarkYAMLOnly100kTenants(b *testing.B) {
	data := largeConfig(100_000)
	b.ReportAllocs()
	for b.Loop() {
		var n yaml.Node
		if err := yaml.Unmarshal(data, &n); err != nil {
			b.Fatal(err)
		}
	}
}
