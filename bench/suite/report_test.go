package suite

import (
	"strings"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/bench/baseline"
	"github.com/retrybroker/retrybroker/bench/fakeprovider"
	"github.com/retrybroker/retrybroker/internal/engine"
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

func TestClusterQuotaTargets(t *testing.T) {
	q := func(st fakeprovider.Style, row Row, n int, s fakeprovider.Stats) QuotaResult {
		return QuotaResult{QuotaCase: QuotaCase{Style: st, Row: row, Callers: n}, Stats: s}
	}
	r := &Report{
		Quota: QuotaParams{Callers: 16, Quota: 50, Windows: 3},
		QuotaRes: []QuotaResult{
			// Row c on one server, beside the cluster rows: it meets
			// everything.
			q(fakeprovider.GitHub, RowRedis3, 16, windows(fakeprovider.GitHub, [3]int{50, 0, 0}, [3]int{50, 0, 0}, [3]int{50, 0, 0})),
			// One refusal in a window is within the cluster's target
			// (row c on one server would need 0).
			q(fakeprovider.GitHub, RowClusterShared, 16, windows(fakeprovider.GitHub, [3]int{50, 1, 0}, [3]int{50, 0, 0}, [3]int{50, 0, 0})),
			// Two refusals and an early send in a later window: missed,
			// github is judged over the whole run.
			q(fakeprovider.GitHub, RowClusterSeeds, 16, windows(fakeprovider.GitHub, [3]int{50, 0, 0}, [3]int{50, 2, 1}, [3]int{50, 0, 0})),
			// A style that announces nothing: the first window does not count.
			q(fakeprovider.RetryAfter, RowClusterShared, 16, windows(fakeprovider.RetryAfter, [3]int{50, 15, 14}, [3]int{50, 1, 0}, [3]int{50, 0, 0})),
			// No refusal, no early send, but calls held while quota was
			// left: the goodput target catches it.
			q(fakeprovider.RetryAfter, RowClusterSeeds, 16, windows(fakeprovider.RetryAfter, [3]int{50, 15, 14}, [3]int{40, 0, 0}, [3]int{40, 0, 0})),
			// More callers than the quota: github is judged after the
			// first window too.
			q(fakeprovider.GitHub, RowClusterShared, 100, windows(fakeprovider.GitHub, [3]int{50, 50, 50}, [3]int{50, 1, 0}, [3]int{50, 0, 0})),
		},
	}
	ts := r.Targets()
	for _, c := range []struct {
		parts []string
		want  string
	}{
		{[]string{"github row c-cluster", "16 callers", "≤ 1 refused"}, "yes"},
		{[]string{"github row c-cluster", "16 callers", "0 early"}, "yes"},
		{[]string{"github row c-cluster", "16 callers", "goodput"}, "yes"},
		{[]string{"github row d-cluster", "16 callers", "≤ 1 refused"}, "**no**"},
		{[]string{"github row d-cluster", "16 callers", "0 early"}, "**no**"},
		{[]string{"github row d-cluster", "16 callers", "goodput"}, "yes"},
		{[]string{"retry-after row c-cluster", "after the first window: ≤ 1 refused"}, "yes"},
		{[]string{"retry-after row c-cluster", "after the first window: 0 early"}, "yes"},
		{[]string{"retry-after row d-cluster", "after the first window: ≤ 1 refused"}, "yes"},
		{[]string{"retry-after row d-cluster", "after the first window: goodput"}, "**no**"},
		{[]string{"github row c-cluster", "100 callers", "after the first window: ≤ 1 refused"}, "yes"},
		{[]string{"github row c-cluster", "100 callers", "after the first window: 0 early"}, "yes"},
		{[]string{"github row c", "(3 brokers, shared Redis)", "0 refused"}, "yes"},
	} {
		if got := met(t, ts, c.parts...); got != c.want {
			t.Errorf("%q: met %q, want %q", c.parts, got, c.want)
		}
	}
	for _, x := range ts {
		if strings.Contains(x.Name, "cluster") && strings.Contains(x.Name, ": 0 refused") {
			t.Errorf("a cluster row judged by row c's 0-refusal target: %q", x.Name)
		}
	}
	f := strings.Join(r.Findings(), "\n")
	for _, want := range []string{
		"github row d-cluster, 16 callers: max 2 refused calls in a window, 1 early sends, goodput 100.0%; refused, early per window: 0/0, 2/1, 0/0.",
		"Row c on one Redis server in the same run: max 0 refused in a window, 0 early sends, goodput 100.0% (per window: 0/0, 0/0, 0/0): it met the cluster's targets, so the miss comes with the cluster",
		"retry-after row d-cluster, 16 callers, after the first window: max 0 refused calls in a window, 0 early sends, goodput 80.0%",
		"Row c on one Redis server did not run beside it.",
	} {
		if !strings.Contains(f, want) {
			t.Errorf("findings lack %q:\n%s", want, f)
		}
	}
	for _, unwanted := range []string{"github row c-cluster", "retry-after row c-cluster"} {
		if strings.Contains(f, unwanted) {
			t.Errorf("a row that met its targets has a finding (%q):\n%s", unwanted, f)
		}
	}
	cmp := r.ComparisonTable()
	if !strings.Contains(cmp, "| github | 16 | – | – | – | –, –, 0, – | 0.00 (0), 0.33 (1), 0.67 (2) | 0, 0, 1 |") {
		t.Errorf("comparison table lacks the cluster columns:\n%s", cmp)
	}

	// With a single window there is nothing after the first to judge.
	r.QuotaRes = []QuotaResult{q(fakeprovider.Azure, RowClusterShared, 16, windows(fakeprovider.Azure, [3]int{50, 15, 14}))}
	if got := met(t, r.Targets(), "azure row c-cluster"); got != "n/a" {
		t.Errorf("one window: met %q, want n/a", got)
	}
}

func TestRedisTargets(t *testing.T) {
	r := &Report{RedisOps: []RedisOpsResult{
		{
			Topology: TopoSingle, Case: "1 attempt: quota", Executes: 500, Attempts: 500, WantAttempts: 1, Bound: 2, BoundWhy: "quota: ≤ 2",
			Commands: 11000, TopLevel: 1000, RoundTrips: 1000, Wire: true, Masters: 1, MastersReached: 1,
			ByCommand: map[string]int64{"evalsha": 1000, "hget": 10000}, TopByCommand: map[string]int64{"evalsha": 1000},
		},
		{
			// Pipelined: fewer round trips than commands.
			Topology: TopoSingle, Case: "1 attempt: nothing", Executes: 500, Attempts: 500, WantAttempts: 1, Bound: 1, BoundWhy: "nothing: ≤ 1",
			Commands: 3000, TopLevel: 520, RoundTrips: 500, Wire: true, Masters: 1, MastersReached: 1,
		},
		{
			Topology: TopoCluster, Case: "1 attempt: nothing", Executes: 500, Attempts: 500, WantAttempts: 1, Bound: 1, BoundWhy: "nothing: ≤ 1",
			Commands: 3010, TopLevel: 510, RoundTrips: 510, Masters: 3, MastersReached: 2,
			ByCommand: map[string]int64{"evalsha": 500, "cluster|slots": 10}, TopByCommand: map[string]int64{"evalsha": 500, "cluster|slots": 5, "rejected evalsha": 5},
		},
		{
			Topology: TopoSentinel, Case: "2 attempts", Executes: 50, Attempts: 60, WantAttempts: 2, Bound: 3, BoundWhy: "≤ 3",
			Commands: 1000, TopLevel: 100, SentinelCommands: 5, RoundTrips: 105, Masters: 1, MastersReached: 1,
		},
		{Topology: TopoSentinel, Case: "no bound", Executes: 10, Attempts: 10, WantAttempts: 1, TopLevel: 90, RoundTrips: 90},
	}}
	ts := r.Targets()
	for _, c := range []struct {
		parts []string
		want  string
	}{
		{[]string{"Redis one server, 1 attempt: quota", "≤ 2 round trips"}, "yes"},
		{[]string{"Redis one server, 1 attempt: nothing", "≤ 1 round trip"}, "yes"},
		{[]string{"Redis 3-master cluster, 1 attempt: nothing", "≤ 1 round trip"}, "**no**"},
		{[]string{"Redis master + replica + sentinel, 2 attempts", "≤ 3 round trips"}, "n/a"},
	} {
		if got := met(t, ts, c.parts...); got != c.want {
			t.Errorf("%q: met %q, want %q", c.parts, got, c.want)
		}
	}
	for _, x := range ts {
		if strings.Contains(x.Name, "no bound") {
			t.Errorf("a case without a bound has a target: %+v", x)
		}
	}
	f := strings.Join(r.Findings(), "\n")
	if want := "Redis 3-master cluster, 1 attempt: nothing: 1.02 round trips per Execute (top-level commands, every master), bound 1; top-level commands per Execute: evalsha 1.00, cluster|slots 0.01, rejected evalsha 0.01."; !strings.Contains(f, want) {
		t.Errorf("findings lack %q:\n%s", want, f)
	}
	if strings.Contains(f, "one server") || strings.Contains(f, "sentinel") {
		t.Errorf("a finding for a case that met its bound or was not judged:\n%s", f)
	}
	o := strings.Join(r.Observations(), "\n")
	if !strings.Contains(o, "Redis one server, 1 attempt: nothing: 500 round trips on the wire, 520 top-level commands") || strings.Contains(o, "quota") {
		t.Errorf("observations: %q", o)
	}
	tab := r.ScaleTables()
	for _, want := range []string{
		"| one server | 1 attempt: quota | 500 | 500 | 22.00 | 2.00 | 2.00 | on the wire (proxy) | ≤ 2 | 1 of 1 | evalsha 1000, hget 10000 |",
		"| 3-master cluster | 1 attempt: nothing | 500 | 500 | 6.02 | 1.02 | 1.02 | top-level commands, every master | ≤ 1 | 2 of 3 | cluster|slots 10, evalsha 500 |",
		"| master + replica + sentinel | 2 attempts | 50 | 60 | 20.00 | 2.10 | 2.10 | top-level commands: master + sentinel | ≤ 3 | 1 of 1 | sentinel: 5 |",
	} {
		if !strings.Contains(tab, want) {
			t.Errorf("scale table lacks %q:\n%s", want, tab)
		}
	}
}

func TestCommandStatsDiff(t *testing.T) {
	info := "# Commandstats\r\n" +
		"cmdstat_evalsha:calls=10,usec=700,usec_per_call=70.00,rejected_calls=2,failed_calls=1\r\n" +
		"cmdstat_hget:calls=30,usec=10,usec_per_call=0.33,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_cluster|slots:calls=1,usec=5,usec_per_call=5.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_info:calls=7,usec=5,usec_per_call=5.00,rejected_calls=0,failed_calls=0\r\n"
	st := parseCommandStats(info)
	if got := st["evalsha"]; got != (commandCount{Calls: 10, Rejected: 2}) {
		t.Errorf("evalsha %+v", got)
	}
	if got := st["cluster|slots"]; got.Calls != 1 {
		t.Errorf("cluster|slots %+v", got)
	}
	// Two masters: the first ran 10 EVALSHA (30 HGET inside them, 2 refused
	// before they ran) and one CLUSTER SLOTS since before; the second only
	// answered INFO, which counts nowhere.
	before := []map[string]commandCount{{"evalsha": {Calls: 0}, "info": {Calls: 3}}, {"info": {Calls: 2}}}
	after := []map[string]commandCount{st, {"info": {Calls: 9}, "ping": {Calls: 4}}}
	data := map[string]bool{"hget": true}
	d := diffStats(before, after, data, ignoredCommands(TopoCluster))
	if d.Total != 45 || d.TopLevel != 17 || d.Reached != 2 {
		t.Errorf("cluster: total %d, top-level %d, reached %d; want 45, 17, 2", d.Total, d.TopLevel, d.Reached)
	}
	if d.TopCommands["rejected evalsha"] != 2 || d.TopCommands["ping"] != 4 || d.Commands["hget"] != 30 || d.Commands["info"] != 0 {
		t.Errorf("cluster breakdown: %v, %v", d.TopCommands, d.Commands)
	}
	// On Sentinel the second master's PINGs are the sentinel's.
	d = diffStats(before, after, data, ignoredCommands(TopoSentinel))
	if d.TopLevel != 13 || d.Reached != 1 {
		t.Errorf("sentinel: top-level %d, reached %d; want 13, 1", d.TopLevel, d.Reached)
	}
}

func TestHerdTargets(t *testing.T) {
	h := func(st fakeprovider.Style, setup HerdSetup, dl Deadline, s fakeprovider.Stats) HerdResult {
		return HerdResult{HerdCase: HerdCase{Style: st, Setup: setup, Deadline: dl}, Callers: 100, Stats: s, Failed: map[string]int{}}
	}
	good := [3]int{50, 0, 0}
	// github: 1 refused in the first window is within its bound.
	gh := h(fakeprovider.GitHub, HerdOneBroker, DeadlineLong, windows(fakeprovider.GitHub, [3]int{50, 1, 0}, good, good))
	gh.HeldAtEnd = 50 // held when the run ended: not judged
	// retry-after: 12 refused in the first window is within a quarter of
	// the quota; a later window with 2 refusals and an early send, 96%
	// goodput after the first window, a call held to its deadline.
	ra := h(fakeprovider.RetryAfter, HerdRedis3, DeadlineShort, windows(fakeprovider.RetryAfter, [3]int{50, 12, 3}, [3]int{46, 2, 1}, good))
	ra.HeldPast, ra.HeldPastExample = 1, "a call held to its deadline"
	ra.Starved, ra.StarvedExample = 2, "a call held through 3 reopenings"
	// The rolling row: 13 refused first (over the bound), a failed RPC,
	// SharedState SERVING 3.5 s after the start, once NOT_SERVING after.
	ro := h(fakeprovider.RetryAfter, HerdRolling, DeadlineShort, windows(fakeprovider.RetryAfter, [3]int{50, 13, 0}, good, good))
	ro.Failed["Unavailable"] = 1
	ro.Drained = 4
	ro.Restart = &RestartInfo{Ready: 3500 * time.Millisecond, SharedServing: 3600 * time.Millisecond}
	ro.SharedNotServing = 1
	// Row a has no target.
	a := h(fakeprovider.RetryAfter, HerdRetryableHTTP, DeadlineShort, windows(fakeprovider.RetryAfter, [3]int{50, 900, 900}, [3]int{50, 900, 900}, good))
	r := &Report{Herd: HerdParams{Callers: 100, Quota: 50, Windows: 3}, HerdRes: []HerdResult{gh, ra, a}, RollingRes: []HerdResult{ro}}
	ts := r.Targets()
	for _, c := range []struct {
		parts []string
		want  string
	}{
		{[]string{"github, 1 broker, long deadlines, first window: ≤ 1 refused"}, "yes"},
		{[]string{"github, 1 broker, long", "≤ 1 refused call per gate"}, "yes"},
		{[]string{"github, 1 broker, long", "goodput"}, "yes"},
		{[]string{"github, 1 broker, long", "0 early"}, "yes"},
		{[]string{"github, 1 broker, long", "held to its deadline"}, "yes"},
		{[]string{"retry-after, 3 replicas, Redis, short deadlines, first window: ≤ 12 refused"}, "yes"},
		{[]string{"retry-after, 3 replicas", "≤ 1 refused call per gate"}, "**no**"},
		{[]string{"retry-after, 3 replicas", "goodput"}, "yes"},
		{[]string{"retry-after, 3 replicas", "0 early"}, "**no**"},
		{[]string{"retry-after, 3 replicas", "held to its deadline"}, "**no**"},
		{[]string{"retry-after, 3 replicas", "passed over", "⌈C/Q⌉ = 2"}, "**no**"},
		{[]string{"github, 1 broker, long", "passed over"}, "yes"},
		{[]string{"retry-after, rolling restart, short deadlines, first window: ≤ 12 refused"}, "**no**"},
		{[]string{"retry-after, rolling", "0 broker-caused failed RPCs"}, "**no**"},
		{[]string{"retry-after, rolling", "SERVING within 3 s"}, "**no**"},
		{[]string{"retry-after, rolling", "NOT_SERVING after SERVING"}, "**no**"},
	} {
		if got := met(t, ts, c.parts...); got != c.want {
			t.Errorf("%q: met %s, want %s", c.parts, got, c.want)
		}
	}
	for _, x := range ts {
		if strings.Contains(x.Name, ", a, ") {
			t.Errorf("row a has a target: %+v", x)
		}
	}
	doc := r.Document("")
	for _, want := range []string{"## 7. A herd", "| retry-after | a | short | 900, 900 | 900, 0 |", "Rolling restart:", "1 (Unavailable 1); 4 calls ended by the drain"} {
		if !strings.Contains(doc, want) {
			t.Errorf("document lacks %q", want)
		}
	}
}

func TestReopeningsIn(t *testing.T) {
	t0 := time.Unix(1000, 0)
	h := &herdRecorder{start: t0, window: 2 * time.Second}
	for _, c := range []struct {
		from, to time.Duration
		want     int
	}{
		{0, 1999 * time.Millisecond, 0},
		{0, 2 * time.Second, 1}, // sent at the reopening itself
		{1 * time.Second, 6500 * time.Millisecond, 3},
		{2 * time.Second, 4 * time.Second, 1}, // started at a reopening: not held through it
		{5 * time.Second, 5 * time.Second, 0},
	} {
		if got := h.reopeningsIn(t0.Add(c.from), t0.Add(c.to)); got != c.want {
			t.Errorf("reopenings in (%v, %v]: %d, want %d", c.from, c.to, got, c.want)
		}
	}
}

func TestHoldStats(t *testing.T) {
	var d []time.Duration
	for i := range 100 {
		d = append(d, time.Duration(100-i)*time.Millisecond)
	}
	s := holdStats(d)
	if s.Calls != 100 || s.P50 != 51*time.Millisecond || s.P99 != 100*time.Millisecond || s.Max != 100*time.Millisecond {
		t.Errorf("holdStats: %+v", s)
	}
	if (holdStats(nil) != HoldStats{}) {
		t.Error("holdStats(nil) is not zero")
	}
}

// TestCredentialsTargets checks how the credentials rows are judged: the
// median of the per-round ratios against each row's target, a row without
// a target reported but not judged, and the token request count.
func TestCredentialsTargets(t *testing.T) {
	res := func(rounds ...float64) OverheadResult {
		o := OverheadResult{RoundThroughput: rounds}
		for _, x := range rounds {
			o.Throughput += x / float64(len(rounds))
		}
		return o
	}
	r := &Report{Credentials: &CredentialsReport{
		Params: CredentialsParams{Concurrency: 16}, Brokers: 1, TokenRequests: 2,
		Rows: []CredentialRow{
			{Name: "header credential (value_file), GET", Target: 0.97, Without: res(1000, 1000, 1000), With: res(980, 990, 500)},
			{Name: "aws_sigv4, PUT 1.0 KiB", Target: 0.90, Without: res(1000, 1000, 1000), With: res(800, 850, 2000)},
			{Name: "http_signature ed25519, GET", Without: res(1000), With: res(100)},
		},
	}}
	targets := r.Targets()
	if got := met(t, targets, "header credential", "≥ 97%"); got != "yes" { // median 98%, although the totals say 82%
		t.Errorf("header: %q, want yes", got)
	}
	if got := met(t, targets, "aws_sigv4", "≥ 90%"); got != "**no**" { // median 85%, although the totals say 122%
		t.Errorf("sigv4: %q, want **no**", got)
	}
	if got := met(t, targets, "1 token request per broker process"); got != "**no**" {
		t.Errorf("token requests: %q, want **no**", got)
	}
	for _, x := range targets {
		if strings.Contains(x.Name, "ed25519") {
			t.Errorf("a row without a target is judged: %+v", x)
		}
	}
	if f := strings.Join(r.Findings(), "\n"); !strings.Contains(f, "aws_sigv4, PUT 1.0 KiB: 85.0% of Execute without (target 90%)") || strings.Contains(f, "header credential") {
		t.Errorf("findings:\n%s", f)
	}
	tab := r.CredentialsTable()
	for _, want := range []string{"| header credential (value_file), GET | 1000 | 823 | 98.0% (82.3%) | ≥ 97% | yes |", "| http_signature ed25519, GET | 1000 | 100 | 10.0% (10.0%) | – | (no target) |"} {
		if !strings.Contains(tab, want) {
			t.Errorf("table lacks %q:\n%s", want, tab)
		}
	}
}

// TestStreamForwarderIsHonest: the minimal streaming forwarder reads the
// broker's chunk size (so its messages fit the same gRPC buffer tier), and
// the stream targets judge ExecuteStream against it and direct HTTP.
func TestStreamForwarderIsHonest(t *testing.T) {
	if baseline.StreamChunkSize != engine.StreamChunkSize {
		t.Fatalf("forwarder chunk %d bytes, broker's %d", baseline.StreamChunkSize, engine.StreamChunkSize)
	}
	st := &StreamReport{
		Params: StreamParams{TTFBConcurrency: []int{1, 64}},
		Throughput: []StreamThroughput{
			{Variant: VarStreamForwarder, Rounds: []float64{100, 100, 100}},
			{Variant: VarStreamBroker, Rounds: []float64{90, 70, 85}},
			{Variant: VarStreamDirect, Rounds: []float64{200, 200, 200}},
		},
		TTFB: []StreamTTFB{
			{Variant: VarStreamForwarder, Concurrency: 1, P50: 100 * time.Microsecond},
			{Variant: VarStreamBroker, Concurrency: 1, P50: 110 * time.Microsecond},
			{Variant: VarStreamForwarder, Concurrency: 64, P50: time.Millisecond},
			{Variant: VarStreamBroker, Concurrency: 64, P50: 1300 * time.Microsecond},
		},
	}
	if x, _ := st.ThroughputRatio(); x != 0.85 {
		t.Errorf("broker / forwarder %v, want the median 0.85", x)
	}
	if x, _ := st.ThroughputShare(VarStreamBroker, VarStreamDirect); x != 0.425 {
		t.Errorf("broker / direct %v, want 0.425", x)
	}
	r := &Report{Stream: st}
	met := map[string]string{}
	for _, tg := range r.Targets() {
		met[tg.Name] = tg.Measured + " " + tg.Met
	}
	for name, want := range map[string]string{
		"ExecuteStream time to first byte p50 ≤ 1.2× the forwarder's, concurrency 1":                                  "1.10× yes",
		"ExecuteStream time to first byte p50 ≤ 1.2× the forwarder's, concurrency 64":                                 "1.30× **no**",
		"ExecuteStream bytes/s ≥ 80% of a minimal gRPC streaming forwarder (same codec, chunk size and buffer reuse)": "85.0% yes",
	} {
		if got := met[name]; got != want {
			t.Errorf("target %q: %q, want %q", name, got, want)
		}
	}
}
