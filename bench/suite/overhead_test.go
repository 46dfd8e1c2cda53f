package suite

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/internal/engine"
)

// TestRoundResultLatencies: a variant's latencies give its percentiles
// (nearest rank) and their mean, whatever the order they arrived in.
func TestRoundResultLatencies(t *testing.T) {
	var a roundAcc
	for _, ms := range []int{7, 1, 10, 3, 5, 9, 2, 8, 4, 6} {
		a.lat = append(a.lat, time.Duration(ms)*time.Millisecond)
	}
	a.calls, a.elapsed = 10, time.Second
	r := a.result(variant{group: "execute", name: VarExecute}, 1)
	if r.P50 != 5*time.Millisecond || r.P90 != 9*time.Millisecond || r.P99 != 10*time.Millisecond {
		t.Errorf("p50 %v p90 %v p99 %v, want 5ms 9ms 10ms", r.P50, r.P90, r.P99)
	}
	if r.Mean != 5500*time.Microsecond || r.Throughput != 10 {
		t.Errorf("mean %v, throughput %v; want 5.5ms and 10 calls/s", r.Mean, r.Throughput)
	}
}

// TestOverheadRounds: only the one-caller level splits its rounds; each
// scale multiplies the rounds of its own levels only.
func TestOverheadRounds(t *testing.T) {
	p := OverheadParams{Rounds: 20, Round: 150 * time.Millisecond, OneCallerSplit: 5}
	if n, d := p.rounds(1); n != 100 || d != 30*time.Millisecond {
		t.Errorf("one caller: %d rounds of %v, want 100 of 30ms", n, d)
	}
	if n, d := p.rounds(16); n != 20 || d != 150*time.Millisecond {
		t.Errorf("16 callers: %d rounds of %v, want 20 of 150ms", n, d)
	}
	p.OneCallerScale = 4
	if n, d := p.rounds(1); n != 400 || d != 30*time.Millisecond {
		t.Errorf("one caller, scale 4: %d rounds of %v, want 400 of 30ms", n, d)
	}
	if n, d := p.rounds(16); n != 20 || d != 150*time.Millisecond {
		t.Errorf("16 callers, scale 4: %d rounds of %v, want 20 of 150ms", n, d)
	}
	p.ManyCallerScale = 4
	if n, d := p.rounds(16); n != 80 || d != 150*time.Millisecond {
		t.Errorf("16 callers, many-caller scale 4: %d rounds of %v, want 80 of 150ms", n, d)
	}
	if n, d := p.rounds(1); n != 400 || d != 30*time.Millisecond {
		t.Errorf("one caller, many-caller scale 4: %d rounds of %v, want 400 of 30ms (unchanged)", n, d)
	}
	p.OneCallerSplit, p.OneCallerScale, p.ManyCallerScale = 0, 0, 0
	if n, d := p.rounds(1); n != 20 || d != 150*time.Millisecond {
		t.Errorf("no split: %d rounds of %v, want 20 of 150ms", n, d)
	}
}

// TestRoundRatiosAndQuartiles: the ratio of each round both variants ran,
// rounds the baseline measured nothing left out; the quartiles the log
// gives of them.
func TestRoundRatiosAndQuartiles(t *testing.T) {
	got := roundRatios([]float64{90, 50, 120, 80, 70}, []float64{100, 0, 100, 100, 100, 100})
	want := []float64{0.9, 1.2, 0.8, 0.7}
	if !slices.Equal(got, want) {
		t.Fatalf("roundRatios = %v, want %v", got, want)
	}
	q, ok := quartiles(got)
	want5 := [5]float64{0.7, 0.7, 0.85, 0.9, 1.2}
	if !ok {
		t.Fatal("quartiles: not ok")
	}
	for i := range q {
		if math.Abs(q[i]-want5[i]) > 1e-12 {
			t.Errorf("quartiles = %v, want %v", q, want5)
			break
		}
	}
	if _, ok := quartiles(nil); ok {
		t.Error("quartiles of no rounds: ok")
	}
}

// TestOverheadBodyBudget: the overhead scenario's broker has cmd/broker's
// body budget unless an investigation sets another.
func TestOverheadBodyBudget(t *testing.T) {
	if b := (OverheadParams{}).bodyBudget(); b != engine.DefaultBodyBudget {
		t.Errorf("default: %d, want engine.DefaultBodyBudget (%d)", b, engine.DefaultBodyBudget)
	}
	if b := (OverheadParams{BodyBudget: 1 << 30}).bodyBudget(); b != 1<<30 {
		t.Errorf("set: %d, want %d", b, 1<<30)
	}
}
