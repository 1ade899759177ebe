package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

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

func TestMergeReplacesTheRowsOfTheScenariosRun(t *testing.T) {
	old := report{Mode: "full", Params: "full params", Started: "2026-11-23T19:14:28Z", Seconds: 952,
		Rows: []Row{
			{Scenario: "reads", Name: "replica weak", Result: Result{Ops: 100}},
			{Scenario: "catch-up", Name: "leader puts, no learner joining", Result: Result{Ops: 1}},
			{Scenario: "catch-up", Name: "leader puts while a replica catches up", Result: Result{Ops: 2}},
			{Scenario: "idle", Name: idleBase, Result: Result{Seconds: 40}},
		},
		Failures: []string{failure("catchup", errors.New("catch-up: timeout")), failure("idle", errors.New("idle: boom"))},
		Reruns:   []rerun{{Scenarios: []string{"catchup", "idle"}, Mode: "full", Params: "full params", Started: "2026-11-24T10:00:00Z"}},
	}
	cur := report{Mode: "full", Params: "full params", Started: "2026-11-25T04:00:00Z", Seconds: 60,
		Rows: []Row{{Scenario: "catch-up", Name: "leader puts, no learner joining", Result: Result{Ops: 3}}}}
	var ran []scenarioSpec
	for _, s := range scenarios(false, "", "") {
		if s.name == "catchup" {
			ran = append(ran, s)
		}
	}
	got := mergeReports(old, cur, ran, false)

	var names []string
	for _, r := range got.Rows {
		names = append(names, fmt.Sprintf("%s/%s/%d", r.Scenario, r.Name, r.Ops))
	}
	want := []string{"reads/replica weak/100", "idle/" + idleBase + "/0", "catch-up/leader puts, no learner joining/3"}
	if !slices.Equal(names, want) {
		t.Errorf("rows after merge:\n%q\nwant\n%q", names, want)
	}
	if got.Started != old.Started || got.Mode != old.Mode || got.Seconds != old.Seconds {
		t.Errorf("header of the merged report is %s %s %v, want the earlier run's %s %s %v", got.Mode, got.Started, got.Seconds, old.Mode, old.Started, old.Seconds)
	}
	if want := []string{failure("idle", errors.New("idle: boom"))}; !slices.Equal(got.Failures, want) {
		t.Errorf("failures after merge: %q, want %q (the re-run scenario's old failure dropped)", got.Failures, want)
	}
	wantReruns := []rerun{
		{Scenarios: []string{"idle"}, Mode: "full", Params: "full params", Started: "2026-11-24T10:00:00Z"},
		{Scenarios: []string{"catchup"}, Mode: "full", Params: "full params", Started: "2026-11-25T04:00:00Z", Seconds: 60},
	}
	if fmt.Sprint(got.Reruns) != fmt.Sprint(wantReruns) {
		t.Errorf("reruns after merge: %+v, want %+v", got.Reruns, wantReruns)
	}
	if len(old.Reruns[0].Scenarios) != 2 {
		t.Errorf("merge changed the earlier report's reruns: %+v", old.Reruns)
	}
	md := got.markdown()
	for _, s := range []string{"This report mixes runs", "- catchup: on 2026-11-25T04:00:00Z in 1m0s", "- idle: on 2026-11-24T10:00:00Z", "in the run above or a re-run listed above"} {
		if !strings.Contains(md, s) {
			t.Errorf("report does not say %q:\n%s", s, md[:min(len(md), 1500)])
		}
	}
}

