package main

import (
	"slices"
)

// earlierKept is how many earlier figures of one comparison a report keeps.
const earlierKept = 4

// earlierFigure is a ratio with a goal as an earlier run measured it, kept
// when a --merge run replaced the rows it came from: a goal judged over
// several runs shows each run's figure.
type earlierFigure struct {
	What string `json:"what"`
	// Cell and Goal are the ratios table's cells as that run wrote them:
	// the ratio with its error, the goal met or missed.
	Cell     string `json:"cell"`
	Goal     string `json:"goal"`
	Measured string `json:"measured"`
	Mode     string `json:"mode"`
}

// replacedFigures are old's ratios with a goal whose row or partner is in
// a scenario being replaced (by row id), with when each was measured.
func replacedFigures(old report, ids map[string]bool) []earlierFigure {
	byName := map[string]Row{}
	for _, r := range old.Rows {
		byName[r.Name] = r
	}
	var out []earlierFigure
	for _, c := range comparisons(old.Rows) {
		a, p := byName[c.row], byName[c.partner]
		if c.goal == "" || (!ids[a.Scenario] && !ids[p.Scenario]) {
			continue
		}
		ratio, ok := c.ratio(byName)
		if !ok {
			continue
		}
		text, goal := c.cell(byName, ratio)
		started, mode := old.Started, old.Mode
		if rr := rerunOf(old, scenarioNamed(a.Scenario)); rr != nil {
			started, mode = rr.Started, rr.Mode
		}
		out = append(out, earlierFigure{What: c.what, Cell: text, Goal: goal, Measured: started, Mode: mode})
	}
	return out
}

// scenarioNamed is the name (--only) of the scenario that writes rows with
// id, or "" if none does.
func scenarioNamed(id string) string {
	for _, s := range scenarios(false, "", "") {
		if slices.Contains(s.rows, id) {
			return s.name
		}
	}
	return ""
}

// keepLast is figs with at most n figures of each comparison, the latest.
func keepLast(figs []earlierFigure, n int) []earlierFigure {
	count := map[string]int{}
	var out []earlierFigure
	for i := len(figs) - 1; i >= 0; i-- {
		if count[figs[i].What] < n {
			count[figs[i].What]++
			out = append(out, figs[i])
		}
	}
	slices.Reverse(out)
	return out
}

// writeEarlier lists the earlier figures of the ratios with a goal, oldest
// first within each comparison, after the ratios table.
func writeEarlier(w func(string, ...any), rep report) {
	if len(rep.Earlier) == 0 {
		return
	}
	w("\n## Earlier figures\n\nThe ratios with a goal as earlier runs measured them, before a later run replaced their rows (the last %d of each), so that a goal judged over several runs shows every run's figure; the table above has the latest.\n\n| comparison | ratio | goal, as judged then | measured |\n|---|---|---|---|\n", earlierKept)
	var order []string
	for _, f := range rep.Earlier {
		if !slices.Contains(order, f.What) {
			order = append(order, f.What)
		}
	}
	for _, what := range order {
		for _, f := range rep.Earlier {
			if f.What != what {
				continue
			}
			when := f.Measured
			if f.Mode != rep.Mode {
				when += ", a " + f.Mode + " run"
			}
			w("| %s | %s | %s | %s |\n", f.What, f.Cell, f.Goal, when)
		}
	}
}
