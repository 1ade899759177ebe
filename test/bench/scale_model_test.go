package main

import (
	"math"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*max(1, math.Abs(b)) }

// fitLine is the least-squares line, as worked by hand; through one x, the
// flat line at the mean.
func TestFitLineIsLeastSquares(t *testing.T) {
	xs := []float64{0, 1, 2, 4}
	ys := []float64{1 + 0.5, 3 - 0.5, 5 - 0.5, 9 + 0.5} // 1 + 2x, ends up, middle down
	l := fitLine(xs, ys)
	// By hand: mean x 1.75, mean y 4.5; Sxx 8.75, Sxy 18.
	if wantB := 18 / 8.75; !near(l.B, wantB) || !near(l.A, 4.5-wantB*1.75) {
		t.Fatalf("fitLine = %+v, want B %v", l, wantB)
	}
	if l := fitLine([]float64{3, 3}, []float64{1, 2}); l.A != 1.5 || l.B != 0 {
		t.Fatalf("one x: %+v", l)
	}
}

// A falling fit is taken as noise: the flat line at the mean instead.
func TestFitRisingNeverFalls(t *testing.T) {
	if l := fitRising([]float64{0, 1, 2, 4}, []float64{10, 9, 9.5, 8.5}); l.B != 0 || !near(l.A, 9.25) {
		t.Fatalf("falling points: %+v, want the flat line at 9.25", l)
	}
	if l := fitRising([]float64{0, 1}, []float64{1, 2}); l.A != 1 || l.B != 1 {
		t.Fatalf("rising points: %+v", l)
	}
}

// The model fitted on N ≤ 4 of data made by a known model has its
// coefficients, predicts its N = 8 and 64, and finds its saturation.
func TestFitScaleRecoversASyntheticModel(t *testing.T) {
	want := scaleModel{
		Idle: line{0.5, 0.15}, Write: line{2, 0.1}, Round: line{0.05, 0.004},
		Rounds: map[string]line{scaleReadsOwn: line{0.2, 0.1}, scaleReadsHub: line{0.3, 0}},
	}
	var pts []scalePoint
	for _, n := range []float64{0, 1, 2, 4, 8} {
		p := scalePoint{N: n, IdlePct: want.Idle.at(n), WritePer10k: want.Write.at(n), RoundMs: map[string]float64{}, RoundsPerRead: map[string]float64{}}
		if n > 0 {
			for mode, l := range want.Rounds {
				p.RoundMs[mode], p.RoundsPerRead[mode] = want.Round.at(n), l.at(n)
			}
		}
		if n == 8 { // not fitted on: a wild point changes nothing
			p.IdlePct, p.WritePer10k = 1e6, 1e6
		}
		pts = append(pts, p)
	}
	got := fitScale(pts, 4)
	for _, c := range []struct {
		name      string
		got, want line
	}{{"idle", got.Idle, want.Idle}, {"write", got.Write, want.Write}, {"round", got.Round, want.Round},
		{"own rounds", got.Rounds[scaleReadsOwn], want.Rounds[scaleReadsOwn]}, {"hub rounds", got.Rounds[scaleReadsHub], want.Rounds[scaleReadsHub]}} {
		if !near(c.got.A, c.want.A) || !near(c.got.B, c.want.B) {
			t.Errorf("%s: fitted %+v, want %+v", c.name, c.got, c.want)
		}
	}
	// At N = 8, own rounds: 0.2+0.8 = 1 round per read, 0.082 ms a round.
	if r := got.ReadPer10k(8, scaleReadsOwn); !near(r, 1e4*1*0.082/1e3) {
		t.Errorf("reads/10k at 8 = %v", r)
	}
	// Rounds per read are held at 1: at 64, one round per read still.
	if r := got.ReadPer10k(64, scaleReadsOwn); !near(r, 1e4*(0.05+0.004*64)/1e3) {
		t.Errorf("reads/10k at 64 = %v", r)
	}
	// 100 puts/s and 1000 hub reads/s: 0.5+0.15n + 100·(100·(2+0.1n) + 1000·10·0.3·(0.05+0.004n)/1e3... )/1e4
	pct := func(n float64) float64 {
		return 0.5 + 0.15*n + 100*(100*(2+0.1*n)+1000*1e4*0.3*(0.05+0.004*n)/1e3)/1e4
	}
	n, ok := got.Saturation(100, 1000, scaleReadsHub, 10000)
	if !ok || pct(float64(n)) < 100 || pct(float64(n-1)) >= 100 {
		t.Fatalf("saturation at %d (%v): %.2f %% there, %.2f %% one before", n, ok, pct(float64(n)), pct(float64(n-1)))
	}
	if _, ok := got.Saturation(0, 0, scaleReadsHub, 10); ok {
		t.Fatalf("an idle leader saturates at 10 replicas")
	}
}
