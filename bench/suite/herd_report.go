package suite

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/retrybroker/retrybroker/bench/fakeprovider"
)

// Chart file names of the herd scenario, in ChartDir: one chart of the
// refusals per window per style (ChartHerdPrefix + style + ".png").
const ChartHerdPrefix = "herd-refusals-"

// herdChartName is the herd chart of style st.
func herdChartName(st fakeprovider.Style) string { return ChartHerdPrefix + string(st) + ".png" }

// firstWindowBound is the bound on the first window's refusals:
// 1 for a style that announces its quota on every answer, a quarter of
// the quota for one that announces nothing until it refuses.
func firstWindowBound(st fakeprovider.Style, quota int) int {
	if announcesNothing(st) {
		return quota / 4
	}
	return 1
}

// herdTargets are the targets of one broker row of the herd or
// rolling scenario.
func (r *Report) herdTargets(h HerdResult) []Target {
	if h.Setup == HerdRetryableHTTP {
		return nil
	}
	name := h.Label()
	if h.Err != "" {
		return []Target{{name, "error: " + h.Err, "**no**"}}
	}
	l := h.Later()
	if len(l.Windows) == 0 {
		return []Target{{name + ": targets after the first window", "no window after the first in this run", "n/a"}}
	}
	fb := firstWindowBound(h.Style, r.Herd.Quota)
	out := []Target{
		{name + ", after the first window: ≤ 1 refused call per gate per window", fmt.Sprintf("max %d (per window: %s)", l.MaxRefusedInAWindow(), refusedList(h.Stats)), yesNo(l.MaxRefusedInAWindow() <= 1)},
		{name + ", after the first window: goodput ≥ 95% of the quota", fmt.Sprintf("%s (%d of %d; whole run %s)", pct(l.Goodput()), l.Accepted, l.Quota*len(l.Windows), pct(h.Stats.Goodput())), yesNo(l.Goodput() >= 0.95)},
		{name + ", after the first window: 0 early sends", fmt.Sprintf("%d (first window: %d)", l.Early, h.First().Early), yesNo(l.Early == 0)},
		{fmt.Sprintf("%s, first window: ≤ %d refused", name, fb), fmt.Sprintf("%d (early %d)", h.First().Refused, h.First().Early), yesNo(h.First().Refused <= fb)},
		{name + ": no call held past the time it could still be sent (held to its deadline)", heldPastText(h), yesNo(h.HeldPast == 0)},
		{fmt.Sprintf("%s: no held call passed over, held through more than ⌈C/Q⌉ = %d reopenings (issue 18, Deliver: held calls must not starve)", name, herdReopenings(r.Herd)), starvedText(h), yesNo(h.Starved == 0)},
	}
	if h.Setup == HerdRolling {
		out = append(out, Target{name + ": 0 broker-caused failed RPCs", failedText(h), yesNo(h.FailedRPCs() == 0)})
		if rs := h.Restart; rs != nil {
			// Ready is measured by the suite's own poll of the new process
			// every 20 ms on a fresh connection: "" and SharedState both
			// SERVING; the callers' probe sees it later (its connection
			// reconnects with a backoff).
			seen := "never"
			if rs.SharedServing >= 0 {
				seen = fmtDur(rs.SharedServing)
			}
			out = append(out,
				Target{name + ": the restarted replica reports SharedState SERVING within 3 s of its start", fmt.Sprintf("%s (seen by the callers' probe after %s)", fmtDur(rs.Ready), seen), yesNo(rs.Ready > 0 && rs.Ready.Seconds() <= 3)},
			)
		}
		out = append(out, Target{name + ": no replica reports SharedState NOT_SERVING after SERVING", fmt.Sprintf("%d probes saw it", h.SharedNotServing), yesNo(h.SharedNotServing == 0)})
	}
	return out
}

