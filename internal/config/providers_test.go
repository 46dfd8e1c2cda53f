package config

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/retrybroker/retrybroker/internal/providers"
)

// tenantsA is a one-tenant tenants section; a case may append keys of the
// tenant (4 spaces deep).
var tenantsA = "tenants:\n  - id: team-a\n    api_key_sha256: [" + hashA + "]\n"

// at returns the text of body from 1-based line and character column to
// the end of that line.
func textAt(body string, line, col int) (string, bool) {
	lines := strings.Split(body, "\n")
	if line < 1 || line > len(lines) {
		return "", false
	}
	l := lines[line-1]
	if col < 1 || col > utf8.RuneCountInString(l)+1 {
		return "", false
	}
	i := 0
	for c := 1; c < col; c++ {
		_, w := utf8.DecodeRuneInString(l[i:])
		i += w
	}
	return l[i:], true
}

// TestProviderErrors checks every kind of problem a provider definition
// can have: each is reported at an exact line and column, checked by the
// text the file holds there (at: the text starting at the position; for
// the end of an expression, the position must be just past before).
func TestProviderErrors(t *testing.T) {
	cases := []struct {
		name   string
		body   string
		path   string
		msg    string
		at     string // the text at the position starts with this
		before string // or: the text just before the position ends with this (at the end of a line)
	}{
		// Decoding.
		{
			"unknown key", "version: 1\nproviders:\n  corp:\n    hintz: []\n" + tenantsA,
			"providers.corp.hintz", "did you mean hints?", "hintz:", "",
		},
		{
			"wrong type", "version: 1\nproviders:\n  corp:\n    retry_statuses: [429, soon]\n" + tenantsA,
			"providers.corp.retry_statuses[1]", "want a whole number", "soon]", "",
		},
		{
			"duration without unit", "version: 1\nproviders:\n  corp:\n    quotas:\n      - {remaining: X-Left, reset_in: 60}\n" + tenantsA,
			"providers.corp.quotas[0].reset_in", "has no unit", "60}", "",
		},
		{
			"rule without a name", "version: 1\nproviders:\n  corp:\n    rules:\n      - when: 'true'\n        action: retry\n" + tenantsA,
			"providers.corp.rules[0].name", "every rule has a name", "when: 'true'", "",
		},
		{
			"entry that is not a mapping", "version: 1\nproviders:\n  corp: [hints]\n" + tenantsA,
			"providers.corp", "want a provider", "[hints]", "",
		},
		// not_executed (issue 18 item 5).
		{
			"not_executed names a header that is not a verdict header", "version: 1\nproviders:\n  corp:\n    should_retry: [X-Retry]\n    not_executed: [X-Retry, X-Other]\n" + tenantsA,
			"providers.corp.not_executed[1]", "is not one of should_retry's headers", "X-Other]", "",
		},
		{
			"not_executed on a do_not_retry rule", "version: 1\nproviders:\n  corp:\n    rules:\n      - {name: r, when: 'true', action: do_not_retry, reason: x, not_executed: true}\n" + tenantsA,
			"providers.corp.rules[0].not_executed", "only a retry rule", "true}", "",
		},
		{
			"not_executed that is not a bool", "version: 1\nproviders:\n  corp:\n    rules:\n      - {name: r, when: 'true', action: retry, not_executed: yes}\n" + tenantsA,
			"providers.corp.rules[0].not_executed", "", "yes}", "",
		},
		// Names and extends.
		{
			"invalid name", "version: 1\nproviders:\n  Corp_API: {}\n" + tenantsA,
			"providers.Corp_API", "is not a provider name", "Corp_API:", "",
		},
		{
			"built-in name without extends", "version: 1\nproviders:\n  aws:\n    hints: [{header: X-Wait}]\n" + tenantsA,
			"providers.aws", `provider "aws" is built in; to change it write extends: aws`, "aws:", "",
		},
		{
			"tenant redefines a file entry without extends", "version: 1\nproviders:\n  corp: {hints: [{header: Retry-After}]}\n" + tenantsA + "    providers:\n      corp: {}\n",
			"tenants[0].providers.corp", `already defined at f.yaml:3; to change it write extends: corp`, "corp: {}", "",
		},
		{
			"extends a typo", "version: 1\nproviders:\n  gh:\n    extends: githb\n" + tenantsA,
			"providers.gh.extends", `no provider named "githb" to extend; did you mean github?`, "githb", "",
		},
		{
			"extends nothing close", "version: 1\nproviders:\n  gh:\n    extends: zzzzzzzz\n" + tenantsA,
			"providers.gh.extends", "(known: anthropic, aws,", "zzzzzzzz", "",
		},
		{
			"extends none", "version: 1\nproviders:\n  quiet: {extends: none}\n" + tenantsA,
			"providers.quiet.extends", "cannot be extended", "none}", "",
		},
		{
			"reserved none", "version: 1\nproviders:\n  none:\n    hints: []\n" + tenantsA,
			"providers.none", `"none" is reserved`, "none:", "",
		},
		{
			"extends cycle", "version: 1\nproviders:\n  a: {extends: b}\n  b: {extends: c}\n  c: {extends: a}\n" + tenantsA,
			"providers.a.extends", "extends cycle: a -> b -> c -> a", "b}", "",
		},
		{
			"a tenant cannot extend another tenant's entry", "version: 1\ntenants:\n  - id: b\n    api_key_sha256: [" + hashB + "]\n    providers:\n      mine: {hints: [{header: X-Wait}]}\n  - id: a\n    api_key_sha256: [" + hashA + "]\n    providers:\n      theirs: {extends: mine}\n",
			"tenants[1].providers.theirs.extends", `no provider named "mine" to extend`, "mine}", "",
		},
		{
			"one host for two entries", "version: 1\nproviders:\n  a: {hosts: [api.corp.example]}\n  b: {hosts: [other.example, API.corp.example.]}\n" + tenantsA,
			"providers.b.hosts[1]", `host "api.corp.example" is also listed by provider "a"`, "API.corp.example.]", "",
		},
		// What Compile finds.
		{
			"bad host", "version: 1\nproviders:\n  corp:\n    hosts: [\"not a host\"]\n" + tenantsA,
			"providers.corp.hosts[0]", "is not a host name", `"not a host"]`, "",
		},
		{
			"bad header name", "version: 1\nproviders:\n  corp:\n    hints:\n      - header: 'X Wait'\n" + tenantsA,
			"providers.corp.hints[0].header", "is not a header name", "'X Wait'", "",
		},
		{
			"unknown format", "version: 1\nproviders:\n  corp:\n    hints:\n      - header: X-Wait\n      - {header: X-Wait-2, format: fortnights}\n" + tenantsA,
			"providers.corp.hints[1].format", `unknown format "fortnights"`, "fortnights}", "",
		},
		{
			"nested longest", "version: 1\nproviders:\n  corp:\n    hints:\n      - longest:\n          - header: X-A\n          - longest: [{header: X-B}]\n" + tenantsA,
			"providers.corp.hints[0].longest[1].longest", "groups do not nest", "[{header: X-B}]", "",
		},
		{
			"hint with two sources", "version: 1\nproviders:\n  corp:\n    hints:\n      - {header: X-A, body: wait}\n" + tenantsA,
			"providers.corp.hints[0]", "needs exactly one of header, body", "{header: X-A, body: wait}", "",
		},
		{
			"quota without reset", "version: 1\nproviders:\n  corp:\n    quotas:\n      - remaining: X-Left\n" + tenantsA,
			"providers.corp.quotas[0].reset_in", "needs reset_in", "remaining: X-Left", "",
		},
		{
			"scope without headers", "version: 1\nproviders:\n  corp:\n    scope: {}\n" + tenantsA,
			"providers.corp.scope", "needs header or global", "{}", "",
		},
		{
			"bad action", "version: 1\nproviders:\n  corp:\n    rules:\n      - name: r\n        when: 'true'\n        action: maybe\n" + tenantsA,
			"providers.corp.rules[0].action", `"maybe" is not retry or do_not_retry`, "maybe", "",
		},
		{
			"do_not_retry without a reason", "version: 1\nproviders:\n  corp:\n    rules:\n      - name: r\n        when: 'true'\n        action: do_not_retry\n" + tenantsA,
			"providers.corp.rules[0].reason", "says why", "name: r", "",
		},
		{
			"bad rule name", "version: 1\nproviders:\n  corp:\n    rules:\n      - {name: Slow-Down, when: 'true', action: retry}\n" + tenantsA,
			"providers.corp.rules[0].name", "is not a rule name", "Slow-Down,", "",
		},
		{
			"duplicate rule", "version: 1\nproviders:\n  corp:\n    rules:\n      - {name: r, when: 'true', action: retry}\n      - {name: r, when: 'false', action: retry}\n" + tenantsA,
			"providers.corp.rules[1].name", `rule "r" is defined twice`, "r, when: 'false'", "",
		},
		{
			"delay with two sources", "version: 1\nproviders:\n  corp:\n    rules:\n      - name: r\n        when: 'true'\n        action: retry\n        delay: {body: wait, expr: '1'}\n" + tenantsA,
			"providers.corp.rules[0].delay", "needs exactly one of header, body and expr", "{body: wait", "",
		},
		{
			"delay body path", "version: 1\nproviders:\n  corp:\n    rules:\n      - name: r\n        when: 'true'\n        action: retry\n        delay: {body: 'wait..ms'}\n" + tenantsA,
			"providers.corp.rules[0].delay.body", "is not a dotted path", "'wait..ms'", "",
		},
		{
			"delay unit", "version: 1\nproviders:\n  corp:\n    rules:\n      - name: r\n        when: 'true'\n        action: retry\n        delay: {body: wait, unit: h}\n" + tenantsA,
			"providers.corp.rules[0].delay.unit", `"h" is not s or ms`, "h}", "",
		},
		{
			"a replaced rule keeps the file's index", "version: 1\nproviders:\n  aws:\n    extends: aws\n    rules:\n      - {name: mine, when: 'true', action: retry}\n      - {name: throttling_error_code, when: 'true', action: stop}\n" + tenantsA,
			"providers.aws.rules[1].action", `"stop" is not retry or do_not_retry`, "stop}", "",
		},
		{
			"an inherited rule written twice", "version: 1\nproviders:\n  aws:\n    extends: aws\n    rules:\n      - {name: throttling_error_code, when: 'true', action: retry}\n      - {name: throttling_error_code, when: 'false', action: retry}\n" + tenantsA,
			"providers.aws.rules[1].name", "is defined twice", "throttling_error_code, when: 'false'", "",
		},
		{
			"tenant entry problem", "version: 1\n" + tenantsA + "    providers:\n      corp:\n        hints: [{header: X-Wait, statuses: [429, 700]}]\n",
			"tenants[0].providers.corp.hints[0].statuses[1]", "must be between 100 and 599", "700]", "",
		},
		// CEL, in every scalar style.
		{
			"CEL syntax, plain, end of input", "version: 1\nproviders:\n  corp:\n    rules:\n      - name: r\n        when: body.error == \"slow_down\" &&\n        action: retry\n" + tenantsA,
			"providers.corp.rules[0].when", "Syntax error", "", `"slow_down" &&`,
		},
		{
			"CEL undeclared, plain", "version: 1\nproviders:\n  corp:\n    rules:\n      - name: r\n        when: status == 400 && stauts == 1\n        action: retry\n" + tenantsA,
			"providers.corp.rules[0].when", "undeclared reference to 'stauts'", "stauts == 1", "",
		},
		{
			"CEL undeclared, plain over two lines", "version: 1\nproviders:\n  corp:\n    rules:\n      - name: r\n        when: status == 400 &&\n          bodi.error == 1\n        action: retry\n" + tenantsA,
			"providers.corp.rules[0].when", "undeclared reference to 'bodi'", "bodi.error", "",
		},
		{
			"CEL undeclared, single-quoted", "version: 1\nproviders:\n  corp:\n    rules:\n      - name: r\n        when: 'body.error == ''x'' && stauts == 1'\n        action: retry\n" + tenantsA,
			"providers.corp.rules[0].when", "undeclared reference to 'stauts'", "stauts == 1'", "",
		},
		{
			"CEL undeclared, double-quoted with escapes and accents", "version: 1\nproviders:\n  corp:\n    rules:\n      - name: r\n        when: \"body.msg == \\\"d\\u00e9j\u00e0\\\" && stauts == 1\"\n        action: retry\n" + tenantsA,
			"providers.corp.rules[0].when", "undeclared reference to 'stauts'", "stauts == 1\"", "",
		},
		{
			"CEL undeclared, double-quoted over an escaped line break", "version: 1\nproviders:\n  corp:\n    rules:\n      - name: r\n        when: \"status == 400 && \\\n          stauts == 1\"\n        action: retry\n" + tenantsA,
			"providers.corp.rules[0].when", "undeclared reference to 'stauts'", "stauts == 1\"", "",
		},
		{
			"CEL undeclared, literal block, second line", "version: 1\nproviders:\n  corp:\n    rules:\n      - name: r\n        when: |\n          status == 400 &&\n            stauts == 1\n        action: retry\n" + tenantsA,
			"providers.corp.rules[0].when", "undeclared reference to 'stauts'", "stauts == 1", "",
		},
		{
			"CEL syntax, literal block, end of input", "version: 1\nproviders:\n  corp:\n    rules:\n      - name: r\n        when: |  # a comment\n          status == 400 &&\n        action: retry\n" + tenantsA,
			"providers.corp.rules[0].when", "Syntax error", "", "status == 400 &&",
		},
		{
			"CEL undeclared, folded block", "version: 1\nproviders:\n  corp:\n    rules:\n      - name: r\n        when: >-\n          status == 400 &&\n          body.error == 'x' &&\n          stauts == 1\n        action: retry\n" + tenantsA,
			"providers.corp.rules[0].when", "undeclared reference to 'stauts'", "stauts == 1", "",
		},
		{
			"CEL syntax, flow mapping", "version: 1\nproviders:\n  corp:\n    rules: [{name: r, when: 'status ==', action: retry}]\n" + tenantsA,
			"providers.corp.rules[0].when", "Syntax error", "', action: retry}]", "", // just past the expression
		},
		{
			"CEL condition of the wrong type", "version: 1\nproviders:\n  corp:\n    rules:\n      - name: r\n        when: status + 1\n        action: retry\n" + tenantsA,
			"providers.corp.rules[0].when", "expression has type int, want bool", "status + 1", "",
		},
		{
			"CEL delay of the wrong type", "version: 1\nproviders:\n  corp:\n    rules:\n      - name: r\n        when: 'true'\n        action: retry\n        delay:\n          expr: '\"soon\"'\n" + tenantsA,
			"providers.corp.rules[0].delay.expr", "want duration, double or int", "\"soon\"'", "",
		},
		{
			"CEL empty condition", "version: 1\nproviders:\n  corp:\n    rules:\n      - {name: r, when: '  ', action: retry}\n" + tenantsA,
			"providers.corp.rules[0].when", "empty expression", "'  '", "",
		},
		{
			"CEL in a tenant's entry", "version: 1\n" + tenantsA + "    providers:\n      corp:\n        rules:\n          - {name: r, when: 'headers.x', action: retry}\n",
			"tenants[0].providers.corp.rules[0].when", "has type list(string), want bool", "headers.x'", "",
		},
		// Names that policies and host maps use.
		{
			"policy names a provider no one defines", "version: 1\nproviders:\n  corp: {}\n" + tenantsA + "    policies:\n      default: {provider: crop}\n",
			"tenants[0].policies.default.provider", `unknown provider "crop" (known: anthropic, aws, azure, corp,`, "provider: crop", "",
		},
		{
			"policy names another tenant's provider", "version: 1\ntenants:\n  - id: b\n    api_key_sha256: [" + hashB + "]\n    providers:\n      mine: {}\n  - id: a\n    api_key_sha256: [" + hashA + "]\n    policies:\n      default: {provider: mine}\n",
			"tenants[1].policies.default.provider", `unknown provider "mine"`, "provider: mine", "",
		},
		{
			"shared policy names a tenant's provider", "version: 1\npolicies:\n  p: {provider: mine}\n" + tenantsA + "    providers:\n      mine: {}\n    policies: {default: p}\n",
			"policies.p.provider", `unknown provider "mine"`, "provider: mine", "",
		},
		{
			"top-level host_providers names an unknown provider", "version: 1\nproviders:\n  corp: {}\nhost_providers:\n  api.corp.example: crop\n" + tenantsA,
			`host_providers["api.corp.example"]`, `unknown provider "crop"`, "crop", "",
		},
		{
			"policy host_providers names another tenant's provider", "version: 1\ntenants:\n  - id: b\n    api_key_sha256: [" + hashB + "]\n    providers:\n      mine: {}\n  - id: a\n    api_key_sha256: [" + hashA + "]\n    policies:\n      default:\n        host_providers: {api.example: mine}\n",
			`tenants[1].policies.default.host_providers["api.example"]`, `unknown provider "mine"`, "mine}", "",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("f.yaml", []byte(c.body))
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("Parse: %v, want *Error", err)
			}
			var p *Problem
			for _, x := range ce.Problems {
				if x.Path == c.path && strings.Contains(x.Message, c.msg) {
					p = x
				}
			}
			if p == nil {
				t.Fatalf("no problem at %s containing %q; got:\n%v", c.path, c.msg, err)
			}
			if len(ce.Problems) != 1 {
				t.Errorf("want one problem, got:\n%v", err)
			}
			rest, ok := textAt(c.body, p.Line, p.Column)
			if !ok {
				t.Fatalf("%d:%d is not in the file", p.Line, p.Column)
			}
			if c.before != "" {
				line := strings.Split(c.body, "\n")[p.Line-1]
				if rest != "" || !strings.HasSuffix(line, c.before) {
					t.Fatalf("%d:%d is before %q in %q, want the end of a line ending %q", p.Line, p.Column, rest, line, c.before)
				}
				return
			}
			if !strings.HasPrefix(rest, c.at) {
				t.Fatalf("%d:%d points at %q, want %q\n%v", p.Line, p.Column, rest, c.at, err)
			}
		})
	}
}

