package suite

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/retrybroker/retrybroker/bench/fakeprovider"
	"github.com/retrybroker/retrybroker/internal/egress"
	"github.com/retrybroker/retrybroker/internal/engine"
)

// Target is one of the issue's targets, evaluated on the run.
type Target struct {
	Name     string
	Measured string
	// Met is "yes", "no" or "n/a" (not measured in this run).
	Met string
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

// quotaResult finds a row of the quota scenario.
func (r *Report) quotaResult(style fakeprovider.Style, row Row, callers int) (QuotaResult, bool) {
	for _, q := range r.QuotaRes {
		if q.Style == style && q.Row == row && q.Callers == callers && q.Err == "" {
			return q, true
		}
	}
	return QuotaResult{}, false
}

// quotaCallers lists the numbers of callers of the quota rows, in the
// order of first appearance.
func (r *Report) quotaCallers() []int {
	var out []int
	for _, q := range r.QuotaRes {
		if !slices.Contains(out, q.Callers) {
			out = append(out, q.Callers)
		}
	}
	return out
}

// judgedLater reports whether a row's targets apply to the windows after
// the first only: for styles that announce nothing until they refuse, and
// for any style when there are more callers than the quota (C > Q), since
// the C calls of the first instant are all sent before any answer, so C − Q
// of them are refused whatever the broker knows.
func judgedLater(q QuotaResult) bool {
	return announcesNothing(q.Style) || q.Callers > q.Stats.Quota
}

// announcesNothing reports whether a style sends nothing on accepted
// calls (Retry-After only, Azure): a broker can know the quota only by
// learning it from the refusals, so such rows are judged after the first
// window.
func announcesNothing(st fakeprovider.Style) bool {
	return st == fakeprovider.Azure || st == fakeprovider.RetryAfter
}

// overheadResult finds a variant at a concurrency.
func (r *Report) overheadResult(variant string, c int) (OverheadResult, bool) {
	for _, o := range r.OverRes {
		if o.Variant == variant && o.Concurrency == c {
			return o, true
		}
	}
	return OverheadResult{}, false
}

// ThroughputRatio is variant / baseline throughput at concurrency c: the
// median over rounds of the ratio of the two variants' throughput in the
// same round (they ran back to back), which a burst of noise on the
// machine moves far less than the ratio of totals.
func (r *Report) ThroughputRatio(variant, baseline string, c int) (float64, bool) {
	a, ok1 := r.overheadResult(variant, c)
	b, ok2 := r.overheadResult(baseline, c)
	if !ok1 || !ok2 || b.Throughput == 0 {
		return 0, false
	}
	ratios := roundRatios(a.RoundThroughput, b.RoundThroughput)
	if len(ratios) == 0 {
		return a.Throughput / b.Throughput, true
	}
	return median(ratios), true
}

// roundRatios is a[i] / b[i] for each round i both have (rounds where b
// measured nothing left out).
func roundRatios(a, b []float64) []float64 {
	var ratios []float64
	for i := range min(len(a), len(b)) {
		if b[i] > 0 {
			ratios = append(ratios, a[i]/b[i])
		}
	}
	return ratios
}

// TotalRatio is variant / baseline throughput over all rounds.
func (r *Report) TotalRatio(variant, baseline string, c int) (float64, bool) {
	a, ok1 := r.overheadResult(variant, c)
	b, ok2 := r.overheadResult(baseline, c)
	if !ok1 || !ok2 || b.Throughput == 0 {
		return 0, false
	}
	return a.Throughput / b.Throughput, true
}

// wasteRatio formats a / b for refusals per window.
func wasteRatio(a, b float64) (string, float64) {
	switch {
	case b == 0 && a == 0:
		return "– (both 0)", math.NaN()
	case b == 0:
		return fmt.Sprintf("∞ (%.1f vs 0)", a), math.Inf(1)
	}
	return fmt.Sprintf("%.1f× (%.2f vs %.2f)", a/b, a, b), a / b
}

// Targets evaluates the issue's targets.
func (r *Report) Targets() []Target {
	var out []Target
	for _, n := range r.quotaCallers() {
		for _, st := range r.quotaStyles() {
			out = append(out, r.quotaTargets(st, n)...)
		}
	}
	for _, h := range r.HerdRes {
		out = append(out, r.herdTargets(h)...)
	}
	for _, h := range r.RollingRes {
		out = append(out, r.herdTargets(h)...)
	}
	out = append(out, r.outageTargets()...)
	for _, c := range r.Overhead.Concurrency {
		if x, ok := r.ThroughputRatio(VarClassify, VarEmpty, c); ok {
			out = append(out, Target{fmt.Sprintf("ClassifyResponse ≥ 90%% of an empty handler, concurrency %d", c), fmt.Sprintf("%.1f%%", 100*x), yesNo(x >= 0.90)})
		}
	}
	for _, c := range r.Overhead.Concurrency {
		if x, ok := r.ThroughputRatio(VarExecute, VarForwarder, c); ok {
			out = append(out, Target{fmt.Sprintf("Execute ≥ %.0f%% of the minimal forwarder, concurrency %d", 100*executeTarget(c), c), fmt.Sprintf("%.1f%%", 100*x), yesNo(x >= executeTarget(c))})
		}
	}
	if st := r.Stream; st != nil {
		if st.Single.Streams > 0 {
			lim := int64(32 << 20)
			out = append(out, Target{
				fmt.Sprintf("one %s download through ExecuteStream: broker RSS growth ≤ 32 MiB", fmtBytes(float64(st.Single.Bytes))),
				fmtBytes(float64(st.Single.Growth())), yesNo(st.Single.Growth() <= lim),
			})
		}
		if st.Concurrent.Streams > 0 {
			lim := int64(256 << 20)
			out = append(out, Target{
				fmt.Sprintf("%d concurrent %s downloads: broker RSS growth ≤ 256 MiB", st.Concurrent.Streams, fmtBytes(float64(st.Concurrent.Bytes))),
				fmtBytes(float64(st.Concurrent.Growth())), yesNo(st.Concurrent.Growth() <= lim),
			})
		}
		if x, ok := st.ThroughputRatio(); ok {
			out = append(out, Target{"ExecuteStream bytes/s ≥ 80% of a minimal gRPC streaming forwarder (same codec, chunk size and buffer reuse)", fmt.Sprintf("%.1f%%", 100*x), yesNo(x >= 0.80)})
		}
		for _, c := range st.Params.TTFBConcurrency {
			if x, ok := st.TTFBRatio(VarStreamBroker, VarStreamForwarder, c); ok {
				out = append(out, Target{fmt.Sprintf("ExecuteStream time to first byte p50 ≤ 1.2× the forwarder's, concurrency %d", c), fmt.Sprintf("%.2f×", x), yesNo(x <= 1.2)})
			}
		}
	}
	for _, p := range r.Parked {
		out = append(out,
			Target{fmt.Sprintf("%d parked calls: ≤ 20 KiB per parked call (Go heap + stacks in use)", p.Calls), fmtBytes(p.GoMemPerCall()), yesNo(p.GoMemPerCall() <= 20*1024)},
			Target{fmt.Sprintf("%d parked calls: ≤ 20 KiB per parked call (RSS)", p.Calls), fmtBytes(p.RSSPerCall()), yesNo(p.RSSPerCall() <= 20*1024)},
			Target{
				fmt.Sprintf("%d parked calls: goroutines back to baseline", p.Calls),
				fmt.Sprintf("%.0f before, %.0f parked, %.0f after", p.Before.Goroutines, p.Parked.Goroutines, p.After.Goroutines), yesNo(p.After.Goroutines <= p.Before.Goroutines),
			},
		)
	}
	out = append(out, r.credentialsTargets()...)
	out = append(out, r.tasksTargets()...)
	return append(out, r.redisTargets()...)
}

// quotaTargets are the targets of one style at n callers. Rows b and c of
// styles that announce their quota on accepted calls (GitHub, Jira) keep 0
// refusals over the whole run; rows of styles that announce nothing until
// they refuse (Azure, Retry-After) are judged after the first window: at
// most 1 refusal per gate per window, goodput ≥ 95% and no early send.
func (r *Report) quotaTargets(st fakeprovider.Style, n int) []Target {
	var out []Target
	for _, row := range []Row{RowOneBroker, RowRedis3} {
		q, ok := r.quotaResult(st, row, n)
		if !ok {
			continue
		}
		name := fmt.Sprintf("%s row %s (%s), %d callers", st, row, row.Describe(), n)
		if !announcesNothing(st) {
			w, scope := q.Stats, ""
			if judgedLater(q) {
				w, scope = q.Later(), ", after the first window"
				if len(w.Windows) == 0 {
					out = append(out, Target{name + ": targets after the first window", "no window after the first in this run", "n/a"})
					continue
				}
			}
			out = append(out,
				Target{name + scope + ": goodput ≥ 95% of the quota", pct(w.Goodput()), yesNo(w.Goodput() >= 0.95)},
				Target{name + scope + ": 0 refused calls", fmt.Sprintf("%d (max %d in a window; first window %d)", w.Refused, w.MaxRefusedInAWindow(), q.First().Refused), yesNo(w.Refused == 0)},
				Target{name + scope + ": 0 early sends", fmt.Sprintf("%d (first window %d)", w.Early, q.First().Early), yesNo(w.Early == 0)},
			)
			continue
		}
		l := q.Later()
		if len(l.Windows) == 0 {
			out = append(out, Target{name + ": targets after the first window", "no window after the first in this run", "n/a"})
			continue
		}
		out = append(out,
			Target{name + ", after the first window: ≤ 1 refused call per gate per window", fmt.Sprintf("max %d in a window, %.2f per window on average (first window: %d)", l.MaxRefusedInAWindow(), l.RefusedPerWindow(), q.First().Refused), yesNo(l.MaxRefusedInAWindow() <= 1)},
			Target{name + ", after the first window: goodput ≥ 95% of the quota", fmt.Sprintf("%s (whole run %s)", pct(l.Goodput()), pct(q.Goodput())), yesNo(l.Goodput() >= 0.95)},
			Target{name + ", after the first window: 0 early sends", fmt.Sprintf("%d (first window: %d)", l.Early, q.First().Early), yesNo(l.Early == 0)},
		)
	}
	for _, row := range []Row{RowClusterShared, RowClusterSeeds} {
		q, ok := r.quotaResult(st, row, n)
		if !ok {
			continue
		}
		out = append(out, clusterTargets(q)...)
	}
	a, oka := r.quotaResult(st, RowRetryableHTTP, n)
	b, okb := r.quotaResult(st, RowOneBroker, n)
	if oka && okb && n == r.Quota.Callers {
		s, x := wasteRatio(a.Waste(), b.Waste())
		out = append(out, Target{fmt.Sprintf("%s, %d callers: row a waste over row b waste ≥ 10× (whole run)", st, n), s, yesNo(math.IsInf(x, 1) || x >= 10)})
	}
	return out
}

// clusterTargets are the issue's targets of a row on the Redis Cluster:
// at most 1 refused call per gate per window and 0 early sends, over the
// windows the row is judged on (judgedLater: after the first window for
// styles that announce nothing and for more callers than the quota, the
// whole run otherwise), and the goodput target of the other broker rows,
// so that a broker that holds every call cannot pass.
func clusterTargets(q QuotaResult) []Target {
	name := fmt.Sprintf("%s row %s (%s), %d callers", q.Style, q.Row, q.Row.Describe(), q.Callers)
	w, scope := q.Stats, ""
	if judgedLater(q) {
		w, scope = q.Later(), ", after the first window"
		if len(w.Windows) == 0 {
			return []Target{{name + ": targets after the first window", "no window after the first in this run", "n/a"}}
		}
	}
	return []Target{
		{name + scope + ": ≤ 1 refused call per gate per window", fmt.Sprintf("max %d in a window, %.2f per window on average (first window: %d)", w.MaxRefusedInAWindow(), w.RefusedPerWindow(), q.First().Refused), yesNo(w.MaxRefusedInAWindow() <= 1)},
		{name + scope + ": 0 early sends", fmt.Sprintf("%d (first window: %d)", w.Early, q.First().Early), yesNo(w.Early == 0)},
		{name + scope + ": goodput ≥ 95% of the quota", fmt.Sprintf("%s (whole run %s)", pct(w.Goodput()), pct(q.Goodput())), yesNo(w.Goodput() >= 0.95)},
	}
}

func (r *Report) quotaStyles() []fakeprovider.Style {
	var out []fakeprovider.Style
	seen := map[fakeprovider.Style]bool{}
	for _, q := range r.QuotaRes {
		if !seen[q.Style] {
			seen[q.Style] = true
			out = append(out, q.Style)
		}
	}
	return out
}

func pct(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }

func fmtBytes(b float64) string {
	switch {
	case math.IsNaN(b):
		return "n/a"
	case math.Abs(b) >= 1<<30:
		return fmt.Sprintf("%.2f GiB", b/(1<<30))
	case math.Abs(b) >= 1<<20:
		return fmt.Sprintf("%.1f MiB", b/(1<<20))
	case math.Abs(b) >= 1<<10:
		return fmt.Sprintf("%.1f KiB", b/(1<<10))
	}
	return fmt.Sprintf("%.0f B", b)
}

func fmtDur(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
}

// QuotaTable is the quota-citizenship table.
func (r *Report) QuotaTable() string {
	var b strings.Builder
	p := r.Quota
	fmt.Fprintf(&b, "Quota citizenship: C callers, Q=%d calls per W=%v window, %d windows (quota %d). The first window (nothing is known before the first answer) is also shown apart, and the later windows alone.\n\n",
		p.Quota, p.Window, p.Windows, p.Quota*p.Windows)
	b.WriteString("| style | row | setup | C | goodput | refused / window (max) | early sends | first window: refused, early | later windows: goodput | later: refused / window (max) | later: early | accepted | refused | late | caller calls | call outcomes |\n")
	b.WriteString("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, q := range r.QuotaRes {
		if q.Err != "" {
			fmt.Fprintf(&b, "| %s | %s | %s | %d | error: %s | | | | | | | | | | | |\n", q.Style, q.Row, q.Row.Describe(), q.Callers, q.Err)
			continue
		}
		l := q.Later()
		later := [3]string{"–", "–", "–"}
		if len(l.Windows) > 0 {
			later = [3]string{pct(l.Goodput()), fmt.Sprintf("%.2f (%d)", l.RefusedPerWindow(), l.MaxRefusedInAWindow()), fmt.Sprint(l.Early)}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %s | %.2f (%d) | %d | %d, %d | %s | %s | %s | %d | %d | %d | %d | %s |\n",
			q.Style, q.Row, q.Row.Describe(), q.Callers, pct(q.Goodput()), q.Waste(), q.Stats.MaxRefusedInAWindow(), q.Stats.Early,
			q.First().Refused, q.First().Early, later[0], later[1], later[2],
			q.Stats.Accepted, q.Stats.Refused, q.Stats.Outside, q.Calls, outcomeSummary(q.Outcomes))
	}
	return b.String()
}

// ComparisonTable holds the side-by-side ratios of the quota scenario.
func (r *Report) ComparisonTable() string {
	var b strings.Builder
	b.WriteString("| style | C | refusals: a over b | refusals: d over c | goodput: d over c | early sends: a, b, c, d | refused / window (max): c, c-cluster, d-cluster | early sends: c, c-cluster, d-cluster |\n")
	b.WriteString("|---|---:|---:|---:|---:|---|---|---|\n")
	for _, n := range r.quotaCallers() {
		for _, st := range r.quotaStyles() {
			b.WriteString(r.comparisonRow(st, n))
		}
	}
	return b.String()
}

// comparisonRow is one line of ComparisonTable ("" when the style has
// no row at n callers).
func (r *Report) comparisonRow(st fakeprovider.Style, n int) string {
	a, oka := r.quotaResult(st, RowRetryableHTTP, n)
	bb, okb := r.quotaResult(st, RowOneBroker, n)
	c, okc := r.quotaResult(st, RowRedis3, n)
	d, okd := r.quotaResult(st, RowMemory3, n)
	cc, okcc := r.quotaResult(st, RowClusterShared, n)
	dc, okdc := r.quotaResult(st, RowClusterSeeds, n)
	if !oka && !okb && !okc && !okd && !okcc && !okdc {
		return ""
	}
	ab, dcRatio, gdc := "–", "–", "–"
	if oka && okb {
		ab, _ = wasteRatio(a.Waste(), bb.Waste())
	}
	if okc && okd {
		dcRatio, _ = wasteRatio(d.Waste(), c.Waste())
		if c.Goodput() > 0 {
			gdc = fmt.Sprintf("%.2f× (%s vs %s)", d.Goodput()/c.Goodput(), pct(d.Goodput()), pct(c.Goodput()))
		}
	}
	early := []string{}
	for _, x := range []struct {
		q  QuotaResult
		ok bool
	}{{a, oka}, {bb, okb}, {c, okc}, {d, okd}} {
		if x.ok {
			early = append(early, fmt.Sprint(x.q.Stats.Early))
		} else {
			early = append(early, "–")
		}
	}
	var waste, early2 []string
	for _, x := range []struct {
		q  QuotaResult
		ok bool
	}{{c, okc}, {cc, okcc}, {dc, okdc}} {
		if x.ok {
			waste = append(waste, fmt.Sprintf("%.2f (%d)", x.q.Waste(), x.q.Stats.MaxRefusedInAWindow()))
			early2 = append(early2, fmt.Sprint(x.q.Stats.Early))
		} else {
			waste = append(waste, "–")
			early2 = append(early2, "–")
		}
	}
	return fmt.Sprintf("| %s | %d | %s | %s | %s | %s | %s | %s |\n", st, n, ab, dcRatio, gdc, strings.Join(early, ", "), strings.Join(waste, ", "), strings.Join(early2, ", "))
}

// OverheadTable is the overhead table, with ratios to the baselines.
func (r *Report) OverheadTable() string {
	var b strings.Builder
	p := r.Overhead
	n1, d1 := p.rounds(1)
	nn, dn := p.rounds(2)
	fmt.Fprintf(&b, "Overhead: closed-loop callers, %d alternating rounds of %v per variant and level (%d of %v at one caller); the ratio is the median of the per-round ratios (the ratio of all rounds' totals in brackets).\n\n", nn, dn, n1, d1)
	b.WriteString("| call | concurrency | variant | calls/s | p50 | p99 | upstream connections opened | throughput ratio |\n")
	b.WriteString("|---|---:|---|---:|---:|---:|---:|---|\n")
	for _, o := range r.OverRes {
		ratio := ""
		rat := func(base, label string) string {
			x, ok := r.ThroughputRatio(o.Variant, base, o.Concurrency)
			if !ok {
				return ""
			}
			t, _ := r.TotalRatio(o.Variant, base, o.Concurrency)
			return fmt.Sprintf("%.1f%% of %s (all rounds: %.1f%%)", 100*x, label, 100*t)
		}
		switch o.Variant {
		case VarClassify:
			ratio = rat(VarEmpty, "empty handler")
		case VarControlB:
			ratio = rat(VarControlA, "empty handler A: the control, two identical servers")
		case VarExecute:
			ratio = rat(VarForwarder, "forwarder") + "; " + rat(VarDirect, "direct HTTP")
		case VarForwarder:
			ratio = rat(VarDirect, "direct HTTP")
		}
		errs := ""
		if o.Errors > 0 {
			errs = fmt.Sprintf(" (%d errors)", o.Errors)
		}
		fmt.Fprintf(&b, "| %s | %d | %s%s | %.0f | %s | %s | %d | %s |\n", o.Group, o.Concurrency, o.Variant, errs, o.Throughput, fmtDur(o.P50), fmtDur(o.P99), o.UpstreamConns, ratio)
	}
	if len(r.OverShares) > 0 {
		b.WriteString("\nProfile of the Execute rows (the suite's own CPU profile while they ran, every level and warm-up round; CPU per call, cumulative, outside net/http's Client.Do, which both share):\n\n")
		for _, h := range r.OverShares {
			fmt.Fprintf(&b, "- %s.\n", shareText(h))
		}
	}
	return b.String()
}

// ParkedTable is the parked-calls table.
func (r *Report) ParkedTable() string {
	var b strings.Builder
	b.WriteString("| parked calls | parked when sampled | Go heap: before → parked | heap / call | stacks: before → parked | heap + stacks / call | RSS: before → parked | RSS / call | goroutines: before → parked → after | goroutines / call | calls OK | errors | time to park all |\n")
	b.WriteString("|---:|---:|---|---:|---|---:|---|---:|---|---:|---:|---:|---:|\n")
	for _, p := range r.Parked {
		fmt.Fprintf(&b, "| %d | %.0f | %s → %s | %s | %s → %s | %s | %s → %s | %s | %.0f → %.0f → %.0f | %.2f | %d | %d | %s |\n",
			p.Calls, p.Parked.Waiting, fmtBytes(p.Before.HeapInuse), fmtBytes(p.Parked.HeapInuse), fmtBytes(p.HeapPerCall()),
			fmtBytes(p.Before.StackInuse), fmtBytes(p.Parked.StackInuse), fmtBytes(p.GoMemPerCall()),
			fmtBytes(float64(p.Before.RSS)), fmtBytes(float64(p.Parked.RSS)), fmtBytes(p.RSSPerCall()),
			p.Before.Goroutines, p.Parked.Goroutines, p.After.Goroutines, p.GoroutinesPerCall(), p.Succeeded, p.Errors, fmtDur(p.IssueTime))
	}
	return b.String()
}

// ScaleTables are the configuration-load and Redis-operations tables.
func (r *Report) ScaleTables() string {
	var b strings.Builder
	if len(r.Config) > 0 {
		b.WriteString("| tenants | file size | config.Load (median) | loads | heap retained | per tenant | allocated per load | broker ready after | broker heap in use, 1 s after ready | broker RSS, 1 s after ready (peak) |\n")
		b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		if bb := r.BrokerBase; bb != nil {
			fmt.Fprintf(&b, "| no --config (dev tenant) | – | – | – | – | – | – | %s | %s | %s (%s) |\n", fmtDur(bb.Startup), fmtBytes(bb.Heap), fmtBytes(float64(bb.RSS)), fmtBytes(float64(bb.PeakRSS)))
		}
		for _, c := range r.Config {
			fmt.Fprintf(&b, "| %d | %s | %s | %d | %s | %s | %s | %s | %s | %s (%s) |\n", c.Tenants, fmtBytes(float64(c.FileBytes)), fmtDur(c.Load), c.Loads,
				fmtBytes(float64(c.Retained)), fmtBytes(float64(c.Retained)/float64(c.Tenants)), fmtBytes(float64(c.Allocated)),
				fmtDur(c.BrokerStartup), fmtBytes(c.BrokerHeap), fmtBytes(float64(c.BrokerRSS)), fmtBytes(float64(c.BrokerPeakRSS)))
		}
		b.WriteString("\n")
	}
	if len(r.RedisOps) > 0 {
		b.WriteString("| topology | Execute case | calls | attempts | Redis commands / Execute | top-level commands / Execute | round trips / Execute | round trips counted | bound (per Execute) | masters reached | commands (all calls) |\n")
		b.WriteString("|---|---|---:|---:|---:|---:|---:|---|---|---:|---|\n")
		for _, x := range r.RedisOps {
			cpe, rpe := x.PerExecute()
			bound := "–"
			if x.Bound > 0 {
				bound = fmt.Sprintf("≤ %g", x.Bound)
			}
			fmt.Fprintf(&b, "| %s | %s | %d | %d | %.2f | %.2f | %.2f | %s | %s | %d of %d | %s |\n", x.Topology, x.Case, x.Executes, x.Attempts, cpe, x.TopLevelPerExecute(), rpe, x.HowCounted(), bound, x.MastersReached, x.Masters, commandList(x.ByCommand, x.SentinelCommands))
		}
	}
	return b.String()
}

// commandList formats command counts by name, with the sentinel's.
func commandList(m map[string]int64, sentinel int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	if sentinel > 0 {
		parts = append(parts, fmt.Sprintf("sentinel: %d", sentinel))
	}
	return strings.Join(parts, ", ")
}

// redisTargets are the issue's bounds on Redis round trips: per attempt,
// ≤ 1 when the response reports nothing and ≤ 2 when it carries quota,
// summed over each case's attempts. A case whose calls did not make the
// attempts it is made of is not evaluated.
func (r *Report) redisTargets() []Target {
	var out []Target
	for _, x := range r.RedisOps {
		if x.Bound <= 0 {
			continue
		}
		unit := "round trips"
		if x.Bound == 1 {
			unit = "round trip"
		}
		name := fmt.Sprintf("Redis %s, %s: ≤ %g %s per Execute (%s)", x.Topology, x.Case, x.Bound, unit, x.BoundWhy)
		if x.Executes == 0 || x.Attempts != x.WantAttempts*x.Executes {
			out = append(out, Target{name, fmt.Sprintf("%d attempts for %d calls, not %d each", x.Attempts, x.Executes, x.WantAttempts), "n/a"})
			continue
		}
		_, rpe := x.PerExecute()
		out = append(out, Target{name, fmt.Sprintf("%.2f (%s)", rpe, x.HowCounted()), yesNo(rpe <= x.Bound)})
	}
	return out
}

// redisFindings explains the missed Redis bounds from the counts.
func (r *Report) redisFindings() []string {
	var out []string
	for _, x := range r.RedisOps {
		_, rpe := x.PerExecute()
		if x.Bound <= 0 || x.Executes == 0 || x.Attempts != x.WantAttempts*x.Executes || rpe <= x.Bound {
			continue
		}
		msg := fmt.Sprintf("Redis %s, %s: %.2f round trips per Execute (%s), bound %g; top-level commands per Execute: %s.", x.Topology, x.Case, rpe, x.HowCounted(), x.Bound, perCall(x.TopByCommand, x.Executes))
		if x.SentinelCommands > 0 {
			msg += fmt.Sprintf(" The sentinel answered %.2f commands per Execute.", float64(x.SentinelCommands)/float64(x.Executes))
		}
		out = append(out, msg)
	}
	return out
}

// perCall formats counts divided by n, largest first.
func perCall(m map[string]int64, n int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] || m[keys[i]] == m[keys[j]] && keys[i] < keys[j] })
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.2f", k, float64(m[k])/float64(n)))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// redisObservations compares, on one server, the round trips counted on
// the wire with the top-level commands counted from INFO commandstats,
// the count the other topologies rely on.
func (r *Report) redisObservations() []string {
	var out []string
	for _, x := range r.RedisOps {
		if !x.Wire || x.Executes == 0 || x.RoundTrips == x.TopLevel {
			continue
		}
		why := "more commands than round trips: the broker pipelined some (one round trip for several commands)"
		if x.TopLevel < x.RoundTrips {
			why = "fewer top-level commands than round trips: the broker sent a data command outside a script (counted as a script's), or a command INFO commandstats does not count"
		}
		out = append(out, fmt.Sprintf("Redis %s, %s: %d round trips on the wire, %d top-level commands from INFO commandstats (%s); on the cluster and Sentinel the round trips are counted as top-level commands.",
			x.Topology, x.Case, x.RoundTrips, x.TopLevel, why))
	}
	return out
}

