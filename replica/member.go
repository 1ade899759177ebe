package replica

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/jonboulle/clockwork"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/understudy-kv/understudy/learner"
	"github.com/understudy-kv/understudy/logging"
	"github.com/understudy-kv/understudy/membership"
	"github.com/understudy-kv/understudy/readpath"
)

// joinProbeTimeout bounds the check that --join reaches an etcd cluster.
const joinProbeTimeout = 5 * time.Second

// checkJoin checks, before anything listens or is added, that --join is
// not this replica and answers as an etcd cluster, within dialTimeout
// (conn.Flags.Probe). A --join that does not answer stops a first start
// at once, naming each URL and its cause; a data dir that holds a member
// restarts without --join (prepare), and joinErr says why it did not
// answer.
func checkJoin(ctx context.Context, cfg learnerConfig) (joinErr, err error) {
	if err := joinsItself(cfg); err != nil {
		return nil, err
	}
	f, err := clientFlags(cfg.Front, "--join", cfg.Join)
	if err != nil {
		return nil, err
	}
	if _, joinErr = f.Probe(ctx); joinErr == nil || learner.HasData(cfg.DataDir) {
		return joinErr, nil
	}
	return nil, fmt.Errorf("replica: %w", joinErr)
}

// prepare checks, before anything listens or is added, that the data dir
// belongs to the cluster --join reaches (joinErr, if checkJoin found it
// does not answer). A data dir holding a learner that never started (a
// first start that crashed after the add) is emptied, and its entry
// removed unless a join with these peer URLs takes it over.
func prepare(ctx context.Context, lg *zap.Logger, clock clockwork.Clock, cfg learnerConfig, cli *clientv3.Client, joinErr error) error {
	stored, held, err := learner.ReadDataDir(cfg.DataDir)
	if err != nil {
		return fmt.Errorf("replica: %w", err)
	}
	cl, err := probeJoin(ctx, cli, cfg.Join, joinErr)
	if err != nil && held {
		// A member restarting must not depend on --join: a voter serves
		// clients only once it has published itself, which takes a quorum
		// this member may be part of (a promoted replica). Its own raft
		// refuses peers of another cluster.
		lg.Warn("--join does not answer; restarting as the member the data dir holds, unchecked against it",
			zap.String("data-dir", cfg.DataDir), zap.String("member-id", fmt.Sprintf("%x", stored.ID)),
			zap.String("cluster-id", fmt.Sprintf("%x", stored.ClusterID)), zap.Error(err))
		return nil
	}
	if err != nil {
		return fmt.Errorf("replica: %w", err)
	}
	verdict, err := learner.CheckDataDir(self(cfg), stored, held, cl.ID, cl.Members)
	confirmed := !errors.Is(err, learner.ErrRemovedMember) // a foreign cluster ID does not lag
	if errors.Is(err, learner.ErrRemovedMember) || verdict == learner.VerdictDiscard {
		// The serializable list may lag (an add not yet applied where it
		// was read, a learner since started or promoted): decide on the
		// leader's before refusing, and before deleting anything.
		lctx, cancel := context.WithTimeout(ctx, joinProbeTimeout)
		list, lerr := cli.MemberList(lctx)
		cancel()
		switch {
		case lerr == nil:
			verdict, err = learner.CheckDataDir(self(cfg), stored, held, list.Header.ClusterId, list.Members)
			confirmed = true
		case verdict == learner.VerdictDiscard:
			return fmt.Errorf("replica: --data-dir %s holds learner %x, which the cluster lists as never started, but the leader's member list cannot confirm it (%v); nothing deleted, start again once --join answers", cfg.DataDir, stored.ID, lerr)
		}
	}
	if stale := errors.Is(err, learner.ErrForeignDataDir) || errors.Is(err, learner.ErrRemovedMember); stale && cfg.ReplaceStaleDataDir != "" {
		want, _ := cfg.StaleDataDirCluster() // checked by Validate
		switch {
		case !confirmed:
			return fmt.Errorf("replica: %w; --replace-stale-data-dir: the leader's member list could not confirm it, nothing moved", err)
		case cl.ID != want:
			return fmt.Errorf("replica: %w; --replace-stale-data-dir %x, but --join is cluster %x: nothing moved", err, want, cl.ID)
		}
		return moveAside(lg, clock, cfg, stored, err)
	}
	if err != nil {
		return fmt.Errorf("replica: %w", err)
	}
	if !held {
		// A first start: the learner's peer TLS must reach a voter.
		if err := checkPeers(ctx, cfg, cl); err != nil {
			return err
		}
	}
	if verdict != learner.VerdictDiscard {
		return nil
	}
	// The entry has this replica's peer URLs (CheckDataDir): the join
	// takes it over.
	lg.Warn("the data dir holds a learner that never started (the cluster lists it without a name); dropping the data dir and joining again as it",
		zap.String("data-dir", cfg.DataDir), zap.String("member-id", fmt.Sprintf("%x", stored.ID)))
	if err := os.RemoveAll(filepath.Join(cfg.DataDir, "member")); err != nil {
		return fmt.Errorf("replica: --data-dir %s: dropping the data of learner %x that never started: %w", cfg.DataDir, stored.ID, err)
	}
	return nil
}

