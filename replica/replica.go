// Package replica runs a replica: an etcd member that joined its cluster as a
// learner (package learner), fronted by an etcd-compatible gRPC server that
// serves reads and watches itself (package readpath).
package replica

import (
	"context"
	"errors"
	"fmt"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/understudy-kv/understudy/certexpiry"
	"github.com/understudy-kv/understudy/config"
	"github.com/understudy-kv/understudy/learner"
	"github.com/understudy-kv/understudy/logging"
	"github.com/understudy-kv/understudy/promotion"
)

// ErrStopped means the embedded member stopped on its own; the usual cause is
// that the replica was removed from the cluster.
var ErrStopped = errors.New("replica: member stopped (removed from the cluster?)")

// Options are the parts of a run that are not configuration.
type Options struct {
	// Logger receives understudy's own logs; nil builds one at cfg.LogLevel.
	Logger *zap.Logger
	// Registerer receives metrics; nil means prometheus.DefaultRegisterer,
	// which the embedded member's --listen-metrics-urls serve.
	Registerer prometheus.Registerer
	// Progress receives catch-up progress; nil picks a bar on a terminal
	// and log lines otherwise.
	Progress func(learner.Progress)
	// Ready, if not nil, is closed once the front serves.
	Ready chan<- struct{}
	// MemberLogOutputs are the embedded etcd member's log outputs (etcd's
	// --log-outputs); nil means stderr.
	MemberLogOutputs []string
	// Clock is the one clock of the front, the role loop and the quota
	// guard; nil means the real clock.
	Clock clockwork.Clock
	// CascadeApplyValue, nil but in tests of a cascaded replica's checks,
	// alters the values its store applies (cascade.Config.ApplyValue).
	CascadeApplyValue func(key, value []byte) []byte
}

// Run runs the replica cfg describes until ctx ends (a clean stop, nil) or
// it fails: a learner replica (runLearner) or a cascaded replica
// (runCascaded), each given the front's settings and its own kind's.
func Run(ctx context.Context, cfg config.Replica, opts Options) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	// The data dir's kind before anything is logged, dialled or written.
	if err := checkDataDirKind(cfg.DataDir, cfg.Cascaded != nil, cfg.Learner != nil && len(cfg.Learner.Join) > 0); err != nil {
		return err
	}
	if cfg.Cascaded != nil {
		return runCascaded(ctx, cfg.Front, *cfg.Cascaded, opts)
	}
	return runLearner(ctx, learnerConfig{Front: cfg.Front, Learner: *cfg.Learner}, opts)
}

// learnerConfig is what a learner replica runs with: its front's settings
// and its own.
type learnerConfig struct {
	config.Front
	config.Learner
}