func heldPastText(h HerdResult) string {
	m := fmt.Sprint(h.HeldPast)
	if h.HeldPastExample != "" {
		m += "; e.g. " + h.HeldPastExample
	}
	if h.Deadline == DeadlineLong {
		m += fmt.Sprintf(" (%d still held when the run, their deadline, ended: not judged)", h.HeldAtEnd)
	}
	return m
}

func ordinalSuffix(n int) string {
	switch {
	case n%100 >= 11 && n%100 <= 13:
		return "th"
	case n%10 == 1:
		return "st"
	case n%10 == 2:
		return "nd"
	case n%10 == 3:
		return "rd"
	}
	return "th"
}

// herdReopenings is the most reopenings a call may be held through.
func herdReopenings(p HerdParams) int {
	if p.Quota <= 0 {
		return 0
	}
	return (p.Callers + p.Quota - 1) / p.Quota
}

func starvedText(h HerdResult) string {
	if h.Starved == 0 {
		return fmt.Sprintf("0 (longest hold %s)", fmtDur(max(h.HeldFirst.Max, h.HeldLater.Max)))
	}
	return fmt.Sprintf("%d; the longest: %s", h.Starved, h.StarvedExample)
}

func failedText(h HerdResult) string {
	m := fmt.Sprint(h.FailedRPCs())
	if len(h.Failed) > 0 {
		m += " (" + outcomeSummary(h.Failed) + ")"
	}
	return m + fmt.Sprintf("; %d calls ended by the drain (OUTCOME_SHUTTING_DOWN), not counted", h.Drained)
}

// herdFindings explains the missed herd targets from the run's figures.
func (r *Report) herdFindings() []string {
	var out []string
	for _, h := range append(append([]HerdResult(nil), r.HerdRes...), r.RollingRes...) {
		if h.Setup == HerdRetryableHTTP || h.Err != "" {
			continue
		}
		l := h.Later()
		if len(l.Windows) == 0 {
			continue
		}
		if l.MaxRefusedInAWindow() > 1 || l.Early > 0 || l.Goodput() < 0.95 {
			idle := 0
			for _, w := range l.Windows {
				if w.Accepted < l.Quota && w.Refused == 0 {
					idle++
				}
			}
			msg := fmt.Sprintf("%s, after the first window: refused/early per window %s, goodput %s.", h.Label(), perWindow(h.Stats), pct(l.Goodput()))
			if idle > 0 {
				msg += fmt.Sprintf(" In %d of %d later windows the provider accepted fewer than %d calls and refused none: the broker held %d callers while quota was left (held p99 %s, max %s; %d calls ended unsent).",
					idle, len(l.Windows), l.Quota, h.Callers, fmtDur(h.HeldLater.P99), fmtDur(h.HeldLater.Max), h.Unsent)
			}
			out = append(out, msg)
		}
		if h.Starved > 0 {
			out = append(out, fmt.Sprintf("%s: %d calls were held through more than %d reopenings (%s; held p99 %s after the first window): with %d callers and %d calls per window, a broker that releases its held calls in arrival order at each reopening sends every call by its %d%s reopening; these were passed over.",
				h.Label(), h.Starved, herdReopenings(r.Herd), h.StarvedExample, fmtDur(h.HeldLater.P99), h.Callers, r.Herd.Quota, herdReopenings(r.Herd), ordinalSuffix(herdReopenings(r.Herd))))
		}
		if fb := firstWindowBound(h.Style, r.Herd.Quota); h.First().Refused > fb {
			out = append(out, fmt.Sprintf("%s, first window: %d refused (bound %d): the %d callers' first calls went out before any answer had come back.", h.Label(), h.First().Refused, fb, h.Callers))
		}
		if h.HeldPast > 0 {
			out = append(out, fmt.Sprintf("%s: %d calls were held to their deadline without being sent (e.g. %s); %d calls in all were held ≥ %v and then ended unsent, the longest %s (%s).",
				h.Label(), h.HeldPast, h.HeldPastExample, h.HeldUnsent, heldFor, fmtDur(h.HeldUnsentMax), h.HeldUnsentExample))
		}
		if h.Late > 500*time.Millisecond {
			out = append(out, fmt.Sprintf("%s: the callers' own deadlines fired up to %s late (load average %.1f at the row's end, on %d cores): the suite's process could not run for that long, so this row's figures are the busy machine's as much as the broker's.",
				h.Label(), fmtDur(h.Late), h.Load, r.Machine.Cores))
		}
		if h.SharedNotServing > 0 {
			out = append(out, fmt.Sprintf("%s: the readiness probe saw SharedState NOT_SERVING %d times (every %v; per replica %v) on replicas that had reported SERVING: they served on local state meanwhile. The brokers logged: %s.",
				h.Label(), h.SharedNotServing, r.Herd.Poll, h.SharedNotServingBy, orDash(outcomeSummary(h.Warnings))))
		}
		if h.Setup == HerdRolling && h.FailedRPCs() > 0 {
			out = append(out, fmt.Sprintf("%s: %d RPCs failed with a gRPC error while replica 0 stopped and started (%s); the callers' readiness probe runs every %v.", h.Label(), h.FailedRPCs(), outcomeSummary(h.Failed), r.Herd.Poll))
		}
	}
	return out
}

