package config

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

func hashHex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestAdminTokenHashes (issue 21): admin.token_sha256 lists the admin
// tokens' hashes, as api_key_sha256 does for tenants; a token written in
// place of its hash, a hash shared with an API key, and an unknown field
// are refused at their line.
func TestAdminTokenHashes(t *testing.T) {
	tenants := "version: 1\ntenants:\n  - id: team-a\n    api_key_sha256: [\"" + hashHex("key-a") + "\"]\n"
	d := parseOK(t, tenants+"admin:\n  token_sha256: [\""+hashHex("admin-1")+"\", \""+hashHex("admin-2")+"\"]\n")
	got := d.AdminTokenHashes()
	if len(got) != 2 || got[0] != sha256.Sum256([]byte("admin-1")) || got[1] != sha256.Sum256([]byte("admin-2")) {
		t.Fatalf("AdminTokenHashes = %x", got)
	}
	if got := parseOK(t, tenants).AdminTokenHashes(); got != nil {
		t.Fatalf("no admin section: %x", got)
	}
	wantProblem(t, tenants+"admin:\n  token_sha256: s3cret-admin-token #<\n", "admin.token_sha256", "SHA-256", "")
	wantProblem(t, tenants+"admin:\n  token_sha256: [\"nothex\"] #<\n", "admin.token_sha256[0]", "", "")
	wantProblem(t, tenants+"admin:\n  token_sha256: [\""+hashHex("key-a")+"\"] #<\n", "admin.token_sha256[0]", "also an API key hash of tenant", "")
	wantProblem(t, tenants+"admin:\n  tokens: [] #<\n", "admin.tokens", "", "")
}
