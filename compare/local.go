package compare

// The topology `replica compare --local` runs: real processes on
// 127.0.0.1, started and stopped by package loopback, from the binaries
// installed beside this one (the replica users get: no build tag).

import (
	"fmt"
	"os"
	"strings"
	"time"

	"context"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/understudy-kv/understudy/config"
	"github.com/understudy-kv/understudy/loopback"
)

// Local is the topology --local runs, on 127.0.0.1: three voters whose raft
// traffic passes TCP proxies, a replica behind a proxy of its own (so that
// its raft links can be cut), and `replica mirror` copying the prefix into
// a one-member destination cluster. Every part is a real process, started
// and stopped by package loopback.
type Local struct {
	t       loopback.TB
	Cluster *loopback.Cluster
	Replica *loopback.Replica
	// Cascaded is a cascaded replica fed by Replica.
	Cascaded *loopback.Replica
	Dest     *loopback.Cluster
	Mirror   *loopback.Proc
	clients  Clients
}

// StartLocal starts the topology of bins through t (a *testing.T, or a
// loopback.Runner), all of it stopped at t's cleanup; the mirror copies
// prefix.
func StartLocal(t loopback.TB, bins *loopback.Bins, prefix string) *Local {
	t.Helper()
	bins.RequireReplica(t)
	l := &Local{t: t}
	l.Cluster = loopback.StartCluster(t, loopback.ClusterConfig{Bins: bins, N: 3, PeerProxies: true})
	l.Replica = loopback.StartReplica(t, l.Cluster, loopback.ReplicaConfig{Name: "replica", PeerProxy: true})
	l.Cascaded = loopback.StartReplica(t, l.Cluster, loopback.ReplicaConfig{Name: "cascaded", Upstream: []string{l.Replica.ClientURL}})
	l.Dest = loopback.StartCluster(t, loopback.ClusterConfig{Bins: bins, N: 1})
	l.Mirror = loopback.Start(t, loopback.ProcConfig{Name: "mirror", Bin: l.Cluster.Bins.Replica, Args: []string{
		"mirror", "--source-endpoints", strings.Join(l.Cluster.Endpoints(), ","), "--dest-endpoints", l.Dest.Endpoints()[0],
		"--prefix", prefix, "--name", "compare", "--log-level", "warn",
	}})
	l.clients = Clients{Primary: l.Cluster.Client(t), Replica: localClient(t, l.Replica.ClientURL), Cascaded: localClient(t, l.Cascaded.ClientURL), Mirror: l.Dest.Client(t)}
	return l
}

// Clients returns clients of the voters, the replica and the mirror's
// destination, closed at t's cleanup.
func (l *Local) Clients() Clients { return l.clients }

func localClient(t loopback.TB, url string) *clientv3.Client {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(), DialOptions: DialOptions()})
	if err != nil {
		t.Fatalf("compare: client of %s: %v", url, err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// Injector returns what applies fault f to the topology; nil for
// config.FaultNone. do runs harness calls so that a failure becomes an error
// (loopback.Runner.Do, or a function that just calls its argument under
// go test).
func (l *Local) Injector(f config.Fault, do func(func()) error) (Injector, error) {
	switch f {
	case config.FaultNone:
		return nil, nil
	case config.FaultReplicaPartition:
		return &localFault{do: do,
			inject: func() { l.Replica.CutPeerLinks(l.t, l.Cluster) },
			heal:   func() { l.Replica.HealPeerLinks(l.Cluster) }}, nil
	case config.FaultMirrorKill:
		return &localFault{do: do,
			inject: func() { l.Mirror.Kill() },
			heal:   func() { l.Mirror.Restart(l.t) }}, nil
	case config.FaultLeaderKill:
		var leader *loopback.Member
		return &localFault{do: do,
			inject: func() { leader = l.Cluster.Leader(l.t); leader.Proc.Kill() },
			heal:   func() { leader.Proc.Restart(l.t) }}, nil
	case config.FaultQuorumLoss:
		var dead []*loopback.Member
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
func (l *Local) killMajority() []*loopback.Member {
	leader := l.Cluster.Leader(l.t)
	dead := []*loopback.Member{leader}
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

// runLocal measures cfg on a local topology of its own, torn down
// afterwards, from the binaries installed beside this one.
func runLocal(ctx context.Context, cfg config.Compare, opts Options) (*Analysis, error) {
	bins, err := localBinaries()
	if err != nil {
		return nil, err
	}
	r := loopback.NewRunner("compare", opts.HarnessLog)
	defer r.Finish()
	var l *Local
	if err := r.Do(func() { l = StartLocal(r, &bins, cfg.Prefix) }); err != nil {
		return nil, fmt.Errorf("compare: local topology: %w", err)
	}
	inj, err := l.Injector(cfg.Fault, r.Do)
	if err != nil {
		return nil, err
	}
	return Measure(ctx, cfg, l.Clients(), inj, opts)
}

// localBinaries are what the topology runs: this replica, and the primary
// installed beside it (or on $PATH).
func localBinaries() (loopback.Bins, error) {
	self, err := os.Executable()
	if err != nil {
		return loopback.Bins{}, fmt.Errorf("compare: --local: find this binary: %w", err)
	}
	bins, ok := loopback.Installed(self)
	if !ok {
		return bins, fmt.Errorf("compare: --local runs the primary installed beside %s (or on $PATH), and there is none; "+
			"install both as README's Install says: go build -o bin/ ./cmd/replica ./cmd/primary", self)
	}
	return bins, nil
}