// TestMergeOfAFullRunKeepsTheEarlierFigures: a full run merged into a
// report takes its header, keeps the rows of the scenarios it does not run
// (with when they were measured), and keeps the goal ratios of the rows it
// replaced, so that a goal judged over two runs shows both figures.
func TestMergeOfAFullRunKeepsTheEarlierFigures(t *testing.T) {
	weak := func(replica, learner float64) []Row {
		return []Row{
			{Scenario: "reads", Name: "replica weak", Result: Result{Throughput: replica}},
			{Scenario: "reads", Name: "etcd serializable @ stock learner", Result: Result{Throughput: learner}},
		}
	}
	old := report{Mode: "full", Params: "p", Started: "2026-11-23T19:14:28Z", Seconds: 952,
		Rows:   append(weak(115, 100), Row{Scenario: scaleID, Name: "scale row", Result: Result{Ops: 7}}, Row{Scenario: "idle", Name: idleBase, Result: Result{Seconds: 40}}),
		Reruns: []rerun{{Scenarios: []string{"reads"}, Mode: "full", Params: "p", Started: "2026-11-27T12:41:06Z"}, {Scenarios: []string{"scale"}, Mode: "full", Params: "p", Started: "2026-11-26T11:16:42Z"}},
	}
	var ran []scenarioSpec
	for _, s := range scenarios(false, "", "") {
		if s.name == "reads" {
			ran = append(ran, s)
		}
	}
	first := mergeReports(old, report{Mode: "full", Params: "p", Started: "2026-11-28T06:00:00Z", Seconds: 2700, Rows: weak(136, 100)}, ran, true)
	if first.Started != "2026-11-28T06:00:00Z" || first.Seconds != 2700 {
		t.Errorf("header after a full run's merge: %s %v, want the full run's", first.Started, first.Seconds)
	}
	wantReruns := []rerun{
		{Scenarios: []string{"scale"}, Mode: "full", Params: "p", Started: "2026-11-26T11:16:42Z"},
		{Scenarios: []string{"idle"}, Mode: "full", Params: "p", Started: "2026-11-23T19:14:28Z", Seconds: 952},
	}
	if fmt.Sprint(first.Reruns) != fmt.Sprint(wantReruns) {
		t.Errorf("reruns after a full run's merge: %+v, want %+v (the kept rows' runs)", first.Reruns, wantReruns)
	}
	second := mergeReports(first, report{Mode: "full", Params: "p", Started: "2026-11-28T07:00:00Z", Seconds: 2700, Rows: weak(120, 100)}, ran, true)
	const what = "weak reads through a replica vs serializable reads at a stock etcd learner"
	var got []string
	for _, f := range second.Earlier {
		if f.What == what {
			got = append(got, f.Cell+" "+f.Goal+" "+f.Measured)
		}
	}
	want := []string{"**1.15×** ≥ 0.97 ✓ 2026-11-27T12:41:06Z", "**1.36×** ≥ 0.97 ✓ 2026-11-28T06:00:00Z"}
	if !slices.Equal(got, want) {
		t.Errorf("earlier figures of %q: %q, want %q", what, got, want)
	}
	md := second.markdown()
	for _, s := range []string{"## Earlier figures", "| " + what + " | **1.36×** | ≥ 0.97 ✓ | 2026-11-28T06:00:00Z |", "**1.20×**"} {
		if !strings.Contains(md, s) {
			t.Errorf("report does not say %q", s)
		}
	}
	if figs := keepLast(slices.Repeat(second.Earlier, 3), earlierKept); len(figs) > earlierKept*2 {
		t.Errorf("keepLast kept %d figures of 2 comparisons, want at most %d each", len(figs), earlierKept)
	}
}

