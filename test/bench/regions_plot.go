package main

import (
	"fmt"
	"image/color"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// cdfPoints is about the most steps a distribution is drawn with.
const cdfPoints = 1000

// regionPlotFloor is where the latency axis (log scale, ms) starts.
const regionPlotFloor = 0.05

// rttColors give each RTT its colour in every plot, from compare's
// palette (compare/plot.go).
var rttColors = []color.RGBA{
	{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, // RTT 0
	{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, // the first RTT
	{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, // the second
}

// regionPlotFile is the file name (without extension) of path's plot.
func regionPlotFile(path string) string {
	f := strings.NewReplacer(" ", "-", ",", "", "@", "at", "(", "", ")", "").Replace(path)
	return "latency-cdf-" + f
}

// regionPlots writes into dir, for each path, the cumulative distribution
// of its latency at each RTT and concurrency, as PNG and SVG.
func regionPlots(dir string, samples []regionSamples) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("regions plots: %w", err)
	}
	var paths []string
	byPath := map[string][]regionSamples{}
	for _, s := range samples {
		if _, ok := byPath[s.path]; !ok {
			paths = append(paths, s.path)
		}
		byPath[s.path] = append(byPath[s.path], s)
	}
	for _, path := range paths {
		p, err := regionCDF(path, byPath[path])
		if err != nil {
			return fmt.Errorf("regions plot of %s: %w", path, err)
		}
		if err := savePlot(p, 20*vg.Centimeter, 11*vg.Centimeter, filepath.Join(dir, regionPlotFile(path))); err != nil {
			return err
		}
	}
	return nil
}

// savePlot draws p, w by h, to base.png and base.svg.
func savePlot(p *plot.Plot, w, h vg.Length, base string) error {
	png := vgimg.PngCanvas{Canvas: vgimg.New(w, h)}
	svg := vgsvg.New(w, h)
	for ext, c := range map[string]interface {
		vg.CanvasSizer
		io.WriterTo
	}{".png": png, ".svg": svg} {
		p.Draw(draw.New(c))
		if err := writeTo(base+ext, c); err != nil {
			return err
		}
	}
	return nil
}

// regionCDF is path's plot: a step line per RTT and concurrency, solid at
// 32 clients, dashed at 1.
func regionCDF(path string, ss []regionSamples) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Latency from region B: " + path + " (cumulative)"
	p.X.Label.Text = "latency (ms, log scale)"
	p.Y.Label.Text = "fraction of operations at most this slow"
	// Room above 1 for the legend, out of the curves' way: fast paths
	// rise on the left, slow ones on the right.
	p.Y.Min, p.Y.Max = 0, 1.4
	p.Y.Tick.Marker = plot.ConstantTicks([]plot.Tick{{Value: 0, Label: "0"}, {Value: 0.25, Label: "0.25"}, {Value: 0.5, Label: "0.5"}, {Value: 0.75, Label: "0.75"}, {Value: 1, Label: "1"}})
	xmax := 1.0
	for _, s := range ss {
		if len(s.lat) > 0 {
			xmax = max(xmax, ms(s.lat[len(s.lat)-1]))
		}
	}
	xmax *= 1.2
	p.X.Min, p.X.Max = regionPlotFloor, xmax
	p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs = vg.Millimeter
	p.Add(plotter.NewGrid())
	for _, s := range ss {
		label := fmt.Sprintf("%s, %d client", rttName(s.rtt), s.clients)
		if s.clients != 1 {
			label += "s"
		}
		if len(s.lat) == 0 {
			p.Legend.Add(label + " (no successful operation)")
			continue
		}
		l, err := plotter.NewLine(cdfSteps(s.lat, xmax))
		if err != nil {
			return nil, err
		}
		l.Color = rttColors[rttIndex(s.rtt)%len(rttColors)]
		l.Width = vg.Points(1.6)
		if s.clients == 1 {
			l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		}
		p.Add(l)
		p.Legend.Add(label, l)
	}
	return p, nil
}

// cdfSteps is the step function of sorted latencies: at each distinct
// value, up from the fraction below it to the fraction at most it; over
// at most cdfPoints of them, evenly spaced in rank, so that a row of many
// thousand operations draws (and weighs) as much as one of a hundred.
func cdfSteps(sorted []time.Duration, xmax float64) plotter.XYs {
	pts := plotter.XYs{{X: regionPlotFloor, Y: 0}}
	below := 0.0
	step := max(1, len(sorted)/cdfPoints)
	for j, v := range sorted {
		last := j == len(sorted)-1
		if !last && (sorted[j+1] == v || j%step != step-1) {
			continue
		}
		x := max(ms(v), regionPlotFloor)
		y := float64(j+1) / float64(len(sorted))
		pts = append(pts, plotter.XY{X: x, Y: below}, plotter.XY{X: x, Y: y})
		below = y
	}
	return append(pts, plotter.XY{X: xmax, Y: 1})
}

func rttIndex(rtt time.Duration) int {
	for i, r := range regionRTTs {
		if r == rtt {
			return i
		}
	}
	return 0
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// writeTo writes c to the file at path.
func writeTo(path string, c io.WriterTo) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("plot: write %s: %w", path, err)
	}
	return f.Close()
}

// regionsPlotDir is where the regions scenario's plots go: regions/ under
// the report's docs directory in a full run, a directory under the
// system's temporary one in a quick run (its figures are not the ones
// documented).
func regionsPlotDir(docs string, quick bool) string {
	if quick {
		return filepath.Join(os.TempDir(), "understudy-regions-plots")
	}
	return filepath.Join(docs, "regions")
}
