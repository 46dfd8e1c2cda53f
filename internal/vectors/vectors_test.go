package vectors

import (
	"testing"
	"time"
)

func TestLoadFindsEveryVector(t *testing.T) {
	vs, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) < 60 {
		t.Fatalf("loaded %d vectors, want the full file (>= 60)", len(vs))
	}
	for _, v := range vs {
		if v.Expect.Action != "retry" && v.Expect.Action != "do_not_retry" {
			t.Errorf("%s: bad expect.action %q", v.Name, v.Expect.Action)
		}
		if (v.Status == 0) == (v.TransportError == "") {
			t.Errorf("%s: exactly one of status and transport_error must be set", v.Name)
		}
	}
}

// TestCheckRejects proves Check can fail: each wrong decision is caught.
func TestCheckRejects(t *testing.T) {
	ms := func(f float64) *float64 { return &f }
	src := "retry-after"
	v := Vector{Name: "x", Expect: Expect{Action: "retry", DelayMS: ms(5000), HintSource: &src, Reason: "REASON_SERVER_HINT"}}
	good := Got{Action: "retry", Delay: 5 * time.Second, HintSource: "retry-after", Reason: "REASON_SERVER_HINT"}
	if err := v.Check(good); err != nil {
		t.Fatalf("good decision rejected: %v", err)
	}
	bads := map[string]Got{
		"action": {Action: "do_not_retry", Delay: 5 * time.Second, HintSource: "retry-after", Reason: "REASON_SERVER_HINT"},
		"delay":  {Action: "retry", Delay: 5002 * time.Millisecond, HintSource: "retry-after", Reason: "REASON_SERVER_HINT"},
		"source": {Action: "retry", Delay: 5 * time.Second, HintSource: "", Reason: "REASON_SERVER_HINT"},
		"reason": {Action: "retry", Delay: 5 * time.Second, HintSource: "retry-after", Reason: "REASON_BACKOFF"},
	}
	for name, g := range bads {
		if err := v.Check(g); err == nil {
			t.Errorf("%s: wrong decision accepted", name)
		}
	}
	vmax := Vector{Expect: Expect{Action: "retry", DelayMaxMS: ms(1000)}}
	if err := vmax.Check(Got{Action: "retry", Delay: 1001 * time.Millisecond}); err == nil {
		t.Error("delay above delay_max_ms accepted")
	}
	vh := Vector{Expect: Expect{Action: "do_not_retry", HintMS: ms(61000)}}
	if err := vh.Check(Got{Action: "do_not_retry"}); err == nil {
		t.Error("missing hint accepted")
	}
}

func TestLoadAllReadsBothFiles(t *testing.T) {
	all, err := LoadAll()
	if err != nil {
		t.Fatal(err)
	}
	shared, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	catalog, err := LoadFile("catalog.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(shared)+len(catalog) || len(catalog) < 30 {
		t.Fatalf("LoadAll = %d vectors; classify.jsonl %d + catalog.jsonl %d (want >= 30)", len(all), len(shared), len(catalog))
	}
	for _, v := range catalog {
		if v.Provider == "" {
			t.Errorf("%s: catalog vectors name their provider", v.Name)
		}
	}
}

// TestCheckRejectsRuleAndReading proves the catalog fields can fail.
func TestCheckRejectsRuleAndReading(t *testing.T) {
	rule, scope := "openai/insufficient_quota", "global"
	v := Vector{Expect: Expect{
		Action: "do_not_retry", Rule: &rule, Scope: &scope,
		Quota: &ExpectQuota{Remaining: 3, ResetMS: 1000, Source: "ratelimit", Limit: 10},
	}}
	if err := v.Check(Got{Action: "do_not_retry", Rule: rule}); err != nil {
		t.Fatalf("good decision rejected: %v", err)
	}
	if err := v.Check(Got{Action: "do_not_retry"}); err == nil {
		t.Error("missing rule accepted")
	}
	good := GotReading{HasQuota: true, Remaining: 3, ResetIn: time.Second, Source: "ratelimit", Limit: 10, Scope: "global"}
	if err := v.CheckReading(good); err != nil {
		t.Fatalf("good reading rejected: %v", err)
	}
	for name, mut := range map[string]func(*GotReading){
		"no quota":  func(g *GotReading) { g.HasQuota = false },
		"remaining": func(g *GotReading) { g.Remaining = 4 },
		"reset":     func(g *GotReading) { g.ResetIn = 3 * time.Second },
		"source":    func(g *GotReading) { g.Source = "x" },
		"limit":     func(g *GotReading) { g.Limit = 0 },
		"scope":     func(g *GotReading) { g.Scope = "user" },
	} {
		g := good
		mut(&g)
		if err := v.CheckReading(g); err == nil {
			t.Errorf("%s: wrong reading accepted", name)
		}
	}
	none := Vector{}
	if err := none.CheckReading(GotReading{HasQuota: true}); err == nil {
		t.Error("unexpected quota accepted")
	}
}
