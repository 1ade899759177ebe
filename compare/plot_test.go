package compare

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/understudy-kv/understudy/config"
)

func TestPlotsHaveOneSeriesPerPath(t *testing.T) {
	for _, tc := range []struct {
		name string
		lag  func(i int) time.Duration
	}{
		{"paths apart", func(i int) time.Duration { return time.Duration(i) * 20 * msec }},
		// The worst case for the eye: every series on top of the others.
		{"paths on top of each other", func(int) time.Duration { return 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := synthetic(300)
			for i, p := range Paths {
				addReads(h, p, 0, tc.lag(i))
			}
			cfg := config.DefaultCompare()
			cfg.Fault = config.FaultReplicaPartition
			a := Analyze(cfg, h, time.Second, 2*time.Second)
			dir := t.TempDir()
			if err := a.Plots(dir); err != nil {
				t.Fatal(err)
			}
			for _, name := range PlotFiles {
				if err := CheckPlot(filepath.Join(dir, name), Paths); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// The check fails when a path has no series: here the mirror answered no
// read, so its legend entry says so and nothing is drawn in its colour.
func TestCheckPlotFailsWithoutAPathsSeries(t *testing.T) {
	h := synthetic(300)
	for _, p := range Paths[:len(Paths)-1] {
		addReads(h, p, 0, 0)
	}
	a := Analyze(config.DefaultCompare(), h, 0, 0)
	dir := t.TempDir()
	if err := a.Plots(dir); err != nil {
		t.Fatal(err)
	}
	for _, name := range PlotFiles {
		err := CheckPlot(filepath.Join(dir, name), Paths)
		if err == nil || !strings.Contains(err.Error(), "mirror") {
			t.Fatalf("%s without a mirror series: CheckPlot = %v, want an error about the mirror", name, err)
		}
	}
}
