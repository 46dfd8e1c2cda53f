package config

import (
	"net/netip"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// TestDecodePositions checks the column of each kind of problem the
// decoding layer reports: key problems at the key, value problems at the
// value, the engine's range problems at the key that set the field.
func TestDecodePositions(t *testing.T) {
	const def = "tenants[0].policies.default"
	cases := []struct {
		name, body, path, msg, at string
	}{
		{"unknown key at the key", ownPolicy("max_dellay: 10s #<"), def + ".max_dellay", "did you mean max_delay?", "max_dellay"},
		{"unknown nested key", ownPolicy("backoff: {base: 1s, jiter: none} #<"), def + ".backoff.jiter", "did you mean jitter?", "jiter"},
		{"unknown key without a close match", ownPolicy("budget: {zzzzzzzz: 1} #<"), def + ".budget.zzzzzzzz", "unknown field (known fields: disabled, ratio, floor_per_second, window)", "zzzzzzzz"},
		{"duplicate key at the second key", ownPolicy("backoff:", "  base: 1s", "  base: 2s #<"), def + ".backoff.base", "duplicate key (first at line 8)", "base"},
		{"scalar at the value", ownPolicy("max_retries: three #<"), def + ".max_retries", `want a whole number, got the string "three"`, "three"},
		{"null scalar", ownPolicy("max_delay: #<"), def + ".max_delay", "want a duration such as 30s, got nothing (null)", ""},
		{"engine range at the key", ownPolicy("backoff: {factor: 200} #<"), def + ".backoff.factor", "must be between 1 and 100, got 200", "factor"},
		{"alias value", "version: 1\nx: &b 3s\n" + strings.TrimPrefix(ownPolicy("max_delay: *b #<"), "version: 1\n"), def + ".max_delay", "aliases (*b) are not supported", "*b"},
		{"merge key", ownPolicy("budget:", "  <<: {ratio: 1} #<"), def + ".budget", "merge keys (<<) are not supported", "<<"},
		{"key that is a list", ownPolicy("? [a] #<", ": 1"), def, "want a plain key, got a list", "[a]"},
		{"list item", ownPolicy("allow_ports: [443, http] #<"), def + ".allow_ports[1]", `want a whole number, got the string "http"`, "http"},
		{"list of the wrong kind", ownPolicy("allow_hosts: api.example.com #<"), def + ".allow_hosts", `want a list, got the string "api.example.com"`, "api.example.com"},
		{"quoted key under the document", "version: 1\n\"weird key\": 1 #<\ntenants:\n  - id: a\n    mtls_identities: [CN=a]\n", "weird key", "unknown field", `"weird key"`},
		{"tenant that is null", "version: 1\ntenants:\n  - #<\n", "tenants[0]", "want a tenant (a mapping with id, api_key_sha256, ...), got nothing (null)", ""},
		{"custom reader that is null", ownPolicy("custom_readers: [~] #<"), def + ".custom_readers[0].header", "missing: name the header to read", "~"},
		{"custom reader without format", ownPolicy("custom_readers: [{header: X-Wait}] #<"), def + ".custom_readers[0].format", "missing: want seconds", "{header"},
		{"attempt header", ownPolicy("attempt_header: \"X Attempt\" #<"), def + ".attempt_header", `"X Attempt" is not a valid header name`, `"X Attempt"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { wantProblem(t, tc.body, tc.path, tc.msg, tc.at) })
	}
}

// TestNullValues checks what an empty value means: an empty list replaces
// the inherited list, an empty section keeps what the policy inherits.
func TestNullValues(t *testing.T) {
	body := withShared([]string{
		"base:",
		"  allow_destinations: [10.0.0.0/8]",
		"  backoff: {base: 2s}",
		"  budget: {ratio: 0.5}",
	}, []string{
		"default:",
		"  extends: base",
		"  allow_destinations:",
		"  backoff: ~",
		"  budget:",
		"kept:",
		"  extends: base",
	})
	d := parseOK(t, body)
	p := policyOf(t, d, "default")
	if len(p.AllowDestinations) != 0 {
		t.Errorf("allow_destinations = %v, want none: an empty list replaces the inherited one", p.AllowDestinations)
	}
	if p.Backoff.Base != 2*time.Second || p.Budget.Ratio != 0.5 {
		t.Errorf("backoff %+v budget %+v, want the inherited ones", p.Backoff, p.Budget)
	}
	kept := policyOf(t, d, "kept")
	if want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}; !slices.Equal(kept.AllowDestinations, want) {
		t.Errorf("kept allow_destinations = %v, want %v", kept.AllowDestinations, want)
	}
}

// TestSectionTypes checks that every section type decodes itself: each
// field with a yaml tag implements yaml.Unmarshaler (fieldsOf panics
// otherwise) and no key is listed twice.
func TestSectionTypes(t *testing.T) {
	for _, v := range []any{fileDoc{}, tenantDoc{}, policyDoc{}, backoffDoc{}, streamDoc{}, budgetDoc{}, pacingDoc{}, learningDoc{}, breakerDoc{}, customReaderDoc{}} {
		typ := reflect.TypeOf(v)
		ft := fieldsOf(typ)
		if len(ft.keys) == 0 || len(ft.index) != len(ft.keys) {
			t.Errorf("%s: keys %v", typ, ft.keys)
		}
	}
}

// TestPolicyOptionsDocumented keeps docs/policy.md and the decoded types
// in step: the policy options table lists exactly the keys of policyDoc,
// in the same order, and each section's table lists exactly its keys.
func TestPolicyOptionsDocumented(t *testing.T) {
	raw, err := os.ReadFile("../../docs/policy.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	rows := tableKeys(t, doc, "## Policy options\n")
	var top []string
	for _, r := range rows {
		name, _, _ := strings.Cut(r, ".")
		if !slices.Contains(top, name) {
			top = append(top, name)
		}
	}
	if want := fieldsOf(reflect.TypeFor[policyDoc]()).keys; !slices.Equal(top, want) {
		t.Errorf("the policy options table lists\n%v\nthe policy has\n%v", top, want)
	}
	for heading, typ := range map[string]reflect.Type{
		"### stream\n":   reflect.TypeFor[streamDoc](),
		"### budget\n":   reflect.TypeFor[budgetDoc](),
		"### pacing\n":   reflect.TypeFor[pacingDoc](),
		"### learning\n": reflect.TypeFor[learningDoc](),
		"### breaker\n":  reflect.TypeFor[breakerDoc](),
	} {
		got := slices.Sorted(slices.Values(tableKeys(t, doc, heading)))
		want := slices.Sorted(slices.Values(fieldsOf(typ).keys))
		if !slices.Equal(got, want) {
			t.Errorf("%s table lists %v, the section has %v", strings.TrimSpace(heading), got, want)
		}
	}
}

// tableKeys returns the backquoted names in the first column of the first
// table after heading.
func tableKeys(t *testing.T, doc, heading string) []string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, heading)
	if !ok {
		t.Fatalf("no %q in docs/policy.md", strings.TrimSpace(heading))
	}
	var keys []string
	inTable := false
	for _, line := range strings.Split(rest, "\n") {
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break
			}
			continue
		}
		inTable = true
		cell := strings.TrimSpace(strings.Split(line, "|")[1])
		if name, ok := strings.CutPrefix(cell, "`"); ok {
			keys = append(keys, strings.TrimSuffix(name, "`"))
		}
	}
	return keys
}

// TestIssuesError checks how a decoding error reads on its own (yaml.v3
// returns it from yaml.Unmarshal into a section).
func TestIssuesError(t *testing.T) {
	var b backoffDoc
	err := yaml.Unmarshal([]byte("base: 1\nfactor: x\n"), &b)
	if err == nil {
		t.Fatal("no error")
	}
	want := "1:7: base: duration \"1\" has no unit; write for example 1s or 1ms\n2:9: factor: want a number, got the string \"x\""
	if err.Error() != want {
		t.Errorf("error %q, want %q", err.Error(), want)
	}
}

// TestScalarPosition checks that a decoded value keeps the line and column
// it was written at, for checks that run after decoding.
func TestScalarPosition(t *testing.T) {
	var d policyDoc
	if err := yaml.Unmarshal([]byte("max_retries: 2\nbackoff:\n  cap: 10s\n"), &d); err != nil {
		t.Fatal(err)
	}
	if d.MaxRetries == nil || d.MaxRetries.V != 2 || d.MaxRetries.Line() != 1 || d.MaxRetries.Column() != 14 {
		t.Errorf("max_retries: %+v", d.MaxRetries)
	}
	if c := d.Backoff.Cap; c == nil || c.V != 10*time.Second || c.Line() != 3 || c.Column() != 8 {
		t.Errorf("backoff.cap: %+v", c)
	}
	if d.MaxDelay != nil || d.Backoff.Base != nil {
		t.Error("keys the mapping does not set are not nil")
	}
	var unset at
	if unset.Line() != 0 || unset.Column() != 0 {
		t.Error("an unset value has a position")
	}
}

// TestKeyNeverEchoedOutsideAList checks that a plain key written as
// api_key_sha256's value, without brackets, is not repeated either.
func TestKeyNeverEchoedOutsideAList(t *testing.T) {
	const secret = "sk-live-verysecretvalue"
	body := "version: 1\ntenants:\n  - id: a\n    api_key_sha256: " + secret + " #<\n"
	_, err := Parse("k.yaml", []byte(body))
	if err == nil {
		t.Fatal("no error")
	}
	if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), secret[:10]) {
		t.Errorf("problem echoes the key: %v", err)
	}
	wantProblem(t, body, "tenants[0].api_key_sha256", "want a list of SHA-256 hashes", secret)
}
