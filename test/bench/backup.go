package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/understudy-kv/understudy/test/harness"
)

// backupID is the backup scenario's Row.Scenario.
const backupID = "backup"

// Kinds of the backup scenario's rows: where `etcdctl snapshot save` reads.
const (
	backupLeader   = "snapshot save from the leader"
	backupFollower = "snapshot save from a follower"
	backupReplica  = "snapshot save from a learner replica"
)

// backupRounds are the backup scenario's rounds, each a save from every
// source, in rotating order.
const backupRounds = 3

// backupScenario measures the backup an operator takes (issue 43): `etcdctl
// snapshot save` of the same data (fanoutBytes of 512 KiB values) from the
// leader, a follower and a learner replica of 3 primaries, in rounds, the
// sources in rotating order: the time it takes, and the leader's and the
// source's CPU meanwhile. A replica serves the snapshot from its own
// backend, so the leader only keeps the cluster as it was; from the leader,
// the leader reads and streams the whole database while it leads.
func backupScenario(p params) ([]Row, error) {
	var rows []Row
	err := scenario(backupID, func(r *runner) {
		bins := harness.Binaries(r)
		c := harness.StartCluster(r, harness.ClusterConfig{N: 3})
		leader := c.WaitLeader(r, 30*time.Second)
		rep := harness.StartReplica(r, c, harness.ReplicaConfig{Name: "r1", Extra: p.replicaArgs})
		const valueSize = 512 << 10
		fill(r, clients(r, leader.ClientURL, 1)[0], "bench/backup/", p.fanoutBytes/valueSize, strings.Repeat("b", valueSize))
		follower := c.Members[0]
		if follower == leader {
			follower = c.Members[1]
		}
		sources := []struct {
			kind, url string
			pid       int
		}{
			{backupLeader, leader.ClientURL, leader.Proc.PID()},
			{backupFollower, follower.ClientURL, follower.Proc.PID()},
			{backupReplica, rep.ClientURL, rep.PID()},
		}
		arms := map[string]*scaleArm{}
		for _, s := range sources {
			arms[s.kind] = newScaleArm(0, s.kind, "leader CPU")
		}
		file := filepath.Join(r.TempDir(), "snapshot.db")
		var size int64
		for k := range backupRounds {
			for i := range sources {
				s := sources[(i+k)%len(sources)]
				cpu := startCPU(map[string]int{"leader": leader.Proc.PID(), "source": s.pid})
				start := time.Now()
				cmd := harness.EtcdctlCmd(r, bins, []string{s.url}, "snapshot", "save", file, "--command-timeout", "10m")
				if out, err := cmd.CombinedOutput(); err != nil {
					r.Fatalf("%s: etcdctl snapshot save: %v\n%s", s.kind, err, out)
				}
				took := time.Since(start)
				st, err := os.Stat(file)
				if err != nil {
					r.Fatalf("%s: %v", s.kind, err)
				}
				size = st.Size()
				if err := os.Remove(file); err != nil {
					r.Fatalf("%s: %v", s.kind, err)
				}
				res := Result{Ops: 1, Seconds: took.Seconds(), CPU: cpu.stop(), P50: took, P99: took}
				arms[s.kind].add(res, res.CPU["leader"])
				r.Logf("%-40s %v, leader %.2f CPU-s, source %.2f", s.kind, took.Round(10*time.Millisecond), res.CPU["leader"], res.CPU["source"])
			}
		}
		for _, s := range sources {
			a := arms[s.kind]
			row := a.row(p)
			row.Scenario, row.Name = backupID, s.kind
			row.Note = fmt.Sprintf("`etcdctl snapshot save`, a %d MiB database (%d MiB of %d KiB values); ops/s inverse of the time a save takes; leader CPU-s per save: %s; CPU \"source\" is the process that served it",
				size>>20, p.fanoutBytes>>20, valueSize>>10, windowsText(a.windows, 2))
			rows = append(rows, row)
		}
	})
	return rows, err
}

// backupComparisons are the report's ratios of the backup rows.
func backupComparisons() []comparison {
	return []comparison{
		{"leader CPU while a snapshot is saved from a learner replica vs from the leader", backupReplica, backupLeader, "leader CPU", "", ""},
		{"leader CPU while a snapshot is saved from a follower vs from the leader", backupFollower, backupLeader, "leader CPU", "", ""},
		{"saves a second (the inverse of a save's time) from a learner replica vs from the leader", backupReplica, backupLeader, "throughput", "", ""},
	}
}
