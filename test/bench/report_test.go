package main

import "testing"

func TestRatioTextKeepsSmallRatios(t *testing.T) {
	for _, tc := range []struct {
		r    float64
		want string
	}{{0.0041, "0.0041"}, {0.014, "0.014"}, {0.092, "0.092"}, {0.1, "0.10"}, {0.894, "0.89"}, {11.749, "11.75"}} {
		if got := ratioText(tc.r); got != tc.want {
			t.Errorf("ratioText(%v) = %q, want %q", tc.r, got, tc.want)
		}
	}
}
