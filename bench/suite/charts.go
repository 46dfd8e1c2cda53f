package suite

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/retrybroker/retrybroker/bench/fakeprovider"
)

// drawCharts writes the PNG charts of the report into dir.
func drawCharts(r *Report, dir string) error {
	var errs []error
	if len(r.QuotaRes) > 0 {
		errs = append(errs,
			quotaChart(r, filepath.Join(dir, ChartGoodput), "Goodput: accepted calls / (quota × windows), whole run", "goodput (% of quota)",
				func(q QuotaResult) float64 { return 100 * q.Goodput() }, 95, "target 95%", "%.0f"),
			quotaChart(r, filepath.Join(dir, ChartWaste), "Waste: refused calls per window, after the first window", "refused calls per window",
				func(q QuotaResult) float64 { return q.Later().RefusedPerWindow() }, 1, "target ≤ 1 (rows b, c, c-cluster, d-cluster)", "%.1f"))
	}
	if len(r.OutageRes) > 0 {
		errs = append(errs, outageChart(r, filepath.Join(dir, ChartOutage)))
	}
	if len(r.HerdRes)+len(r.RollingRes) > 0 {
		errs = append(errs, herdCharts(r, dir))
	}
	if len(r.OverRes) > 0 {
		errs = append(errs,
			latencyChart(r, filepath.Join(dir, ChartLatencyClassify), "ClassifyResponse latency", "classify"),
			latencyChart(r, filepath.Join(dir, ChartLatencyExecute), "Execute latency", "execute"),
			ratioChart(r, filepath.Join(dir, ChartRatio)))
	}
	return errors.Join(errs...)
}

// quotaChart draws one bar per (row, callers, style): rows and their
// numbers of callers on the X axis, styles as bar groups, with a
// horizontal target line.
func quotaChart(r *Report, path, title, ylabel string, value func(QuotaResult) float64, target float64, targetLabel string, format string) error {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = ylabel
	short := map[Row]string{
		RowRetryableHTTP: "a: own retries", RowOneBroker: "b: 1 broker", RowRedis3: "c: 3 + Redis", RowMemory3: "d: 3 × memory",
		RowClusterShared: "c: 3 + cluster", RowClusterSeeds: "d: 3 + cluster\n(1 seed each)",
	}
	type group struct {
		row     Row
		callers int
	}
	var groups []group
	var names []string
	for _, n := range r.quotaCallers() {
		for _, row := range Rows {
			for _, q := range r.QuotaRes {
				if q.Row == row && q.Callers == n {
					groups = append(groups, group{row, n})
					names = append(names, fmt.Sprintf("%s\n%d callers", short[row], n))
					break
				}
			}
		}
	}
	styles := r.quotaStyles()
	width := vg.Points(14)
	ymax := target
	for i, st := range styles {
		vals := make(plotter.Values, len(groups))
		var lab plotter.XYLabels
		for j, g := range groups {
			if q, ok := r.quotaResult(st, g.row, g.callers); ok {
				vals[j] = value(q)
				ymax = math.Max(ymax, vals[j])
				lab.XYs = append(lab.XYs, plotter.XY{X: float64(j), Y: vals[j]})
				lab.Labels = append(lab.Labels, fmt.Sprintf(format, vals[j]))
			}
		}
		bars, err := plotter.NewBarChart(vals, width)
		if err != nil {
			return err
		}
		bars.LineStyle.Width = vg.Length(0)
		bars.Color = plotutil.Color(i)
		bars.Offset = vg.Length(float64(i)-float64(len(styles)-1)/2) * width
		p.Add(bars)
		p.Legend.Add(string(st), bars)
		if len(lab.XYs) > 0 {
			labels, err := plotter.NewLabels(lab)
			if err != nil {
				return err
			}
			for k := range labels.TextStyle {
				labels.TextStyle[k].Font.Size = vg.Points(7)
				labels.TextStyle[k].XAlign = draw.XCenter
			}
			labels.Offset = vg.Point{X: bars.Offset, Y: vg.Points(2)}
			p.Add(labels)
		}
	}
	line := plotter.NewFunction(func(float64) float64 { return target })
	line.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	line.Color = plotutil.Color(len(fakeprovider.Styles) + 1)
	p.Add(line)
	p.Legend.Add(targetLabel, line)
	p.Legend.Top = true
	p.NominalX(names...)
	p.Y.Min = 0
	p.Y.Max = ymax * 1.4 // room for the legend
	p.X.Min, p.X.Max = -0.6, float64(len(groups))-0.4
	p.Add(plotter.NewGrid())
	return p.Save(vg.Length(max(8, 1.3*float64(len(groups))))*vg.Inch, 4.5*vg.Inch, path)
}

