package server

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
	"github.com/retrybroker/retrybroker/internal/engine"
)

// TestBodyEndTableComplete: every engine.BodyEnd has the proto value of
// the same name, and every proto value one engine value.
func TestBodyEndTableComplete(t *testing.T) {
	if len(bodyEnds.missing) > 0 {
		t.Fatalf("engine body ends without a proto value: %v", bodyEnds.missing)
	}
	for name, n := range rbv1.BodyEnd_value {
		e, ok := bodyEnds.engine(n)
		if !ok || bodyEnds.proto(e) != n {
			t.Errorf("proto %s has no engine counterpart", name)
		}
	}
	if got := rbv1.BodyEnd(bodyEnds.proto(engine.BodyEndIdleTimeout)); got != rbv1.BodyEnd_BODY_END_IDLE_TIMEOUT {
		t.Errorf("idle timeout maps to %s", got)
	}
}

// TestStreamSlots: a slot per (tenant, policy) up to the policy's limit,
// and per tenant up to the tenant's; release gives both back once, however
// often it is called.
func TestStreamSlots(t *testing.T) {
	var s streamSlots
	const many = 100
	r1, f1 := s.acquire("t1", "default", 2, many)
	r2, f2 := s.acquire("t1", "default", 2, many)
	_, f3 := s.acquire("t1", "default", 2, many)
	if f1 != slotsOK || f2 != slotsOK || f3 != slotsPolicyFull {
		t.Fatalf("acquire: %v %v %v, want ok ok policy-full", f1, f2, f3)
	}
	if _, f := s.acquire("t2", "default", 2, many); f != slotsOK {
		t.Fatal("another tenant shares the first tenant's slots")
	}
	if _, f := s.acquire("t1", "bulk", 1, many); f != slotsOK {
		t.Fatal("another policy shares the first policy's slots")
	}
	r1.release()
	r1.release() // a second release gives back nothing more
	if _, f := s.acquire("t1", "default", 2, many); f != slotsOK {
		t.Fatal("a released slot is not free")
	}
	if _, f := s.acquire("t1", "default", 2, many); f != slotsPolicyFull {
		t.Fatal("a double release freed two slots")
	}
	r2.release()
	if n := s.open[streamKey{tenant: "t1", policy: "default"}]; n != 1 {
		t.Fatalf("%d open, want 1", n)
	}
}

// TestStreamSlotsTenantLimit (issue 17, defect 9): the tenant's limit holds
// across its policies; a refused slot takes nothing from either count.
func TestStreamSlotsTenantLimit(t *testing.T) {
	var s streamSlots
	var releases []streamSlot
	for i := range 8 {
		r, f := s.acquire("t1", fmt.Sprint("p", i%4), 8, 8)
		if f != slotsOK {
			t.Fatalf("stream %d: %v", i+1, f)
		}
		releases = append(releases, r)
	}
	if _, f := s.acquire("t1", "p0", 8, 8); f != slotsTenantFull {
		t.Fatalf("9th stream across 4 policies: %v, want tenant-full", f)
	}
	if _, f := s.acquire("t2", "p0", 8, 8); f != slotsOK {
		t.Fatal("another tenant shares the tenant's limit")
	}
	releases[0].release()
	r, f := s.acquire("t1", "p3", 8, 8)
	if f != slotsOK {
		t.Fatalf("after a release: %v", f)
	}
	r.release()
	for i := range releases[1:] {
		releases[1+i].release()
	}
	if n := s.open[streamKey{tenant: "t1", whole: true}]; n != 0 {
		t.Fatalf("%d open for t1 after every release, want 0", n)
	}
}

// TestStreamEndReusesTheHeadsAttempts: the end repeats the head's attempt
// messages when the records are the ones the head was sent with, and
// converts them anew when any changed after the head (the end then says
// what the records say).
func TestStreamEndReusesTheHeadsAttempts(t *testing.T) {
	recs := []engine.AttemptRecord{
		{Number: 1, Status: 503, Decision: engine.Decision{Action: engine.ActionRetry, Reason: engine.ReasonServerHint, Delay: time.Second, HintSource: "retry-after"}},
		{Number: 2, Status: 200, Duration: 3 * time.Millisecond, Decision: engine.Decision{Action: engine.ActionDoNotRetry, Reason: engine.ReasonSuccess}},
	}
	g := &grpcSink{provider: "github"}
	g.headRecs, g.headAttempts = slices.Clone(recs), attemptsToProto(recs, g.provider)

	same := g.attempts(slices.Clone(recs))
	if &same[0] != &g.headAttempts[0] {
		t.Fatal("unchanged records were converted again")
	}

	changed := slices.Clone(recs)
	changed[1].Duration = 9 * time.Millisecond
	changed[1].Decision.Rule = "github/secondary"
	got := g.attempts(changed)
	if &got[0] == &g.headAttempts[0] {
		t.Fatal("changed records reused the head's messages")
	}
	if d := got[1].GetDuration().AsDuration(); d != 9*time.Millisecond || got[1].GetDecision().GetRule() != "github/secondary" {
		t.Fatalf("end attempt 2: duration %v rule %q, want the changed record's", d, got[1].GetDecision().GetRule())
	}
	if g.headAttempts[1].GetDuration().AsDuration() != 3*time.Millisecond {
		t.Fatal("the head's message changed")
	}
	if more := g.attempts(append(slices.Clone(recs), engine.AttemptRecord{Number: 3})); len(more) != 3 || more[2].GetNumber() != 3 {
		t.Fatalf("a record added after the head: %d attempts", len(more))
	}
}

// TestGRPCSinkGoesBackZeroed: a sink given back to the pool holds nothing
// of its stream (the next stream takes it as it is).
func TestGRPCSinkGoesBackZeroed(t *testing.T) {
	g := grpcSinks.get()
	g.provider, g.yielded = "github", true
	g.headRecs = []engine.AttemptRecord{{Number: 1, Status: 200}}
	g.headAttempts = attemptsInto(g.headRecs, g.provider, g.attempt[:], g.attemptPtr[:0])
	g.head.Headers = headersInto(http.Header{"X-Secret": {"v"}}, g.header[:], g.headerPtr[:0])
	g.end.BodyBytes = 9
	grpcSinks.put(g)
	if g.provider != "" || g.yielded || g.headRecs != nil || g.headAttempts != nil ||
		g.attempt[0].a.GetNumber() != 0 || g.header[0].GetValue() != "" || g.head.Headers != nil || g.end.BodyBytes != 0 {
		t.Fatal("a sink given back still holds its stream's messages")
	}
}