// TestProviderErrorsAll checks that one file's provider problems are all
// reported together, with those of its policies, and that a policy naming
// a broken entry is not reported again as naming an unknown provider.
func TestProviderErrorsAll(t *testing.T) {
	body := "version: 1\nproviders:\n  corp:\n    rules: [{name: r, when: 'stauts', action: retry}]\n  other: {hints: [{header: 'a b'}]}\n" +
		tenantsA + "    policies:\n      default: {provider: corp, max_retries: -1}\n"
	_, err := Parse("f.yaml", []byte(body))
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("Parse: %v", err)
	}
	var paths []string
	for _, p := range ce.Problems {
		paths = append(paths, p.Path)
	}
	want := []string{"providers.corp.rules[0].when", "providers.other.hints[0].header", "tenants[0].policies.default.max_retries"}
	if !slices.Equal(paths, want) {
		t.Fatalf("problems at %v, want %v:\n%v", paths, want, err)
	}
}

const exampleProviders = "../../testdata/config/providers.yaml"

// slowDown is the example's throttled response: a 400 whose JSON body
// says how long to wait.
func slowDown() *providers.Response {
	return &providers.Response{Status: 400, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"error":"slow_down","wait_ms":1500}`)}
}

// TestProvidersExample loads the example file and reads the operator's
// throttling response through the policy that names the provider, through
// the host map, and through a tenant's extension of it.
func TestProvidersExample(t *testing.T) {
	d, err := Load(exampleProviders)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := d.Tenant("team-a")
	pa, _ := a.Policy("")
	rd := pa.Reader()
	if rd.Name() != "corp-api" {
		t.Fatalf("team-a's reader is %s", rd.Name())
	}
	got := rd.Read(slowDown())
	if !got.HasHint || got.Hint.Delay != 1500*time.Millisecond || got.Hint.Source != "body:wait_ms" || got.Rule != "corp-api/slow_down" || got.Verdict != providers.VerdictRetry {
		t.Fatalf("reading %+v", got)
	}
	if !providers.NeedsBody(rd, 400) || providers.NeedsBody(rd, 200) {
		t.Error("the reader should peek at the body of a 400 only")
	}

	b, _ := d.Tenant("team-b")
	pb, _ := b.Policy("")
	if name, ok := pb.HostMap.ProviderFor("batch.corp.example"); !ok || name != "corp-batch" {
		t.Fatalf("team-b's host map gives %q for batch.corp.example", name)
	}
	if name, _ := pb.HostMap.ProviderFor("api.corp.example"); name != "corp-api" {
		t.Fatalf("team-b's host map gives %q for api.corp.example (a file entry's host)", name)
	}
	if name, ok := pa.HostMap.ProviderFor("batch.corp.example"); ok {
		t.Fatalf("team-a sees team-b's host: %q", name)
	}
	batch := pb.ReaderFor("corp-batch")
	if got := batch.Read(slowDown()); got.Rule != "corp-batch/slow_down" || got.Hint.Delay != 1500*time.Millisecond {
		t.Fatalf("corp-batch does not inherit slow_down: %+v", got)
	}
	quota := &providers.Response{Status: 429, Body: []byte(`{"error":"daily_quota_exhausted"}`)}
	if got := batch.Read(quota); got.Verdict != providers.VerdictDoNotRetry || got.Rule != "corp-batch/daily_quota" {
		t.Fatalf("daily quota: %+v", got)
	}
	if a.Catalog.Has("corp-batch") || !b.Catalog.Has("corp-batch") || d.Catalog().Has("corp-batch") {
		t.Fatal("corp-batch must be in team-b's catalog only")
	}
	if !d.Catalog().Has("corp-api") || !a.Catalog.Has("corp-api") {
		t.Fatal("corp-api must be in the file's catalog")
	}
	e, _ := b.Catalog.Lookup("corp-batch")
	if o := e.Origin(); o != exampleProviders+":53, tenant team-b, extends corp-api" {
		t.Errorf("origin %q", o)
	}
}

// TestProviderExtends checks what an entry inherits: everything but the
// hosts of another entry, lists replaced, rules merged by name (new ones
// first, replaced ones in place).
func TestProviderExtends(t *testing.T) {
	body := `version: 1
providers:
  aws:
    extends: aws
    title: AWS, with our own rule
    rules:
      - name: corp_gateway
        statuses: [503]
        when: headers["x-corp-gateway"] == ["busy"]
        action: retry
        delay: {header: X-Corp-Wait, format: seconds}
  aws-china:
    extends: aws
    hosts: ["*.amazonaws.com.cn"]
    hints:
      - {header: X-Wait-Ms, format: milliseconds}
    rules:
      - name: throttling_error_code
        statuses: [400]
        when: 'body.code == "Throttling"'
        action: retry
  corp-base:
    hints: [{header: X-Wait, format: seconds}]
    retry_statuses: [520]
  corp-derived:
    extends: corp-base
    hosts: [derived.example]
` + tenantsA + `    providers:
      github:
        extends: github
        rules:
          - {name: secondary_rate_limit, when: 'false', action: retry}
    policies:
      default: {provider: aws}
      gh: shared-gh
      own: {extends: shared-gh, max_retries: 1}
  - id: team-b
    api_key_sha256: [` + hashB + `]
    policies:
      gh: shared-gh
      default: {}
policies:
  shared-gh: {provider: github}
`
	d, err := Parse("f.yaml", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	cat := d.Catalog()
	aws, _ := cat.Lookup("aws")
	if aws.Spec().Title != "AWS, with our own rule" || !slices.Equal(aws.Hosts(), []string{"*.amazonaws.com"}) {
		t.Errorf("aws extended: title %q hosts %v", aws.Spec().Title, aws.Hosts())
	}
	if names := ruleNames(aws); !slices.Equal(names, []string{"corp_gateway", "throttling_error_code"}) {
		t.Errorf("aws rules %v, want the new one first", names)
	}
	builtinAWS, _ := providers.Builtin().Lookup("aws")
	if !reflect.DeepEqual(aws.Spec().Hints, builtinAWS.Spec().Hints) {
		t.Error("aws extended lost its hints")
	}
	r := &providers.Response{Status: 503, Header: http.Header{"X-Corp-Gateway": {"busy"}, "X-Corp-Wait": {"7"}}}
	if got := aws.Read(r); got.Rule != "aws/corp_gateway" || got.Hint.Delay != 7*time.Second {
		t.Errorf("corp_gateway: %+v", got)
	}
	china, _ := cat.Lookup("aws-china")
	if !slices.Equal(china.Hosts(), []string{"*.amazonaws.com.cn"}) || len(china.Spec().Hints) != 1 {
		t.Errorf("aws-china hosts %v hints %v", china.Hosts(), china.Spec().Hints)
	}
	// extends: aws names the file's aws (the layer's own entries first),
	// so aws-china has corp_gateway too, and its own throttling rule.
	if names := ruleNames(china); !slices.Equal(names, []string{"corp_gateway", "throttling_error_code"}) || china.Spec().Rules[1].When != `body.code == "Throttling"` {
		t.Errorf("aws-china rules %+v", china.Spec().Rules)
	}
	derived, _ := cat.Lookup("corp-derived")
	if !slices.Equal(derived.ExtraRetryableStatuses(), []int{520}) || len(derived.Spec().Hints) != 1 {
		t.Errorf("corp-derived inherits statuses %v hints %v", derived.ExtraRetryableStatuses(), derived.Spec().Hints)
	}
	hm := d.HostMap()
	for host, want := range map[string]string{"s3.amazonaws.com": "aws", "s3.amazonaws.com.cn": "aws-china", "derived.example": "corp-derived", "api.github.com": "github"} {
		if got, _ := hm.ProviderFor(host); got != want {
			t.Errorf("host %s -> %q, want %q", host, got, want)
		}
	}

	// A tenant's extension of github is what its policies see, the
	// shared ones included; the other tenant sees the built-in one.
	a, _ := d.Tenant("team-a")
	b, _ := d.Tenant("team-b")
	secondary := &providers.Response{Status: 403, Body: []byte(`{"message":"You have exceeded a secondary rate limit."}`)}
	for _, name := range []string{"gh", "own"} {
		p, _ := a.Policy(name)
		if got := p.Reader().Read(secondary); got.Rule != "" {
			t.Errorf("team-a %s: the tenant's github should not match: %+v", name, got)
		}
	}
	pb, _ := b.Policy("gh")
	if got := pb.Reader().Read(secondary); got.Rule != "github/secondary_rate_limit" {
		t.Errorf("team-b gh: %+v", got)
	}
	if pa, _ := a.Policy("gh"); pa == pb {
		t.Error("team-a shares a policy object with team-b although their catalogs differ")
	}
	if pd, _ := a.Policy(""); pd.Reader().Name() != "aws" {
		t.Errorf("team-a default reader %s", pd.Reader().Name())
	}
}

func ruleNames(e *providers.Entry) []string {
	var out []string
	for _, r := range e.Spec().Rules {
		out = append(out, r.Name)
	}
	return out
}

// TestProvidersRetryAfterExtended: extending retry-after changes the
// reader of every policy that names no provider, for unknown hosts too.
func TestProvidersRetryAfterExtended(t *testing.T) {
	body := "version: 1\nproviders:\n  retry-after:\n    extends: retry-after\n    hints: [{header: X-Wait-Ms, format: milliseconds}, {header: Retry-After}]\n" + tenantsA
	d, err := Parse("f.yaml", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	tn, _ := d.Tenant("team-a")
	p, _ := tn.Policy("")
	r := &providers.Response{Status: 503, Header: http.Header{"X-Wait-Ms": {"250"}}}
	for _, rd := range []providers.HintReader{p.Reader(), p.ReaderFor("retry-after"), p.ReaderFor("")} {
		if got := rd.Read(r); got.Hint.Delay != 250*time.Millisecond {
			t.Errorf("%s: %+v", rd.Name(), got)
		}
	}
}

// TestProvidersReloadKeepsLastGood: a reload whose provider does not
// compile keeps serving the last good configuration, provider included.
func TestProvidersReloadKeepsLastGood(t *testing.T) {
	good, err := os.ReadFile(exampleProviders)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "broker.yaml")
	replaceFile(t, path, string(good))
	reg := prometheus.NewRegistry()
	h, err := NewHolder(path, reg, WithLogger(quietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(good), `when: body.error == "slow_down"`, `when: body.error == "slow_down" &&`, 1)
	if bad == string(good) {
		t.Fatal("the example changed: no slow_down condition to break")
	}
	replaceFile(t, path, bad)
	err = h.Reload()
	var ce *Error
	if !errors.As(err, &ce) || len(ce.Problems) != 1 || ce.Problems[0].Path != "providers.corp-api.rules[0].when" || ce.Problems[0].Line != 30 {
		t.Fatalf("reload error: %v", err)
	}
	if metric(t, reg, "retrybroker_config_reload_failures_total", "") != 1 {
		t.Error("failure not counted")
	}
	tn, ok := h.Directory().Tenant("team-a")
	if !ok {
		t.Fatal("team-a lost")
	}
	p, _ := tn.Policy("")
	if got := p.Reader().Read(slowDown()); got.Rule != "corp-api/slow_down" {
		t.Fatalf("after a bad reload: %+v", got)
	}
	// Fixing the rule (a longer wait) reloads.
	replaceFile(t, path, strings.Replace(string(good), `unit: ms`, `unit: s`, 1))
	if err := h.Reload(); err != nil {
		t.Fatal(err)
	}
	tn, _ = h.Directory().Tenant("team-a")
	p, _ = tn.Policy("")
	if got := p.Reader().Read(slowDown()); got.Hint.Delay != 1500*time.Second {
		t.Fatalf("after the good reload: %+v", got)
	}
}
