package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/store"
	"github.com/retrybroker/retrybroker/internal/tenant"
)

// withShared returns a file with the given top-level policies (each line
// indented under "policies:") and one tenant whose policies are the given
// lines (indented under the tenant's "policies:").
func withShared(shared, own []string) string {
	var b strings.Builder
	b.WriteString("version: 1\n")
	if len(shared) > 0 {
		b.WriteString("policies:\n")
		for _, l := range shared {
			b.WriteString("  " + l + "\n")
		}
	}
	b.WriteString("tenants:\n  - id: team-a\n    api_key_sha256: [" + hashA + "]\n    policies:\n")
	for _, l := range own {
		b.WriteString("      " + l + "\n")
	}
	return b.String()
}

// ownPolicy returns a file whose one tenant has one policy, default, with
// the given option lines.
func ownPolicy(lines ...string) string {
	own := []string{"default:"}
	for _, l := range lines {
		own = append(own, "  "+l)
	}
	return withShared(nil, own)
}

// wantProblem parses body and checks that it is refused with a problem at
// path whose message contains msg, on the line marked "#<" and, when at is
// not empty, at the column where at first appears on that line.
func wantProblem(t *testing.T, body, path, msg, at string) {
	t.Helper()
	_, err := Parse("broker.yaml", []byte(body))
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("Parse: got %v, want *config.Error\n%s", err, body)
	}
	line := markedLine(t, body)
	col := 0
	if at != "" {
		text := strings.Split(body, "\n")[line-1]
		i := strings.Index(text, at)
		if i < 0 {
			t.Fatalf("%q is not on line %d: %q", at, line, text)
		}
		col = i + 1
	}
	for _, p := range ce.Problems {
		if p.Path != path || !strings.Contains(p.Message, msg) {
			continue
		}
		if p.Line != line || col != 0 && p.Column != col {
			t.Errorf("problem %v: at %d:%d, want %d:%d", p, p.Line, p.Column, line, col)
		}
		return
	}
	t.Errorf("no problem at path %q containing %q; got:\n%v\nin\n%s", path, msg, err, body)
}

// parseOK parses body and fails the test on any problem.
func parseOK(t *testing.T, body string) *Directory {
	t.Helper()
	d, err := Parse("broker.yaml", []byte(body))
	if err != nil {
		t.Fatalf("Parse: %v\n%s", err, body)
	}
	return d
}

// policyOf returns the named policy of tenant team-a.
func policyOf(t *testing.T, d *Directory, name string) *tenant.Policy {
	t.Helper()
	a, ok := d.Tenant("team-a")
	if !ok {
		t.Fatal("no tenant team-a")
	}
	p, ok := a.Policy(name)
	if !ok {
		t.Fatalf("no policy %q", name)
	}
	return p
}

// TestNewOptionDefaults checks that a policy that sets none of max_gate,
// stream, learning and breaker gets the engine's and the store's defaults.
func TestNewOptionDefaults(t *testing.T) {
	p := policyOf(t, parseOK(t, ownPolicy("max_retries: 2")), "default")
	if p.MaxGate != 24*time.Hour {
		t.Errorf("max_gate = %s, want 24h", p.MaxGate)
	}
	if want := (engine.StreamLimits{MaxConcurrent: 64, IdleTimeout: 60 * time.Second}); p.Stream != want {
		t.Errorf("stream = %+v, want %+v", p.Stream, want)
	}
	if p.Learning != store.DefaultLearning() {
		t.Errorf("learning = %+v, want %+v", p.Learning, store.DefaultLearning())
	}
	if p.Breaker != store.DefaultBreaker() {
		t.Errorf("breaker = %+v, want %+v", p.Breaker, store.DefaultBreaker())
	}
}

