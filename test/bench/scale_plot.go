package main

import (
	"fmt"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// scalePlotDir is where the scale scenario's plot goes, under the
// report's docs directory.
func scalePlotDir(docs string) string { return filepath.Join(docs, "scaling") }

// scalePlotFile is the plot's file name without its extension.
const scalePlotFile = "leader-cpu"

// scalePlotMaxN is how far the model's lines are drawn.
const scalePlotMaxN = 64

// scalePlot writes into dir the leader's CPU against N, measured (points)
// and modelled (lines, fitted on N ≤ scaleFitN), idle, at the run's put
// rate and at its strong-read rate in each mode, as PNG and SVG.
func scalePlot(dir string, rows []Row) error {
	byName := map[string]Row{}
	for _, r := range rows {
		byName[r.Name] = r
	}
	p, err := scaleLeaderPlot(byName)
	if err != nil {
		return fmt.Errorf("scale plot: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("scale plot: %w", err)
	}
	return savePlot(p, 20*vg.Centimeter, 12*vg.Centimeter, filepath.Join(dir, scalePlotFile))
}

// scaleSeries is one quantity of the plot: its measured leader CPU (% of
// a core) at a row's N, and the model's.
type scaleSeries struct {
	label    string
	measured func(n int) (float64, bool)
	model    func(n float64) float64
}

func scaleLeaderPlot(byName map[string]Row) (*plot.Plot, error) {
	m := fitScale(scalePoints(byName), scaleFitN)
	puts, reads := scaleRates(byName)
	busy := func(kind string) func(n int) (float64, bool) {
		return func(n int) (float64, bool) {
			r, ok := byName[scaleName(n, kind)]
			if !ok || r.Seconds == 0 {
				return 0, false
			}
			return 100 * r.CPU["leader"] / r.Seconds, true
		}
	}
	series := []scaleSeries{
		{"idle", busy(scaleIdleReplicas), m.Idle.at},
		{fmt.Sprintf("%.0f puts/s", puts), busy(scaleWritesReplicas), func(n float64) float64 { return m.LeaderPct(n, puts, 0, scaleReadsOwn) }},
		{fmt.Sprintf("%.0f strong reads/s, own rounds", reads), busy(scaleReadsOwn), func(n float64) float64 { return m.LeaderPct(n, 0, reads, scaleReadsOwn) }},
		{fmt.Sprintf("%.0f strong reads/s, one hub", reads), busy(scaleReadsHub), func(n float64) float64 { return m.LeaderPct(n, 0, reads, scaleReadsHub) }},
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Leader CPU against N replicas: measured (points), model fitted on N ≤ %d (lines)", scaleFitN)
	p.X.Label.Text = "N replicas (log scale)"
	p.Y.Label.Text = "leader CPU, % of a core (log scale)"
	// Log scales: N from 1 (N = 0, the base, is in the report's tables),
	// CPU from a tenth of a percent to ten cores, where a line is cut.
	const yMin, yMax = 0.1, 1000
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 1, scalePlotMaxN, yMin, yMax
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	var xt []plot.Tick
	for n := 1; n <= scalePlotMaxN; n *= 2 {
		xt = append(xt, plot.Tick{Value: float64(n), Label: fmt.Sprint(n)})
	}
	p.X.Tick.Marker = plot.ConstantTicks(xt)
	p.Y.Tick.Marker = plot.ConstantTicks([]plot.Tick{{Value: 0.1, Label: "0.1"}, {Value: 1, Label: "1"}, {Value: 10, Label: "10"}, {Value: 100, Label: "100 (one core)"}, {Value: 1000, Label: "1000"}})
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	clamp := func(y float64) float64 { return min(max(y, yMin), yMax) }
	for i, s := range series {
		var pts, curve plotter.XYs
		for _, n := range scaleNs[1:] {
			if y, ok := s.measured(n); ok {
				pts = append(pts, plotter.XY{X: float64(n), Y: clamp(y)})
			}
		}
		for n := 1; n <= scalePlotMaxN; n++ {
			curve = append(curve, plotter.XY{X: float64(n), Y: clamp(s.model(float64(n)))})
		}
		col := rttColors[i%len(rttColors)]
		if i == 3 {
			col.R, col.G, col.B = 0x94, 0x67, 0xbd
		}
		l, err := plotter.NewLine(curve)
		if err != nil {
			return nil, err
		}
		l.Color, l.Width = col, vg.Points(1.4)
		p.Add(l)
		if len(pts) == 0 {
			p.Legend.Add(s.label+" (not measured)", l)
			continue
		}
		sc, err := plotter.NewScatter(pts)
		if err != nil {
			return nil, err
		}
		sc.Color, sc.Radius = col, vg.Points(3)
		p.Add(sc)
		p.Legend.Add(s.label, l, sc)
	}
	return p, nil
}
