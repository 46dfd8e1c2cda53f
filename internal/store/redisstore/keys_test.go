package redisstore

import (
	"strings"
	"testing"

	"github.com/retrybroker/retrybroker/internal/store"
)

func naive(g store.GateKey) string { return g.Tenant + ":" + g.Scope + ":" + g.Credential }

func naiveUnderscore(g store.GateKey) string { return g.Tenant + "_" + g.Scope + "_" + g.Credential }

// TestKeysDoNotCollide shows pairs of gates whose naive joins collide and
// whose keys do not.
func TestKeysDoNotCollide(t *testing.T) {
	k := keys{prefix: DefaultKeyPrefix}
	pairs := []struct {
		a, b store.GateKey
		join func(store.GateKey) string
	}{
		{store.GateKey{Tenant: "a:b", Scope: "c"}, store.GateKey{Tenant: "a", Scope: "b:c"}, naive},
		{store.GateKey{Tenant: "t", Scope: "s:x", Credential: "y"}, store.GateKey{Tenant: "t", Scope: "s", Credential: "x:y"}, naive},
		{store.GateKey{Tenant: "a_b", Scope: "c"}, store.GateKey{Tenant: "a", Scope: "b_c"}, naiveUnderscore},
		{store.GateKey{Tenant: "a}", Scope: "x"}, store.GateKey{Tenant: "a", Scope: "}x"}, func(g store.GateKey) string { return "{" + g.Tenant + g.Scope + "}" }},
		{store.GateKey{Tenant: "a%3Ab", Scope: "c"}, store.GateKey{Tenant: "a:b", Scope: "c"}, func(g store.GateKey) string {
			return strings.ReplaceAll(naive(g), "%3A", ":") // a decoder that percent-decodes
		}},
	}
	for _, p := range pairs {
		if p.join(p.a) != p.join(p.b) {
			t.Fatalf("bad test: naive joins of %+v and %+v differ", p.a, p.b)
		}
		if ka, kb := k.gate(p.a), k.gate(p.b); ka == kb {
			t.Errorf("gate keys of %+v and %+v collide: %q", p.a, p.b, ka)
		}
		if ka, kb := k.inflight(p.a), k.inflight(p.b); ka == kb {
			t.Errorf("in-flight keys of %+v and %+v collide: %q", p.a, p.b, ka)
		}
	}
	if k.pace("a:p", "h") == k.pace("a", "p:h") {
		t.Error("pacing keys collide")
	}
	if k.budget("a") == k.budget("a:b") || k.budget("a}") == k.budget("a") {
		t.Error("budget keys collide")
	}
	want := map[string]string{
		k.gate(store.GateKey{Tenant: "acme", Scope: "github", Credential: "ab12"}): "rb:v1:{t:acme}:g:github:ab12",
		k.gate(store.GateKey{Tenant: "a:b}", Scope: "api.example.com:8443"}):       "rb:v1:{t:a%3Ab%7D}:g:api.example.com%3A8443:",
		k.inflight(store.GateKey{Tenant: "acme", Scope: "github"}):                 "rb:v1:{t:acme}:f:github:",
		k.pace("acme", "api.github.com"):                                           "rb:v1:{t:acme}:p:api.github.com",
		k.budget(""):                                                               "rb:v1:{t:}:b",
	}
	for got, w := range want {
		if got != w {
			t.Errorf("key %q, want %q", got, w)
		}
	}
}

// hashTag returns the part of key Redis Cluster hashes.
func hashTag(key string) string {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return key
	}
	j := strings.IndexByte(key[i+1:], '}')
	if j <= 0 {
		return key
	}
	return key[i+1 : i+1+j]
}

// TestKeysShareTenantSlot checks that every key a script touches has the
// tenant's hash tag, whatever the components hold.
func TestKeysShareTenantSlot(t *testing.T) {
	k := keys{prefix: DefaultKeyPrefix}
	for _, tenant := range []string{"", "acme", "{x}", "a}b{", "%7D"} {
		g := store.GateKey{Tenant: tenant, Scope: "{s}", Credential: "}"}
		tag := hashTag(k.budget(tenant))
		for _, key := range []string{k.gate(g), k.inflight(g), k.pace(tenant, "{h}")} {
			if hashTag(key) != tag {
				t.Errorf("key %q has hash tag %q, want %q", key, hashTag(key), tag)
			}
		}
	}
}

func FuzzEscape(f *testing.F) {
	for _, s := range []string{"", "acme", "a:b", "a%3Ab", "{}", "%", "%%41", "\x00\xff", "héllo"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e := escape(s)
		if strings.ContainsAny(e, ":{}") {
			t.Fatalf("escape(%q) = %q holds a separator", s, e)
		}
		back, ok := store.UnescapeComponent(e)
		if !ok || back != s {
			t.Fatalf("unescape(escape(%q)) = %q, %v", s, back, ok)
		}
		// A gate's listing position (its index member) round-trips too.
		if sc, cr, ok := store.ParseGatePosition(store.GatePosition(s, s+"x")); !ok || sc != s || cr != s+"x" {
			t.Fatalf("ParseGatePosition(GatePosition(%q, %q)) = %q, %q, %v", s, s+"x", sc, cr, ok)
		}
	})
}