// moveAside renames the data dir's member/ (a member of another cluster, or
// one the cluster no longer lists: why) to member.stale-<UTC time>, so that
// the replica joins as a new learner and nothing is deleted. The data dir
// itself may be a mount point, so it stays.
func moveAside(lg *zap.Logger, clock clockwork.Clock, cfg learnerConfig, stored learner.Stored, why error) error {
	from := filepath.Join(cfg.DataDir, "member")
	to := filepath.Join(cfg.DataDir, "member.stale-"+clock.Now().UTC().Format("20060102T150405Z"))
	if err := os.Rename(from, to); err != nil {
		return fmt.Errorf("replica: --replace-stale-data-dir: moving %s aside: %w (it stays: %v)", from, err, why)
	}
	lg.Warn("--replace-stale-data-dir: the data dir held a stale member; moved aside, joining as a new learner",
		zap.String("moved-to", to), zap.String("member-id", fmt.Sprintf("%x", stored.ID)),
		zap.String("cluster-id", fmt.Sprintf("%x", stored.ClusterID)), zap.NamedError("why", why))
	return nil
}

// probeJoin returns, within joinProbeTimeout, the ID and (serializable)
// member list of the cluster --join reaches; joinErr, if checkJoin found
// it does not answer.
func probeJoin(ctx context.Context, cli *clientv3.Client, join []string, joinErr error) (learner.Cluster, error) {
	if joinErr != nil {
		return learner.Cluster{}, joinErr
	}
	pctx, cancel := context.WithTimeout(ctx, joinProbeTimeout)
	defer cancel()
	return learner.ProbeJoin(pctx, cli.Cluster, join)
}

func self(cfg learnerConfig) learner.Self {
	return learner.Self{Name: cfg.Name, PeerURLs: cfg.AdvertisePeerURLs, DataDir: cfg.DataDir, Join: cfg.Join, ReplaceOwnLearner: cfg.ReplaceOwnLearner}
}

// start starts the embedded member: as the member its data dir holds, or,
// on first start, as a newly added learner that must catch up within
// --join-timeout or be taken out again.
func start(ctx context.Context, lg *zap.Logger, cfg learnerConfig, cli *clientv3.Client, opts Options) (*embed.Etcd, error) {
	if learner.HasData(cfg.DataDir) {
		lg.Info("restarting as the member in the data dir", zap.String("data-dir", cfg.DataDir))
		ec, err := embedConfig(cfg, cfg.Name+"="+cfg.AdvertisePeerURLs[0], opts.MemberLogOutputs)
		if err != nil {
			return nil, err
		}
		e, err := embed.StartEtcd(ec)
		if err != nil {
			return nil, fmt.Errorf("replica: restart member from %s: %w", cfg.DataDir, err)
		}
		select {
		case <-e.Server.ReadyNotify():
			return e, nil
		case err := <-e.Err():
			e.Close()
			return nil, fmt.Errorf("replica: restart member: %w", err)
		case <-e.Server.StopNotify():
			e.Close()
			return nil, ErrStopped
		case <-ctx.Done():
			e.Close()
			return nil, ctx.Err()
		}
	}

	joinCtx, cancel := context.WithTimeout(ctx, cfg.JoinTimeout)
	defer cancel()
	j, err := learner.Join(joinCtx, lg, opts.Clock, cli.Cluster, self(cfg))
	switch {
	case errors.Is(err, rpctypes.ErrPermissionDenied), errors.Is(err, rpctypes.ErrUserEmpty):
		return nil, fmt.Errorf("replica: join: %w (the replica joins as %s; etcd lets only the root role add a member: give --user a user with it)", err, credential(cfg.Front))
	case isAuthError(err):
		return nil, fmt.Errorf("replica: join: %w (the replica joins as %s)", err, credential(cfg.Front))
	}
	if err != nil {
		return nil, fmt.Errorf("replica: join: %w", err)
	}
	lg.Info("added as a learner", zap.String("member-id", fmt.Sprintf("%x", j.ID)), zap.String("initial-cluster", j.InitialCluster))

	e, err := startLearner(joinCtx, lg, cfg, j, cli, opts)
	if err == nil {
		return e, nil
	}
	// Undo the join: the voters are left as they were.
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer rcancel()
	if rerr := removeOwnLearner(rctx, lg, opts.Clock, cli, j.ID); rerr != nil {
		return nil, fmt.Errorf("replica: %w; removing learner %x failed too, remove it with `etcdctl member remove %x`: %v", err, j.ID, j.ID, rerr)
	}
	// Only what etcd wrote: --data-dir may hold the operator's own files.
	if rerr := os.RemoveAll(filepath.Join(cfg.DataDir, "member")); rerr != nil {
		lg.Warn("could not remove the data of the removed learner", zap.String("dir", filepath.Join(cfg.DataDir, "member")), zap.Error(rerr))
	}
	return nil, fmt.Errorf("replica: %w; learner %x was removed again, the voters are unchanged", err, j.ID)
}

