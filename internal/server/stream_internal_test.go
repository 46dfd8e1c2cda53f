package server

import (
	"testing"

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

// TestStreamSlots: a slot per (tenant, policy) up to the limit; release
// gives it back once, however often it is called.
func TestStreamSlots(t *testing.T) {
	var s streamSlots
	a := streamKey{tenant: "t1", policy: "default"}
	r1, ok1 := s.acquire(a, 2)
	r2, ok2 := s.acquire(a, 2)
	_, ok3 := s.acquire(a, 2)
	if !ok1 || !ok2 || ok3 {
		t.Fatalf("acquire: %v %v %v, want true true false", ok1, ok2, ok3)
	}
	if _, ok := s.acquire(streamKey{tenant: "t2", policy: "default"}, 2); !ok {
		t.Fatal("another tenant shares the first tenant's slots")
	}
	if _, ok := s.acquire(streamKey{tenant: "t1", policy: "bulk"}, 1); !ok {
		t.Fatal("another policy shares the first policy's slots")
	}
	r1()
	r1() // a second release gives back nothing more
	if _, ok := s.acquire(a, 2); !ok {
		t.Fatal("a released slot is not free")
	}
	if _, ok := s.acquire(a, 2); ok {
		t.Fatal("a double release freed two slots")
	}
	r2()
	if s.open[a] != 1 {
		t.Fatalf("%d open, want 1", s.open[a])
	}
}
