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
