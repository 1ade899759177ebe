package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/understudy-kv/understudy/test/harness"
)

// statusJSON is one row of `replica status -w json`, the fields these
// tests read.
type statusJSON struct {
	Name           string `json:"name"`
	ID             string `json:"id"`
	ClientURL      string `json:"client_url"`
	IsLeader       bool   `json:"is_leader"`
	Reachable      bool   `json:"reachable"`
	Error          string `json:"error"`
	LeaderProgress string `json:"leader_progress"`
	ProgressError  string `json:"leader_progress_error"`
	Compaction     string `json:"compaction"`
	Cascaded       bool   `json:"cascaded"`
	Upstreams      string `json:"upstream_chain"`
	Revision       int64  `json:"revision"`
}

func parseStatus(t *testing.T, out []byte) []statusJSON {
	t.Helper()
	var rows []statusJSON
	if err := json.Unmarshal(out, &rows); err != nil {
		t.Fatalf("replica status -w json does not parse: %v\n%s", err, out)
	}
	return rows
}

// runStatus runs `replica status` with args; it fails the test if the
// command does not exit 0.
func runStatus(t *testing.T, bins *harness.Bins, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bins.Replica, append([]string{"status"}, args...)...).Output()
	if err != nil {
		t.Fatalf("replica status %v: %v\n%s", args, err, out)
	}
	return out
}

// TestReplicaStatusShowsCascadedReplicasByName: a learner replica r1, a
// cascaded replica c1 fed by it, c2 fed by c1, and a --cascaded URL where
// nothing listens. `replica status` names c1 and c2 by their --name, with
// their advertised client URL as ID and their chains of upstreams (c2's
// through c1's ID to r1's member ID) in a column of their own; the dead
// URL's error, naming it, in the ERROR column; every member's leader
// progress. A cascaded replica restarted with an upstream that copies from
// it finds itself (its ID, the same after the restart) in that upstream's
// chain, and refuses it: a cycle.
func TestReplicaStatusShowsCascadedReplicasByName(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3})
	voters := client(t, c.Endpoints()...)
	r1 := startReplica(t, bins, c, "r1", replicaOpts{})
	c1 := cascaded(t, c, "c1", []string{r1.ClientURL})
	c2 := cascaded(t, c, "c2", []string{c1.ClientURL})
	dead := fmt.Sprintf("http://127.0.0.1:%d", harness.FreePort(t))
	id, _ := memberID(t, voters, r1.ClientURL)
	r1ID := fmt.Sprintf("%x", id)
	eps := strings.Join(c.Endpoints(), ",")
	cascadedURLs := strings.Join([]string{c1.ClientURL, c2.ClientURL, dead}, ",")

	var rows []statusJSON
	var out []byte
	harness.WaitFor(t, time.Minute, "every member's leader progress and both cascaded replicas' chains", func() (bool, error) {
		out = runStatus(t, bins, "-w", "json", "--endpoints", eps, "--cascaded", cascadedURLs)
		rows = parseStatus(t, out)
		for _, r := range rows {
			switch {
			case !r.Cascaded && (r.LeaderProgress == "" || r.ProgressError != ""):
				return false, fmt.Errorf("%s: leader progress %q (%s)", r.Name, r.LeaderProgress, r.ProgressError)
			case r.Cascaded && r.ClientURL != dead && strings.Count(r.Upstreams, ",") < 1:
				return false, fmt.Errorf("%s: chain %q", r.Name, r.Upstreams)
			}
		}
		return len(rows) == 7, fmt.Errorf("%d rows", len(rows))
	})
	want := map[string]statusJSON{
		c1.ClientURL: {Name: "c1", ID: c1.ClientURL, Upstreams: c1.ClientURL + "," + r1ID, Reachable: true},
		c2.ClientURL: {Name: "c2", ID: c2.ClientURL, Upstreams: c2.ClientURL + "," + c1.ClientURL + "," + r1ID, Reachable: true},
	}
	for _, r := range rows {
		if !r.Cascaded {
			continue
		}
		if r.ClientURL == dead {
			if r.Reachable || !strings.Contains(r.Error, dead) {
				t.Errorf("the dead --cascaded URL: %+v; want unreachable, its error naming %s", r, dead)
			}
			continue
		}
		w := want[r.ClientURL]
		if r.Name != w.Name || r.ID != w.ID || r.Upstreams != w.Upstreams || !r.Reachable || r.Error != "" || r.Revision == 0 {
			t.Errorf("cascaded row %+v; want name %s, ID %s, chain %s", r, w.Name, w.ID, w.Upstreams)
		}
	}

	table := string(runStatus(t, bins, "--endpoints", eps, "--cascaded", cascadedURLs))
	line := func(prefix string) string {
		for _, l := range strings.Split(table, "\n") {
			if strings.HasPrefix(l, prefix+" ") {
				return l
			}
		}
		t.Fatalf("no row %s in\n%s", prefix, table)
		return ""
	}
	if l := line("c2"); !strings.Contains(l, c2.ClientURL) || !strings.Contains(l, c1.ClientURL+" ← "+r1ID) {
		t.Errorf("c2's row has not its ID and chain %s ← %s:\n%s", c1.ClientURL, r1ID, table)
	}
	if l := line("r1"); !strings.Contains(l, "replicate") || !strings.Contains(l, "learner") {
		t.Errorf("r1's row has not its leader progress:\n%s", table)
	}
	var cascadedHeader string
	for _, l := range strings.Split(table, "\n") {
		if strings.Contains(l, "UPSTREAMS") {
			cascadedHeader = l
		}
		if strings.Contains(l, dead) {
			if col := strings.Index(cascadedHeader, "ERROR"); col < 0 || strings.Index(l, "--cascaded "+dead) < col {
				t.Errorf("the dead URL's error is not in the ERROR column:\n%s", table)
			}
		}
		if !strings.Contains(l, dead) && len([]rune(l)) > 120 && !strings.HasPrefix(l, "  ") {
			t.Errorf("a row of %d columns:\n%s", len([]rune(l)), table)
		}
	}
	if strings.Contains(table, "(cascaded)") || !strings.Contains(table, "--cascaded "+dead) {
		t.Errorf("replica status table:\n%s", table)
	}
	t.Logf("replica status:\n%s", table)

	// c1 restarted with c2, which copies from it, as its upstream: c2's
	// chain holds c1's ID (its advertised client URL), which a restart
	// keeps.
	args := c1.Proc.Args()
	i := slices.Index(args, "--upstream")
	args[i+1] = c2.ClientURL
	c1.Proc.RestartWithArgs(t, args)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code, err := c1.Proc.Wait(ctx)
	if err != nil {
		t.Fatalf("c1 restarted with c2 as its upstream still runs after a minute: a cycle not refused\n%s", c1.Proc.Log())
	}
	if log := c1.Proc.Log(); code == 0 || !strings.Contains(log, "a cycle") || !strings.Contains(log, c1.ClientURL) {
		t.Fatalf("c1 restarted with c2 as its upstream exited %d, want a refusal naming the cycle through %s:\n%s", code, c1.ClientURL, log)
	}
}

