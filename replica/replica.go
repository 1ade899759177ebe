// Package replica runs a replica: an etcd member that joined its cluster as a
// learner (package learner), fronted by an etcd-compatible gRPC server that
// serves reads and watches itself (package readpath).
package replica

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
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
	user, password := cfg.Credentials()
	cli, err := clientv3.New(clientv3.Config{Endpoints: cfg.Join, TLS: joinTLS, DialTimeout: 5 * time.Second,
		Username: user, Password: password,
		Logger: lg.Named("join-client").WithOptions(zap.IncreaseLevel(zap.ErrorLevel))})
	if err != nil {
		return fmt.Errorf("replica: connect to --join %v: %w", cfg.Join, err)
	}
	defer cli.Close()
	if err := prepare(ctx, lg, cfg, cli); err != nil {
		return err
	}

	// Certificates and listeners first: a replica that cannot serve must
	// fail before it joins, not leave a learner behind.
	frontTLS, err := serverTLS(cfg.ClientTLS, cfg.ListenClientURLs)
	if err != nil {
		return err
	}
	listeners, err := listen("listen-client-urls", cfg.ListenClientURLs)
	if err != nil {
		return err
	}
	metricsListeners, err := listen("listen-metrics-urls", cfg.ListenMetricsURLs)
	if err != nil {
		closeAll(listeners)
		return err
	}
	listeners = append(listeners, metricsListeners...)
	// The quota before the member starts: a replica whose quota is below a
	// voter's could raise a NOSPACE alarm that stops writes cluster-wide.
	explicitQuota := cfg.QuotaBackendBytes > 0
	if cfg.QuotaBackendBytes, err = backendQuota(ctx, lg, cli, cfg.Name, learner.HasData(cfg.DataDir), cfg.QuotaBackendBytes); err != nil {
		closeAll(listeners)
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

	via := readpath.ViaConfig{URLs: cfg.ReadIndexVia, Timeout: cfg.ReadIndexViaTimeout}
	if len(via.URLs) > 0 {
		viaTLS, err := clientTLS(cfg.ClientTLS, cfg.ReadIndexVia)
		if err != nil {
			closeAll(listeners)
			return err
		}
		via.Client = &http.Client{Transport: &http.Transport{TLSClientConfig: viaTLS, MaxIdleConnsPerHost: 4}}
		if user != "" { // a hub with auth on wants a token (or the client certificate's user)
			via.Token = func(ctx context.Context) (string, error) {
				resp, err := cli.Auth.Authenticate(ctx, user, password)
				if errors.Is(err, rpctypes.ErrAuthNotEnabled) {
					return "", nil
				}
				if err != nil {
					return "", fmt.Errorf("replica: logging in as --user %s for --read-index-via: %w", user, err)
				}
				return resp.Token, nil
			}
		}
	}
	roleState := newRoleStatus(lg.Named("role"), opts.Registerer)
	front, err := readpath.New(readpath.Config{
		TLS:                   frontTLS,
		Server:                m.Server,
		Logger:                lg.Named("readpath"),
		Registerer:            opts.Registerer,
		MaxStaleness:          cfg.MaxStaleness,
		FreshnessInterval:     cfg.FreshnessInterval,
		FreshnessIdleInterval: cfg.FreshnessIdleInterval,
		ReadBatchInterval:     cfg.ReadBatchInterval,
		ReadBatchMaxWait:      cfg.ReadBatchMaxWait,
		Via:                   via,
		Zone:                  cfg.Zone,
		RoleState:             roleState.String,
		Ready:                 readpath.ReadyConfig{MaxLag: cfg.ReadyMaxLag, MaxStaleness: cfg.ReadyStaleness()},
		KeepAlive:             readpath.KeepAlive{MinTime: cfg.GRPCKeepAliveMinTime, Interval: cfg.GRPCKeepAliveInterval, Timeout: cfg.GRPCKeepAliveTimeout},
	})
	if err != nil {
		closeAll(listeners)
		return err
	}
	gate := &promotionGate{}
	var r *roles
	if cfg.Promotion.Role != promotion.RoleReader {
		if r, err = newRoles(lg.Named("role"), cfg, m.Server, front.LastLeaderContact, gate, roleState, opts.Registerer); err != nil {
			closeAll(listeners)
			return err
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	for i, l := range listeners {
		if i < len(listeners)-len(metricsListeners) {
			g.Go(func() error { return front.Serve(l) })
		} else {
			g.Go(func() error { return front.ServeMetrics(l) })
		}
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
	quota := newQuotaGuard(lg.Named("quota"), cli, cfg.Name, uint64(m.Server.MemberID()), cfg.QuotaBackendBytes, explicitQuota, cfg.QuotaCheckInterval, gate, opts.Registerer)
	g.Go(func() error { return quota.run(gctx) })
	if cfg.Promotion.Role != promotion.RoleReader {
		lg.Info("promotion policy", zap.String("role", string(cfg.Promotion.Role)), zap.Uint64("promote-max-lag", cfg.Promotion.MaxLag),
			zap.Duration("promote-hold", cfg.Promotion.Hold), zap.Duration("failover-after", cfg.Promotion.FailoverAfter))
		g.Go(func() error { r.run(gctx); return nil })
	}
	err = g.Wait()
	// --remove-on-exit: a clean stop takes the member entry and data with
	// it, and so does the quota guard's stop of a learner (which costs no
	// quorum), so that a replica without its data dir can join again.
	cleanStop := err == nil && ctx.Err() != nil
	if !cfg.RemoveOnExit || !(cleanStop || errors.Is(err, errQuotaPassed)) {
		return err
	}
	stopErr := err
	id := uint64(m.Server.MemberID())
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := learner.Remove(rctx, cli.Cluster, id); err != nil {
		return errors.Join(stopErr, fmt.Errorf("replica: --remove-on-exit: removing member %x: %w (remove it with `etcdctl member remove %x`)", id, err, id))
	}
	closed = true
	m.Close()
	if err := os.RemoveAll(cfg.DataDir); err != nil {
		return errors.Join(stopErr, fmt.Errorf("replica: --remove-on-exit: member %x removed, but its data dir stays: %w", id, err))
	}
	lg.Info("removed this replica's member entry and data dir", zap.String("member-id", fmt.Sprintf("%x", id)))
	return stopErr
}