func TestMergeWithoutReadableRawFiguresFailsBeforeRunning(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.json")
	if err := os.WriteFile(garbage, []byte("# Benchmarks\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.json")
	if err := os.WriteFile(empty, []byte(`{"mode":"full","rows":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ raw, want string }{
		{filepath.Join(dir, "missing.json"), "no such file"},
		{garbage, "is not a report's raw figures"},
		{empty, "has no rows"},
	} {
		out := filepath.Join(dir, "out.md")
		// idle would run for minutes: the error must come first.
		err := run(options{quick: true, out: out, raw: tc.raw, only: "idle", merge: true, consistency: filepath.Join(dir, "c.md")})
		if err == nil || !strings.Contains(err.Error(), "--merge") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--merge with %s: error %v, want one naming --merge and saying %q", filepath.Base(tc.raw), err, tc.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("--merge with %s wrote %s", filepath.Base(tc.raw), out)
		}
	}
}

func TestRatioLessABase(t *testing.T) {
	rows := map[string]Row{
		mirrorSrcNone:    {Name: mirrorSrcNone, Result: Result{Ops: 10000, CPU: map[string]float64{"leader": 4}}},
		mirrorSrcLeader:  {Name: mirrorSrcLeader, Result: Result{Ops: 20000, CPU: map[string]float64{"leader": 10}}},
		mirrorSrcReplica: {Name: mirrorSrcReplica, Result: Result{Ops: 10000, CPU: map[string]float64{"leader": 4.1}}},
	}
	c := comparison{"x", mirrorSrcReplica, mirrorSrcLeader, "leader CPU/10k", "≤ 0.2", mirrorSrcNone}
	// (4.1 − 4) / (5 − 4) per 10,000 puts.
	if got, ok := c.ratio(rows); !ok || math.Abs(got-0.1) > 1e-9 {
		t.Errorf("ratio = %v, %v; want 0.1, true", got, ok)
	}
	delete(rows, mirrorSrcNone)
	if got, ok := c.ratio(rows); ok {
		t.Errorf("ratio without its base row = %v, want none", got)
	}
}

func TestRatioWithinNoiseIsNotResolved(t *testing.T) {
	row := func(name string, cpu float64, windows ...float64) Row {
		return Row{Scenario: "mirror-source", Name: name, Windows: windows, WindowsMetric: "leader CPU/10k", Result: Result{Ops: 10000, CPU: map[string]float64{"leader": cpu}}}
	}
	c := comparison{"x", mirrorSrcReplica, mirrorSrcLeader, "leader CPU/10k", "≤ 0.2", mirrorSrcFollower}
	follower := row(mirrorSrcFollower, 6, 6.0, 6.2, 5.8)
	for _, tc := range []struct {
		name            string
		leader, replica Row
		unresolved      bool
		wantInTable     string
	}{
		// n = 0.1, 0, 0.2 and d = 2, 2.1, 1.9: 0.05 ± t975(2) × 0.0303 = 4.303 × 0.0303.
		{"apart", row(mirrorSrcLeader, 8, 8.0, 8.3, 7.7), row(mirrorSrcReplica, 6.1, 6.1, 6.2, 6.0), false, "**0.05×** ± 0.13 | ≤ 0.2 ✓"},
		// n = 0.7, 0, 0: 0.117 ± 4.303 × 0.117, across the goal.
		{"goal within the error", row(mirrorSrcLeader, 8, 8.0, 8.3, 7.7), row(mirrorSrcReplica, 6.7/3+6.2/3+5.8/3, 6.7, 6.2, 5.8), false, "**0.12×** ± 0.50 | ≤ 0.2 ? (within the error)"},
		{"within noise", row(mirrorSrcLeader, 6.2, 5.0, 7.6, 6.0), row(mirrorSrcReplica, 6.1, 6.1, 6.2, 6.0), true, "not resolved | ≤ 0.2: partner − base = 0.200 ± "},
		{"below the base", row(mirrorSrcLeader, 5, 5.0, 5.2, 4.8), row(mirrorSrcReplica, 6.1, 6.1, 6.2, 6.0), true, "not resolved | ≤ 0.2: partner − base = -1.000 ± "},
	} {
		rows := map[string]Row{mirrorSrcFollower: follower, mirrorSrcReplica: tc.replica, mirrorSrcLeader: tc.leader}
		if _, _, got := c.unresolved(rows); got != tc.unresolved {
			t.Errorf("%s: unresolved = %v, want %v", tc.name, got, tc.unresolved)
		}
		rep := report{Rows: []Row{follower, tc.replica, tc.leader}}
		if md := rep.markdown(); !strings.Contains(md, tc.wantInTable) {
			t.Errorf("%s: the ratios do not say %q:\n%s", tc.name, tc.wantInTable, md)
		}
	}
}

func TestRatioOfWindowedRowsHasItsError(t *testing.T) {
	for _, tc := range []struct {
		name    string
		on, off []float64
		want    string
	}{
		// Paired window by window: 88/98 and 92/102, mean 0.9000, standard
		// error 0.0020; two windows, one degree of freedom: t975(1) =
		// 12.706 of them.
		{"paired", []float64{88, 92}, []float64{98, 102}, "**0.90×** ± 0.025 |"},
		// A partner window far below the others: the error is that of the
		// ratio of the means, from the residuals 140 − 0.9·150 = 5 and
		// 40 − 0.9·50 = −5: √(50/2)/100 = 0.05 (the windows' own ratios,
		// 0.933 and 0.8, would give 0.067); × 12.706.
		{"paired, uneven", []float64{140, 40}, []float64{150, 50}, "**0.90×** ± 0.64 |"},
		// Not as many windows: 0.9 × √(4/3/90² + 8/2/100²) = 0.0214, ×
		// t975 of the fewer windows' degrees of freedom (1).
		{"unpaired", []float64{88, 92, 90}, []float64{98, 102}, "**0.90×** ± 0.27 |"},
	} {
		rep := report{Rows: []Row{
			{Scenario: "headers", Name: headersOn, Windows: tc.on, WindowsMetric: "throughput", Result: Result{Throughput: 90, Ops: 900, CPU: map[string]float64{"extra": 9}}},
			{Scenario: "headers", Name: headersOff, Windows: tc.off, WindowsMetric: "throughput", Result: Result{Throughput: 100, Ops: 1000, CPU: map[string]float64{"extra": 10}}},
		}}
		md := rep.markdown()
		if !strings.Contains(md, tc.want) {
			t.Errorf("%s: the ratios do not say %q:\n%s", tc.name, tc.want, md)
		}
		// The replica's CPU per read is not what the windows hold: no error.
		if !strings.Contains(md, "replica CPU/10k | **1.00×** | — |") {
			t.Errorf("%s: a ratio in another metric than the windows' has an error:\n%s", tc.name, md)
		}
	}
}

// The fanout scenario's idle comparisons are in percent of a core: each
// row's leader CPU over its seconds. (They had no value, and the report
// left them out without a word.)
func TestRatioOfIdleRowsInPercentOfACore(t *testing.T) {
	e16, e0 := fanoutName(16, fanoutIdleU), fanoutName(0, fanoutIdleU)
	rows := map[string]Row{
		e16: {Name: e16, Result: Result{Seconds: 30, CPU: map[string]float64{"leader": 0.6}}},
		e0:  {Name: e0, Result: Result{Seconds: 60, CPU: map[string]float64{"leader": 1.0}}},
	}
	var c comparison
	for _, cc := range fanoutComparisons() {
		if cc.row == e16 && cc.partner == e0 {
			c = cc
		}
	}
	if c.row == "" {
		t.Fatal("no fanout comparison of idle E=16 with E=0")
	}
	// 2 % of a core against 1.67 %.
	if got, ok := c.ratio(rows); !ok || math.Abs(got-1.2) > 1e-9 {
		t.Errorf("ratio = %v, %v; want 1.2, true", got, ok)
	}
}

// The report's ± is a 95 % interval: Student's t for the windows' degrees
// of freedom, which with few windows is well above 2 standard errors.
func TestT975(t *testing.T) {
	for _, tc := range []struct {
		df   int
		want float64
	}{{1, 12.706}, {5, 2.571}, {15, 2.131}, {30, 2.042}, {200, 2.042}} {
		if got := t975(tc.df); got != tc.want {
			t.Errorf("t975(%d) = %v, want %v", tc.df, got, tc.want)
		}
	}
	if !math.IsInf(t975(0), 1) {
		t.Errorf("t975(0) = %v, want +Inf: one window has no spread", t975(0))
	}
}