// removeOwnLearner takes this replica's own learner entry id out of the
// cluster (a join undone, --remove-on-exit) through the membership
// Changer, until ctx ends: a member not found is gone already, and a voter
// (promoted meanwhile) is never removed.
func removeOwnLearner(ctx context.Context, lg *zap.Logger, clock clockwork.Clock, cli *clientv3.Client, id uint64) error {
	cfg := membership.DefaultChangerConfig(cli.Cluster, clock)
	cfg.Log = lg
	ch, err := membership.NewChanger(cfg)
	if err != nil {
		return err
	}
	_, err = ch.RemoveLearner(ctx, id)
	return err
}

func startLearner(ctx context.Context, lg *zap.Logger, cfg learnerConfig, j learner.Joined, cli *clientv3.Client, opts Options) (*embed.Etcd, error) {
	// A voter that has not applied this learner's add, or another made
	// just before or after it, refuses the start; the start is made again
	// once it has (learner.Start). What a refused start left in the data
	// dir (an empty backend, no WAL) goes first.
	tries := 0
	e, err := learner.Start(ctx, lg, opts.Clock, cli.Cluster, j, cfg.Name, func(initialCluster string) (*embed.Etcd, error) {
		if tries++; tries > 1 {
			// etcd refuses before it writes a WAL: were there one, the
			// member would have started, and nothing is removed.
			if learner.HasData(cfg.DataDir) {
				return nil, fmt.Errorf("--data-dir %s holds a WAL after a refused start; nothing removed", cfg.DataDir)
			}
			if err := os.RemoveAll(filepath.Join(cfg.DataDir, "member")); err != nil {
				return nil, fmt.Errorf("--data-dir %s: dropping what the refused start left: %w", cfg.DataDir, err)
			}
		}
		ec, err := embedConfig(cfg, initialCluster, opts.MemberLogOutputs)
		if err != nil {
			return nil, err
		}
		return embed.StartEtcd(ec)
	})
	if err != nil {
		return nil, fmt.Errorf("start learner: %w", err)
	}
	fail := func(err error) (*embed.Etcd, error) {
		e.Close()
		return nil, err
	}
	if !cfg.SkipPeerURLCheck {
		peerTLS, err := clientTLS(cfg.PeerTLS, cfg.TLSVersions, cfg.AdvertisePeerURLs)
		if err != nil {
			return fail(err)
		}
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		for _, u := range cfg.AdvertisePeerURLs {
			if err := learner.ProbePeerURL(pctx, opts.Clock, u, e.Server.Cluster().ID().String(), peerTLS); err != nil {
				return fail(fmt.Errorf("--initial-advertise-peer-urls: %w; the voters send snapshots there (--skip-peer-url-check if only this host cannot reach it)", err))
			}
		}
	}
	err = learner.WaitPublished(ctx, lg, learner.Publishing{
		Published: e.Server.ReadyNotify(),
		Failed:    e.Err(),
		SnapshotLast: func() (bool, uint64) {
			applied := readpath.AppliedIndex(e.Server)
			return applied > e.Server.AppliedIndex(), applied
		},
		Clock: opts.Clock,
		Nudge: func(ctx context.Context) error {
			_, err := cli.AuthStatus(ctx)
			return err
		},
	})
	switch {
	case err != nil && ctx.Err() == nil:
		return fail(err)
	case err != nil && e.Server.Leader() == 0:
		return fail(fmt.Errorf("%w (%v): it never heard from the leader; can the voters reach --initial-advertise-peer-urls %v?",
			learner.ErrNotReady, cfg.JoinTimeout, cfg.AdvertisePeerURLs))
	case err != nil:
		return fail(fmt.Errorf("%w (%v): it heard from leader %s and applied index %d (commit index %d), but etcd did not publish it (its name and client URLs) through raft",
			learner.ErrNotReady, cfg.JoinTimeout, e.Server.Leader(), readpath.AppliedIndex(e.Server), e.Server.CommittedIndex()))
	}
	observe := func(ctx context.Context) (learner.Progress, error) {
		commit, err := learner.LeaderCommit(ctx, cli.Maintenance, cfg.Join)
		if err != nil {
			return learner.Progress{}, err
		}
		return learner.Progress{LeaderCommit: commit, Applied: readpath.AppliedIndex(e.Server)}, nil
	}
	if _, err := learner.WaitCaughtUp(ctx, lg, opts.Clock, 200*time.Millisecond, observe, opts.Progress); err != nil {
		return fail(err)
	}
	return e, nil
}