// TargetTable lists the targets with their measured figures.
func (r *Report) TargetTable() string {
	var b strings.Builder
	b.WriteString("| target | measured | met |\n|---|---|---|\n")
	for _, t := range r.Targets() {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", t.Name, t.Measured, t.Met)
	}
	return b.String()
}

// Markdown is the printed summary: every table.
func (r *Report) Markdown() string {
	var b strings.Builder
	if r.Quick {
		b.WriteString("_Quick smoke run: the numbers are not meant to be quoted._\n\n")
	}
	sections := []struct {
		title string
		body  string
		show  bool
	}{
		{"Targets", r.TargetTable(), true},
		{"Why targets were missed", bulletList(r.Findings()), len(r.Findings()) > 0},
		{"Other observations", bulletList(r.Observations()), len(r.Observations()) > 0},
		{"Quota citizenship", r.QuotaTable(), len(r.QuotaRes) > 0},
		{"Quota citizenship: side-by-side ratios", r.ComparisonTable(), len(r.QuotaRes) > 0},
		{"Herd: more callers than quota, all at once", r.HerdTable(r.HerdRes), len(r.HerdRes) > 0},
		{"Herd: side by side", r.HerdComparison(), len(r.HerdRes)+len(r.RollingRes) > 0},
		{"Rolling restart", r.HerdTable(r.RollingRes) + "\n" + r.RollingTable(), len(r.RollingRes) > 0},
		{"Outage", r.OutageTable(), len(r.OutageRes) > 0},
		{"Overhead", r.OverheadTable(), len(r.OverRes) > 0},
		{"Parked calls", r.ParkedTable(), len(r.Parked) > 0},
		{"Scale", r.ScaleTables(), len(r.Config)+len(r.RedisOps) > 0},
		{"Streaming", r.StreamTables(), r.Stream != nil},
		{"Broker-held credentials", r.CredentialsTable(), r.Credentials != nil},
		{"Deferred calls (tasks)", r.TasksTable(), r.Tasks != nil},
	}
	for _, s := range sections {
		if s.show {
			fmt.Fprintf(&b, "### %s\n\n%s\n", s.title, s.body)
		}
	}
	if len(r.Errors) > 0 {
		b.WriteString("### Errors\n\n")
		for _, e := range r.Errors {
			fmt.Fprintf(&b, "- %s\n", e)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// Findings explains, from the run's own figures, why targets were missed.
func (r *Report) Findings() []string {
	var out []string
	out = append(out, r.quotaFindings()...)
	out = append(out, r.herdFindings()...)
	out = append(out, r.outageFindings()...)
	out = append(out, r.redisFindings()...)
	out = append(out, r.credentialsFindings()...)
	for _, c := range r.Overhead.Concurrency {
		x, ok := r.ThroughputRatio(VarExecute, VarForwarder, c)
		if !ok || x >= executeTarget(c) {
			continue
		}
		b, _ := r.overheadResult(VarExecute, c)
		f, _ := r.overheadResult(VarForwarder, c)
		msg := fmt.Sprintf("Execute at concurrency %d: %.1f%% of the minimal forwarder (target %.0f%%); p50 %s against the forwarder's %s.",
			c, 100*x, 100*executeTarget(c), fmtDur(b.P50), fmtDur(f.P50))
		if b.UpstreamConns > f.UpstreamConns && b.Calls > 0 {
			msg += fmt.Sprintf(" The broker opened %d new upstream connections during its rounds (one per %.1f calls), the forwarder %d: beyond %d idle connections per host (--upstream-max-idle-conns-per-host) calls pay for a new TCP connection.",
				b.UpstreamConns, float64(b.Calls)/float64(b.UpstreamConns), f.UpstreamConns, egress.DefaultMaxIdleConnsPerHost)
		}
		if sharesKnown(r.OverShares) {
			msg += fmt.Sprintf(" Profile of the Execute rows: the broker's handler spent %s of CPU per call outside the HTTP client, the forwarder's %s (see the Overhead section for the parts).",
				fmtDur(r.OverShares[0].PerCall), fmtDur(r.OverShares[1].PerCall))
		}
		out = append(out, msg)
	}
	if st := r.Stream; st != nil {
		for _, m := range []StreamMemory{st.Single, st.Concurrent} {
			lim := int64(32 << 20)
			if m.Streams > 1 {
				lim = 256 << 20
			}
			if m.Streams == 0 || m.Growth() <= lim {
				continue
			}
			out = append(out, fmt.Sprintf("%d concurrent %s downloads: RSS growth %s, %s per stream; the Go heap in use at the peak was %s: the growth is Go heap, not memory the runtime kept (the engine itself holds one %s buffer per stream).",
				m.Streams, fmtBytes(float64(m.Bytes)), fmtBytes(float64(m.Growth())), fmtBytes(float64(m.Growth())/float64(m.Streams)), fmtBytes(float64(m.PeakHeap)), fmtBytes(float64(engine.StreamChunkSize))))
		}
	}
	if st := r.Stream; st != nil {
		for _, c := range st.Params.TTFBConcurrency {
			x, ok := st.TTFBRatio(VarStreamBroker, VarStreamForwarder, c)
			if !ok || x <= 1.2 {
				continue
			}
			msg := fmt.Sprintf("ExecuteStream's time to first byte at concurrency %d: %.2f× the forwarder's p50 (target 1.2×).", c, x)
			if sharesKnown(st.Shares) {
				msg += fmt.Sprintf(" Profile of those rows: the broker's handler spent %s of CPU per stream outside the HTTP client, the forwarder's %s (see the Streaming section for the parts).",
					fmtDur(st.Shares[0].PerCall), fmtDur(st.Shares[1].PerCall))
			}
			out = append(out, msg)
		}
	}
	for _, c := range r.Overhead.Concurrency {
		if x, ok := r.ThroughputRatio(VarClassify, VarEmpty, c); ok && x < 0.90 {
			out = append(out, fmt.Sprintf("ClassifyResponse at concurrency %d: %.1f%% of the empty handler.", c, 100*x))
		}
	}
	for _, p := range r.Parked {
		if p.GoMemPerCall() > 20*1024 || p.RSSPerCall() > 20*1024 {
			out = append(out, fmt.Sprintf("%d parked calls: %s of Go heap and stacks (%s of heap alone) and %s of RSS per parked call.", p.Calls, fmtBytes(p.GoMemPerCall()), fmtBytes(p.HeapPerCall()), fmtBytes(p.RSSPerCall())))
		}
		if p.After.Goroutines > p.Before.Goroutines {
			out = append(out, fmt.Sprintf("%d parked calls: %.0f goroutines after the calls ended, %.0f before.", p.Calls, p.After.Goroutines, p.Before.Goroutines))
		}
	}
	return out
}

// quotaFindings explains the quota targets that were missed.
func (r *Report) quotaFindings() []string {
	var out []string
	for _, n := range r.quotaCallers() {
		for _, st := range r.quotaStyles() {
			for _, row := range []Row{RowOneBroker, RowRedis3} {
				q, ok := r.quotaResult(st, row, n)
				if !ok {
					continue
				}
				out = append(out, quotaRowFindings(q)...)
			}
			for _, row := range []Row{RowClusterShared, RowClusterSeeds} {
				q, ok := r.quotaResult(st, row, n)
				if !ok {
					continue
				}
				single, okSingle := r.quotaResult(st, RowRedis3, n)
				if f := clusterRowFindings(q, single, okSingle); f != "" {
					out = append(out, f)
				}
			}
			a, oka := r.quotaResult(st, RowRetryableHTTP, n)
			b, okb := r.quotaResult(st, RowOneBroker, n)
			if oka && okb && n == r.Quota.Callers && b.Waste() > 0 && a.Waste()/b.Waste() < 10 {
				out = append(out, fmt.Sprintf("%s, %d callers: row a wasted %.2f refused calls per window, row b %.2f over the whole run, %d of row b's %d refusals in the first window (where nothing is known before the first answer).",
					st, n, a.Waste(), b.Waste(), b.First().Refused, b.Stats.Refused))
			}
		}
	}
	return out
}

// quotaRowFindings explains the misses of one broker row, from its own
// figures.
func quotaRowFindings(q QuotaResult) []string {
	var out []string
	name := fmt.Sprintf("%s row %s, %d callers", q.Style, q.Row, q.Callers)
	st := q.Stats
	if judgedLater(q) {
		name += ", after the first window"
		st = q.Later()
		if len(st.Windows) == 0 {
			return nil
		}
	}
	if st.Goodput() < 0.95 {
		idle := 0
		for _, w := range st.Windows {
			if w.Accepted < st.Quota && w.Refused == 0 {
				idle++
			}
		}
		msg := fmt.Sprintf("%s: goodput %s.", name, pct(st.Goodput()))
		if idle > 0 {
			msg += fmt.Sprintf(" In %d of %d windows the provider accepted fewer than Q = %d calls and refused none: the broker held its callers (gate closed, or calls held beyond a learned quota) while quota was left, so the loss is the broker's, not the callers'.", idle, len(st.Windows), st.Quota)
		}
		out = append(out, msg)
	}
	if !announcesNothing(q.Style) {
		if st.Refused > 0 || st.Early > 0 {
			out = append(out, fmt.Sprintf("%s: %d refused calls (max %d in a window), %d early sends, although every accepted response carried the remaining count and the reset; refused, early per window: %s.",
				name, st.Refused, st.MaxRefusedInAWindow(), st.Early, perWindow(q.Stats)))
		}
		return out
	}
	if st.MaxRefusedInAWindow() > 1 || st.Early > 0 {
		msg := fmt.Sprintf("%s: %.2f refused calls per window (max %d; first window %d), %d early sends (first window %d); refused, early per window: %s.",
			name, st.RefusedPerWindow(), st.MaxRefusedInAWindow(), q.First().Refused, st.Early, q.First().Early, perWindow(q.Stats))
		var held, bad []fakeprovider.WindowStats
		for _, w := range st.Windows {
			if w.Refused <= 1 && w.Early == 0 {
				held = append(held, w)
			} else {
				bad = append(bad, w)
			}
		}
		if len(held) > 0 {
			var parts []string
			for _, w := range bad {
				parts = append(parts, fmt.Sprintf("window %d: %d refused, %d early, the first refusal %s into the window after %d accepted calls", w.Index, w.Refused, w.Early, fmtDur(w.FirstRefusal), w.Accepted))
			}
			msg += fmt.Sprintf(" The broker held its callers beyond the learned quota in %d of %d later windows (≤ 1 refusal, no early send) and not in the others (%s): learning works, but not every time, which points at the broker (a race in holding or releasing the calls), not at the provider's style.",
				len(held), len(st.Windows), strings.Join(parts, "; "))
		} else {
			msg += fmt.Sprintf(" The %s style sends nothing on accepted calls, so a broker that does not hold calls back beyond a learned quota learns that the quota is gone only from each window's first refusal, and the calls already on their way are refused too (up to C − 1 = %d per window).", q.Style, q.Callers-1)
			if first := float64(q.First().Refused); first > 0 && st.RefusedPerWindow() >= first/2 {
				msg += " No later window did better than half the first: no learned quota held calls back in this run (learning off, or not implemented by this broker)."
			}
		}
		out = append(out, msg)
	}
	return out
}

// clusterRowFindings explains the misses of a row on the Redis Cluster
// ("" when it met its targets), beside row c on one Redis server in the
// same run (single, when ok).
func clusterRowFindings(q QuotaResult, single QuotaResult, ok bool) string {
	w, scope := q.Stats, ""
	if judgedLater(q) {
		w, scope = q.Later(), ", after the first window"
		if len(w.Windows) == 0 {
			return ""
		}
	}
	if w.MaxRefusedInAWindow() <= 1 && w.Early == 0 && w.Goodput() >= 0.95 {
		return ""
	}
	msg := fmt.Sprintf("%s row %s, %d callers%s: max %d refused calls in a window, %d early sends, goodput %s; refused, early per window: %s.",
		q.Style, q.Row, q.Callers, scope, w.MaxRefusedInAWindow(), w.Early, pct(w.Goodput()), perWindow(q.Stats))
	if !ok {
		return msg + " Row c on one Redis server did not run beside it."
	}
	sw := single.Stats
	if judgedLater(single) {
		sw = single.Later()
	}
	msg += fmt.Sprintf(" Row c on one Redis server in the same run: max %d refused in a window, %d early sends, goodput %s (per window: %s)",
		sw.MaxRefusedInAWindow(), sw.Early, pct(sw.Goodput()), perWindow(single.Stats))
	if sw.MaxRefusedInAWindow() <= 1 && sw.Early == 0 && sw.Goodput() >= 0.95 {
		msg += ": it met the cluster's targets, so the miss comes with the cluster (its client, or keys and scripts on the master of the tenant's slot), not with sharing state as such."
	} else {
		msg += ": it missed them too, so the miss is the shared-state path's, not the cluster's."
	}
	return msg
}

// perWindow lists "refused/early" for every window of s, e.g. "15/14, 1/0".
func perWindow(s fakeprovider.Stats) string {
	var parts []string
	for _, w := range s.Windows {
		parts = append(parts, fmt.Sprintf("%d/%d", w.Refused, w.Early))
	}
	return strings.Join(parts, ", ")
}

func bulletList(items []string) string {
	var b strings.Builder
	for _, x := range items {
		fmt.Fprintf(&b, "- %s\n", x)
	}
	return b.String()
}

// Observations are notable figures of the run that are not targets.
func (r *Report) Observations() []string {
	out := r.redisObservations()
	for _, c := range r.Config {
		if c.Retained > 0 && c.BrokerHeap > 5*float64(c.Retained) && c.BrokerHeap > 64<<20 {
			base := 0.0
			if r.BrokerBase != nil {
				base = r.BrokerBase.Heap
			}
			out = append(out, fmt.Sprintf("A broker started with %d tenants holds %s of heap in use (RSS %s) 1 s after it is ready, although the loaded configuration retains %s (and a broker without --config %s): one load allocates %s, and an idle broker does not run the garbage collector again before the runtime's forced cycle (every 2 minutes), so the garbage of loading stays resident. A runtime.GC (or debug.FreeOSMemory) after each (re)load would give it back at once.",
				c.Tenants, fmtBytes(c.BrokerHeap), fmtBytes(float64(c.BrokerRSS)), fmtBytes(float64(c.Retained)), fmtBytes(base), fmtBytes(float64(c.Allocated))))
		}
	}
	return out
}

// StreamTables lists the streaming scenario's figures.
func (r *Report) StreamTables() string {
	st := r.Stream
	if st == nil {
		return ""
	}
	var b strings.Builder
	b.WriteString("| broker process streaming | streams | bytes each | RSS before | peak RSS | growth | Go heap in use at the peak | time | throughput |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, m := range []StreamMemory{st.Single, st.Concurrent} {
		if m.Streams == 0 {
			continue
		}
		rate := 0.0
		if m.Elapsed > 0 {
			rate = float64(int64(m.Streams)*m.Bytes) / m.Elapsed.Seconds()
		}
		fmt.Fprintf(&b, "| ExecuteStream download | %d | %s | %s | %s | %s | %s | %s | %s/s |\n", m.Streams, fmtBytes(float64(m.Bytes)),
			fmtBytes(float64(m.BaseRSS)), fmtBytes(float64(m.PeakRSS)), fmtBytes(float64(m.Growth())), fmtBytes(float64(m.PeakHeap)), fmtDur(m.Elapsed), fmtBytes(rate))
	}
	b.WriteString("\n| throughput (one stream, in process) | bytes | bytes/s | rounds (bytes/s) |\n|---|---:|---:|---|\n")
	for _, t := range st.Throughput {
		var rounds []string
		for _, x := range t.Rounds {
			rounds = append(rounds, fmtBytes(x))
		}
		fmt.Fprintf(&b, "| %s | %s | %s/s | %s |\n", t.Variant, fmtBytes(float64(t.Bytes)), fmtBytes(t.BytesPerSecond()), strings.Join(rounds, ", "))
	}
	if x, ok := st.ThroughputRatio(); ok {
		fmt.Fprintf(&b, "\nExecuteStream / forwarder (median of per-round ratios): %.1f%%\n", 100*x)
	}
	if x, ok := st.ThroughputShare(VarStreamBroker, VarStreamDirect); ok {
		fmt.Fprintf(&b, "\nExecuteStream / direct HTTP, the physical limit (median of per-round ratios): %.1f%%\n", 100*x)
	}
	if x, ok := st.ThroughputShare(VarStreamForwarder, VarStreamDirect); ok {
		fmt.Fprintf(&b, "\nForwarder / direct HTTP (median of per-round ratios): %.1f%%\n", 100*x)
	}
	b.WriteString("\n| time to first byte | concurrency | calls | p50 | p99 | p50 / forwarder's (both in process) |\n|---|---:|---:|---:|---:|---:|\n")
	for _, t := range st.TTFB {
		share := ""
		if x, ok := st.TTFBRatio(t.Variant, VarStreamForwarder, t.Concurrency); ok && t.Variant == VarStreamBroker { // both in process
			share = fmt.Sprintf("%.2f×", x)
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %s | %s | %s |\n", t.Variant, t.Concurrency, t.Calls, fmtDur(t.P50), fmtDur(t.P99), share)
	}
	if len(st.Shares) > 0 {
		b.WriteString("\nProfile of the in-process time-to-first-byte rows (the suite's own CPU profile while they ran; CPU per stream, cumulative, outside net/http's Client.Do, which both share):\n\n")
		for _, h := range st.Shares {
			fmt.Fprintf(&b, "- %s.\n", shareText(h))
		}
	}
	return b.String()
}

// executeTarget is the issue's bound on Execute's throughput over the
// minimal forwarder's: 90% for one caller, 85% for more.
func executeTarget(concurrency int) float64 {
	if concurrency <= 1 {
		return 0.90
	}
	return 0.85
}
