// Package replica runs a replica: an etcd member that joined its cluster as a
// learner (package learner), fronted by an etcd-compatible gRPC server that
// serves reads and watches itself (package readpath).
package replica

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/understudy-kv/understudy/config"
	"github.com/understudy-kv/understudy/learner"
	"github.com/understudy-kv/understudy/promotion"
	"github.com/understudy-kv/understudy/readpath"
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
}

// Run joins (or rejoins) the cluster and serves until ctx ends (a clean stop,
// nil) or the member fails.
func Run(ctx context.Context, cfg config.Replica, opts Options) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	lg := opts.Logger
	if lg == nil {
		var err error
		if lg, err = NewLogger(cfg.LogLevel); err != nil {
			return err
		}
		defer func() { _ = lg.Sync() }()
	}
	if opts.Registerer == nil {
		opts.Registerer = prometheus.DefaultRegisterer
	}
	if opts.Progress == nil {
		opts.Progress = defaultProgress(lg)
	}

	joinTLS, err := clientTLS(cfg.ClientTLS, cfg.Join)
	if err != nil {
		return err
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: cfg.Join, TLS: joinTLS, DialTimeout: 5 * time.Second, Logger: lg.Named("join-client").WithOptions(zap.IncreaseLevel(zap.ErrorLevel))})
	if err != nil {
		return fmt.Errorf("replica: connect to --join %v: %w", cfg.Join, err)
	}
	defer cli.Close()

	// Certificates and listeners first: a replica that cannot serve must
	// fail before it joins, not leave a learner behind.
	frontTLS, err := serverTLS(cfg.ClientTLS, cfg.ListenClientURLs)
	if err != nil {
		return err
	}
	listeners, err := listen(cfg.ListenClientURLs)
	if err != nil {
		return err
	}
	m, err := start(ctx, lg, cfg, cli, opts)
	if err != nil {
		closeAll(listeners)
		return err
	}
	closed := false
	defer func() {
		if !closed {
			m.Close()
		}
	}()

	front, err := readpath.New(readpath.Config{
		TLS:               frontTLS,
		Server:            m.Server,
		Logger:            lg.Named("readpath"),
		Registerer:        opts.Registerer,
		MaxStaleness:      cfg.MaxStaleness,
		FreshnessInterval: cfg.FreshnessInterval,
		ReadBatchInterval: cfg.ReadBatchInterval,
		Zone:              cfg.Zone,
	})
	if err != nil {
		closeAll(listeners)
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, l := range listeners {
		g.Go(func() error { return front.Serve(l) })
	}
	lg.Info("replica serving", zap.String("name", cfg.Name), zap.String("member-id", m.Server.MemberID().String()),
		zap.Strings("client-urls", cfg.AdvertiseClientURLs))
	if opts.Ready != nil {
		close(opts.Ready)
	}
	g.Go(func() error {
		defer front.Stop()
		select {
		case <-gctx.Done():
			return nil
		case err := <-m.Err():
			return fmt.Errorf("replica: member: %w", err)
		case <-m.Server.StopNotify():
			return ErrStopped
		}
	})
	if cfg.Promotion.Role != promotion.RoleReader {
		r := &roles{lg: lg.Named("role"), cfg: cfg.Promotion, srv: m.Server, cli: cli, asOf: front.Freshness().AsOf,
			m: newRoleMetrics(opts.Registerer), decider: promotion.NewDecider(cfg.Promotion), unreachableSince: map[uint64]time.Time{}}
		lg.Info("promotion policy", zap.String("role", string(cfg.Promotion.Role)), zap.Uint64("promote-max-lag", cfg.Promotion.MaxLag),
			zap.Duration("promote-hold", cfg.Promotion.Hold), zap.Duration("failover-after", cfg.Promotion.FailoverAfter))
		g.Go(func() error { r.run(gctx); return nil })
	}
	err = g.Wait()
	if err != nil || !cfg.RemoveOnExit || ctx.Err() == nil {
		return err
	}
	// --remove-on-exit: a clean stop takes the member entry and data with it.
	id := uint64(m.Server.MemberID())
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := learner.Remove(rctx, cli.Cluster, id); err != nil {
		return fmt.Errorf("replica: --remove-on-exit: removing member %x: %w (remove it with `etcdctl member remove %x`)", id, err, id)
	}
	closed = true
	m.Close()
	if err := os.RemoveAll(cfg.DataDir); err != nil {
		return fmt.Errorf("replica: --remove-on-exit: member %x removed, but its data dir stays: %w", id, err)
	}
	lg.Info("removed this replica's member entry and data dir", zap.String("member-id", fmt.Sprintf("%x", id)))
	return nil
}

// start starts the embedded member: as the member its data dir holds, or,
// on first start, as a newly added learner that must catch up within
// --join-timeout or be taken out again.
func start(ctx context.Context, lg *zap.Logger, cfg config.Replica, cli *clientv3.Client, opts Options) (*embed.Etcd, error) {
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
	j, err := learner.Join(joinCtx, lg, cli.Cluster, cfg.Name, cfg.AdvertisePeerURLs)
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
	if rerr := learner.Remove(rctx, cli.Cluster, j.ID); rerr != nil {
		return nil, fmt.Errorf("replica: %w; removing learner %x failed too, remove it with `etcdctl member remove %x`: %v", err, j.ID, j.ID, rerr)
	}
	if rerr := os.RemoveAll(cfg.DataDir); rerr != nil {
		lg.Warn("could not remove the data dir of the removed learner", zap.Error(rerr))
	}
	return nil, fmt.Errorf("replica: %w; learner %x was removed again, the voters are unchanged", err, j.ID)
}

