package config

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/providers"
	"github.com/retrybroker/retrybroker/internal/store"
	"github.com/retrybroker/retrybroker/internal/tenant"
)

const exampleFile = "../../testdata/config/two-tenants.yaml"

func keyHash(key string) [32]byte { return sha256.Sum256([]byte(key)) }

// joinPrefixes writes prefixes as a comma-separated list.
func joinPrefixes(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

// TestTwoTenantExample loads the committed example used by the docs and the
// end-to-end tests.
func TestTwoTenantExample(t *testing.T) {
	d, err := Load(exampleFile)
	if err != nil {
		t.Fatal(err)
	}
	if d.Len() != 2 || d.PolicyCount() != 5 || d.SharedPolicyCount() != 2 {
		t.Fatalf("tenants %d, policies %d, shared %d; want 2, 5, 2", d.Len(), d.PolicyCount(), d.SharedPolicyCount())
	}
	a, ok := d.TenantByKeyHash(keyHash("team-a-secret-key"))
	if !ok || a.ID != "team-a" {
		t.Fatalf("team-a key: got %v, %v", a, ok)
	}
	b, ok := d.TenantByKeyHash(keyHash("team-b-secret-key"))
	if !ok || b.ID != "team-b" {
		t.Fatalf("team-b key: got %v, %v", b, ok)
	}
	if _, ok := d.TenantByKeyHash(keyHash("team-c-secret-key")); ok {
		t.Error("unknown key resolves")
	}
	if got, _ := d.TenantByIdentity("spiffe://corp.example/ns/team-a/sa/caller"); got != a {
		t.Errorf("spiffe identity: got %v", got)
	}
	if got, _ := d.TenantByIdentity("CN=team-b"); got != b {
		t.Errorf("CN identity: got %v", got)
	}
	if got, _ := d.Tenant("team-b"); got != b {
		t.Errorf("Tenant(team-b) = %v", got)
	}

	def, ok := a.Policy("")
	if !ok || def.Name != "default" {
		t.Fatalf("team-a default policy: %v %v", def, ok)
	}
	if def.Provider != "github" || def.AttemptHeader != "X-Retry-Attempt" || def.MaxRetries != 3 {
		t.Errorf("team-a default: provider %q attempt header %q max_retries %d", def.Provider, def.AttemptHeader, def.MaxRetries)
	}
	if len(def.CustomBefore) != 1 || def.CustomBefore[0].Name() != "custom:x-wait-ms" || len(def.CustomAfter) != 0 {
		t.Errorf("custom readers: %v / %v", def.CustomBefore, def.CustomAfter)
	}
	if joinPrefixes(def.AllowDestinations) != "127.0.0.1/32,::1/128" {
		t.Errorf("allow_destinations = %v", def.AllowDestinations)
	}
	// The reader resolves the custom header before GitHub's.
	h := http.Header{"X-Wait-Ms": {"1500"}, "Retry-After": {"9"}}
	if r := def.Reader().Read(&providers.Response{Status: 429, Header: h, Now: time.Now()}); !r.HasHint || r.Hint.Delay != 1500*time.Millisecond {
		t.Errorf("reader: %+v", r)
	}
	if p, _ := def.HostMap.ProviderFor("api.github.example.com"); p != "github" {
		t.Errorf("top-level host_providers not applied: %q", p)
	}
	if p, _ := def.HostMap.ProviderFor("api.openai.com"); p != "openai" {
		t.Errorf("built-in host map lost: %q", p)
	}

	bulkA, _ := a.Policy("bulk")
	bulkB, _ := b.Policy("bulk")
	if bulkA != bulkB {
		t.Error("the shared bulk policy is not shared between tenants")
	}
	if bulkA.MaxRequestBody != 8<<20 || bulkA.Pace != (store.PaceConfig{Rate: 10, Burst: 20}) || bulkA.Backoff.Factor != 2 || bulkA.Backoff.Base != 2*time.Second {
		t.Errorf("bulk: %+v", bulkA)
	}
	defB, _ := b.Policy("default")
	if defB.MaxRetries != 1 || defB.Budget != store.DefaultBudget() {
		t.Errorf("team-b default: max_retries %d budget %+v", defB.MaxRetries, defB.Budget)
	}
	if _, ok := b.Policy("reports"); ok {
		t.Error("team-b sees team-a's reports policy")
	}
}

// TestDefaults checks that a tenant with no policies gets the standard
// policy, identical to tenant.DefaultPolicy(), and that such tenants share
// one policy map.
func TestDefaults(t *testing.T) {
	body := "version: 1\ntenants:\n  - id: a\n    api_key_sha256: [" + hashA + "]\n  - id: b\n    api_key_sha256: [" + hashB + "]\n"
	d, err := Parse("d.yaml", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	ts := d.Tenants()
	pa, ok := ts[0].Policy("")
	if !ok {
		t.Fatal("no default policy")
	}
	want := tenant.DefaultPolicy()
	if err := want.Validate(); err != nil {
		t.Fatal(err)
	}
	if pa.MaxRetries != want.MaxRetries || pa.MaxDelay != want.MaxDelay || pa.Backoff != want.Backoff ||
		pa.RetryableStatuses != want.RetryableStatuses || pa.IdempotencyHeader != want.IdempotencyHeader ||
		pa.RetryTransportErrors != want.RetryTransportErrors || pa.AttemptTimeout != want.AttemptTimeout ||
		pa.TotalTimeout != want.TotalTimeout || pa.MaxRequestBody != want.MaxRequestBody ||
		pa.MaxResponseBody != want.MaxResponseBody || pa.Budget != want.Budget || pa.Pace != want.Pace ||
		pa.MaxRedirects != 0 || pa.FailClosed || pa.GateByCredential || pa.Provider != "" {
		t.Errorf("default policy %+v differs from tenant.DefaultPolicy()", pa)
	}
	if pa.Name != "default" || ts[0].DefaultPolicy != "default" {
		t.Errorf("names: %q %q", pa.Name, ts[0].DefaultPolicy)
	}
	pb, _ := ts[1].Policy("")
	if pa != pb {
		t.Error("tenants without policies do not share the default policy")
	}
}

// TestSharedDefaultTemplate checks that a shared policy named default is
// the default of tenants that define no policies.
func TestSharedDefaultTemplate(t *testing.T) {
	body := "version: 1\npolicies:\n  default: {max_retries: 7}\ntenants:\n  - id: a\n    api_key_sha256: [" + hashA + "]\n"
	d, err := Parse("d.yaml", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := d.Tenant("a")
	if p, _ := a.Policy(""); p.MaxRetries != 7 {
		t.Errorf("max_retries = %d, want 7", p.MaxRetries)
	}
}

func TestPolicyOptions(t *testing.T) {
	body := `version: 1
policies:
  base:
    budget: {disabled: true}
    host_providers: {"*.corp.example": aws}
tenants:
  - id: a
    api_key_sha256: [` + hashA + `]
    policies:
      default:
        extends: base
        provider: none
        retryable_statuses: [429, 503]
        max_retries: 0
        max_delay: 2m30s
        backoff: {base: 250ms, factor: 1.5, cap: 10s, jitter: equal}
        attempt_timeout: 5s
        total_timeout: 1m
        retry_unsafe_methods: true
        retry_transport_errors: false
        idempotency_header: x-request-id
        generate_idempotency_key: true
        attempt_header: x-retry-attempt
        max_request_body: 1048576
        max_response_body: 512 KiB
        allow_destinations: [10.20.0.0/16, 192.168.1.7, "fd00::/8"]
        allow_ports: [8443, 443, 443]
        allow_hosts: [api.github.com, "*.Example.com"]
        max_redirects: 3
        gate_by_credential: true
        fail_closed: true
        pacing: {rate: 0.5}
        host_providers: {api.example.com: stripe}
        custom_readers:
          - {header: X-After, format: unix_seconds, position: after}
      budgeted:
        extends: base
        budget: {ratio: 0.5}
`
	d, err := Parse("p.yaml", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := d.Tenant("a")
	p, _ := a.Policy("default")
	checks := []struct {
		name string
		ok   bool
	}{
		{"provider", p.Provider == "none"},
		{"statuses", p.RetryableStatuses == engine.NewStatusSet(429, 503)},
		{"max_retries", p.MaxRetries == 0},
		{"max_delay", p.MaxDelay == 150*time.Second},
		{"backoff", p.Backoff == engine.Backoff{Base: 250 * time.Millisecond, Factor: 1.5, Cap: 10 * time.Second, Jitter: engine.JitterEqual}},
		{"timeouts", p.AttemptTimeout == 5*time.Second && p.TotalTimeout == time.Minute},
		{"bools", p.RetryUnsafeMethods && !p.RetryTransportErrors && p.GenerateIdempotencyKey && p.GateByCredential && p.FailClosed},
		{"headers canonical", p.IdempotencyHeader == "X-Request-Id" && p.AttemptHeader == "X-Retry-Attempt"},
		{"bodies", p.MaxRequestBody == 1<<20 && p.MaxResponseBody == 512<<10},
		{"destinations", joinPrefixes(p.AllowDestinations) == "10.20.0.0/16,192.168.1.7/32,fd00::/8"},
		{"ports", len(p.AllowPorts) == 2 && p.AllowPorts[0] == 443 && p.AllowPorts[1] == 8443},
		{"hosts", len(p.AllowHosts) == 2 && p.AllowHosts[0] == "api.github.com" && p.AllowHosts[1] == "*.example.com"},
		{"redirects", p.MaxRedirects == 3},
		{"budget disabled", p.Budget == store.BudgetConfig{}},
		{"pacing", p.Pace == store.PaceConfig{Rate: 0.5, Burst: 1}},
		{"custom after", len(p.CustomAfter) == 1 && len(p.CustomBefore) == 0},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: policy %+v", c.name, p)
		}
	}
	for host, want := range map[string]string{"api.example.com": "stripe", "x.corp.example": "aws", "api.github.com": "github"} {
		if got, _ := p.HostMap.ProviderFor(host); got != want {
			t.Errorf("host %s: provider %q, want %q", host, got, want)
		}
	}
	bp, _ := a.Policy("budgeted")
	if bp.Budget != (store.BudgetConfig{Ratio: 0.5, FloorPerSecond: 10, Window: 10 * time.Second}) {
		t.Errorf("re-enabled budget = %+v", bp.Budget)
	}
}

func TestParseByteSize(t *testing.T) {
	cases := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true},
		{"1048576", 1 << 20, true},
		{"1MiB", 1 << 20, true},
		{"1 MiB", 1 << 20, true},
		{"1mib", 1 << 20, true},
		{"1MB", 1_000_000, true},
		{"4KiB", 4096, true},
		{"4kb", 4000, true},
		{"2GiB", 2 << 30, true},
		{"10B", 10, true},
		{" 7 ", 7, true},
		{"1M", 0, false},
		{"1.5MiB", 0, false},
		{"-1", 0, false},
		{"+1", 0, false},
		{"MiB", 0, false},
		{"", 0, false},
		{"9223372036854775807", 1<<63 - 1, true},
		{"9223372036854775808", 0, false},
		{"9999999999GiB", 0, false},
	}
	for _, c := range cases {
		got, err := ParseByteSize(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseByteSize(%q) = %d, %v; want %d, ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
}

func TestValidName(t *testing.T) {
	for s, want := range map[string]bool{
		"team-a": true, "Team_A.1": true, strings.Repeat("a", 64): true,
		"": false, strings.Repeat("a", 65): false, "team/a": false, "team a": false, "tëam": false,
	} {
		if ValidName(s) != want {
			t.Errorf("ValidName(%q) = %v", s, !want)
		}
	}
}

func TestCheck(t *testing.T) {
	var out strings.Builder
	if err := Check(exampleFile, &out); err != nil {
		t.Fatalf("Check: %v\n%s", err, out.String())
	}
	if out.String() != "ok: 2 tenants, 5 policies\n" {
		t.Errorf("output %q", out.String())
	}

	out.Reset()
	bad := writeConfig(t, "bad.yaml", "version: 3\ntenants:\n  - id: a\n    api_key_sha256: [nothex]\n")
	err := Check(bad, &out)
	if err == nil || !strings.Contains(err.Error(), "2 problem(s)") {
		t.Fatalf("Check(bad) = %v", err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], bad+":1:10: version:") || !strings.HasPrefix(lines[1], bad+":4:22: tenants[0].api_key_sha256[0]:") {
		t.Errorf("output:\n%s", out.String())
	}

	out.Reset()
	if err := Check(bad+".missing", &out); err == nil || !os.IsNotExist(unwrapAll(err)) {
		t.Errorf("Check(missing) = %v", err)
	}
}

func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		err = u.Unwrap()
	}
}

func TestDigest(t *testing.T) {
	data, err := os.ReadFile(exampleFile)
	if err != nil {
		t.Fatal(err)
	}
	d, err := Parse("x", data)
	if err != nil {
		t.Fatal(err)
	}
	sum := d.Digest()
	if want := sha256.Sum256(data); hex.EncodeToString(sum[:]) != hex.EncodeToString(want[:]) {
		t.Error("digest mismatch")
	}
}

// TestDocsExample keeps the example in docs/policy.md identical to the
// committed example file (without its header comments).
func TestDocsExample(t *testing.T) {
	doc, err := os.ReadFile("../../docs/policy.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "## Example\n")
	if !ok {
		t.Fatal("no Example section")
	}
	_, rest, ok = strings.Cut(rest, "```yaml\n")
	block, _, ok2 := strings.Cut(rest, "```\n")
	if !ok || !ok2 {
		t.Fatal("no yaml block in the Example section")
	}
	file, err := os.ReadFile(exampleFile)
	if err != nil {
		t.Fatal(err)
	}
	body := string(file)
	for strings.HasPrefix(body, "#") {
		_, body, _ = strings.Cut(body, "\n")
	}
	body = strings.TrimLeft(body, "\n")
	if block != body {
		t.Errorf("docs/policy.md example differs from %s", exampleFile)
	}
}