// TestNewOptions checks that max_gate, stream, learning and breaker are
// decoded, and that sections override only the keys they set, over what a
// policy inherits through extends.
func TestNewOptions(t *testing.T) {
	body := withShared([]string{
		"quiet:",
		"  max_gate: 1h",
		"  stream: {max_concurrent: 8, max_bytes: 1GiB}",
		"  learning: {disabled: true}",
		"  breaker: {disabled: true}",
		"tuned:",
		"  learning: {idle_expiry: 3h}",
		"  breaker: {min_calls: 5, failure_ratio: 0.25, window: 1m, open_for: 2s, max_open: 30s}",
	}, []string{
		"default: quiet",
		"relearn:",
		"  extends: quiet",
		"  learning: {idle_expiry: 10m, first_window: false, scout_hold: 500ms}",
		"  breaker: {min_calls: 50}",
		"  stream: {idle_timeout: 5s, max_duration: 10m}",
		"tuned: tuned",
		"partial:",
		"  extends: tuned",
		"  breaker: {max_open: 1m}",
		"  learning: {disabled: false}",
	})
	d := parseOK(t, body)

	quiet := policyOf(t, d, "default")
	if quiet.MaxGate != time.Hour {
		t.Errorf("quiet max_gate = %s", quiet.MaxGate)
	}
	if want := (engine.StreamLimits{MaxConcurrent: 8, IdleTimeout: 60 * time.Second, MaxBytes: 1 << 30}); quiet.Stream != want {
		t.Errorf("quiet stream = %+v, want %+v", quiet.Stream, want)
	}
	if quiet.Learning.Enabled || quiet.Breaker.Enabled {
		t.Errorf("quiet learning %+v breaker %+v, want both disabled", quiet.Learning, quiet.Breaker)
	}

	re := policyOf(t, d, "relearn")
	if want := (store.LearningConfig{Enabled: true, IdleExpiry: 10 * time.Minute, FirstWindowOff: true, ScoutHold: 500 * time.Millisecond}); re.Learning != want {
		t.Errorf("relearn learning = %+v, want %+v", re.Learning, want)
	}
	wantBreaker := store.DefaultBreaker()
	wantBreaker.MinCalls = 50
	if re.Breaker != wantBreaker {
		t.Errorf("relearn breaker = %+v, want the defaults with min_calls 50: %+v", re.Breaker, wantBreaker)
	}
	if want := (engine.StreamLimits{MaxConcurrent: 8, IdleTimeout: 5 * time.Second, MaxDuration: 10 * time.Minute, MaxBytes: 1 << 30}); re.Stream != want {
		t.Errorf("relearn stream = %+v, want %+v", re.Stream, want)
	}
	if re.MaxGate != time.Hour {
		t.Errorf("relearn max_gate = %s, want the inherited 1h", re.MaxGate)
	}

	tuned := policyOf(t, d, "tuned")
	wantTuned := store.BreakerConfig{Enabled: true, MinCalls: 5, FailureRatio: 0.25, Window: time.Minute, OpenFor: 2 * time.Second, MaxOpen: 30 * time.Second}
	if tuned.Breaker != wantTuned {
		t.Errorf("tuned breaker = %+v, want %+v", tuned.Breaker, wantTuned)
	}
	if want := (store.LearningConfig{Enabled: true, IdleExpiry: 3 * time.Hour}); tuned.Learning != want {
		t.Errorf("tuned learning = %+v, want %+v", tuned.Learning, want)
	}

	partial := policyOf(t, d, "partial")
	wantTuned.MaxOpen = time.Minute
	if partial.Breaker != wantTuned {
		t.Errorf("partial breaker = %+v, want %+v", partial.Breaker, wantTuned)
	}
	if partial.Learning != tuned.Learning {
		t.Errorf("partial learning = %+v, want the inherited %+v", partial.Learning, tuned.Learning)
	}
}

