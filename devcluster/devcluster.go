// Package devcluster runs a complete understudy deployment on loopback in one
// process, for trying understudy out: three voters and a replica on
// consecutive ports from 2379.
package devcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/server/v3/embed"

	"go.uber.org/zap"

	"github.com/understudy-kv/understudy/config"
	"github.com/understudy-kv/understudy/learner"
	"github.com/understudy-kv/understudy/logging"
	"github.com/understudy-kv/understudy/primary"
	"github.com/understudy-kv/understudy/replica"
)

// Config says where the deployment keeps its data and where it reports.
type Config struct {
	// Dir holds every member's data and logs; empty means a temporary
	// directory, removed on exit.
	Dir string
	// Out receives the endpoints and the commands to try.
	Out io.Writer
	// Host is the address every member listens on (default 127.0.0.1).
	Host string
	// BasePort is the first voter's client port (default 2379). Voter i
	// (0, 1, 2) serves clients on BasePort+2i and peers on BasePort+2i+1;
	// the replica uses BasePort+100 and +101.
	BasePort int
}

type voterSpec struct{ name, client, peer string }

func (c Config) voters() []voterSpec {
	var out []voterSpec
	for i := range 3 {
		p := c.BasePort + 2*i
		out = append(out, voterSpec{
			name:   fmt.Sprintf("infra%d", i+1),
			client: fmt.Sprintf("http://%s:%d", c.Host, p),
			peer:   fmt.Sprintf("http://%s:%d", c.Host, p+1),
		})
	}
	return out
}

// Run starts the deployment, prints how to use it, and stops it cleanly
// when ctx ends.
func Run(ctx context.Context, cfg Config) (err error) {
	cfg, cleanup, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	defer cleanup()
	voters := cfg.voters()
	ic := initialCluster(voters)
	members, err := startVoters(ctx, cfg, voters, ic)
	defer func() {
		for _, m := range members {
			m.Close()
		}
	}()
	if err != nil {
		return err
	}
	var eps []string
	for _, v := range voters {
		eps = append(eps, v.client)
	}
	errs := make(chan error, len(members)+1)
	rcfg := replicaConfig(cfg, eps)
	ready := make(chan struct{})
	rctx, stopReplica := context.WithCancel(ctx)
	replicaDone := make(chan struct{})
	go func() {
		defer close(replicaDone)
		if err := replica.Run(rctx, rcfg, replica.Options{
			Logger:           fileLogger(filepath.Join(cfg.Dir, rcfg.Name+".log")),
			MemberLogOutputs: []string{filepath.Join(cfg.Dir, rcfg.Name+".member.log")},
			Ready:            ready,
			Progress:         func(learner.Progress) {},
		}); err != nil {
			errs <- fmt.Errorf("replica: %w", err)
		}
	}()
	// The replica stops before the voters, so that it leaves no learner
	// waiting on a leader that is gone.
	defer func() { stopReplica(); <-replicaDone }()
	select {
	case <-ready:
	case err := <-errs:
		return fmt.Errorf("devcluster: %w", err)
	case <-ctx.Done():
		return nil
	}
	if members, err = leadFromNewestNode(ctx, cfg, voters, ic, members); err != nil {
		if errors.Is(err, errNotStarted) {
			return err
		}
		fmt.Fprintf(cfg.Out, "(replica status will not show the leader's raft progress: %v)\n", err)
	}
	printWelcome(cfg, eps, rcfg.AdvertiseClientURLs[0])
	return watchVoters(ctx, cfg, members, errs)
}

// withDefaults fills what cfg leaves out; cleanup removes a data dir it
// made.
func (cfg Config) withDefaults() (_ Config, cleanup func(), err error) {
	cleanup = func() {}
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	if cfg.BasePort == 0 {
		cfg.BasePort = 2379
	}
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	if cfg.Dir == "" {
		dir, err := os.MkdirTemp("", "understudy-dev-")
		if err != nil {
			return cfg, cleanup, fmt.Errorf("devcluster: %w", err)
		}
		cfg.Dir, cleanup = dir, func() { os.RemoveAll(dir) }
	}
	return cfg, cleanup, nil
}

// initialCluster is etcd's --initial-cluster of voters.
func initialCluster(voters []voterSpec) string {
	var ic []string
	for _, v := range voters {
		ic = append(ic, v.name+"="+v.peer)
	}
	return strings.Join(ic, ",")
}

// errNotStarted: a voter started again did not start.
var errNotStarted = errors.New("devcluster: a voter did not start again")

// leadFromNewestNode makes the leader the voter whose raft node started
// last in this process: etcd's raft.status expvar, which `replica status`
// reads the leader's raft progress from (/debug/vars), is one per process
// and describes that node, which is the replica's once it has joined
// (etcd adds no member, not even a learner, before a quorum of the voters
// after the addition is connected: all three). So a follower is started
// again (the other two are a quorum meanwhile), and given the leadership.
// It returns the members with that follower's new start in place of the
// old one (or without it, and errNotStarted, if it did not start).
func leadFromNewestNode(ctx context.Context, cfg Config, voters []voterSpec, ic string, members []*embed.Etcd) ([]*embed.Etcd, error) {
	i := slices.IndexFunc(members, func(m *embed.Etcd) bool { return m.Server.Lead() != uint64(m.Server.MemberID()) })
	if i < 0 {
		return members, fmt.Errorf("devcluster: no follower to start again")
	}
	name := members[i].Config().Name
	v := slices.IndexFunc(voters, func(v voterSpec) bool { return v.name == name })
	members[i].Close()
	again, err := startVoters(ctx, cfg, voters[v:v+1], ic)
	if err != nil {
		return slices.Delete(members, i, i+1), fmt.Errorf("%w: %w", errNotStarted, err)
	}
	members[i] = again[0]
	return members, moveLeader(ctx, members, members[i])
}