func embedConfig(cfg learnerConfig, initialCluster string, logOutputs []string) (*embed.Config, error) {
	ec := embed.NewConfig()
	ec.Name = cfg.Name
	ec.Dir = cfg.DataDir
	var err error
	if ec.ListenPeerUrls, err = parseURLs(cfg.ListenPeerURLs); err != nil {
		return nil, err
	}
	if ec.AdvertisePeerUrls, err = parseURLs(cfg.AdvertisePeerURLs); err != nil {
		return nil, err
	}
	// The member serves no clients itself: the front does, and its URL is
	// what the member advertises, so `member list` leads clients to it.
	ec.ListenClientUrls = nil
	if ec.AdvertiseClientUrls, err = parseURLs(cfg.AdvertiseClientURLs); err != nil {
		return nil, err
	}
	// --listen-metrics-urls are served by the front, whose /readyz knows a
	// replica (etcd's fails every learner).
	ec.ListenMetricsUrls = nil
	// With --client-cert-auth, etcd takes a client's user name from its
	// certificate's CN; the front's requests reach this member's auth.
	ec.ClientTLSInfo.ClientCertAuth = cfg.ClientTLS.ClientCertAuth
	ec.QuotaBackendBytes = cfg.QuotaBackendBytes
	ec.MaxRequestBytes = cfg.MaxRequestBytes
	ec.MaxTxnOps = cfg.MaxTxnOps
	ec.MaxConcurrentStreams = cfg.MaxConcurrentStreams
	ec.WatchProgressNotifyInterval = cfg.WatchProgressNotifyInterval
	ec.PeerTLSInfo = transport.TLSInfo{CertFile: cfg.PeerTLS.CertFile, KeyFile: cfg.PeerTLS.KeyFile,
		TrustedCAFile: cfg.PeerTLS.TrustedCAFile, ClientCertAuth: cfg.PeerTLS.ClientCertAuth}
	ec.TlsMinVersion, ec.TlsMaxVersion, ec.CipherSuites = cfg.TLSVersions.MinVersion, cfg.TLSVersions.MaxVersion, cfg.TLSVersions.CipherSuites
	ec.ClusterState = embed.ClusterStateFlagExisting
	ec.InitialCluster = initialCluster
	// Every member checks the learner limit on each addition it applies: a
	// replica with a lower limit than the voters' would refuse a learner
	// they accepted. Unless told the voters' value, accept all they do.
	ec.MaxLearners = 1 << 16
	if cfg.MaxLearners > 0 {
		ec.MaxLearners = cfg.MaxLearners
	}
	// etcd compacts only on the leader: these matter once promoted.
	ec.AutoCompactionMode, ec.AutoCompactionRetention = cfg.AutoCompactionMode, cfg.AutoCompactionRetention
	ec.TickMs = cfg.HeartbeatMs
	ec.ElectionMs = cfg.ElectionMs
	ec.AuthToken = cfg.AuthToken
	ec.EnableGRPCGateway = false
	ec.LogLevel = "warn"
	if cfg.LogLevel == "debug" {
		ec.LogLevel = "info"
	}
	ec.LogOutputs = []string{"stderr"}
	if len(logOutputs) > 0 {
		ec.LogOutputs = logOutputs
	}
	logging.Member(ec, logging.Learner)
	return ec, nil
}

func parseURLs(ss []string) ([]url.URL, error) {
	var out []url.URL
	for _, s := range ss {
		u, err := url.Parse(s)
		if err != nil {
			return nil, fmt.Errorf("replica: URL %q: %w", s, err)
		}
		out = append(out, *u)
	}
	return out, nil
}
