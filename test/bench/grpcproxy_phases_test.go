package main

import (
	"math"
	"testing"
)

// TestHistQuantile: quantiles interpolate within the bucket that holds
// their rank, as Prometheus' histogram_quantile does, and a window's
// histogram is its end's less its start's.
func TestHistQuantile(t *testing.T) {
	start := hist{bounds: []float64{1, 2, 4, math.Inf(1)}, counts: []float64{5, 5, 5, 5}, n: 5}
	// 10 more samples: 2 in (0,1], 4 in (1,2], 4 in (2,4].
	end := hist{bounds: start.bounds, counts: []float64{7, 11, 15, 15}, n: 15}
	w := end.minus(start)
	for _, c := range []struct{ q, want float64 }{
		{0.1, 0.5},  // rank 1 of 2 in (0,1]
		{0.5, 1.75}, // rank 5: 3 of 4 in (1,2]
		{0.9, 3.5},  // rank 9: 3 of 4 in (2,4]
		{1, 4},
	} {
		if got := w.quantile(c.q); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("quantile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
	if got := w.plus(w).quantile(0.5); math.Abs(got-1.75) > 1e-9 {
		t.Errorf("two windows' median = %v, want 1.75", got)
	}
	if got := (hist{}).quantile(0.5); !math.IsNaN(got) {
		t.Errorf("no samples: %v, want NaN", got)
	}
}
