package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// scaleRowsOf are the scale rows a run would write if the leader's costs
// were exactly model's, with windows ±spread about each figure.
func scaleRowsOf(model scaleModel, spread float64) []Row {
	const secs, reads, puts = 10.0, 2000.0, 500.0
	win := func(x float64) []float64 { return []float64{x - spread, x + spread} }
	var rows []Row
	for _, n := range scaleNs {
		f := float64(n)
		idle := model.Idle.at(f)
		rows = append(rows,
			Row{Scenario: scaleID, Name: scaleName(n, scaleIdleReplicas), Windows: win(idle), WindowsMetric: metricLeaderPct, Result: Result{Seconds: secs, CPU: map[string]float64{"leader": idle / 100 * secs}}},
			Row{Scenario: scaleID, Name: scaleName(n, scaleIdleLearners), Windows: win(0.5 + 0.2*f), WindowsMetric: metricLeaderPct, Result: Result{Seconds: secs, CPU: map[string]float64{"leader": (0.5 + 0.2*f) / 100 * secs}}},
			Row{Scenario: scaleID, Name: scaleName(n, scaleWritesReplicas), Result: Result{Ops: int(puts * secs), Seconds: secs, Throughput: puts, CPU: map[string]float64{"leader": model.Write.at(f) * puts * secs / 1e4}}},
		)
		if n == 0 {
			continue
		}
		for _, mode := range []string{scaleReadsOwn, scaleReadsHub, scaleReadsHub4} {
			if (mode == scaleReadsHub && n < 2) || (mode == scaleReadsHub4 && n < 8) {
				continue
			}
			ops := reads * secs
			rounds := model.roundsPerRead(f, mode) * ops
			if mode == scaleReadsHub4 {
				rounds = 2 * model.roundsPerRead(f, scaleReadsHub) * ops
			}
			cpu := idle/100*secs + rounds*model.Round.at(f)/1e3
			per10k := cpu * 1e4 / ops
			rows = append(rows,
				Row{Scenario: scaleID, Name: scaleName(n, mode), Windows: win(per10k), WindowsMetric: "leader CPU/10k", Result: Result{Ops: int(ops), Seconds: secs, Throughput: reads, LeaderRounds: rounds, CPU: map[string]float64{"leader": cpu}}},
				Row{Scenario: scaleID, Name: scaleName(n, scalePartner+mode), Windows: win(0.3), WindowsMetric: "leader CPU/10k", Result: Result{Ops: int(ops), Seconds: secs, Throughput: reads, CPU: map[string]float64{"leader": 0.3 * ops / 1e4}}},
			)
		}
		rows = append(rows,
			Row{Scenario: scaleID, Name: scaleName(n, scaleRSSReplicas), Windows: win(60), WindowsMetric: metricRSS},
			Row{Scenario: scaleID, Name: scaleName(n, scaleRSSLearners), Windows: win(40), WindowsMetric: metricRSS})
	}
	return rows
}

// The scaling section of a run whose figures follow the model exactly:
// the model fitted on N ≤ 4 predicts N = 8 to the percent, the fleet rows
// are in the Ratios table with their goals at N = 4 and 8, and the idle
// cost of a replica is compared with a stock learner's at every N.
func TestScaleReportFitsAndRatios(t *testing.T) {
	model := scaleModel{Idle: line{1, 0.15}, Write: line{2, 0.05}, Round: line{0.04, 0.005},
		Rounds: map[string]line{scaleReadsOwn: line{0.02, 0.04}, scaleReadsHub: line{0.06, 0}}}
	md := report{Mode: "quick", Rows: scaleRowsOf(model, 0.001)}.markdown()
	for _, want := range []string{
		"| " + scaleFleetName(4) + " | " + scaleName(4, scaleReadsHub) + " | " + scaleName(4, scalePartner+scaleReadsHub) + " | leader CPU/10k | **",
		"| **0.39×** ± 0.026 | ≤ 0.5 ✓ |",
		"| " + scaleFleetName(8) + " | " + scaleName(8, scaleReadsHub4) + " |",
		"| **0.69×** ± 0.013 | ≤ 0.6 ✗ |",
		"| leader idle CPU, % of a core | 1.000 + 0.150·N | 2.2 | 2.2 | 0 % |",
		"| leader CPU-s per 10k puts | 2.0000 + 0.0500·N | 2.4 | 2.4 | 0 % |",
		"| leader CPU-ms per ReadIndex round | 0.04000 + 0.00500·N | 0.08 | 0.08 | 0 % |",
		"| rounds per strong read, own rounds | 0.0200 + 0.0400·N | 0.34 | 0.34 | 0 % |",
		"| rounds per strong read, one hub | 0.0600 + 0.0000·N | 0.06 | 0.06 | 0 % |",
		"| leader CPU-s per 10k strong reads (idle CPU taken off), own rounds |  | 0.272 | 0.272 | 0 % |",
		"| 8 | 0.150 ± 0.000 % of a core | 0.200 ± 0.000 % | **0.75×** ± 0.0022 | ≤ 1.1 ✓ |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
}

// The plot is written as PNG and SVG from a run's rows.
func TestScalePlotIsWritten(t *testing.T) {
	model := scaleModel{Idle: line{1, 0.15}, Write: line{2, 0.05}, Round: line{0.04, 0.005},
		Rounds: map[string]line{scaleReadsOwn: line{0.02, 0.04}, scaleReadsHub: line{0.06, 0}}}
	dir := t.TempDir()
	if err := scalePlot(dir, scaleRowsOf(model, 0.001)); err != nil {
		t.Fatal(err)
	}
	for _, ext := range []string{".png", ".svg"} {
		fi, err := os.Stat(filepath.Join(dir, scalePlotFile+ext))
		if err != nil || fi.Size() == 0 {
			t.Fatalf("plot %s: %v", ext, err)
		}
	}
}