// TestDevDeploymentStatusShowsLeaderProgress: under `primary --dev` (three
// voters and a replica in one process, which share etcd's one raft.status
// expvar) `replica status` shows the leader's raft progress for every
// member, as on a cluster of processes.
func TestDevDeploymentStatusShowsLeaderProgress(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	harness.Must(t, bins.RequireReplica())
	base := harness.FreePortRun(t, 102)
	p := harness.Start(t, harness.ProcConfig{Name: "dev", Bin: bins.Primary, Args: []string{"--dev", "--dev-port", strconv.Itoa(base), "--dev-dir", t.TempDir()}})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := p.WaitLog(ctx, "Ctrl-C stops everything"); err != nil {
		t.Fatalf("dev deployment not up: %v", err)
	}
	var eps []string
	for i := range 3 {
		eps = append(eps, fmt.Sprintf("http://127.0.0.1:%d", base+2*i))
	}
	out := runStatus(t, bins, "-w", "json", "--endpoints", strings.Join(eps, ","))
	rows := parseStatus(t, out)
	if len(rows) != 4 {
		t.Fatalf("replica status: %d rows, want 3 voters and the replica:\n%s", len(rows), out)
	}
	for _, r := range rows {
		if r.LeaderProgress == "" || r.ProgressError != "" {
			t.Errorf("%s: leader progress %q (%s)", r.Name, r.LeaderProgress, r.ProgressError)
		}
	}
	table := string(runStatus(t, bins, "--endpoints", strings.Join(eps, ",")))
	if strings.Count(table, "replicate") != 4 {
		t.Errorf("replica status under --dev does not show every member's progress:\n%s", table)
	}
	t.Logf("replica status under --dev:\n%s", table)
}