// TestNewOptionErrors checks the problems of the new options: each at the
// marked line and, where given, at the column of the text that caused it.
func TestNewOptionErrors(t *testing.T) {
	const def = "tenants[0].policies.default"
	cases := []struct {
		name, body, path, msg, at string
	}{
		{"max_gate above 168h", ownPolicy("max_gate: 169h #<"), def + ".max_gate", "at most 168h", "max_gate"},
		{"max_gate below max_delay", ownPolicy("max_delay: 2m", "max_gate: 1m #<"), def + ".max_gate", "must be at least max_delay (2m0s), got 1m0s", "max_gate"},
		{"max_gate without unit", ownPolicy("max_gate: 10 #<"), def + ".max_gate", "has no unit", "10"},
		{
			"max_gate set below an inherited max_delay",
			withShared([]string{"slow: {max_delay: 2h}"}, []string{"default:", "  extends: slow", "  max_gate: 1h #<"}),
			def + ".max_gate", "must be at least max_delay (2h0m0s), got 1h0m0s", "max_gate",
		},
		{
			"max_delay raised above an inherited max_gate",
			withShared([]string{"short: {max_gate: 1m}"}, []string{"default:", "  extends: short", "  max_delay: 5m #<"}),
			def + ".max_gate", "max_gate is inherited through extends; set max_gate in this policy, or lower max_delay", "max_delay",
		},
		{
			"shared policy whose max_gate contradicts its max_delay",
			withShared([]string{"bad:", "  max_delay: 10m", "  max_gate: 5m #<"}, []string{"default: bad"}),
			"policies.bad.max_gate", "must be at least max_delay", "max_gate",
		},
		{"stream max_concurrent zero", ownPolicy("stream: {max_concurrent: 0} #<"), def + ".stream.max_concurrent", "must be between 1 and 100000, got 0", "0}"},
		{"stream idle_timeout zero", ownPolicy("stream:", "  idle_timeout: 0s #<"), def + ".stream.idle_timeout", "must be positive", "idle_timeout"},
		{"stream max_duration negative", ownPolicy("stream:", "  max_duration: -1s #<"), def + ".stream.max_duration", "must not be negative", "max_duration"},
		{"stream max_bytes unit", ownPolicy("stream: {max_bytes: 1XB} #<"), def + ".stream.max_bytes", `unknown unit "XB"`, "1XB"},
		{"stream unknown key", ownPolicy("stream: {max_conncurrent: 5} #<"), def + ".stream.max_conncurrent", "did you mean max_concurrent?", "max_conncurrent"},
		{"learning disabled with idle_expiry", ownPolicy("learning: {disabled: true, idle_expiry: 1h} #<"), def + ".learning.disabled", "disabled learning takes no other key", "true"},
		{"learning disabled with first_window", ownPolicy("learning: {disabled: true, first_window: false} #<"), def + ".learning.disabled", "disabled learning takes no other key", "true"},
		{"learning scout_hold zero", ownPolicy("learning: {scout_hold: 0s} #<"), def + ".learning.scout_hold", "must be positive and at most 1m", "0s"},
		{"learning scout_hold too long", ownPolicy("learning:", "  scout_hold: 2m #<"), def + ".learning.scout_hold", "got 2m0s", "2m"},
		{"learning idle_expiry zero", ownPolicy("learning: {idle_expiry: 0s} #<"), def + ".learning.idle_expiry", "must be positive and at most 168h", "0s"},
		{"learning idle_expiry too long", ownPolicy("learning:", "  idle_expiry: 200h #<"), def + ".learning.idle_expiry", "got 200h0m0s", "200h"},
		{"learning unknown key", ownPolicy("learning: {idle: 1h} #<"), def + ".learning.idle", "unknown field", "idle"},
		{"learning yes", ownPolicy("learning: {disabled: yes} #<"), def + ".learning.disabled", `want true or false, got the string "yes"`, "yes"},
		{"breaker disabled with keys", ownPolicy("breaker: {disabled: true, min_calls: 3} #<"), def + ".breaker.disabled", "a disabled breaker takes no", "true"},
		{"breaker min_calls zero", ownPolicy("breaker: {min_calls: 0} #<"), def + ".breaker.min_calls", "must be between 1 and 100000, got 0", "0}"},
		{"breaker min_calls too many", ownPolicy("breaker: {min_calls: 100001} #<"), def + ".breaker.min_calls", "must be between 1 and 100000", "100001"},
		{"breaker failure_ratio zero", ownPolicy("breaker: {failure_ratio: 0} #<"), def + ".breaker.failure_ratio", "must be above 0 and at most 1, got 0", "0}"},
		{"breaker failure_ratio above 1", ownPolicy("breaker: {failure_ratio: 1.5} #<"), def + ".breaker.failure_ratio", "got 1.5", "1.5"},
		{"breaker window too short", ownPolicy("breaker: {window: 500ms} #<"), def + ".breaker.window", "must be between 1s and 10m", "500ms"},
		{"breaker window too long", ownPolicy("breaker: {window: 11m} #<"), def + ".breaker.window", "got 11m0s", "11m"},
		{"breaker open_for zero", ownPolicy("breaker: {open_for: 0s} #<"), def + ".breaker.open_for", "must be positive", "0s"},
		{"breaker max_open above 24h", ownPolicy("breaker: {max_open: 25h} #<"), def + ".breaker.max_open", "at most 24h", "25h"},
		{"breaker max_open below open_for", ownPolicy("breaker: {open_for: 10s, max_open: 5s} #<"), def + ".breaker.max_open", "must be at least open_for (10s), got 5s", "5s}"},
		{"breaker max_open below the default open_for", ownPolicy("breaker:", "  max_open: 1s #<"), def + ".breaker.max_open", "must be at least open_for (5s), got 1s", "1s"},
		{
			"breaker open_for above an inherited max_open",
			withShared([]string{"b: {breaker: {max_open: 10s}}"}, []string{"default:", "  extends: b", "  breaker: {open_for: 30s} #<"}),
			def + ".breaker.open_for", "must be at most max_open (10s), got 30s", "30s",
		},
		{"breaker mapping wrong kind", ownPolicy("breaker: off #<"), def + ".breaker", "want a mapping (key: value lines), got the string \"off\"", "off"},
		{"body above MaxBodyLimit", ownPolicy(fmt.Sprintf("max_request_body: %d #<", engine.MaxBodyLimit+1)), def + ".max_request_body", "between 1 byte and 64 MiB", "max_request_body"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { wantProblem(t, tc.body, tc.path, tc.msg, tc.at) })
	}
}

