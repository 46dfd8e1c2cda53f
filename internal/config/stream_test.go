package config

import (
	"strings"
	"testing"
)

// streamConfig is a tenant with four policies of the given stream limits
// and tenantStream, when not empty, as its own stream mapping.
func streamConfig(tenantStream string, limits ...string) string {
	var b strings.Builder
	b.WriteString("version: 1\ntenants:\n  - id: acme\n    api_key_sha256: [\"" + strings.Repeat("ab", 32) + "\"]\n")
	if tenantStream != "" {
		b.WriteString("    stream: " + tenantStream + "\n")
	}
	b.WriteString("    policies:\n")
	for i, l := range limits {
		name := "default"
		if i > 0 {
			name = "p" + string(rune('0'+i))
		}
		b.WriteString("      " + name + ": {stream: {max_concurrent: " + l + "}}\n")
	}
	return b.String()
}

// TestTenantStreamLimit (issue 17, defect 9): a tenant's own stream limit
// across its policies; by default the largest of its policies' limits.
func TestTenantStreamLimit(t *testing.T) {
	for _, tc := range []struct {
		tenant string
		limits []string
		want   int
	}{
		{"{max_concurrent: 8}", []string{"8", "8", "8", "8"}, 8},
		{"", []string{"8", "8", "8", "8"}, 8},
		{"", []string{"8", "32", "16", "4"}, 32},
		{"{max_concurrent: 100}", []string{"8", "8"}, 100},
		{"{}", []string{"8", "64"}, 64},
	} {
		d, err := Parse("streams.yaml", []byte(streamConfig(tc.tenant, tc.limits...)))
		if err != nil {
			t.Fatalf("%s %v: %v", tc.tenant, tc.limits, err)
		}
		a, _ := d.Tenant("acme")
		if a.StreamMaxConcurrent != tc.want || a.StreamLimit() != tc.want {
			t.Errorf("tenant stream %q, policies %v: limit %d (%d), want %d", tc.tenant, tc.limits, a.StreamMaxConcurrent, a.StreamLimit(), tc.want)
		}
	}
	for _, bad := range []struct{ tenant, want string }{
		{"{max_concurrent: 0}", "tenants[0].stream.max_concurrent"},
		{"{max_concurrent: 100001}", "tenants[0].stream.max_concurrent"},
		{"{max_concurent: 8}", "max_concurrent"},
		{"8", "stream"},
	} {
		_, err := Parse("streams.yaml", []byte(streamConfig(bad.tenant, "8")))
		if err == nil || !strings.Contains(err.Error(), bad.want) || !strings.Contains(err.Error(), "streams.yaml:5:") {
			t.Errorf("tenant stream %q: %v, want an error at line 5 naming %s", bad.tenant, err, bad.want)
		}
	}
}
