package suite

import (
	"strings"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/bench/fakeprovider"
)

// windows builds provider statistics from (accepted, refused, early) per
// window, with a quota of 50.
func windows(style fakeprovider.Style, w ...[3]int) fakeprovider.Stats {
	s := fakeprovider.Stats{Style: style, Quota: 50, Window: 2 * time.Second}
	for i, x := range w {
		s.Windows = append(s.Windows, fakeprovider.WindowStats{Index: i, Accepted: x[0], Refused: x[1], Early: x[2]})
		s.Accepted += x[0]
		s.Refused += x[1]
		s.Early += x[2]
	}
	return s
}

// met returns the Met of the target whose name contains all of parts.
func met(t *testing.T, targets []Target, parts ...string) string {
	t.Helper()
	var found []Target
	for _, x := range targets {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(x.Name, p)
		}
		if ok {
			found = append(found, x)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d targets match %q: %+v", len(found), parts, found)
	}
	return found[0].Met
}

func TestQuotaTargetsJudgeSilentStylesAfterTheFirstWindow(t *testing.T) {
	q := func(st fakeprovider.Style, row Row, n int, s fakeprovider.Stats) QuotaResult {
		return QuotaResult{QuotaCase: QuotaCase{Style: st, Row: row, Callers: n}, Stats: s}
	}
	r := &Report{
		Quota: QuotaParams{Callers: 16, Quota: 50, Windows: 3},
		QuotaRes: []QuotaResult{
			// The first window's 15 refusals and 14 early sends do not
			// count against a style that announces nothing.
			q(fakeprovider.Azure, RowOneBroker, 16, windows(fakeprovider.Azure, [3]int{50, 15, 14}, [3]int{50, 1, 0}, [3]int{50, 0, 0})),
			// Two refusals in a later window, an early send, and 94% goodput.
			q(fakeprovider.RetryAfter, RowRedis3, 16, windows(fakeprovider.RetryAfter, [3]int{50, 15, 14}, [3]int{47, 2, 1}, [3]int{47, 0, 0})),
			// GitHub is judged over the whole run: one refusal in the
			// first window is a miss.
			q(fakeprovider.GitHub, RowOneBroker, 16, windows(fakeprovider.GitHub, [3]int{50, 1, 1}, [3]int{50, 0, 0}, [3]int{50, 0, 0})),
			q(fakeprovider.Jira, RowRedis3, 100, windows(fakeprovider.Jira, [3]int{50, 0, 0}, [3]int{50, 0, 0}, [3]int{50, 0, 0})),
			// 100 callers for a quota of 50: the first instant's 50 extra
			// calls are refused before any answer; later windows count.
			q(fakeprovider.GitHub, RowRedis3, 100, windows(fakeprovider.GitHub, [3]int{50, 50, 50}, [3]int{50, 0, 0}, [3]int{50, 0, 0})),
			q(fakeprovider.GitHub, RowOneBroker, 100, windows(fakeprovider.GitHub, [3]int{50, 50, 50}, [3]int{50, 1, 1}, [3]int{50, 0, 0})),
		},
	}
	ts := r.Targets()
	for _, c := range []struct {
		parts []string
		want  string
	}{
		{[]string{"azure row b", "16 callers", "≤ 1 refused"}, "yes"},
		{[]string{"azure row b", "16 callers", "goodput"}, "yes"},
		{[]string{"azure row b", "16 callers", "early"}, "yes"},
		{[]string{"retry-after row c", "≤ 1 refused"}, "**no**"},
		{[]string{"retry-after row c", "goodput"}, "**no**"},
		{[]string{"retry-after row c", "early"}, "**no**"},
		{[]string{"github row b", "16 callers", "0 refused"}, "**no**"},
		{[]string{"github row b", "16 callers", "0 early"}, "**no**"},
		{[]string{"github row b", "16 callers", "goodput"}, "yes"},
		{[]string{"jira row c", "100 callers", "after the first window: 0 refused"}, "yes"},
		{[]string{"github row c", "100 callers", "after the first window: 0 refused"}, "yes"},
		{[]string{"github row c", "100 callers", "after the first window: 0 early"}, "yes"},
		{[]string{"github row b", "100 callers", "after the first window: 0 refused"}, "**no**"},
	} {
		if got := met(t, ts, c.parts...); got != c.want {
			t.Errorf("%q: met %q, want %q", c.parts, got, c.want)
		}
	}
	f := strings.Join(r.Findings(), "\n")
	for _, want := range []string{
		"retry-after row c, 16 callers, after the first window: goodput 94.0%", "github row b, 16 callers: 1 refused calls",
		"held its callers beyond the learned quota in 1 of 2 later windows", "refused, early per window: 15/14, 2/1, 0/0",
	} {
		if !strings.Contains(f, want) {
			t.Errorf("findings lack %q:\n%s", want, f)
		}
	}
	if strings.Contains(f, "azure row b") {
		t.Errorf("a row that met its targets has a finding:\n%s", f)
	}

	// With a single window there is nothing after the first to judge.
	r.QuotaRes = []QuotaResult{q(fakeprovider.Azure, RowOneBroker, 16, windows(fakeprovider.Azure, [3]int{50, 15, 14}))}
	if got := met(t, r.Targets(), "azure row b"); got != "n/a" {
		t.Errorf("one window: met %q, want n/a", got)
	}
}