// TestBodySizesUpToMaxBodyLimit checks that every body size a policy may
// allow, up to engine.MaxBodyLimit, loads: the gRPC server derives its
// message limits from that bound.
func TestBodySizesUpToMaxBodyLimit(t *testing.T) {
	for _, s := range []string{"1", "1KiB", "1 MiB", "8MiB", "64MiB", "67108864", fmt.Sprint(engine.MaxBodyLimit)} {
		d := parseOK(t, ownPolicy("max_request_body: "+s, "max_response_body: "+s))
		p := policyOf(t, d, "default")
		want, err := ParseByteSize(s)
		if err != nil {
			t.Fatal(err)
		}
		if p.MaxRequestBody != want || p.MaxResponseBody != want {
			t.Errorf("%s: bodies %d and %d, want %d", s, p.MaxRequestBody, p.MaxResponseBody, want)
		}
		if want > engine.MaxBodyLimit {
			t.Errorf("%s is above engine.MaxBodyLimit", s)
		}
	}
}

// TestContradictingLimitsRefused checks issue #9 item 7: a file whose
// limits contradict each other does not load, and the problem says where.
func TestContradictingLimitsRefused(t *testing.T) {
	body := ownPolicy("max_delay: 10m", "max_gate: 1m #<")
	_, err := Parse("broker.yaml", []byte(body))
	var p *Problem
	if !errors.As(err, &p) {
		t.Fatalf("Parse: got %v, want a *Problem", err)
	}
	line := markedLine(t, body)
	want := fmt.Sprintf("broker.yaml:%d:9: tenants[0].policies.default.max_gate: must be at least max_delay (10m0s), got 1m0s", line)
	if !strings.HasPrefix(p.Error(), want) {
		t.Errorf("problem %q, want prefix %q", p.Error(), want)
	}
}
