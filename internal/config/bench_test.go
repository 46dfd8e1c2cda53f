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

// providersConfig returns a configuration with n tenants, each defining one
// provider with a CEL rule and a policy that names it. With distinct, each
// tenant's rule has its own expression text (nothing is shared); without,
// they repeat one text (compiled once, see providers.Compiler).
func providersConfig(n int, distinct bool) []byte {
	var b strings.Builder
	b.WriteString("version: 1\npolicies:\n  standard: {max_retries: 3}\ntenants:\n")
	for i := range n {
		h := sha256.Sum256(fmt.Appendf(nil, "key-%d", i))
		code := "slow_down"
		if distinct {
			code = fmt.Sprintf("slow_down_%d", i)
		}
		fmt.Fprintf(&b, `  - id: tenant-%04d
    api_key_sha256: [%s]
    providers:
      api-%04d:
        hosts: [api-%04d.corp.example]
        rules:
          - name: slow_down
            statuses: [400]
            when: body.error == %q && body.wait_ms > 0
            action: retry
            delay: {body: wait_ms, unit: ms}
    policies:
      default: {provider: api-%04d, allow_destinations: [10.0.0.0/8]}
      standard: standard
`, i, hex.EncodeToString(h[:]), i, i, code, i)
	}
	return []byte(b.String())
}

// BenchmarkLoad1000TenantProviders measures a reload of a file whose 1,000
// tenants each define a provider with a CEL rule (the target is under a
// second).
func BenchmarkLoad1000TenantProviders(b *testing.B) {
	for _, distinct := range []bool{true, false} {
		name := "same-rule"
		if distinct {
			name = "distinct-rules"
		}
		b.Run(name, func(b *testing.B) {
			const n = 1000
			path := filepath.Join(b.TempDir(), "providers.yaml")
			if err := os.WriteFile(path, providersConfig(n, distinct), 0o600); err != nil {
				b.Fatal(err)
			}
			h, err := NewHolder(path, nil, WithLogger(quietLogger()))
			if err != nil {
				b.Fatal(err)
			}
			tn, ok := h.Directory().Tenant("tenant-0999")
			if !ok || !tn.Catalog.Has("api-0999") || tn.Catalog.Has("api-0998") {
				b.Fatal("tenant-0999 does not see exactly its own provider")
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if err := h.Reload(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
