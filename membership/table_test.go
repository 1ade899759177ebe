package membership

import (
	"bytes"
	"strings"
	"testing"
)

func yes() *bool { b := true; return &b }

// commonCase is three voters, a reader replica and a standby, all
// answering, and two cascaded replicas, one fed by the other.
func commonCase() []*Member {
	row := func(name, id string, learner, leader bool) *Member {
		m := &Member{Name: name, ID: id, IsLearner: learner, IsLeader: leader, Reachable: true, Leader: "8e9e05c52164694d",
			RaftIndex: 1234567, Applied: 1234560, Lag: 7, LeaderProgress: "StateReplicate"}
		if learner {
			m.Replica, m.Freshness, m.Promotable = true, "112ms", yes()
			m.Compaction = "learned periodic 5m0s: 4 compactions seen, every 5m0s, each to the revision of 5m0s before"
		}
		return m
	}
	standby := row("standby-1", "fd422379fda50e48", true, false)
	standby.RoleState = "idle: every voter is live"
	return []*Member{
		row("infra1", "8e9e05c52164694d", false, true),
		row("infra2", "91bc3c398fb3c146", false, false),
		row("infra3", "fd422379fda50e47", false, false),
		row("replica1", "2a0b5c7d9e1f3a4b", true, false),
		standby,
		{Name: "edge-1", ID: "http://10.0.0.7:2379", Cascaded: true, IsLearner: true, Reachable: true, Revision: 880, LagRevisions: 2,
			Freshness: "40ms", Upstreams: "http://10.0.0.7:2379,2a0b5c7d9e1f3a4b"},
		{Name: "edge-2", ID: "http://10.0.0.8:2379", Cascaded: true, IsLearner: true, Reachable: true, Revision: 879, LagRevisions: 3,
			Freshness: "2562047h47m16.854s", Upstreams: "http://10.0.0.8:2379,http://10.0.0.7:2379,2a0b5c7d9e1f3a4b"},
	}
}

func render(sts []*Member) string {
	var b bytes.Buffer
	WriteTable(&b, sts)
	return b.String()
}

func TestWriteTableFitsTheCommonCaseIn120Columns(t *testing.T) {
	out := render(commonCase())
	for _, l := range strings.Split(out, "\n") {
		if len([]rune(l)) > 120 && !strings.HasPrefix(l, "  ") {
			t.Errorf("a line of %d columns:\n%s", len([]rune(l)), l)
		}
	}
	for _, want := range []string{"PROGRESS", "replicate", "never", "leader", "ROLE STATE", "idle: every voter is live",
		"edge-2", "http://10.0.0.8:2379", "http://10.0.0.7:2379 ← 2a0b5c7d9e1f3a4b",
		"standby-1 (fd422379fda50e48): learned periodic 5m0s"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	for _, absent := range []string{"ERROR", "SETTINGS", "LEADER ", "(cascaded)", "StateReplicate"} {
		if strings.Contains(out, absent) {
			t.Errorf("%q in\n%s", absent, out)
		}
	}
	t.Logf("\n%s", out)
}

func TestWriteTablePutsErrorsInTheirColumn(t *testing.T) {
	sts := commonCase()
	sts[2] = &Member{Name: "infra3", ID: "fd422379fda50e47", Error: "rpc error: code = Unavailable desc = connection refused"}
	sts[0].ProgressError = "Get \"http://127.0.0.1:2379/debug/vars\": dial tcp: connection refused"
	sts[3].Leader = "91bc3c398fb3c146" // sees another leader
	sts = append(sts, &Member{ClientURL: "http://127.0.0.1:9", Cascaded: true, IsLearner: true,
		Error: "--cascaded http://127.0.0.1:9: connection refused"})
	out := render(sts)
	lines := strings.Split(out, "\n")
	header := lines[0]
	col := strings.Index(header, "ERROR")
	if col < 0 || strings.Index(header, "PROMOTABLE") > col {
		t.Fatalf("no ERROR column last:\n%s", out)
	}
	find := func(name string) string {
		for _, l := range lines {
			if strings.HasPrefix(l, name+" ") {
				return l
			}
		}
		t.Fatalf("no row %s in\n%s", name, out)
		return ""
	}
	if l := find("infra3"); !strings.HasSuffix(l, "unreachable: rpc error: code = Unavailable desc = connection refused") || len(l) <= col {
		t.Errorf("infra3's error not in the ERROR column:\n%s", out)
	}
	if l := find("infra1"); !strings.Contains(l[col:], "leader progress unknown: ") {
		t.Errorf("the leader's progress error not in the ERROR column:\n%s", out)
	}
	if l := find("replica1"); !strings.Contains(l, "91bc3c398fb3c146") || !strings.Contains(header, "LEADER") {
		t.Errorf("replica1's other leader not shown:\n%s", out)
	}
	if !strings.Contains(out, "--cascaded http://127.0.0.1:9: connection refused") {
		t.Errorf("the unreachable cascaded replica's error not shown:\n%s", out)
	}
	t.Logf("\n%s", out)
}