func startLearner(ctx context.Context, lg *zap.Logger, cfg config.Replica, j learner.Joined, cli *clientv3.Client, opts Options) (*embed.Etcd, error) {
	ec, err := embedConfig(cfg, j.InitialCluster, opts.MemberLogOutputs)
	if err != nil {
		return nil, err
	}
	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("start learner: %w", err)
	}
	fail := func(err error) (*embed.Etcd, error) {
		e.Close()
		return nil, err
	}
	if !cfg.SkipPeerURLCheck {
		peerTLS, err := clientTLS(cfg.PeerTLS, cfg.AdvertisePeerURLs)
		if err != nil {
			return fail(err)
		}
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		for _, u := range cfg.AdvertisePeerURLs {
			if err := learner.ProbePeerURL(pctx, u, e.Server.Cluster().ID().String(), peerTLS); err != nil {
				return fail(fmt.Errorf("--initial-advertise-peer-urls: %w; the voters send snapshots there (--skip-peer-url-check if only this host cannot reach it)", err))
			}
		}
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		return fail(fmt.Errorf("learner failed: %w", err))
	case <-ctx.Done():
		return fail(fmt.Errorf("%w (%v): it never heard from the leader; can the voters reach --initial-advertise-peer-urls %v?",
			learner.ErrNotReady, cfg.JoinTimeout, cfg.AdvertisePeerURLs))
	}
	observe := func(ctx context.Context) (learner.Progress, error) {
		commit, err := learner.LeaderCommit(ctx, cli.Maintenance, cfg.Join)
		if err != nil {
			return learner.Progress{}, err
		}
		return learner.Progress{LeaderCommit: commit, Applied: e.Server.AppliedIndex()}, nil
	}
	if _, err := learner.WaitCaughtUp(ctx, lg, 200*time.Millisecond, observe, opts.Progress); err != nil {
		return fail(err)
	}
	return e, nil
}

func embedConfig(cfg config.Replica, initialCluster string, logOutputs []string) (*embed.Config, error) {
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
	if ec.ListenMetricsUrls, err = parseURLs(cfg.ListenMetricsURLs); err != nil {
		return nil, err
	}
	ec.PeerTLSInfo = transport.TLSInfo{CertFile: cfg.PeerTLS.CertFile, KeyFile: cfg.PeerTLS.KeyFile,
		TrustedCAFile: cfg.PeerTLS.TrustedCAFile, ClientCertAuth: cfg.PeerTLS.ClientCertAuth}
	ec.ClusterState = embed.ClusterStateFlagExisting
	ec.InitialCluster = initialCluster
	// The voters enforce the learner limit when a member is added; a replica
	// with a lower limit than theirs would refuse, on apply, a learner they
	// accepted.
	ec.MaxLearners = 1 << 16
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
	return ec, nil
}

// clientTLS is the client side of t, for talking to urls: nil when
// neither t nor the URLs ask for TLS.
func clientTLS(t config.TLS, urls []string) (*tls.Config, error) {
	https := false
	for _, u := range urls {
		https = https || strings.HasPrefix(u, "https://")
	}
	if !https && !t.Enabled() {
		return nil, nil
	}
	info := transport.TLSInfo{CertFile: t.CertFile, KeyFile: t.KeyFile, TrustedCAFile: t.TrustedCAFile}
	c, err := info.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("replica: TLS client configuration: %w", err)
	}
	return c, nil
}

// serverTLS is the front's TLS: nil for http client URLs.
func serverTLS(t config.TLS, urls []string) (*tls.Config, error) {
	if len(urls) == 0 || !strings.HasPrefix(urls[0], "https://") {
		return nil, nil
	}
	info := transport.TLSInfo{CertFile: t.CertFile, KeyFile: t.KeyFile, TrustedCAFile: t.TrustedCAFile, ClientCertAuth: t.ClientCertAuth}
	c, err := info.ServerConfig()
	if err != nil {
		return nil, fmt.Errorf("replica: --cert-file/--key-file/--trusted-ca-file: %w", err)
	}
	return c, nil
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

func listen(urls []string) ([]net.Listener, error) {
	var ls []net.Listener
	for _, s := range urls {
		u, err := url.Parse(s)
		if err != nil {
			return nil, fmt.Errorf("replica: --listen-client-urls %q: %w", s, err)
		}
		if u.Scheme != "http" && u.Scheme != "https" {
			closeAll(ls)
			return nil, fmt.Errorf("replica: --listen-client-urls %q: want http or https", s)
		}
		l, err := net.Listen("tcp", u.Host)
		if err != nil {
			closeAll(ls)
			return nil, fmt.Errorf("replica: --listen-client-urls %q: %w", s, err)
		}
		ls = append(ls, l)
	}
	return ls, nil
}

func closeAll(ls []net.Listener) {
	for _, l := range ls {
		_ = l.Close()
	}
}
