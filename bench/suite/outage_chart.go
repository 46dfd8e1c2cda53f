package suite

import (
	"fmt"
	"image/color"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// ChartOutage is the outage chart's file name, in ChartDir.
const ChartOutage = "outage-arrivals.png"

// log1pScale is a plot.Normalizer on log(1 + y): logarithmic for large
// values, yet 0 has a place (at the bottom), so that the quiet time of an
// open breaker and a herd of hundreds fit on one readable axis.
type log1pScale struct{}

// Normalize maps x in [lo, hi] to [0, 1] on log(1 + x).
func (log1pScale) Normalize(lo, hi, x float64) float64 {
	a, b := math.Log1p(max(lo, 0)), math.Log1p(max(hi, 0))
	if b == a {
		return 0
	}
	return (math.Log1p(max(x, 0)) - a) / (b - a)
}

// log1pTicks marks 0 and the powers of ten with labels, and 2 and 5 times
// them without.
type log1pTicks struct{}

// Ticks returns the ticks in [lo, hi].
func (log1pTicks) Ticks(lo, hi float64) []plot.Tick {
	var out []plot.Tick
	if lo <= 0 {
		out = append(out, plot.Tick{Value: 0, Label: "0"})
	}
	for p := 1.0; p <= hi; p *= 10 {
		for _, m := range []float64{1, 2, 5} {
			v := m * p
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 {
				t.Label = strconv.FormatFloat(v, 'f', -1, 64)
			}
			out = append(out, t)
		}
	}
	return out
}

// outageChart draws the calls reaching the upstream per second against
// time, one step line per setup, with the outage shaded and the breaker's
// recovery target marked.
func outageChart(r *Report, path string) error {
	p := plot.New()
	o := r.Outage
	p.Title.Text = fmt.Sprintf("Outage: calls reaching the upstream per second (%.0f new calls/s; 503 with no hint during the shaded %v)", o.Rate, o.Outage)
	p.X.Label.Text = "seconds since the outage began"
	p.Y.Label.Text = fmt.Sprintf("calls reaching the upstream per second (%v bins)", o.Bin)
	p.Y.Scale, p.Y.Tick.Marker = log1pScale{}, log1pTicks{}
	ymax := 10.0
	for _, res := range r.OutageRes {
		for _, n := range res.Bins {
			ymax = math.Max(ymax, float64(n)/o.Bin.Seconds())
		}
	}
	ymax *= 3 // room for the legend
	xmin, xmax := -o.Warmup.Seconds(), (o.Outage + o.Recovery).Seconds()

	shade, err := plotter.NewPolygon(plotter.XYs{{X: 0, Y: 0}, {X: o.Outage.Seconds(), Y: 0}, {X: o.Outage.Seconds(), Y: ymax}, {X: 0, Y: ymax}})
	if err != nil {
		return err
	}
	shade.Color = color.Gray{Y: 230}
	shade.LineStyle.Width = 0
	p.Add(shade)
	p.Add(plotter.NewGrid())

	for i, res := range r.OutageRes {
		if res.Err != "" || len(res.Bins) == 0 {
			continue
		}
		xys := make(plotter.XYs, 0, len(res.Bins)+1)
		for k, n := range res.Bins {
			xys = append(xys, plotter.XY{X: xmin + float64(k)*o.Bin.Seconds(), Y: float64(n) / o.Bin.Seconds()})
		}
		xys = append(xys, plotter.XY{X: xmin + float64(len(res.Bins))*o.Bin.Seconds(), Y: xys[len(xys)-1].Y})
		l, err := plotter.NewLine(xys)
		if err != nil {
			return err
		}
		l.StepStyle = plotter.PostStep
		l.Color = plotutil.Color(i)
		l.Width = vg.Points(1.5)
		l.Dashes = plotutil.Dashes(i)
		p.Add(l)
		name := string(res.Setup)
		if res.Setup == OutageRetryableHTTP {
			name = "a: go-retryablehttp callers"
		}
		p.Legend.Add(fmt.Sprintf("%s: %d calls during the outage", name, res.Stats.During), l)
	}
	by := (o.Outage + 2*o.OpenFor).Seconds()
	mark, err := plotter.NewLine(plotter.XYs{{X: by, Y: 0}, {X: by, Y: ymax}})
	if err != nil {
		return err
	}
	mark.Color = color.Gray{Y: 90}
	mark.Dashes = []vg.Length{vg.Points(2), vg.Points(3)}
	p.Add(mark)
	p.Legend.Add(fmt.Sprintf("recovery + 2 × open_for (%v): the breaker's first success by then", 2*o.OpenFor), mark)
	p.Legend.Top, p.Legend.Left = true, false
	p.Y.Min, p.Y.Max = 0, ymax
	p.X.Min, p.X.Max = xmin, xmax
	p.X.Tick.Marker = secondTicks{}
	return p.Save(10*vg.Inch, 5*vg.Inch, path)
}

// secondTicks marks whole seconds: every second over spans up to 12 s,
// every 2 s beyond, labelled.
type secondTicks struct{}

// Ticks returns the ticks in [lo, hi].
func (secondTicks) Ticks(lo, hi float64) []plot.Tick {
	step := 1.0
	if hi-lo > 12 {
		step = 2
	}
	var out []plot.Tick
	for v := math.Ceil(lo/step) * step; v <= hi; v += step {
		if v == 0 {
			v = 0 // not -0
		}
		out = append(out, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', -1, 64)})
	}
	return out
}
