package engine

import (
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/internal/store"
)

// TestAdmissionStep: the admission decision is a table from the store's
// answer, the clock, the deadline, the drain and the attempt number to
// send / sleep(d, cause, wake) / end(outcome, retry_after).
func TestAdmissionStep(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	p := DefaultPolicy() // max_delay 60 s
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	in := stepInput{now: t0, deadline: t0.Add(10 * time.Second), attempt: 1, heldPoll: 100 * time.Millisecond}
	with := func(mut func(*stepInput)) stepInput {
		c := in
		mut(&c)
		return c
	}
	draining := with(func(i *stepInput) { i.draining = true })
	far := with(func(i *stepInput) { i.deadline = t0.Add(10 * time.Minute) })
	sleep := func(d time.Duration, cause string) step {
		return step{kind: stepSleep, d: d, until: t0.Add(d), cause: cause, wake: wakeGate}
	}
	end := func(o Outcome, d time.Duration, cause string) step {
		return step{kind: stepEnd, d: d, outcome: o, hasRetryAfter: true, until: t0.Add(d), cause: cause}
	}
	tests := []struct {
		name string
		adm  store.Admission
		in   stepInput
		want step
	}{
		{"admitted", store.Admission{}, in, step{kind: stepSend, cause: causePacing}},
		{"admitted while draining", store.Admission{}, draining, step{kind: stepSend, cause: causePacing}},
		{"admitted after pacing", store.Admission{PaceWait: 2 * time.Second}, in, step{kind: stepSend, d: 2 * time.Second, cause: causePacing}},
		{"pacing while draining", store.Admission{PaceWait: 2 * time.Second}, draining, step{kind: stepEnd, d: 2 * time.Second, outcome: OutcomeShuttingDown, hasRetryAfter: true}},
		{"closed gate", store.Admission{GateClosedUntil: t0.Add(3 * time.Second)}, in, sleep(3*time.Second, causeCooldown)},
		{"closed gate while draining", store.Admission{GateClosedUntil: t0.Add(3 * time.Second)}, draining, end(OutcomeShuttingDown, 3*time.Second, causeCooldown)},
		{"closed gate past the deadline", store.Admission{GateClosedUntil: t0.Add(12 * time.Second)}, in, end(OutcomeGateClosed, 12*time.Second, causeCooldown)},
		{"closed gate at the deadline", store.Admission{GateClosedUntil: t0.Add(10 * time.Second)}, in, end(OutcomeGateClosed, 10*time.Second, causeCooldown)},
		{"closed gate past max_delay", store.Admission{GateClosedUntil: t0.Add(61 * time.Second)}, far, end(OutcomeGateClosed, 61*time.Second, causeCooldown)},
		{"open breaker", store.Admission{BreakerOpenUntil: t0.Add(5 * time.Second)}, in, sleep(5*time.Second, causeBreaker)},
		{"open breaker past the deadline", store.Admission{BreakerOpenUntil: t0.Add(20 * time.Second)}, in, end(OutcomeBreakerOpen, 20*time.Second, causeBreaker)},
		{"closed gate and a later breaker", store.Admission{GateClosedUntil: t0.Add(2 * time.Second), BreakerOpenUntil: t0.Add(4 * time.Second)}, in, sleep(4*time.Second, causeBreaker)},
		{"held", store.Admission{Held: true, HeldFor: 30 * time.Millisecond}, in, sleep(30*time.Millisecond, causeHeld)},
		{"held: the poll is bounded", store.Admission{Held: true, HeldFor: time.Minute}, in, sleep(100*time.Millisecond, causeHeld)},
		{"held: at least 1 ms", store.Admission{Held: true}, in, sleep(time.Millisecond, causeHeld)},
		{"held past the deadline", store.Admission{Held: true, HeldFor: time.Second}, with(func(i *stepInput) { i.deadline = t0.Add(50 * time.Millisecond) }), end(OutcomeGateClosed, 100*time.Millisecond, causeHeld)},
		{"held while draining", store.Admission{Held: true, HeldFor: 30 * time.Millisecond}, draining, end(OutcomeShuttingDown, 30*time.Millisecond, causeHeld)},
		{"pacing denies a first attempt", store.Admission{PaceDenied: true, PaceWait: 30 * time.Second}, in, step{kind: stepEnd, d: 30 * time.Second, pacing: true}},
		{"pacing denies a retry", store.Admission{PaceDenied: true, PaceWait: 30 * time.Second}, with(func(i *stepInput) { i.attempt = 2 }), step{kind: stepEnd, d: 30 * time.Second, outcome: OutcomeDeadlineTooShort, hasRetryAfter: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := admissionStep(&p, tt.adm, tt.in); got != tt.want {
				t.Fatalf("admissionStep = %+v\nwant            %+v", got, tt.want)
			}
		})
	}
}