// latencyChart draws p50 and p99 against concurrency for every variant of
// a group, on log-log axes.
func latencyChart(r *Report, path, title, group string) error {
	p := plot.New()
	p.Title.Text = title + " against concurrency (p50 solid, p99 dashed)"
	p.X.Label.Text = "concurrent callers"
	p.Y.Label.Text = "latency (ms)"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
	var variants []string
	seen := map[string]bool{}
	for _, o := range r.OverRes {
		if o.Group == group && !seen[o.Variant] {
			seen[o.Variant] = true
			variants = append(variants, o.Variant)
		}
	}
	for i, v := range variants {
		var p50, p99 plotter.XYs
		for _, o := range r.OverRes {
			if o.Variant == v && o.P50 > 0 {
				p50 = append(p50, plotter.XY{X: float64(o.Concurrency), Y: ms(o.P50)})
				p99 = append(p99, plotter.XY{X: float64(o.Concurrency), Y: ms(o.P99)})
			}
		}
		if len(p50) == 0 {
			continue
		}
		l50, s50, err := plotter.NewLinePoints(p50)
		if err != nil {
			return err
		}
		l99, s99, err := plotter.NewLinePoints(p99)
		if err != nil {
			return err
		}
		c := plotutil.Color(i)
		l50.Color, s50.Color, l99.Color, s99.Color = c, c, c, c
		s50.Shape, s99.Shape = draw.CircleGlyph{}, draw.TriangleGlyph{}
		l99.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(l50, s50, l99, s99)
		p.Legend.Add(v, l50, s50)
	}
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	return p.Save(8*vg.Inch, 4.5*vg.Inch, path)
}

func ms(d interface{ Seconds() float64 }) float64 { return d.Seconds() * 1000 }

// ratioChart draws broker / baseline throughput against concurrency, with
// the targets.
func ratioChart(r *Report, path string) error {
	p := plot.New()
	p.Title.Text = "Throughput ratio against concurrency (same run, alternating rounds)"
	p.X.Label.Text = "concurrent callers"
	p.Y.Label.Text = "broker / baseline throughput (%)"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	series := []struct {
		name, v, base string
		target        float64
	}{
		{"ClassifyResponse / empty handler (target 90%)", VarClassify, VarEmpty, 90},
		{"Execute / minimal forwarder (target 90% at 1 caller, 85% above)", VarExecute, VarForwarder, 85},
		{"Execute / direct HTTP", VarExecute, VarDirect, 0},
	}
	ymax := 100.0
	for i, s := range series {
		var xys plotter.XYs
		for _, c := range r.Overhead.Concurrency {
			if x, ok := r.ThroughputRatio(s.v, s.base, c); ok {
				xys = append(xys, plotter.XY{X: float64(c), Y: 100 * x})
				ymax = math.Max(ymax, 100*x)
			}
		}
		if len(xys) == 0 {
			continue
		}
		l, sc, err := plotter.NewLinePoints(xys)
		if err != nil {
			return err
		}
		l.Color, sc.Color = plotutil.Color(i), plotutil.Color(i)
		p.Add(l, sc)
		p.Legend.Add(s.name, l, sc)
		if s.target > 0 {
			t := s.target
			f := plotter.NewFunction(func(float64) float64 { return t })
			f.Color = plotutil.Color(i)
			f.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			p.Add(f)
		}
	}
	p.Y.Min, p.Y.Max = 0, ymax*1.1
	p.Legend.Top, p.Legend.Left = false, true
	p.Legend.YOffs = vg.Points(0)
	p.Add(plotter.NewGrid())
	if len(r.Overhead.Concurrency) > 0 {
		p.X.Min = float64(r.Overhead.Concurrency[0]) / 1.5
		p.X.Max = float64(r.Overhead.Concurrency[len(r.Overhead.Concurrency)-1]) * 1.5
	}
	if err := p.Save(8*vg.Inch, 4.5*vg.Inch, path); err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return nil
}
