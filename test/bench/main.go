// Command bench measures understudy side by side with stock etcd, in one run
// on one machine with one load generator, and writes BENCHMARKS.md (ratios
// first, then absolute figures) and BENCHMARKS.json (the raw figures).
//
//	go run ./test/bench            # full run, under 25 minutes on 2 cores
//	go run ./test/bench --quick    # about four minutes, while developing
//	go run ./test/bench --only mirror-source --merge
//	                               # one scenario again, the others' rows kept
//
// It builds what it needs (etcd, primary, replica), starts every topology
// itself on 127.0.0.1 ports picked at run time, and stops everything.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// scenarioSpec is one scenario of a run: its name (--only), the Row.Scenario
// ids of the rows it writes (what --merge replaces), and how it runs.
type scenarioSpec struct {
	name string
	rows []string
	run  func(params) ([]Row, error)
}

// scenarios are the benchmark's scenarios; the plots of a report at out
// go under docs/ beside it (docs/ of the checkout for BENCHMARKS.md), so
// that an experiment written elsewhere leaves the checkout's alone.
func scenarios(quick bool, out, consistency string) []scenarioSpec {
	docs := filepath.Join(filepath.Dir(out), "docs")
	return []scenarioSpec{
		{"generator", []string{"generator"}, generatorScenario},
		{"reads", []string{"reads"}, readScenario},
		{"headers", []string{"headers"}, headersScenario},
		{"writes", []string{"writes"}, writeScenario},
		{"watch", []string{"watch"}, watchScenario},
		{"catchup", []string{"catch-up"}, catchupScenario},
		{"mirror", []string{"mirror"}, mirrorScenario},
		{"mirror-source", []string{"mirror-source"}, mirrorSourceScenario},
		{"mirror-catchup", []string{"mirror-catchup"}, mirrorCatchUpScenario},
		{"idle", []string{"idle"}, idleScenario},
		{"compare", []string{"compare"}, func(params) ([]Row, error) { return compareScenario(quick, consistency) }},
		{"regions", []string{regionsID}, func(p params) ([]Row, error) { return regionsScenario(p, quick, regionsPlotDir(docs, quick)) }},
		{"regions-ready", []string{regionsSoakID}, func(p params) ([]Row, error) { return regionsSoakScenario(p, quick) }},
		{"scale", []string{scaleID}, func(p params) ([]Row, error) { return scaleScenario(p, scalePlotDir(docs)) }},
		{"fanout", []string{fanoutID}, fanoutScenario},
		{"fanout-paired", []string{fanoutPairedID}, fanoutPairedScenario},
		{"tiers", []string{tiersID}, tiersScenario},
		{"tree", []string{treeID}, treeScenario},
		{"backup", []string{backupID}, backupScenario},
		{grpcProxyID, []string{grpcProxyID}, grpcProxyScenario},
		{storageSuiteID, []string{storageSuiteID}, storageSuiteScenario},
	}
}

func scenarioNames() string {
	var names []string
	for _, s := range scenarios(false, "", "") {
		if askedOnly[s.name] {
			names = append(names, s.name+" (only with --only: not part of a full run)")
			continue
		}
		names = append(names, s.name)
	}
	return strings.Join(names, ", ")
}

// options are the command's flags.
type options struct {
	quick, merge, render     bool
	out, raw, only           string
	consistency, replicaArgs string
	// windows and scaleReads are 0 for the mode's.
	windows, scaleReads int
	// proxyWatchers is --proxy-watchers, "" for the mode's.
	proxyWatchers string
}

