package auth

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/retrybroker/retrybroker/internal/config"
	"github.com/retrybroker/retrybroker/internal/tenant"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const (
	keyA = "team-a-secret-key"
	keyB = "team-b-secret-key"
)

// testConfig has team-a (key A, a SPIFFE identity), team-b (key B, CN
// mapping) and team-c (certificate only, full subject).
func testConfig(t testing.TB) *config.Directory {
	t.Helper()
	body := `version: 1
tenants:
  - id: team-a
    api_key_sha256: [` + APIKeyHash(keyA) + `]
    mtls_identities: ["spiffe://corp.example/ns/team-a/sa/caller"]
    policies:
      default: {max_retries: 1}
      reports: {max_retries: 2}
  - id: team-b
    api_key_sha256: [` + strings.ToUpper(APIKeyHash(keyB)) + `]
    mtls_identities: ["CN=team-b"]
  - id: team-c
    mtls_identities: ["CN=team-c,O=Corp"]
`
	d, err := config.Parse("test.yaml", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func withMD(kv ...string) context.Context {
	return metadata.NewIncomingContext(context.Background(), metadata.Pairs(kv...))
}

func TestAPIKeyHash(t *testing.T) {
	// The hashes of the keys in testdata/config/two-tenants.yaml.
	if got := APIKeyHash(keyA); got != "12e43dbe7404fac122a678d3347840446ef214e68de6361a1089dbacf34478d9" {
		t.Errorf("APIKeyHash(A) = %s", got)
	}
	if got := APIKeyHash(keyB); got != "ee612764d423b3100701813d8aac3dbdbe1e78e1a47270b83df6d8cacc23d47c" {
		t.Errorf("APIKeyHash(B) = %s", got)
	}
}

func TestAPIKeys(t *testing.T) {
	d := testConfig(t)
	authFn := New(func() *config.Directory { return d })
	cases := []struct {
		name   string
		ctx    context.Context
		tenant string
		code   codes.Code
		msg    string
	}{
		{"key A", withMD("authorization", "Bearer "+keyA), "team-a", codes.OK, ""},
		{"key B resolves B, not A", withMD("authorization", "Bearer "+keyB), "team-b", codes.OK, ""},
		{"scheme is case-insensitive", withMD("authorization", "bearer "+keyA), "team-a", codes.OK, ""},
		{"no metadata", context.Background(), "", codes.Unauthenticated, MsgMissingCredentials},
		{"other metadata only", withMD("x-api-key", keyA), "", codes.Unauthenticated, MsgMissingCredentials},
		{"basic scheme", withMD("authorization", "Basic x"), "", codes.Unauthenticated, MsgMalformed},
		{"bearer without token", withMD("authorization", "Bearer"), "", codes.Unauthenticated, MsgMalformed},
		{"bearer with empty token", withMD("authorization", "Bearer "), "", codes.Unauthenticated, MsgMalformed},
		{"two authorization values", withMD("authorization", "Bearer "+keyA, "authorization", "Bearer "+keyB), "", codes.Unauthenticated, MsgMalformed},
		{"unknown key", withMD("authorization", "Bearer team-c-secret-key"), "", codes.Unauthenticated, MsgUnknownKey},
		{"hash instead of key", withMD("authorization", "Bearer "+APIKeyHash(keyA)), "", codes.Unauthenticated, MsgUnknownKey},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, err := authFn(tc.ctx)
			if status.Code(err) != tc.code {
				t.Fatalf("code %v (%v), want %v", status.Code(err), err, tc.code)
			}
			if err != nil {
				if got := status.Convert(err).Message(); got != tc.msg {
					t.Errorf("message %q, want %q", got, tc.msg)
				}
				for _, k := range []string{keyA, keyB, "team-c-secret-key"} {
					if strings.Contains(err.Error(), k) {
						t.Errorf("error echoes the key: %v", err)
					}
				}
				return
			}
			got, ok := tenant.FromContext(ctx)
			if !ok || got.ID != tc.tenant {
				t.Fatalf("tenant %v, want %s", got, tc.tenant)
			}
			if id, _ := IdentityFromContext(ctx); id.TenantID != tc.tenant || id.Method != MethodAPIKey || id.Certificate != "" {
				t.Errorf("identity %+v", id)
			}
		})
	}
}

// TestReloadApplies checks that the authenticator reads the current
// directory on every call.
func TestReloadApplies(t *testing.T) {
	var cur atomic.Pointer[config.Directory]
	cur.Store(testConfig(t))
	authFn := New(cur.Load)
	ctx := withMD("authorization", "Bearer "+keyA)
	if _, err := authFn(ctx); err != nil {
		t.Fatal(err)
	}
	d, err := config.Parse("new.yaml", []byte("version: 1\ntenants:\n  - id: team-b\n    api_key_sha256: ["+APIKeyHash(keyB)+"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	cur.Store(d)
	if _, err := authFn(ctx); status.Code(err) != codes.Unauthenticated {
		t.Errorf("removed key still accepted: %v", err)
	}
}

func TestNoDirectory(t *testing.T) {
	var failures []error
	authFn := New(func() *config.Directory { return nil }, WithOnFailure(func(_ context.Context, err error) { failures = append(failures, err) }))
	_, err := authFn(withMD("authorization", "Bearer "+keyA))
	if status.Code(err) != codes.Unavailable {
		t.Errorf("got %v, want UNAVAILABLE", err)
	}
	if len(failures) != 1 || !errors.Is(failures[0], err) {
		t.Errorf("OnFailure saw %v", failures)
	}
}

func TestPolicyRef(t *testing.T) {
	cases := []struct {
		in             string
		tenant, policy string
		cross          bool
	}{
		{"", "", "", false},
		{"bulk", "", "bulk", false},
		{"team-b/bulk", "team-b", "bulk", true},
		{"team-b/", "team-b", "", true},
		{"/bulk", "", "bulk", true},
		{"a/b/c", "a", "b/c", true},
	}
	for _, c := range cases {
		tid, p, cross := PolicyRef(c.in)
		if tid != c.tenant || p != c.policy || cross != c.cross {
			t.Errorf("PolicyRef(%q) = %q, %q, %v", c.in, tid, p, cross)
		}
	}
}

func TestResolvePolicy(t *testing.T) {
	d := testConfig(t)
	a, _ := d.Tenant("team-a")
	cases := []struct {
		name   string
		policy string
		code   codes.Code
	}{
		{"", "default", codes.OK},
		{"reports", "reports", codes.OK},
		{"team-a/reports", "reports", codes.OK},
		{"missing", "", codes.FailedPrecondition},
		{"team-a/missing", "", codes.FailedPrecondition},
		{"team-b/default", "", codes.PermissionDenied},
		{"team-b/no-such-policy", "", codes.PermissionDenied},
		{"no-such-tenant/default", "", codes.PermissionDenied},
	}
	var denied string
	for _, c := range cases {
		p, err := ResolvePolicy(a, c.name)
		if status.Code(err) != c.code {
			t.Errorf("ResolvePolicy(%q): %v, want %v", c.name, err, c.code)
			continue
		}
		if err == nil && p.Name != c.policy {
			t.Errorf("ResolvePolicy(%q) = %s, want %s", c.name, p.Name, c.policy)
		}
		if c.code == codes.PermissionDenied {
			// The same words whether or not the tenant or policy exists.
			if denied == "" {
				denied = err.Error()
			} else if err.Error() != denied {
				t.Errorf("PERMISSION_DENIED messages differ: %q vs %q", err.Error(), denied)
			}
		}
	}
}
