package main

import (
	"slices"
	"strings"
	"time"
)

// rerun records that the rows of some scenarios in a report come from
// another run than the one its header describes: an --only run merged in
// later, or the rows a full run kept from before because it does not run
// those scenarios.
type rerun struct {
	Scenarios []string `json:"scenarios"`
	Mode      string   `json:"mode"`
	Params    string   `json:"params"`
	Started   string   `json:"started"`
	Seconds   float64  `json:"seconds"`
}

// mergeReports is old with the rows and failures of the scenarios in ran
// replaced by cur's, the goal ratios of the replaced rows kept as earlier
// figures. After an --only run (whole false) the header figures (mode,
// params, start, machine) stay old's, since they describe the run most rows
// come from, and a rerun says which rows cur measured; after a full run
// (whole) the header is cur's and a rerun says which rows are older. A
// scenario run again drops out of its earlier rerun record.
func mergeReports(old, cur report, ran []scenarioSpec, whole bool) report {
	ids := map[string]bool{}
	var names []string
	for _, s := range ran {
		names = append(names, s.name)
		for _, id := range s.rows {
			ids[id] = true
		}
	}
	out := old
	if whole {
		out = cur
	}
	out.Earlier = keepLast(append(slices.Clone(old.Earlier), replacedFigures(old, ids)...), earlierKept)
	out.Rows = nil
	kept := map[string]bool{}
	for _, r := range old.Rows {
		if !ids[r.Scenario] {
			out.Rows = append(out.Rows, r)
			kept[r.Scenario] = true
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
	if !whole {
		out.Reruns = append(out.Reruns, rerun{Scenarios: names, Mode: cur.Mode, Params: cur.Params, Started: cur.Started, Seconds: cur.Seconds})
	} else if fromOld := oldMainScenarios(old, kept); len(fromOld) > 0 {
		// Rows of old's own run that this full run did not measure again.
		out.Reruns = append(out.Reruns, rerun{Scenarios: fromOld, Mode: old.Mode, Params: old.Params, Started: old.Started, Seconds: old.Seconds})
	}
	return out
}

// oldMainScenarios are the names of the scenarios whose kept rows (by row
// id) come from old's own run rather than from one of its reruns.
func oldMainScenarios(old report, kept map[string]bool) []string {
	var names []string
	for _, s := range scenarios(false, "", "") {
		if slices.ContainsFunc(s.rows, func(id string) bool { return kept[id] }) && rerunOf(old, s.name) == nil {
			names = append(names, s.name)
		}
	}
	return names
}

// rerunOf is the rerun record of old that holds scenario, or nil if its
// rows come from old's own run.
func rerunOf(old report, scenario string) *rerun {
	for i := range old.Reruns {
		if slices.Contains(old.Reruns[i].Scenarios, scenario) {
			return &old.Reruns[i]
		}
	}
	return nil
}

// writeReruns says, under the report's first line, which scenarios' rows
// come from other runs, so that a reader sees the report mixes runs.
func writeReruns(w func(string, ...any), rep report) {
	if len(rep.Reruns) == 0 {
		return
	}
	w("**This report mixes runs.** Rows of these scenarios come from other runs than the one above: scenarios that only `go run ./test/bench --only <scenario> --merge` runs, and scenarios measured again that way later; every other row is from the run above:\n\n")
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
