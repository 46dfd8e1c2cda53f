package tenant

import (
	"context"
	"net/netip"
	"testing"
)

func TestDevTenant(t *testing.T) {
	dev, err := Dev([]string{"127.0.0.1/32"})
	if err != nil {
		t.Fatal(err)
	}
	if dev.ID != DevTenantID {
		t.Fatalf("id %q", dev.ID)
	}
	p, ok := dev.Policy("")
	if !ok || p != dev.Policies[DefaultPolicyName] {
		t.Fatal("empty name must give the default policy")
	}
	if got := p.AllowDestinations; len(got) != 1 || got[0] != netip.MustParsePrefix("127.0.0.1/32") {
		t.Fatalf("allow %v", got)
	}
	if p.MaxRetries != 3 || p.Budget.Ratio != 0.2 {
		t.Fatalf("defaults not applied: retries %d budget %+v", p.MaxRetries, p.Budget)
	}
	if _, ok := dev.Policy("nope"); ok {
		t.Fatal("unknown policy found")
	}
	if _, err := Dev([]string{"10.0.0.0/33"}); err == nil {
		t.Fatal("Dev accepted an invalid CIDR")
	}
}

func TestContext(t *testing.T) {
	if _, ok := FromContext(context.Background()); ok {
		t.Fatal("empty context holds a tenant")
	}
	want := &Tenant{ID: "a"}
	got, ok := FromContext(NewContext(context.Background(), want))
	if !ok || got != want {
		t.Fatal("tenant not carried")
	}
	if _, ok := FromContext(NewContext(context.Background(), nil)); ok {
		t.Fatal("nil tenant reported present")
	}
}
