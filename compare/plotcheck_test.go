package compare_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/understudy-kv/understudy/compare"
	"github.com/understudy-kv/understudy/config"
	"github.com/understudy-kv/understudy/test/plotcheck"
)

func TestPlotsHaveOneSeriesPerPath(t *testing.T) {
	const msec = time.Millisecond
	for _, tc := range []struct {
		name string
		lag  func(i int) time.Duration
	}{
		{"paths apart", func(i int) time.Duration { return time.Duration(i) * 20 * msec }},
		// The worst case for the eye: every series on top of the others.
		{"paths on top of each other", func(int) time.Duration { return 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := compare.Synthetic(300)
			for i, p := range compare.Paths {
				compare.AddReads(h, p, 0, tc.lag(i))
			}
			cfg := config.DefaultCompare()
			cfg.Fault = config.FaultReplicaPartition
			a := compare.Analyze(cfg, h, time.Second, 2*time.Second)
			dir := t.TempDir()
			if err := a.Plots(dir); err != nil {
				t.Fatal(err)
			}
			for _, name := range compare.PlotFiles {
				if err := plotcheck.Check(filepath.Join(dir, name), compare.Paths); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// The check fails when a path has no series: here the mirror answered no
// read, so its legend entry says so and nothing is drawn in its colour.
func TestCheckPlotFailsWithoutAPathsSeries(t *testing.T) {
	h := compare.Synthetic(300)
	for _, p := range compare.Paths[:len(compare.Paths)-1] {
		compare.AddReads(h, p, 0, 0)
	}
	a := compare.Analyze(config.DefaultCompare(), h, 0, 0)
	dir := t.TempDir()
	if err := a.Plots(dir); err != nil {
		t.Fatal(err)
	}
	for _, name := range compare.PlotFiles {
		err := plotcheck.Check(filepath.Join(dir, name), compare.Paths)
		if err == nil || !strings.Contains(err.Error(), "mirror") {
			t.Fatalf("%s without a mirror series: plotcheck.Check = %v, want an error about the mirror", name, err)
		}
	}
}