func TestOutageTargets(t *testing.T) {
	down := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	up := down.Add(10 * time.Second)
	res := func(setup OutageSetup, during int, quiet, recovery time.Duration) OutageResult {
		st := fakeprovider.OutageStats{DownFrom: down, DownUntil: up, During: during}
		if recovery >= 0 {
			st.FirstAfter = up.Add(recovery)
		}
		return OutageResult{Setup: setup, Stats: st, LongestQuiet: quiet, Outcomes: map[string]int{}}
	}
	p := OutageParams{Outage: 10 * time.Second, Recovery: 12 * time.Second, OpenFor: 5 * time.Second}
	for _, c := range []struct {
		name            string
		breaker         OutageResult
		share, recovery string
	}{
		{"meets both", res(OutageBreaker, 100, 9*time.Second, 6*time.Second), "yes", "yes"},
		{"too many calls", res(OutageBreaker, 101, 9*time.Second, 6*time.Second), "**no**", "yes"},
		{"late recovery", res(OutageBreaker, 60, 9*time.Second, 10*time.Second+time.Millisecond), "yes", "**no**"},
		{"no call after the recovery", res(OutageBreaker, 60, 9*time.Second, -1), "yes", "**no**"},
		{"breaker never held", res(OutageBreaker, 900, 40*time.Millisecond, time.Millisecond), "**no**", "n/a"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &Report{Outage: p, OutageRes: []OutageResult{
				res(OutageRetryableHTTP, 1000, 20*time.Millisecond, time.Millisecond),
				res(OutageNoBreaker, 700, 20*time.Millisecond, time.Millisecond),
				c.breaker,
			}}
			ts := r.Targets()
			if got := met(t, ts, "outage", "≤ 10%"); got != c.share {
				t.Errorf("share: met %q, want %q", got, c.share)
			}
			if got := met(t, ts, "outage", "first success"); got != c.recovery {
				t.Errorf("recovery: met %q, want %q", got, c.recovery)
			}
			if (c.share != "yes" || c.recovery != "yes") && len(r.Findings()) == 0 {
				t.Error("a miss without a finding")
			}
			if c.share == "yes" && c.recovery == "yes" && len(r.Findings()) != 0 {
				t.Errorf("findings without a miss: %q", r.Findings())
			}
		})
	}
}

func TestLongestQuietAndBins(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(ms ...int) []time.Time {
		var out []time.Time
		for _, m := range ms {
			out = append(out, t0.Add(time.Duration(m)*time.Millisecond))
		}
		return out
	}
	from, to := t0.Add(time.Second), t0.Add(5*time.Second)
	for _, c := range []struct {
		at   []time.Time
		want time.Duration
	}{
		{nil, 4 * time.Second},
		{at(500, 5000, 6000), 4 * time.Second},                   // nothing inside
		{at(1000, 1500, 4000, 4900), 2500 * time.Millisecond},    // between arrivals
		{at(1200), 3800 * time.Millisecond},                      // to the end
		{at(3000, 4999), 2 * time.Second},                        // from the start
		{at(900, 1100, 1200, 2200, 3200, 4200), 1 * time.Second}, // steady
	} {
		if got := longestQuiet(c.at, from, to); got != c.want {
			t.Errorf("longestQuiet(%v) = %v, want %v", c.at, got, c.want)
		}
	}
	bins := binArrivals(at(-1, 0, 499, 500, 1999, 2000), t0, 500*time.Millisecond, 4)
	if want := []int{2, 1, 0, 1}; len(bins) != 4 || bins[0] != want[0] || bins[1] != want[1] || bins[2] != want[2] || bins[3] != want[3] {
		t.Errorf("bins %v, want %v", bins, want)
	}
}

func TestLog1pAxis(t *testing.T) {
	var s log1pScale
	if s.Normalize(0, 999, 0) != 0 || s.Normalize(0, 999, 999) != 1 {
		t.Fatal("ends not at 0 and 1")
	}
	// log(1 + 9) is a third of log(1 + 999).
	if got := s.Normalize(0, 999, 9); got < 0.333 || got > 0.334 {
		t.Errorf("Normalize(9) = %v", got)
	}
	var labels []string
	for _, tk := range (log1pTicks{}).Ticks(0, 300) {
		if tk.Label != "" {
			labels = append(labels, tk.Label)
		}
	}
	if got := strings.Join(labels, " "); got != "0 1 10 100" {
		t.Errorf("labels %q", got)
	}
}
