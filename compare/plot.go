package compare

import (
	"fmt"
	"image/color"
	"path/filepath"
	"slices"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// PlotFiles are the plots WriteFiles writes, each as .png and .svg.
var PlotFiles = []string{"staleness-cdf", "staleness-time"}

// cdfFloor is where the distribution's logarithmic axis starts, in ms.
const cdfFloor = 0.1

// timeBucket is the width of a point of the staleness-over-time plot: the
// stalest read sent within it.
const timeBucket = 100 * time.Millisecond

// pathColors gives each path its colour in every plot: tests find a
// path's series by it.
var pathColors = map[Path]color.RGBA{
	PathLeader:         {R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	PathReplicaStrong:  {R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	PathReplicaWeak:    {R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	PathReplicaBounded: {R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
	PathMirror:         {R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
}

// faultShade fills the fault's window.
var faultShade = color.RGBA{R: 0xe0, G: 0xe0, B: 0xe0, A: 0xff}

// PathColor is the colour of p's series in the plots.
func PathColor(p Path) color.RGBA { return pathColors[p] }

// Plots writes, into dir, the distribution of staleness per path (as a
// cumulative distribution) and staleness over time per path with the
// fault's window shaded, each as PNG and SVG.
func (a *Analysis) Plots(dir string) error {
	for name, build := range map[string]func() (*plot.Plot, error){
		"staleness-cdf":  a.cdfPlot,
		"staleness-time": a.timePlot,
	} {
		p, err := build()
		if err != nil {
			return fmt.Errorf("compare: plot %s: %w", name, err)
		}
		for _, ext := range []string{".png", ".svg"} {
			if err := p.Save(20*vg.Centimeter, 11*vg.Centimeter, filepath.Join(dir, name+ext)); err != nil {
				return fmt.Errorf("compare: plot %s: %w", name+ext, err)
			}
		}
	}
	return nil
}

// maxStaleness is the largest staleness any path saw, at least 1 ms so
// that axes have a width.
func (a *Analysis) maxStaleness() float64 {
	m := 1.0
	for _, ss := range a.Samples {
		for _, s := range ss {
			m = max(m, s.StalenessMS)
		}
	}
	return m
}

func (a *Analysis) cdfPlot() (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Staleness at read time, per path (cumulative)"
	p.X.Label.Text = fmt.Sprintf("staleness (ms, log scale; a read that missed nothing is drawn at %g)", cdfFloor)
	p.Y.Label.Text = "fraction of reads at most this stale"
	p.Y.Min, p.Y.Max = 0, 1.02
	xmax := a.maxStaleness() * 1.2
	p.X.Min, p.X.Max = cdfFloor, xmax
	p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	p.Legend.Top, p.Legend.Left = false, false
	p.Legend.YOffs = -vg.Centimeter
	for i, path := range Paths {
		vs := make([]float64, 0, len(a.Samples[path]))
		for _, s := range a.Samples[path] {
			vs = append(vs, max(s.StalenessMS, cdfFloor))
		}
		slices.Sort(vs)
		// A step function: at each distinct value, up from the fraction
		// below it to the fraction at most it.
		var pts plotter.XYs
		below := 0.0
		for j, v := range vs {
			if j+1 < len(vs) && vs[j+1] == v {
				continue // the last of a run of equal values
			}
			y := float64(j+1) / float64(len(vs))
			if len(pts) == 0 {
				pts = append(pts, plotter.XY{X: cdfFloor, Y: 0})
			}
			pts = append(pts, plotter.XY{X: v, Y: below}, plotter.XY{X: v, Y: y})
			below = y
		}
		if len(pts) > 0 {
			pts = append(pts, plotter.XY{X: xmax, Y: 1})
		}
		if err := addLine(p, path, pts, i); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func (a *Analysis) timePlot() (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Staleness over time, per path (the stalest successful read in each %v)", timeBucket)
	p.X.Label.Text = "seconds since the start of the workload"
	p.Y.Label.Text = "staleness (ms)"
	// Headroom above the data for the legend.
	ymax := a.maxStaleness() * 1.45
	p.Y.Min, p.Y.Max = 0, ymax
	p.X.Min, p.X.Max = 0, a.Config.DurationS
	p.Legend.Top, p.Legend.Left = true, true
	if a.FaultTo > a.FaultFrom {
		from, to := a.FaultFrom.Seconds(), a.FaultTo.Seconds()
		shade, err := plotter.NewPolygon(plotter.XYs{{X: from, Y: 0}, {X: to, Y: 0}, {X: to, Y: ymax}, {X: from, Y: ymax}})
		if err != nil {
			return nil, err
		}
		shade.Color = faultShade
		shade.LineStyle.Width = 0
		p.Add(shade)
		p.Legend.Add("fault: "+string(a.Config.Fault), shade)
	}
	for _, path := range Paths {
		buckets := map[int]float64{}
		for _, s := range a.Samples[path] {
			b := int(s.At / timeBucket)
			buckets[b] = max(buckets[b], s.StalenessMS)
		}
		keys := make([]int, 0, len(buckets))
		for b := range buckets {
			keys = append(keys, b)
		}
		slices.Sort(keys)
		var pts plotter.XYs
		for _, b := range keys {
			pts = append(pts, plotter.XY{X: (time.Duration(b) * timeBucket).Seconds(), Y: buckets[b]})
		}
		if err := addScatter(p, path, pts); err != nil {
			return nil, err
		}
	}
	p.Add(plotter.NewGrid())
	return p, nil
}

// addLine adds path's series; a path with no successful read still gets
// its legend entry, saying so.
func addLine(p *plot.Plot, path Path, pts plotter.XYs, i int) error {
	if len(pts) == 0 {
		p.Legend.Add(string(path) + " (no successful read)")
		return nil
	}
	l, err := plotter.NewLine(pts)
	if err != nil {
		return err
	}
	l.Color = pathColors[path]
	l.Width = vg.Points(1.5)
	// Paths that never lag draw on top of each other: dashes tell them
	// apart.
	l.Dashes = [][]vg.Length{nil, {vg.Points(6), vg.Points(3)}, nil, {vg.Points(2), vg.Points(2)}, nil}[i%5]
	p.Add(l)
	p.Legend.Add(string(path), l)
	return nil
}

// addScatter adds path's series as points: where a path answered no read
// there is no point, rather than a line drawn across the gap.
func addScatter(p *plot.Plot, path Path, pts plotter.XYs) error {
	if len(pts) == 0 {
		p.Legend.Add(string(path) + " (no successful read)")
		return nil
	}
	sc, err := plotter.NewScatter(pts)
	if err != nil {
		return err
	}
	sc.GlyphStyle.Color = pathColors[path]
	sc.GlyphStyle.Radius = vg.Points(1.6)
	sc.GlyphStyle.Shape = draw.CircleGlyph{}
	p.Add(sc)
	p.Legend.Add(string(path), sc)
	return nil
}