// moveLeader hands the leadership to to, within a few seconds.
func moveLeader(ctx context.Context, members []*embed.Etcd, to *embed.Etcd) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	target := uint64(to.Server.MemberID())
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, m := range members {
			switch lead := m.Server.Lead(); {
			case lead == target:
				return nil
			case lead == uint64(m.Server.MemberID()):
				if err := m.Server.MoveLeader(ctx, lead, target); err != nil {
					return fmt.Errorf("devcluster: moving the leadership to %s: %w", to.Config().Name, err)
				}
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("devcluster: moving the leadership to %s: no voter leads: %w", to.Config().Name, ctx.Err())
		case <-tick.C:
		}
	}
}

// startVoters starts voters at once (each waits for a quorum of the
// initial cluster ic) and returns those that started, with an error if any
// did not.
func startVoters(ctx context.Context, cfg Config, voters []voterSpec, ic string) ([]*embed.Etcd, error) {
	type started struct {
		e   *embed.Etcd
		err error
	}
	results := make(chan started, len(voters))
	launched := 0
	var problems []error
	for _, v := range voters {
		pc, err := voterConfig(cfg.Dir, v, ic)
		if err != nil {
			problems = append(problems, err)
			break
		}
		launched++
		go func() {
			e, err := primary.Start(ctx, pc)
			results <- started{e, err}
		}()
	}
	var members []*embed.Etcd
	for range launched {
		r := <-results
		if r.err != nil {
			problems = append(problems, r.err)
			continue
		}
		members = append(members, r.e)
	}
	if len(problems) > 0 {
		return members, fmt.Errorf("devcluster: voters did not start (ports %d-%d in use? --dev-port picks others): %w",
			cfg.BasePort, cfg.BasePort+5, errors.Join(problems...))
	}
	return members, nil
}

// watchVoters returns nil when ctx ends, or the first voter's failure (or
// the replica's, through errs).
func watchVoters(ctx context.Context, cfg Config, members []*embed.Etcd, errs chan error) error {
	// Its watchers end with it.
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for _, m := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case err := <-m.Err():
				errs <- err
			case <-m.Server.StopNotify():
				errs <- primary.ErrStopped
			case <-ctx.Done():
			}
		}()
	}
	select {
	case <-ctx.Done():
		fmt.Fprintln(cfg.Out, "stopping…")
		return nil
	case err := <-errs:
		return fmt.Errorf("devcluster: a voter failed: %w", err)
	}
}

func voterConfig(dir string, v voterSpec, initialCluster string) (config.Primary, error) {
	pc := config.DefaultPrimary()
	ec := pc.Etcd
	ec.Name = v.name
	ec.Dir = filepath.Join(dir, v.name+".etcd")
	ec.InitialCluster = initialCluster
	ec.InitialClusterToken = "understudy-dev"
	ec.LogOutputs = []string{filepath.Join(dir, v.name+".log")}
	ec.LogLevel = "warn"
	cu, err := url.Parse(v.client)
	if err != nil {
		return pc, fmt.Errorf("devcluster: %w", err)
	}
	pu, err := url.Parse(v.peer)
	if err != nil {
		return pc, fmt.Errorf("devcluster: %w", err)
	}
	ec.ListenClientUrls, ec.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	ec.ListenPeerUrls, ec.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	return pc, nil
}

func replicaConfig(cfg Config, voters []string) config.Replica {
	rc := config.DefaultReplica()
	rc.Name = "replica1"
	rc.DataDir = filepath.Join(cfg.Dir, rc.Name+".replica")
	rc.Learner.Join = voters
	client := fmt.Sprintf("http://%s:%d", cfg.Host, cfg.BasePort+100)
	peer := fmt.Sprintf("http://%s:%d", cfg.Host, cfg.BasePort+101)
	rc.ListenClientURLs, rc.AdvertiseClientURLs = []string{client}, []string{client}
	rc.Learner.ListenPeerURLs, rc.Learner.AdvertisePeerURLs = []string{peer}, []string{peer}
	return rc
}

// fileLogger sends the in-process replica's own logs to a file, beside the
// voters' logs, so the terminal shows only what the user needs.
func fileLogger(path string) *zap.Logger {
	lg, err := logging.New("info", path)
	if err != nil {
		return zap.NewNop()
	}
	return lg
}

func printWelcome(cfg Config, voters []string, replicaURL string) {
	w := cfg.Out
	fmt.Fprintf(w, "understudy dev deployment is up (data and logs in %s)\n\n", cfg.Dir)
	fmt.Fprintf(w, "  voters:   %s\n", strings.Join(voters, ","))
	fmt.Fprintf(w, "  replica:  %s   (a learner; serves reads and watches, forwards writes)\n", replicaURL)
	fmt.Fprintf(w, "\nTry, in another terminal (etcdctl v3.7 is `go tool etcdctl` in this module):\n")
	fmt.Fprintf(w, "  go tool etcdctl --endpoints=%s put greeting hello\n", replicaURL)
	fmt.Fprintf(w, "  go tool etcdctl --endpoints=%s get greeting\n", replicaURL)
	fmt.Fprintf(w, "  go tool etcdctl --endpoints=%s get greeting --consistency=s\n", replicaURL)
	fmt.Fprintf(w, "  go tool etcdctl --endpoints=%s watch greeting\n", replicaURL)
	fmt.Fprintf(w, "  go tool etcdctl --endpoints=%s member list -w table\n", replicaURL)
	fmt.Fprintf(w, "  go tool etcdctl --endpoints=%s,%s endpoint status -w table\n", strings.Join(voters, ","), replicaURL)
	fmt.Fprintf(w, "\nCtrl-C stops everything.\n")
}
