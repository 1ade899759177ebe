package main

import (
	"slices"
	"strings"
	"time"
)

// rerun records that a --merge run replaced the rows of some scenarios in a
// report whose other rows come from an earlier run.
type rerun struct {
	Scenarios []string `json:"scenarios"`
	Mode      string   `json:"mode"`
	Params    string   `json:"params"`
	Started   string   `json:"started"`
	Seconds   float64  `json:"seconds"`
}

// mergeReports is old with the rows and failures of the scenarios in ran
// replaced by cur's, and a rerun saying so. The header figures (mode,
// params, start, machine) stay old's: they describe the run most rows come
// from; a scenario re-run again drops out of its earlier rerun record.
func mergeReports(old, cur report, ran []scenarioSpec) report {
	ids := map[string]bool{}
	var names []string
	for _, s := range ran {
		names = append(names, s.name)
		for _, id := range s.rows {
			ids[id] = true
		}
	}
	out := old
	out.Rows = nil
	for _, r := range old.Rows {
		if !ids[r.Scenario] {
			out.Rows = append(out.Rows, r)
		}
	}
	out.Rows = append(out.Rows, cur.Rows...)
	out.Failures = nil
	for _, f := range old.Failures {
		if !slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(f, failurePrefix(n)) }) {
			out.Failures = append(out.Failures, f)
		}
	}
	out.Failures = append(out.Failures, cur.Failures...)
	out.Reruns = nil
	for _, rr := range old.Reruns {
		rr.Scenarios = slices.DeleteFunc(slices.Clone(rr.Scenarios), func(n string) bool { return slices.Contains(names, n) })
		if len(rr.Scenarios) > 0 {
			out.Reruns = append(out.Reruns, rr)
		}
	}
	out.Reruns = append(out.Reruns, rerun{Scenarios: names, Mode: cur.Mode, Params: cur.Params, Started: cur.Started, Seconds: cur.Seconds})
	return out
}

// writeReruns says, under the report's first line, which scenarios' rows
// come from later --merge runs, so that a reader sees the report mixes runs.
func writeReruns(w func(string, ...any), rep report) {
	if len(rep.Reruns) == 0 {
		return
	}
	w("**This report mixes runs.** Rows of these scenarios were measured again later, each by `go run ./test/bench --only <scenario> --merge`, and replaced the first run's; every other row is from the run above:\n\n")
	for _, rr := range rep.Reruns {
		w("- %s: on %s in %s", strings.Join(rr.Scenarios, ", "), rr.Started, (time.Duration(rr.Seconds) * time.Second).String())
		if rr.Mode != rep.Mode {
			w(", a %s run", rr.Mode)
		}
		if rr.Params != rep.Params {
			w(" (%s)", rr.Params)
		}
		w("\n")
	}
	w("\n")
}
