package compare

import (
	"fmt"
	"image/color"
	"io"
	"path/filepath"
	"slices"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
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
	PathCascadedStrong: {R: 0x17, G: 0xbe, B: 0xcf, A: 0xff},
	PathCascadedWeak:   {R: 0xbc, G: 0xbd, B: 0x22, A: 0xff},
	PathMirror:         {R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
}

// faultShade fills the fault's window.
var faultShade = color.RGBA{R: 0xe0, G: 0xe0, B: 0xe0, A: 0xff}

// PathColor is the colour of p's series in the plots.
func PathColor(p Path) color.RGBA { return pathColors[p] }

// FaultShade is the colour that shades the fault's window in the plots.
func FaultShade() color.RGBA { return faultShade }

// figure is a plot, or a column of plots sharing an x axis.
type figure [][]*plot.Plot

const figWidth = 20 * vg.Centimeter

// Plots writes, into dir, the distribution of staleness per path (as a
// cumulative distribution) and staleness over time per path (a panel
// each, the fault's window shaded), each as PNG and SVG.
func (a *Analysis) Plots(dir string) error {
	for name, build := range map[string]func() (figure, vg.Length, error){
		"staleness-cdf":  a.cdfPlot,
		"staleness-time": a.timePlot,
	} {
		fig, height, err := build()
		if err != nil {
			return fmt.Errorf("compare: plot %s: %w", name, err)
		}
		png := vgimg.PngCanvas{Canvas: vgimg.New(figWidth, height)}
		svg := vgsvg.New(figWidth, height)
		for ext, c := range map[string]interface {
			vg.CanvasSizer
			io.WriterTo
		}{".png": png, ".svg": svg} {
			fig.draw(c)
			if err := writeFile(filepath.Join(dir, name+ext), func(w io.Writer) error { _, err := c.WriteTo(w); return err }); err != nil {
				return err
			}
		}
	}
	return nil
}

func (f figure) draw(c vg.CanvasSizer) {
	dc := draw.New(c)
	if len(f) == 1 {
		f[0][0].Draw(dc)
		return
	}
	tiles := draw.Tiles{Rows: len(f), Cols: 1, PadY: vg.Millimeter, PadTop: vg.Millimeter, PadBottom: vg.Millimeter, PadLeft: vg.Millimeter, PadRight: 3 * vg.Millimeter}
	cs := plot.Align(f, tiles, dc)
	for i := range f {
		f[i][0].Draw(cs[i][0])
	}
}

// maxStaleness is the largest staleness paths saw, at least 1 ms so that
// axes have a width.
func (a *Analysis) maxStaleness(paths ...Path) float64 {
	m := 1.0
	for _, p := range paths {
		for _, s := range a.Samples[p] {
			m = max(m, s.StalenessMS)
		}
	}
	return m
}

func (a *Analysis) cdfPlot() (figure, vg.Length, error) {
	p := plot.New()
	p.Title.Text = "Staleness at read time, per path (cumulative)"
	p.X.Label.Text = fmt.Sprintf("staleness (ms, log scale; a read that missed nothing is drawn at %g)", cdfFloor)
	p.Y.Label.Text = "fraction of reads at most this stale"
	p.Y.Min, p.Y.Max = 0, 1.02
	paths := a.paths()
	xmax := a.maxStaleness(paths...) * 1.2
	p.X.Min, p.X.Max = cdfFloor, xmax
	p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	p.Legend.Top, p.Legend.Left = false, false
	p.Legend.YOffs = vg.Centimeter
	p.Add(plotter.NewGrid())
	for i, path := range paths {
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
		if len(pts) == 0 {
			p.Legend.Add(string(path) + " (no successful read)")
			continue
		}
		pts = append(pts, plotter.XY{X: xmax, Y: 1})
		l, err := plotter.NewLine(pts)
		if err != nil {
			return nil, 0, err
		}
		l.Color = pathColors[path]
		// Paths that never lag draw on top of each other: each is
		// narrower than the one before, so all show, nested.
		l.Width = vg.Points(1.2 + 2.5*float64(len(paths)-1-i))
		p.Add(l)
		p.Legend.Add(string(path), l)
	}
	return figure{{p}}, 11 * vg.Centimeter, nil
}

func (a *Analysis) timePlot() (figure, vg.Length, error) {
	var fig figure
	paths := a.paths()
	for i, path := range paths {
		p := plot.New()
		p.Title.Text = string(path)
		p.Title.TextStyle.Font.Size = vg.Points(10)
		p.Title.Padding = 0
		if i == 0 {
			p.Title.Text = fmt.Sprintf("Staleness over time (ms; the stalest successful read in each %v)\n%s", timeBucket, path)
		}
		if i == len(paths)-1 {
			p.X.Label.Text = "seconds since the start of the workload"
		}
		ymax := a.maxStaleness(path) * 1.1
		p.Y.Min, p.Y.Max = 0, ymax
		p.X.Min, p.X.Max = 0, a.Config.DurationS
		if a.FaultTo > a.FaultFrom {
			from, to := a.FaultFrom.Seconds(), a.FaultTo.Seconds()
			shade, err := plotter.NewPolygon(plotter.XYs{{X: from, Y: 0}, {X: to, Y: 0}, {X: to, Y: ymax}, {X: from, Y: ymax}})
			if err != nil {
				return nil, 0, err
			}
			shade.Color = faultShade
			shade.LineStyle.Width = 0
			p.Add(shade)
			if i == 0 {
				p.Legend.Add("fault: "+string(a.Config.Fault), shade)
				p.Legend.Top = true
			}
		}
		p.Add(plotter.NewGrid())
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
		if len(pts) == 0 {
			p.Title.Text += " (no successful read)"
		} else {
			// Points, not a line: where a path answered no read there is
			// no point, rather than a line drawn across the gap.
			sc, err := plotter.NewScatter(pts)
			if err != nil {
				return nil, 0, err
			}
			sc.GlyphStyle.Color = pathColors[path]
			sc.GlyphStyle.Radius = vg.Points(1.6)
			sc.GlyphStyle.Shape = draw.CircleGlyph{}
			p.Add(sc)
		}
		fig = append(fig, []*plot.Plot{p})
	}
	return fig, vg.Length(len(paths)) * 4 * vg.Centimeter, nil
}

// paths are the paths the analysis has reports of, in report order.
func (a *Analysis) paths() []Path {
	out := make([]Path, len(a.Paths))
	for i, p := range a.Paths {
		out[i] = p.Path
	}
	return out
}
