package config

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// FuzzParse checks that any input either loads or gives a *Error whose
// problems all name the file, and never panics.
func FuzzParse(f *testing.F) {
	for _, file := range []string{exampleFile, exampleProviders} {
		if data, err := os.ReadFile(file); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(configFor("a", "b")))
	f.Add([]byte("version: 1\npolicies:\n  p: {backoff: {factor: 2}, budget: {disabled: true}, pacing: {rate: 1}}\ntenants:\n  - id: a\n    mtls_identities: [CN=a]\n    policies: {default: p, x: {extends: p, max_request_body: 1KiB}}\n"))
	f.Add([]byte("version: 1\ntenants: [{id: a, api_key_sha256: [&k x]}, {id: b, api_key_sha256: *k}]\n"))
	f.Add([]byte("{version: 1, tenants: [{id: a, <<: {x: 1}}]}"))
	for _, kind := range []string{"header", "oauth2", "sigv4", "http-signature"} {
		if data, err := os.ReadFile("../../testdata/config/credentials-" + kind + ".yaml"); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte("version: 1\ntenants:\n  - id: a\n    mtls_identities: [CN=a]\n    credentials: {c: {kind: header, name: X-K, value_env: RB_FUZZ_UNSET, value: s}}\n    policies: {default: {credential: c}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Parse("fuzz.yaml", data)
		if err == nil {
			if d == nil || d.Len() == 0 {
				t.Fatal("valid configuration without tenants")
			}
			for _, tn := range d.Tenants() {
				if _, ok := tn.Policy(""); !ok {
					t.Fatalf("tenant %q has no default policy", tn.ID)
				}
			}
			return
		}
		var ce *Error
		if !errors.As(err, &ce) || len(ce.Problems) == 0 {
			t.Fatalf("error %v is not a *Error with problems", err)
		}
		lines := strings.Count(string(data), "\n") + strings.Count(string(data), "\r") + 1
		for _, p := range ce.Problems {
			if !strings.HasPrefix(p.Error(), "fuzz.yaml") {
				t.Fatalf("problem %q does not name the file", p.Error())
			}
			if p.Line > lines || p.Line < 0 || p.Column < 0 {
				t.Fatalf("problem %q is placed outside the file's %d lines", p.Error(), lines)
			}
		}
	})
}

// FuzzParseByteSize checks ParseByteSize never panics and never returns a
// negative size.
func FuzzParseByteSize(f *testing.F) {
	for _, s := range []string{"1MiB", "1 mb", "0", "9223372036854775807", "99999999999GiB", "-1", "1.5KiB", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseByteSize(s)
		if err == nil && n < 0 {
			t.Fatalf("ParseByteSize(%q) = %d", s, n)
		}
	})
}
