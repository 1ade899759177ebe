package membership

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteTable prints the members, then the cascaded replicas among sts, as
// tables that fit 120 columns in the common case (members that answer, no
// role state): a column that would be empty on every row (LEADER, ROLE
// STATE, SETTINGS, ERROR, UPSTREAMS) is left out, and the long ones come
// last. LEADER is shown where a member names another leader than the
// leader's row (or none is found). Then what each learner replica would
// compact with as leader. -w json has every field.
func WriteTable(w io.Writer, sts []*Member) {
	var members, cascaded []*Member
	for _, s := range sts {
		if s.Cascaded {
			cascaded = append(cascaded, s)
		} else {
			members = append(members, s)
		}
	}
	if len(members) > 0 {
		writeMembers(w, members)
	}
	if len(cascaded) > 0 {
		if len(members) > 0 {
			fmt.Fprintln(w)
		}
		writeCascaded(w, cascaded)
	}
	writeCompaction(w, sts)
}

// table is a text table: columns left out when empty on every row.
type table struct {
	header []string
	rows   [][]string
}

func (t *table) append(cells ...string) { t.rows = append(t.rows, cells) }

// optional marks the columns that are left out when no row fills them.
func (t *table) write(w io.Writer, optional ...string) {
	keep := make([]bool, len(t.header))
	for i, h := range t.header {
		keep[i] = true
		for _, o := range optional {
			if h == o {
				keep[i] = false
			}
		}
		for _, r := range t.rows {
			keep[i] = keep[i] || r[i] != ""
		}
	}
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	line := func(cells []string) {
		var out []string
		for i, c := range cells {
			if keep[i] {
				out = append(out, c)
			}
		}
		fmt.Fprintln(tw, strings.Join(out, "\t"))
	}
	line(t.header)
	for _, r := range t.rows {
		line(r)
	}
	_ = tw.Flush()
	for _, l := range strings.SplitAfter(b.String(), "\n") {
		if l != "" {
			fmt.Fprintln(w, strings.TrimRight(l, " \n"))
		}
	}
}

func writeMembers(w io.Writer, sts []*Member) {
	t := &table{header: []string{"NAME", "ID", "ROLE", "APPLIED", "COMMIT", "LAG", "FRESHNESS", "PROGRESS", "PROMOTABLE", "LEADER", "ROLE STATE", "SETTINGS", "ERROR"}}
	leader := Leader(sts)
	for _, s := range sts {
		role := "voter"
		switch {
		case s.IsLeader:
			role = "leader"
		case s.IsLearner:
			role = "learner"
		}
		var errs []string
		if s.Error != "" {
			errs = append(errs, "unreachable: "+s.Error)
		}
		if s.ProgressError != "" {
			errs = append(errs, "leader progress unknown: "+s.ProgressError)
		}
		if !s.Reachable {
			t.append(s.Name, s.ID, role, "", "", "", "", progressCell(s.LeaderProgress), "", "", "", "", strings.Join(errs, "; "))
			continue
		}
		promotable := ""
		if s.Promotable != nil {
			promotable = strconv.FormatBool(*s.Promotable)
		}
		leaderCell := ""
		if leader == nil || s.Leader != leader.ID {
			leaderCell = s.Leader
			if s.Leader == "0" {
				leaderCell = "none"
			}
		}
		t.append(s.Name, s.ID, role, strconv.FormatUint(s.Applied, 10), strconv.FormatUint(s.RaftIndex, 10),
			strconv.FormatUint(s.Lag, 10), freshnessCell(s.Freshness), progressCell(s.LeaderProgress), promotable, leaderCell, s.RoleState,
			s.settingsCell(), strings.Join(errs, "; "))
	}
	t.write(w, "LEADER", "ROLE STATE", "SETTINGS", "ERROR")
}

// freshnessCell is a freshness age for people: a replica that never
// completed a freshness round tells the largest duration, "never" here.
func freshnessCell(age string) string {
	if d, err := time.ParseDuration(age); err == nil && d >= math.MaxInt64/2 {
		return "never"
	}
	return age
}

// progressCell is raft's progress state for people: StateReplicate is
// "replicate".
func progressCell(state string) string {
	return strings.ToLower(strings.TrimPrefix(state, "State"))
}

// writeCascaded prints the cascaded replicas: revisions, not raft entries,
// and the chain of upstreams each copies from, nearest first ("a ← b": a
// copies from b).
func writeCascaded(w io.Writer, sts []*Member) {
	fmt.Fprintln(w, "cascaded replicas (--cascaded):")
	t := &table{header: []string{"NAME", "ID", "REVISION", "LAG (REVS)", "FRESHNESS", "UPSTREAMS", "ERROR"}}
	for _, s := range sts {
		if !s.Reachable {
			t.append(or(s.Name, "?"), or(s.ID, "?"), "", "", "", "", s.Error)
			continue
		}
		t.append(s.Name, s.ID, strconv.FormatInt(s.Revision, 10), strconv.FormatInt(s.LagRevisions, 10), freshnessCell(s.Freshness),
			strings.Join(s.Chain()[1:], " ← "), s.Error)
	}
	t.write(w, "ERROR")
}

// writeCompaction says what each learner replica that told it would
// compact with once promoted and leading.
func writeCompaction(w io.Writer, sts []*Member) {
	first := true
	for _, s := range sts {
		if s.Compaction == "" {
			continue
		}
		if first {
			fmt.Fprintln(w, "\nauto-compaction of each replica once promoted and leading:")
			first = false
		}
		fmt.Fprintf(w, "  %s (%s): %s\n", s.Name, s.ID, s.Compaction)
	}
}

// or is s, or if it is empty, unknown.
func or(s, unknown string) string {
	if s == "" {
		return unknown
	}
	return s
}