// runLearner joins (or rejoins) the cluster and serves until ctx ends or
// the member fails. Each step has a function of its own; the order is the
// point: nothing that could leave a learner behind runs before the checks
// and listeners that would make the replica fail.
func runLearner(ctx context.Context, cfg learnerConfig, opts Options) (err error) {
	// The cluster to join, before anything is logged, dialled or written.
	joinFromData := len(cfg.Join) == 0
	if joinFromData {
		join, err := joinFromDataDir(cfg.DataDir)
		if err != nil {
			return err
		}
		cfg.Join = join
	}
	opts, flush, err := opts.withDefaults(cfg.LogLevel)
	if err != nil {
		return err
	}
	defer flush()
	// Last, once everything Run started has stopped.
	defer func() { logStopped(ctx, opts.Logger, "replica stopped", cfg.Front, err) }()
	if joinFromData {
		opts.Logger.Info("no --join: restarting through the members the data dir's member list names",
			zap.String("data-dir", cfg.DataDir), zap.Strings("join", cfg.Join))
	}
	// What the replica presents, read at each scrape: a file rotated in
	// place is what the next handshake presents.
	opts.Registerer.MustRegister(certexpiry.New(
		certexpiry.File{Use: "client", Path: cfg.ClientTLS.CertFile},
		certexpiry.File{Use: "peer", Path: cfg.PeerTLS.CertFile}))
	lg := opts.Logger
	// --join is an etcd cluster, not this replica, within the dial timeout.
	joinErr, err := checkJoin(ctx, cfg)
	if err != nil {
		return err
	}
	cli, err := joinClient(lg, cfg)
	if err != nil {
		return err
	}
	defer cli.Close()
	// The data dir, if any, is this cluster's member under --name.
	if err := prepare(ctx, lg, opts.Clock, cfg, cli, joinErr); err != nil {
		return err
	}
	// Certificates and listeners first: a replica that cannot serve must
	// fail before it joins, not leave a learner behind.
	ls, err := openListeners(cfg.Front)
	if err != nil {
		return err
	}
	defer ls.closeUnserved()
	// The quota before the member starts: a replica whose quota is below a
	// voter's could raise a NOSPACE alarm that stops writes cluster-wide.
	explicitQuota := cfg.QuotaBackendBytes > 0
	if cfg.QuotaBackendBytes, err = backendQuota(ctx, lg, cli, cfg.Name, learner.HasData(cfg.DataDir), cfg.QuotaBackendBytes); err != nil {
		return err
	}
	m, err := start(ctx, lg, cfg, cli, opts)
	if err != nil {
		return err
	}
	member := &memberHandle{Etcd: m}
	defer member.close()
	roleState := newRoleStatus(lg.Named("role"), opts.Registerer)
	compaction, err := newCompaction(lg.Named("compaction"), cfg, m.Server, opts.Clock, opts.Registerer)
	if err != nil {
		return err
	}
	front, err := newFront(lg, cfg, m.Server, cli, ls.tls, roleState, compaction, opts)
	if err != nil {
		return err
	}
	gate := &promotionGate{}
	var r *roles
	if cfg.Promotion.Role != promotion.RoleReader {
		if r, err = newRoles(lg.Named("role"), cfg, m.Server, opts.Clock, front.LastLeaderContact, gate, roleState, opts.Registerer); err != nil {
			return err
		}
		// The front's rounds run all the time: the role loop's timeouts
		// know the round trip to the leader before its own evidence does.
		r.leaderRTT = front.RoundTime
	}
	quota := newQuotaGuard(lg.Named("quota"), cli, cfg.Name, uint64(m.Server.MemberID()), cfg.QuotaBackendBytes, explicitQuota, cfg.QuotaCheckInterval, opts.Clock, gate, opts.Registerer)
	peerTLS, err := clientTLS(cfg.PeerTLS, cfg.TLSVersions, cfg.AdvertisePeerURLs)
	if err != nil {
		return err
	}
	learners := newLearnerWatch(lg.Named("learners"), m.Server, httpClient(peerTLS), opts.Clock, opts.Registerer)
	err = serve(ctx, lg, cfg, m, front, ls, quota, r, learners, compaction, opts.Ready)
	return leaveOnExit(ctx, lg, opts.Clock, cfg, cli, member, err)
}

// logStopped says, in one line (msg), that a replica stopped cleanly: ctx
// ended (a signal, for the command) and Run returns nil. A replica that
// fails says why through its error instead.
func logStopped(ctx context.Context, lg *zap.Logger, msg string, cfg config.Front, err error) {
	if err != nil || ctx.Err() == nil {
		return
	}
	lg.Info(msg, zap.String("name", cfg.Name), zap.String("data-dir", cfg.DataDir), zap.NamedError("cause", context.Cause(ctx)))
}

// withDefaults fills what opts leaves out (a logger at level); flush syncs
// a logger it built.
func (opts Options) withDefaults(level string) (_ Options, flush func(), err error) {
	flush = func() {}
	if opts.Logger == nil {
		if opts.Logger, err = logging.New(level); err != nil {
			return opts, flush, err
		}
		lg := opts.Logger
		flush = func() { _ = lg.Sync() }
	}
	if opts.Registerer == nil {
		opts.Registerer = prometheus.DefaultRegisterer
	}
	if opts.Clock == nil {
		opts.Clock = clockwork.NewRealClock()
	}
	if opts.Progress == nil {
		opts.Progress = defaultProgress(opts.Logger, opts.Clock)
	}
	return opts, flush, nil
}

// joinClient is the client of the --join URLs: the join, the start checks
// and the quota guard use it.
func joinClient(lg *zap.Logger, cfg learnerConfig) (*clientv3.Client, error) {
	c, err := replicaClientConfig(cfg.Front, "--join", cfg.Join, lg.Named("join-client"))
	if err != nil {
		return nil, err
	}
	cli, err := clientv3.New(c)
	if err != nil {
		return nil, fmt.Errorf("replica: connect to --join %v: %w", cfg.Join, err)
	}
	return cli, nil
}
