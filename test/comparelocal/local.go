// Package comparelocal is the topology `replica compare --local` runs: real
// processes on 127.0.0.1, started and stopped by the test harness. It is
// linked only into binaries built with the localcompare tag (the tests',
// and `go run -tags localcompare ./cmd/replica compare --local`), never into
// the shipped replica, which must not carry test code.
package comparelocal

import (
	"fmt"
	"os"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"context"

	"github.com/understudy-kv/understudy/compare"
	"github.com/understudy-kv/understudy/test/harness"
)

// Local is the topology --local runs, on 127.0.0.1: three voters whose raft
// traffic passes TCP proxies, a replica behind a proxy of its own (so that
// its raft links can be cut), and `replica mirror` copying the prefix into
// a one-member destination cluster. Every part is a real process, started
// and stopped by package harness.
type Local struct {
	t       harness.TB
	Cluster *harness.Cluster
	Replica *harness.Replica
	Dest    *harness.Cluster
	Mirror  *harness.Proc
	clients compare.Clients
}

// StartLocal starts the topology through t (a *testing.T, or a
// harness.Runner), all of it stopped at t's cleanup; the mirror copies
// prefix.
func StartLocal(t harness.TB, prefix string) *Local {
	t.Helper()
	l := &Local{t: t}
	l.Cluster = harness.StartCluster(t, harness.ClusterConfig{N: 3, PeerProxies: true})
	l.Replica = harness.StartReplica(t, l.Cluster, harness.ReplicaConfig{Name: "replica", PeerProxy: true})
	l.Dest = harness.StartCluster(t, harness.ClusterConfig{N: 1})
	l.Mirror = harness.Start(t, harness.ProcConfig{Name: "mirror", Bin: l.Cluster.Bins.Replica, Args: []string{
		"mirror", "--source-endpoints", strings.Join(l.Cluster.Endpoints(), ","), "--dest-endpoints", l.Dest.Endpoints()[0],
		"--prefix", prefix, "--name", "compare", "--log-level", "warn",
	}})
	l.clients = compare.Clients{Primary: l.Cluster.Client(t), Replica: localClient(t, l.Replica.ClientURL), Mirror: l.Dest.Client(t)}
	return l
}

// Clients returns clients of the voters, the replica and the mirror's
// destination, closed at t's cleanup.
func (l *Local) Clients() compare.Clients { return l.clients }

func localClient(t harness.TB, url string) *clientv3.Client {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(), DialOptions: compare.DialOptions()})
	if err != nil {
		t.Fatalf("compare: client of %s: %v", url, err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// Injector returns what applies fault f to the topology; nil for
// FaultNone. do runs harness calls so that a failure becomes an error
// (harness.Runner.Do, or a function that just calls its argument under
// go test).
func (l *Local) Injector(f compare.Fault, do func(func()) error) (compare.Injector, error) {
	switch f {
	case compare.FaultNone:
		return nil, nil
	case compare.FaultReplicaPartition:
		return &localFault{do: do,
			inject: func() { l.Replica.CutPeerLinks(l.t, l.Cluster) },
			heal:   func() { l.Replica.HealPeerLinks(l.Cluster) }}, nil
	case compare.FaultMirrorKill:
		return &localFault{do: do,
			inject: func() { l.Mirror.Kill() },
			heal:   func() { l.Mirror.Restart(l.t) }}, nil
	case compare.FaultLeaderKill:
		var leader *harness.Member
		return &localFault{do: do,
			inject: func() { leader = l.Cluster.Leader(l.t); leader.Proc.Kill() },
			heal:   func() { leader.Proc.Restart(l.t) }}, nil
	case compare.FaultQuorumLoss:
		var dead []*harness.Member
		return &localFault{do: do,
			inject: func() { dead = l.killMajority() },
			heal: func() {
				for _, m := range dead {
					m.Proc.Restart(l.t)
				}
			}}, nil
	}
	return nil, fmt.Errorf("compare: fault %q: not one the local topology knows", f)
}

// killMajority kills the leader and one follower: the one voter left has
// no quorum, the replica no leader.
func (l *Local) killMajority() []*harness.Member {
	leader := l.Cluster.Leader(l.t)
	dead := []*harness.Member{leader}
	for _, m := range l.Cluster.Members {
		if m != leader {
			dead = append(dead, m)
			break
		}
	}
	for _, m := range dead {
		m.Proc.Kill()
	}
	return dead
}

type localFault struct {
	do           func(func()) error
	inject, heal func()
}

func (f *localFault) Inject() error { return f.do(f.inject) }
func (f *localFault) Heal() error   { return f.do(f.heal) }

// Run measures cfg on a local topology of its own, torn down afterwards:
// what compare.Options.Local runs.
func Run(ctx context.Context, cfg compare.Config, opts compare.Options) (*compare.Analysis, error) {
	if err := chooseBinaries(); err != nil {
		return nil, err
	}
	r := harness.NewRunner("compare", opts.HarnessLog)
	defer r.Finish()
	var l *Local
	if err := r.Do(func() { l = StartLocal(r, cfg.Prefix) }); err != nil {
		return nil, fmt.Errorf("compare: local topology: %w", err)
	}
	inj, err := l.Injector(cfg.Fault, r.Do)
	if err != nil {
		return nil, err
	}
	return compare.Measure(ctx, cfg, l.Clients(), inj, opts)
}

// chooseBinaries picks what the topology runs: the binaries installed
// beside this one (this replica and a primary), so that --local works from
// any directory; else, inside a checkout, the harness builds them from it.
func chooseBinaries() error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("compare: --local: find this binary: %w", err)
	}
	if bins, ok := harness.Installed(self); ok {
		return harness.UseBinaries(bins)
	}
	if harness.InModule() {
		return nil
	}
	return fmt.Errorf("compare: --local needs a primary binary beside %s, or a source checkout as the working directory to build one from; "+
		"install both with: go build -tags localcompare -o DIR ./cmd/replica && go build -o DIR ./cmd/primary", self)
}