func main() {
	var o options
	flag.BoolVar(&o.quick, "quick", false, "short runs with fewer watchers and less data (about four minutes)")
	flag.StringVar(&o.out, "out", "BENCHMARKS.md", "report to write")
	flag.StringVar(&o.raw, "json", "BENCHMARKS.json", "raw figures to write")
	flag.StringVar(&o.only, "only", "", "run only this scenario: "+scenarioNames())
	flag.BoolVar(&o.merge, "merge", false, "keep the rows of the scenarios not run: read the raw figures (--json) of an earlier run, replace the rows of the scenarios this run ran, and write both files again (the report says which scenarios were re-run when)")
	flag.StringVar(&o.consistency, "consistency", "CONSISTENCY.md", "where the compare scenario writes its tables (its plots go in docs/consistency/ beside it)")
	flag.StringVar(&o.replicaArgs, "replica-args", "", "extra flags for every replica, space-separated (for tuning experiments; recorded in the report)")
	flag.BoolVar(&o.render, "render", false, "run nothing: write the report again from the raw figures (--json) of an earlier run, after a change to how it is written")
	flag.IntVar(&o.windows, "windows", 0, "windows per arm where arms alternate (headers, mirror-source, mirror-catchup; fanout-paired's rounds): more narrows the ratios' error; 0 keeps the mode's (full: 16, 8, 6)")
	flag.IntVar(&o.scaleReads, "scale-read-rate", 0, "total strong reads/s of the scale scenario's read windows, spread over the replicas (and over the 2 stock followers in the partner windows): how the fleet's cost changes with the rate; 0 keeps the mode's (1000)")
	flag.StringVar(&o.proxyWatchers, "proxy-watchers", "", "the grpc-proxy scenario's watcher counts, comma-separated multiples of 1000 (each front is measured with each count); empty keeps the mode's (full: 10000,100000)")
	flag.Parse()

	if o.windows < 0 {
		fmt.Fprintf(os.Stderr, "bench: --windows %d: want 0 (the mode's) or more\n", o.windows)
		os.Exit(2)
	}
	if o.scaleReads < 0 {
		fmt.Fprintf(os.Stderr, "bench: --scale-read-rate %d: want 0 (the mode's) or more reads/s\n", o.scaleReads)
		os.Exit(2)
	}
	if _, err := parseWatchers(o.proxyWatchers); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	quick, out, raw, only, merge := o.quick, o.out, o.raw, o.only, o.merge
	if o.render {
		if merge {
			return fmt.Errorf("--render and --merge: --render runs nothing, so there is nothing to merge; give one of them")
		}
		return rerender(raw, out)
	}
	all := scenarios(quick, out, o.consistency)
	var todo []scenarioSpec
	for _, s := range all {
		if (only == "" && !askedOnly[s.name]) || only == s.name {
			todo = append(todo, s)
		}
	}
	if len(todo) == 0 {
		return fmt.Errorf("--only %q: no such scenario; valid: %s", only, scenarioNames())
	}
	var earlier *report
	if merge {
		// Read before running: a missing file is found in a second, not
		// after the scenarios' minutes.
		old, err := readReport(raw, "--merge")
		if err != nil {
			return err
		}
		earlier = &old
	}
	p, mode := fullParams(), "full"
	if quick {
		p, mode = quickParams(), "quick"
	}
	p.replicaArgs = strings.Fields(o.replicaArgs)
	if o.windows > 0 {
		p.headersWindows, p.mirrorSourceWindows, p.pairedRounds = o.windows, o.windows, o.windows
	}
	if o.scaleReads > 0 {
		p.scaleReadRate = o.scaleReads
	}
	if ns, _ := parseWatchers(o.proxyWatchers); len(ns) > 0 {
		p.proxyWatchers = ns
	}
	start := time.Now()
	rep := report{Mode: mode, Params: p.describe(), Started: start.UTC().Format(time.RFC3339), Machine: machine()}
	var ran []string
	for _, s := range todo {
		fmt.Fprintf(os.Stderr, "== %s\n", s.name)
		rows, err := s.run(p)
		rep.Rows = append(rep.Rows, rows...)
		ran = append(ran, s.name)
		if err != nil {
			fmt.Fprintf(os.Stderr, "scenario %s failed: %v\n", s.name, err)
			rep.Failures = append(rep.Failures, failure(s.name, err))
		}
	}
	rep.Seconds = time.Since(start).Seconds()
	if earlier != nil {
		rep = mergeReports(*earlier, rep, todo, only == "")
	}

	if err := os.WriteFile(out, []byte(rep.markdown()), 0o644); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(rep, "", "  ")
	if err := os.WriteFile(raw, append(b, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "wrote %s and %s in %v\n", out, raw, time.Since(start).Round(time.Second))
	if len(rep.Failures) > 0 {
		return fmt.Errorf("%d scenario(s) failed: %s", len(rep.Failures), strings.Join(rep.Failures, "; "))
	}
	return nil
}

// failure is how a failed scenario is recorded: prefixed with its name, so
// that --merge drops it when the scenario is run again.
func failure(name string, err error) string { return failurePrefix(name) + err.Error() }

func failurePrefix(name string) string { return "scenario " + name + ": " }

// readReport reads the raw figures of an earlier run at raw; flag names
// the flag that asked for them, for the error.
func readReport(raw, flag string) (report, error) {
	var rep report
	b, err := os.ReadFile(raw)
	if err != nil {
		return rep, fmt.Errorf("%s needs the raw figures of an earlier run (--json): %w", flag, err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		return rep, fmt.Errorf("%s: %s is not a report's raw figures (--json): %w", flag, raw, err)
	}
	if len(rep.Rows) == 0 {
		return rep, fmt.Errorf("%s: %s has no rows (--json)", flag, raw)
	}
	return rep, nil
}

// rerender writes the report at out from the raw figures at raw, and the
// scale scenario's plot if they hold its rows.
func rerender(raw, out string) error {
	rep, err := readReport(raw, "--render")
	if err != nil {
		return err
	}
	if slices.ContainsFunc(rep.Rows, func(r Row) bool { return r.Scenario == scaleID }) {
		// The scale scenario's plot is drawn from its rows too.
		if err := scalePlot(scalePlotDir(filepath.Join(filepath.Dir(out), "docs")), rep.Rows); err != nil {
			return err
		}
	}
	return os.WriteFile(out, []byte(rep.markdown()), 0o644)
}
