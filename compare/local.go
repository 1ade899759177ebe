package compare

// The topology `replica compare --local` runs: real processes on
// 127.0.0.1, started and stopped by package loopback, from the binaries
// installed beside this one (the replica users get: no build tag).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

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
	Cluster *loopback.Cluster
	Replica *loopback.Replica
	// Cascaded is a cascaded replica fed by Replica.
	Cascaded *loopback.Replica
	Dest     *loopback.Cluster
	Mirror   *loopback.Proc
	clients  Clients
}

// StartLocal starts the topology of bins in e, all of it stopped at e's
// Close (also after an error: what was started is e's); the mirror copies
// prefix.
func StartLocal(e *loopback.Env, bins *loopback.Bins, prefix string) (*Local, error) {
	if err := bins.RequireReplica(); err != nil {
		return nil, err
	}
	l := &Local{}
	var err error
	if l.Cluster, err = loopback.StartCluster(e, loopback.ClusterConfig{Bins: bins, N: 3, PeerProxies: true}); err != nil {
		return nil, err
	}
	if l.Replica, err = loopback.StartReplica(e, l.Cluster, loopback.ReplicaConfig{Name: "replica", PeerProxy: true}); err != nil {
		return nil, err
	}
	if l.Cascaded, err = loopback.StartReplica(e, l.Cluster, loopback.ReplicaConfig{Name: "cascaded", Upstream: []string{l.Replica.ClientURL}}); err != nil {
		return nil, err
	}
	if l.Dest, err = loopback.StartCluster(e, loopback.ClusterConfig{Bins: bins, N: 1}); err != nil {
		return nil, err
	}
	if l.Mirror, err = loopback.Start(e, loopback.ProcConfig{Name: "mirror", Bin: l.Cluster.Bins.Replica, Args: []string{
		"mirror", "--source-endpoints", strings.Join(l.Cluster.Endpoints(), ","), "--dest-endpoints", l.Dest.Endpoints()[0],
		"--prefix", prefix, "--name", "compare", "--log-level", "warn",
	}}); err != nil {
		return nil, err
	}
	if l.clients.Primary, err = l.Cluster.Client(); err != nil {
		return nil, err
	}
	if l.clients.Replica, err = localClient(e, l.Replica.ClientURL); err != nil {
		return nil, err
	}
	if l.clients.Cascaded, err = localClient(e, l.Cascaded.ClientURL); err != nil {
		return nil, err
	}
	if l.clients.Mirror, err = l.Dest.Client(); err != nil {
		return nil, err
	}
	return l, nil
}

// Clients returns clients of the voters, the replica and the mirror's
// destination, closed at the Close of the Env the topology started in.
func (l *Local) Clients() Clients { return l.clients }

func localClient(e *loopback.Env, url string) (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(), DialOptions: DialOptions()})
	if err != nil {
		return nil, fmt.Errorf("compare: client of %s: %w", url, err)
	}
	if err := e.OnClose(func() error {
		if err := cli.Close(); err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("compare: client of %s: %w", url, err)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	return cli, nil
}

// Injector returns what applies fault f to the topology; nil for
// FaultNone.
func (l *Local) Injector(f config.Fault) (Injector, error) {
	switch f {
	case config.FaultNone:
		return nil, nil
	case config.FaultReplicaPartition:
		return &localFault{
			inject: func() error { return l.Replica.CutPeerLinks(l.Cluster) },
			heal:   func() error { l.Replica.HealPeerLinks(l.Cluster); return nil }}, nil
	case config.FaultMirrorKill:
		return &localFault{
			inject: func() error { l.Mirror.Kill(); return nil },
			heal:   l.Mirror.Restart}, nil
	case config.FaultLeaderKill:
		var leader *loopback.Member
		return &localFault{
			inject: func() error {
				var err error
				if leader, err = l.Cluster.Leader(); err != nil {
					return err
				}
				leader.Proc.Kill()
				return nil
			},
			heal: func() error { return leader.Proc.Restart() }}, nil
	case config.FaultQuorumLoss:
		var dead []*loopback.Member
		return &localFault{
			inject: func() error {
				var err error
				dead, err = l.killMajority()
				return err
			},
			heal: func() error {
				var errs []error
				for _, m := range dead {
					errs = append(errs, m.Proc.Restart())
				}
				return errors.Join(errs...)
			}}, nil
	}
	return nil, fmt.Errorf("compare: fault %q: not one the local topology knows", f)
}

// killMajority kills the leader and one follower: the one voter left has
// no quorum, the replica no leader.
func (l *Local) killMajority() ([]*loopback.Member, error) {
	leader, err := l.Cluster.Leader()
	if err != nil {
		return nil, err
	}
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
	return dead, nil
}

type localFault struct {
	inject, heal func() error
}

func (f *localFault) Inject() error { return f.inject() }
func (f *localFault) Heal() error   { return f.heal() }

// runLocal measures cfg on a local topology of its own, torn down
// afterwards, from the binaries installed beside this one. When it fails,
// the end of each process's log goes to opts.HarnessLog.
func runLocal(ctx context.Context, cfg config.Compare, opts Options) (a *Analysis, err error) {
	bins, err := localBinaries()
	if err != nil {
		return nil, err
	}
	failed := false
	e, err := loopback.NewEnv(loopback.EnvConfig{Name: "compare", Log: opts.HarnessLog, ShowLogs: func() bool { return failed }})
	if err != nil {
		return nil, fmt.Errorf("compare: local topology: %w", err)
	}
	defer func() {
		failed = err != nil
		if cerr := e.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("compare: stopping the local topology: %w", cerr))
		}
	}()
	l, err := StartLocal(e, &bins, cfg.Prefix)
	if err != nil {
		return nil, fmt.Errorf("compare: local topology: %w", err)
	}
	inj, err := l.Injector(cfg.Fault)
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
