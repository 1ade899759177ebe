package replica

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"

	"github.com/understudy-kv/understudy/backoff"
	"github.com/understudy-kv/understudy/cascade"
	"github.com/understudy-kv/understudy/config"
	"github.com/understudy-kv/understudy/readpath"
)

// runCascaded runs a cascaded replica (--upstream) until ctx ends: its
// store bootstraps from an upstream's snapshot and follows the upstreams'
// watch, and the front serves it. A store that diverged from the source, or
// fell behind every upstream's compaction, is never served: the front
// stops, and the store is built again. The first bootstrap must succeed
// within --join-timeout; later ones are retried until they do.
func runCascaded(ctx context.Context, cfg config.Replica, opts Options) error {
	lg := opts.Logger
	reg := reregisterer{opts.Registerer}
	metrics := cascade.NewMetrics(opts.Registerer)
	instance := cascade.NewInstance()
	var readyOnce sync.Once
	markReady := func() {
		if opts.Ready != nil {
			readyOnce.Do(func() { close(opts.Ready) })
		}
	}
	retry := backoff.Exponential{Initial: time.Second, Max: 30 * time.Second}
	for first := true; ; first = false {
		err := cascadedOnce(ctx, cfg, opts, reg, metrics, instance, first, markReady)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, cascade.ErrDiverged), errors.Is(err, cascade.ErrBehind):
			lg.Warn("the store cannot be served as it is; stopped serving, bootstrapping again", zap.Error(err))
			retry.Reset()
			continue
		case errors.Is(err, cascade.ErrUpstream), errors.Is(err, cascade.ErrAuth), first:
			return err
		}
		d := retry.Next()
		lg.Warn("bootstrapping again failed; retrying", zap.Error(err), zap.Duration("after", d))
		if backoff.Wait(ctx, opts.Clock, d) != nil {
			return nil
		}
	}
}

// cascadedOnce opens the store, serves it until it must be built again,
// and closes it.
func cascadedOnce(ctx context.Context, cfg config.Replica, opts Options, reg prometheus.Registerer, metrics *cascade.Metrics, instance string, first bool, markReady func()) error {
	lg := opts.Logger
	octx := ctx
	if first {
		var cancel context.CancelFunc
		octx, cancel = context.WithTimeout(ctx, cfg.JoinTimeout)
		defer cancel()
	}
	st, err := cascade.Open(octx, cascadeConfig(cfg, opts, metrics), instance)
	if err != nil {
		return fmt.Errorf("replica: cascaded replica: %w", err)
	}
	defer st.Close()
	ls, err := openListeners(cfg)
	if err != nil {
		return err
	}
	defer ls.closeUnserved()
	fwd, err := dialForward(cfg, opts, st.ForwardDialOptions(cfg.ClientTLS.CertFile != ""))
	if err != nil {
		return err
	}
	defer fwd.Close()
	rc := frontConfig(lg, cfg, st.Server(), ls.tls, opts)
	rc.Registerer = reg
	rc.Cascade = &readpath.Cascade{Member: st.Member(), Contact: st.Contact(), Upstream: fwd, Cluster: st.Cluster(),
		Leader: st.SourceLeader, WaitRevision: st.WaitRevision, Chain: st.Chain, Permit: st.Permit, IssueAt: st.IssueAt,
		Progress: func() (int64, int64) { return st.Revision(), st.SourceRevision() }}
	front, err := readpath.New(rc)
	if err != nil {
		return err
	}
	return serveCascaded(ctx, lg, cfg, st, front, ls, markReady)
}

// serveCascaded serves the front and runs the store until ctx ends or
// either stops; the front stops with it.
func serveCascaded(ctx context.Context, lg *zap.Logger, cfg config.Replica, st *cascade.Store, front *readpath.Front, ls *listenerSet, ready func()) error {
	ls.served = true
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return front.Run(gctx) })
	for _, l := range ls.client {
		g.Go(func() error { return front.Serve(l) })
	}
	for _, l := range ls.metrics {
		g.Go(func() error { return front.ServeMetrics(l) })
	}
	lg.Info("replica serving", zap.String("name", cfg.Name), zap.String("cascaded-from", fmt.Sprint(cfg.Upstream)),
		zap.Int64("revision", st.Revision()), zap.Strings("client-urls", cfg.AdvertiseClientURLs))
	ready()
	g.Go(func() error {
		defer front.Stop()
		err := st.Run(gctx)
		if err == nil && gctx.Err() == nil {
			err = errors.New("replica: the store stopped")
		}
		return err
	})
	return g.Wait()
}

// cascadeConfig is the store's configuration, from the replica's.
func cascadeConfig(cfg config.Replica, opts Options, metrics *cascade.Metrics) cascade.Config {
	cc := cascade.DefaultConfig()
	cc.Upstreams = cfg.Upstream
	cc.Self = append(append([]string{}, cfg.ListenClientURLs...), cfg.AdvertiseClientURLs...)
	cc.Dir, cc.Name = cfg.DataDir, cfg.Name
	cc.LogOutputs = opts.MemberLogOutputs
	cc.WatchProgressNotifyInterval = cfg.WatchProgressNotifyInterval
	cc.Logger, cc.Metrics, cc.Clock = opts.Logger.Named("cascade"), metrics, opts.Clock
	cc.BreakApplyKey = os.Getenv("UNDERSTUDY_TEST_BREAK_APPLY")
	cc.Dial = func(endpoints []string) (*clientv3.Client, error) {
		t, err := clientTLS(cfg.ClientTLS, cfg.TLSVersions, endpoints)
		if err != nil {
			return nil, err
		}
		user, password := cfg.Credentials()
		return clientv3.New(clientv3.Config{Endpoints: endpoints, TLS: t, DialTimeout: 5 * time.Second, Username: user, Password: password,
			Logger: opts.Logger.Named("upstream-client").WithOptions(zap.IncreaseLevel(zap.ErrorLevel))})
	}
	return cc
}

// dialForward opens the client the front forwards with: the caller's own
// token goes on to the upstream (dial: cascade's interceptors), never the
// replica's user, so the source checks what it allows the caller.
func dialForward(cfg config.Replica, opts Options, dial []grpc.DialOption) (*clientv3.Client, error) {
	t, err := clientTLS(cfg.ClientTLS, cfg.TLSVersions, cfg.Upstream)
	if err != nil {
		return nil, err
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: cfg.Upstream, TLS: t, DialTimeout: 5 * time.Second,
		DialOptions: dial,
		Logger:      opts.Logger.Named("forward-client").WithOptions(zap.IncreaseLevel(zap.ErrorLevel))})
	if err != nil {
		return nil, fmt.Errorf("replica: a client of --upstream: %w", err)
	}
	return cli, nil
}

// reregisterer registers a collector in place of one registered under the
// same name before: a cascaded replica builds its front again after every
// bootstrap, and the front's metrics with it.
type reregisterer struct{ prometheus.Registerer }

func (r reregisterer) Register(c prometheus.Collector) error {
	err := r.Registerer.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		r.Registerer.Unregister(are.ExistingCollector)
		err = r.Registerer.Register(c)
	}
	return err
}

func (r reregisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}