// HerdTable is the table of rows (herd or rolling).
func (r *Report) HerdTable(rows []HerdResult) string {
	var b strings.Builder
	b.WriteString("| style | setup | deadlines | first window: refused, early | later windows: refused per window | later: max refused | later: goodput | later: early | whole run: goodput | held p50 / p99: first window | held p50 / p99: later | max held | held, then unsent (longest) | held to the deadline (at the end) | passed over at reopenings | failed RPCs | drained | calls | call outcomes | load, callers' timers late by |\n")
	b.WriteString("|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|\n")
	for _, h := range rows {
		if h.Err != "" {
			fmt.Fprintf(&b, "| %s | %s | %s | error: %s | | | | | | | | | | | | | | | | |\n", h.Style, h.Setup, h.Deadline, h.Err)
			continue
		}
		l := h.Later()
		held := func(s HoldStats) string {
			if h.Setup == HerdRetryableHTTP || s.Calls == 0 {
				return "–"
			}
			return fmtDur(s.P50) + " / " + fmtDur(s.P99)
		}
		mx, unsent, past, starved, failed, drained, late := "–", "–", "–", "–", "–", "–", "–"
		if h.Setup != HerdRetryableHTTP {
			late = fmtDur(h.Late)
			mx = fmtDur(max(h.HeldFirst.Max, h.HeldLater.Max))
			unsent = fmt.Sprint(h.HeldUnsent)
			if h.HeldUnsent > 0 {
				unsent += " (" + fmtDur(h.HeldUnsentMax) + ")"
			}
			past = fmt.Sprintf("%d (%d)", h.HeldPast, h.HeldAtEnd)
			starved = fmt.Sprint(h.Starved)
			failed, drained = fmt.Sprint(h.FailedRPCs()), fmt.Sprint(h.Drained)
		}
		var later []string
		for _, w := range l.Windows {
			later = append(later, fmt.Sprint(w.Refused))
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d, %d | %s | %d | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d | %s | %.1f, %s |\n",
			h.Style, h.Setup, h.Deadline, h.First().Refused, h.First().Early, strings.Join(later, ", "), l.MaxRefusedInAWindow(), pct(l.Goodput()), l.Early,
			pct(h.Stats.Goodput()), held(h.HeldFirst), held(h.HeldLater), mx, unsent, past, starved, failed, drained, h.Calls, outcomeSummary(h.Outcomes), h.Load, late)
	}
	return b.String()
}

// herdResult finds a row.
func (r *Report) herdResult(st fakeprovider.Style, setup HerdSetup, dl Deadline) (HerdResult, bool) {
	for _, h := range append(append([]HerdResult(nil), r.HerdRes...), r.RollingRes...) {
		if h.Style == st && h.Setup == setup && h.Deadline == dl && h.Err == "" {
			return h, true
		}
	}
	return HerdResult{}, false
}

// HerdComparison sets the broker rows beside the go-retryablehttp callers
// of the same style and deadlines, after the first window.
func (r *Report) HerdComparison() string {
	var b strings.Builder
	setups := []HerdSetup{HerdRetryableHTTP, HerdOneBroker, HerdRedis3, HerdRolling}
	b.WriteString("| style | deadlines | later: refused / window: a, 1 broker, 3 replicas, rolling | refusals: a over 1 broker | later: goodput: a, 1 broker, 3 replicas, rolling | early sends: a, 1 broker, 3 replicas, rolling |\n|---|---|---|---:|---|---|\n")
	seen := map[string]bool{}
	for _, h := range append(append([]HerdResult(nil), r.HerdRes...), r.RollingRes...) {
		key := string(h.Style) + string(h.Deadline)
		if seen[key] {
			continue
		}
		seen[key] = true
		var waste, good, early []string
		for _, s := range setups {
			x, ok := r.herdResult(h.Style, s, h.Deadline)
			if !ok {
				waste, good, early = append(waste, "–"), append(good, "–"), append(early, "–")
				continue
			}
			l := x.Later()
			waste = append(waste, fmt.Sprintf("%.2f", l.RefusedPerWindow()))
			good = append(good, pct(l.Goodput()))
			early = append(early, fmt.Sprint(x.Stats.Early))
		}
		ratio := "–"
		a, oka := r.herdResult(h.Style, HerdRetryableHTTP, h.Deadline)
		bb, okb := r.herdResult(h.Style, HerdOneBroker, h.Deadline)
		if oka && okb {
			ratio, _ = wasteRatio(a.Later().RefusedPerWindow(), bb.Later().RefusedPerWindow())
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", h.Style, h.Deadline, strings.Join(waste, ", "), ratio, strings.Join(good, ", "), strings.Join(early, ", "))
	}
	return b.String()
}

// RollingTable describes what the restart did, per rolling row.
func (r *Report) RollingTable() string {
	var b strings.Builder
	b.WriteString("| style | deadlines | SIGTERM at | exited in | new process ready in (\"\" and SharedState SERVING) | SharedState SERVING seen by the callers' probe after | SharedState NOT_SERVING after SERVING (probes) | calls sent to the new process | failed RPCs | drained calls |\n|---|---|---:|---:|---:|---:|---:|---:|---|---:|\n")
	for _, h := range r.RollingRes {
		if h.Err != "" || h.Restart == nil {
			continue
		}
		rs := h.Restart
		sh := "never"
		if rs.SharedServing >= 0 {
			sh = fmtDur(rs.SharedServing)
		}
		failed := fmt.Sprint(h.FailedRPCs())
		if len(h.Failed) > 0 {
			failed += " (" + outcomeSummary(h.Failed) + ")"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %d | %d | %s | %d |\n", h.Style, h.Deadline, fmtDur(rs.StoppedAt), fmtDur(rs.Exited), fmtDur(rs.Ready), sh, h.SharedNotServing, rs.NewCalls, failed, h.Drained)
	}
	return b.String()
}

// herdSection writes the herd and rolling-restart section.
func (r *Report) herdSection(b *strings.Builder, img func(name, alt string)) {
	p := r.Herd
	b.WriteString("## 7. A herd: more callers than quota, from the first call and through a rolling restart\n\n")
	fmt.Fprintf(b, `Issue 18's scenarios, run alone with `+"`go run ./bench/cmd/benchsuite -only herd`"+`
(or `+"`-only rolling`"+`). C = %d callers all start at the same instant, window 0's
start, against one fake provider with a quota of Q = %d calls per W = %v
window, for %d windows (%v), in two styles: **github** (every answer carries
x-ratelimit-remaining and x-ratelimit-reset) and **retry-after** (nothing until
a refusal, whose Retry-After reaches the window's end, rounded up to a whole
second). Every row runs in the same invocation, one after the other, each with
its own provider (and brokers), with the broker policy of section 1
(`+"`%s`"+`).

- **a**: every caller has its own `+"`retryablehttp.NewClient()`"+` (defaults) and calls
  the provider directly; a call ends (success, give-up, deadline) and the next
  starts at once.
- **1 broker**: Execute through one broker process, memory store.
- **3 replicas, Redis**: Execute through 3 broker processes sharing one
  redis-server; caller i calls replica i mod 3.
- **rolling restart**: as 3 replicas, while replica 0 gets SIGTERM %v into the
  run (`+"`--shutdown-timeout 2s`"+`) and, once it has exited, a new process is
  started on the same address. The suite probes every replica's health (`+"`\"\"`"+`
  and `+"`retrybroker.v1.SharedState`"+`) every %v, as a load balancer's readiness
  probe would: a caller calls its own replica while its `+"`\"\"`"+` health is SERVING,
  else the next one that is. A caller whose call fails with a gRPC error, or is
  ended by the drain (OUTCOME_SHUTTING_DOWN), marks that replica not ready
  until its next probe and calls again at once.

Deadlines: **long**, each call's deadline is the end of the run, so the broker
may hold it; **short**, each call has a %v deadline. In both, a caller told a
`+"`retry_after`"+` (OUTCOME_GATE_CLOSED, ...) sleeps exactly that long and calls again;
otherwise it calls again at once.

Per row: the first window's refusals and early sends apart (nothing is known
before the first answer), then every later window's refusals, their maximum,
goodput (accepted calls / Q × the later windows) and early sends (calls that
arrived before a reset or hint the provider had announced). **Held** is the
time from a call's start at its caller to its first send (the first Attempt's
start_time in the ExecuteResponse), or to its end for a call never sent;
p50 / p99 over the calls that started in the first window, and over the later
ones. **Held, then unsent** counts calls held at least %v that the broker then
ended without a send (gate closed past their deadline, deadline too short,
...), with the longest such hold: reported, not judged, since a gate can close
past a call's deadline while it is held. **Held to the deadline** is the target
"no call held longer than its deadline allows it to still be sent": calls that
got no answer before their deadline, or an answer without a send with less
than %v left. With long deadlines, the calls still held when the run (their
deadline) ends are counted apart, in brackets, and not judged. **Passed over
at reopenings** counts calls held through more than ⌈C/Q⌉ = %d reopenings
(window starts), a call still held at the end counting those until then: at
most C calls wait and Q go at each reopening, so a broker that releases its
held calls in arrival order sends each by its ⌈C/Q⌉th (issue 18: held calls
must not starve behind fresh ones). **Failed RPCs**
are gRPC errors that the caller's own deadline did not cause (UNAVAILABLE, ...); **drained** calls ended
with OUTCOME_SHUTTING_DOWN; provider refusals are the refusal columns. The
last column says how busy the machine was: the 1-minute load average at the
row's end, and the most a call's answer came after its own deadline at the
caller (the caller's gRPC deadline fires late only when the suite's process
could not run).
Targets (issue 18): after the first window ≤ 1 refused per gate per window,
goodput ≥ 95%% and 0 early sends; in the first window ≤ 1 refused for github
and ≤ %d (a quarter of the quota) for retry-after; no call held past the time it
could still be sent; in the rolling restart also 0 broker-caused failed RPCs
and the new replica reporting SharedState SERVING within 3 s of its start.

`, p.Callers, p.Quota, p.Window, p.Windows, p.Window*time.Duration(p.Windows), strings.Join(quotaBrokerConfig.Policy, "; "), p.StopAt, p.Poll, p.ShortDeadline, heldFor, heldFor, herdReopenings(p), p.Quota/4)
	if len(r.HerdRes) > 0 {
		b.WriteString(r.HerdTable(r.HerdRes))
		b.WriteString("\nSide by side (same run):\n\n")
		b.WriteString(r.HerdComparison())
		b.WriteString("\n")
	}
	if len(r.RollingRes) > 0 {
		b.WriteString("Rolling restart:\n\n")
		b.WriteString(r.HerdTable(r.RollingRes))
		b.WriteString("\n")
		b.WriteString(r.RollingTable())
		b.WriteString("\n")
	}
	for _, st := range r.herdStyles() {
		img(herdChartName(st), "refused calls per window, "+string(st))
	}
	b.WriteString("The targets of this section (also in the table of every target above):\n\n| target | measured | met |\n|---|---|---|\n")
	for _, h := range append(append([]HerdResult(nil), r.HerdRes...), r.RollingRes...) {
		for _, t := range r.herdTargets(h) {
			fmt.Fprintf(b, "| %s | %s | %s |\n", t.Name, t.Measured, t.Met)
		}
	}
	b.WriteString("\n")
	if f := r.herdFindings(); len(f) > 0 {
		b.WriteString("What the figures of this section say about the misses:\n\n")
		b.WriteString(bulletList(f))
		b.WriteString("\n")
	}
}

func (r *Report) herdStyles() []fakeprovider.Style {
	var out []fakeprovider.Style
	for _, h := range append(append([]HerdResult(nil), r.HerdRes...), r.RollingRes...) {
		if !containsStyle(out, h.Style) {
			out = append(out, h.Style)
		}
	}
	return out
}

func containsStyle(l []fakeprovider.Style, st fakeprovider.Style) bool {
	for _, x := range l {
		if x == st {
			return true
		}
	}
	return false
}

// herdCharts draws, per style, the refusals of every window, one line per
// row, on a log(1 + y) axis.
func herdCharts(r *Report, dir string) error {
	for _, st := range r.herdStyles() {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("%s: refused calls per window, %d callers, quota %d per %v", st, r.Herd.Callers, r.Herd.Quota, r.Herd.Window)
		p.X.Label.Text = "window (0: the first, where nothing is known before the first answer)"
		p.Y.Label.Text = "refused calls in the window"
		p.Y.Scale, p.Y.Tick.Marker = log1pScale{}, log1pTicks{}
		ymax := 10.0
		i := 0
		for _, h := range append(append([]HerdResult(nil), r.HerdRes...), r.RollingRes...) {
			if h.Style != st || h.Err != "" || len(h.Stats.Windows) == 0 {
				continue
			}
			var xys plotter.XYs
			for _, w := range h.Stats.Windows {
				xys = append(xys, plotter.XY{X: float64(w.Index), Y: float64(w.Refused)})
				ymax = math.Max(ymax, float64(w.Refused))
			}
			l, pts, err := plotter.NewLinePoints(xys)
			if err != nil {
				return err
			}
			l.Color, pts.Color = plotutil.Color(i), plotutil.Color(i)
			l.Dashes = plotutil.Dashes(i)
			pts.Shape = plotutil.Shape(i)
			p.Add(l, pts)
			p.Legend.Add(fmt.Sprintf("%s, %s deadlines", h.Setup, h.Deadline), l, pts)
			i++
		}
		target := plotter.NewFunction(func(float64) float64 { return 1 })
		target.Color = plotutil.Color(i)
		target.Dashes = []vg.Length{vg.Points(2), vg.Points(3)}
		p.Add(target)
		p.Legend.Add("target after the first window: ≤ 1", target)
		p.Legend.Top = true
		p.Y.Min, p.Y.Max = 0, ymax*40 // room for the legend
		p.X.Min, p.X.Max = -0.2, float64(r.Herd.Windows)-0.8
		p.X.Tick.Marker = secondTicks{}
		p.Add(plotter.NewGrid())
		if err := p.Save(9*vg.Inch, 4.5*vg.Inch, filepath.Join(dir, herdChartName(st))); err != nil {
			return err
		}
	}
	return nil
}
