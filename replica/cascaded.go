package replica

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	etcdconfig "go.etcd.io/etcd/server/v3/config"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"

	"github.com/understudy-kv/understudy/backoff"
	"github.com/understudy-kv/understudy/cascade"
	"github.com/understudy-kv/understudy/cascade/source"
	"github.com/understudy-kv/understudy/certexpiry"
	"github.com/understudy-kv/understudy/config"
	"github.com/understudy-kv/understudy/readpath"
	"github.com/understudy-kv/understudy/wire"
)

// runCascaded runs a cascaded replica (--upstream) until ctx ends: its
// store bootstraps from an upstream's snapshot and follows the upstreams'
// watch, and the front serves it. A store that must not be served (an
// upstream holds another history, it diverged from the source, or it fell
// behind every upstream it can follow) is fenced at once: its front
// refuses every call, saying why, while the next store bootstraps, and
// then gives way to a front of the new store. The first bootstrap must
// succeed within --join-timeout; later ones are retried until they do.
// It is given the front's settings (cfg) and the cascaded replica's own
// (c): a cascaded replica has no member's.
func runCascaded(ctx context.Context, cfg config.Front, c config.Cascaded, opts Options) (err error) {
	opts, flush, err := opts.withDefaults(cfg.LogLevel)
	if err != nil {
		return err
	}
	defer flush()
	// Last, once everything Run started has stopped.
	defer func() { logStopped(ctx, opts.Logger, "cascaded replica stopped", cfg, err) }()
	// What the replica presents, read at each scrape: a file rotated in
	// place is what the next handshake presents.
	opts.Registerer.MustRegister(certexpiry.New(certexpiry.File{Use: "client", Path: cfg.ClientTLS.CertFile}))
	lg := opts.Logger
	if len(c.Unused) > 0 {
		lg.Warn("these flags set a learner replica's member, role or member entry, which a cascaded replica (--upstream) does not have: they have no effect",
			zap.Strings("flags", c.Unused))
	}
	reg := reregisterer{opts.Registerer}
	metrics := cascade.NewMetrics(opts.Registerer)
	instance := cascade.NewInstance(cfg.AdvertiseClientURLs)
	var readyOnce sync.Once
	markReady := func() {
		if opts.Ready != nil {
			readyOnce.Do(func() { close(opts.Ready) })
		}
	}
	// Every --upstream asked first, within the dial timeout: a cause
	// (refused, TLS, a certificate, another cluster, a user) is one line
	// naming the URL, before anything is dialled for good.
	f, err := clientFlags(cfg, "--upstream", c.Upstream)
	if err != nil {
		return err
	}
	if _, err := f.Probe(ctx); err != nil {
		return fmt.Errorf("replica: %w", err)
	}
	// fenced is the last store's front, refusing calls while the next
	// store bootstraps.
	var fenced *cascadedFront
	defer func() {
		if fenced != nil {
			_ = fenced.stop()
		}
	}()
	retry := backoff.Exponential{Initial: time.Second, Max: 30 * time.Second}
	for first := true; ; first = false {
		st, err := openStore(ctx, cfg, c, opts, metrics, instance, first)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil && first:
			return err
		case err != nil:
			d := retry.Next()
			lg.Warn("bootstrapping again failed; retrying", zap.Error(err), zap.Duration("after", d))
			if backoff.Wait(ctx, opts.Clock, d) != nil {
				return nil
			}
			continue
		}
		opened := opts.Clock.Now()
		if fenced != nil {
			_ = fenced.stop()
			fenced = nil
		}
		cf, err := startFront(ctx, cfg, opts, reg, st)
		if err != nil {
			st.Close()
			return err
		}
		lg.Info("replica serving", zap.String("name", cfg.Name), zap.String("cascaded-from", fmt.Sprint(c.Upstream)),
			zap.Int64("revision", st.Revision()), zap.Strings("client-urls", cfg.AdvertiseClientURLs))
		markReady()
		err = st.Run(cf.gctx)
		st.Close() // fenced: its front refuses every call from now on
		switch {
		case ctx.Err() != nil:
			return cf.stop()
		case err == nil: // the front stopped
			if err = cf.stop(); err == nil {
				err = errors.New("replica: the front stopped")
			}
			return err
		case errors.Is(err, cascade.ErrOtherHistory), errors.Is(err, cascade.ErrDiverged), errors.Is(err, cascade.ErrBehind):
			fenced = cf
			// A store fenced soon after it opened (an upstream of the old
			// history took the snapshot) waits as a failed bootstrap does.
			d := time.Duration(0)
			if opts.Clock.Since(opened) < servedLong {
				d = retry.Next()
			} else {
				retry.Reset()
			}
			lg.Warn("the store cannot be served as it is; refusing every call, bootstrapping again", zap.Error(err), zap.Duration("after", d))
			if d > 0 && backoff.Wait(ctx, opts.Clock, d) != nil {
				return nil
			}
		default:
			_ = cf.stop()
			return err
		}
	}
}

// servedLong is how long a store must have served for its fence to reset
// the bootstrap backoff.
const servedLong = time.Minute

// openStore opens a store: the first within --join-timeout.
func openStore(ctx context.Context, cfg config.Front, c config.Cascaded, opts Options, metrics *cascade.Metrics, instance string, first bool) (*cascade.Store, error) {
	if first {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.JoinTimeout)
		defer cancel()
	}
	st, err := cascade.Open(ctx, cascadeConfig(cfg, c, opts, metrics), instance)
	if err != nil {
		return nil, fmt.Errorf("replica: cascaded replica: %w", err)
	}
	return st, nil
}

// cascadedFront is the front of one store, with its listeners, serving
// until stop.
type cascadedFront struct {
	front  *readpath.Front
	ls     *listenerSet
	g      *errgroup.Group
	gctx   context.Context
	cancel context.CancelFunc
}

// startFront opens the listeners and serves st on them.
func startFront(ctx context.Context, cfg config.Front, opts Options, reg prometheus.Registerer, st *cascade.Store) (*cascadedFront, error) {
	ls, err := openListeners(cfg)
	if err != nil {
		return nil, err
	}
	rc := frontConfig(opts.Logger, cfg, source.New(st), ls.tls, opts)
	rc.Registerer = reg
	front, err := readpath.New(rc)
	if err != nil {
		ls.closeUnserved()
		return nil, err
	}
	ls.served = true
	cf := &cascadedFront{front: front, ls: ls}
	ctx, cf.cancel = context.WithCancel(ctx)
	cf.g, cf.gctx = errgroup.WithContext(ctx)
	cf.g.Go(func() error { return front.Run(cf.gctx) })
	for _, l := range ls.client {
		cf.g.Go(func() error { return front.Serve(l) })
	}
	for _, l := range ls.metrics {
		cf.g.Go(func() error { return front.ServeMetrics(l) })
	}
	return cf, nil
}

// stop stops the front (its listeners close with it) and its client, and
// returns what ended it first.
func (cf *cascadedFront) stop() error {
	cf.front.Stop()
	cf.cancel()
	return cf.g.Wait()
}

// cascadeConfig is the store's configuration, from the replica's: its
// front's (cfg) and its own (c).
func cascadeConfig(cfg config.Front, c config.Cascaded, opts Options, metrics *cascade.Metrics) cascade.Config {
	cc := cascade.DefaultConfig()
	cc.Upstreams = c.Upstream
	cc.Self = append(append([]string{}, cfg.ListenClientURLs...), cfg.AdvertiseClientURLs...)
	cc.Dir, cc.Name = cfg.DataDir, cfg.Name
	cc.LogOutputs = opts.MemberLogOutputs
	cc.WatchProgressNotifyInterval = cfg.WatchProgressNotifyInterval
	cc.MaxRequestBytes, cc.MaxTxnOps, cc.MaxConcurrentStreams = cfg.MaxRequestBytes, cfg.MaxTxnOps, cfg.MaxConcurrentStreams
	if c.Announce {
		target := wire.ReplicasTarget
		if c.ResolverPrefix != "" {
			target = strings.TrimSuffix(c.ResolverPrefix, "/")
		}
		cc.Announce = &cascade.Announcement{Target: target, Name: cfg.Name, URL: cfg.AdvertiseClientURLs[0], Zone: cfg.Zone,
			TTL: time.Duration(c.ResolverTTL) * time.Second}
	}
	cc.Logger, cc.Metrics, cc.Clock = opts.Logger.Named("cascade"), metrics, opts.Clock
	if opts.CascadeApplyValue != nil {
		cc.ApplyValue = opts.CascadeApplyValue
	}
	cc.Dial = func(endpoints []string) (*clientv3.Client, error) {
		uc, err := replicaClientConfig(cfg, "--upstream", endpoints, opts.Logger.Named("upstream-client"))
		if err != nil {
			return nil, err
		}
		return clientv3.New(upstreamClientConfig(uc))
	}
	// The forwarding client: the caller's own token goes on to the
	// upstream (the store's interceptors), never the replica's user, so
	// the source checks what it allows the caller.
	cc.ClientCert = cfg.ClientTLS.CertFile != ""
	cc.DialForward = func(endpoints []string, dial []grpc.DialOption) (*clientv3.Client, error) {
		fc, err := replicaClientConfig(cfg, "--upstream", endpoints, opts.Logger.Named("forward-client"))
		if err != nil {
			return nil, err
		}
		fc.Username, fc.Password, fc.DialOptions = "", "", dial
		// What the front takes, it forwards (clientv3 sends 2 MiB at most).
		limits := etcdconfig.ServerConfig{MaxRequestBytes: cfg.MaxRequestBytes}
		fc.MaxCallSendMsgSize = int(limits.MaxRequestBytesWithOverhead())
		return clientv3.New(upstreamClientConfig(fc))
	}
	return cc
}

// upstreamClientConfig sets what every client of upstreams shares: a dial
// timeout; keepalives, so that a connection to an upstream that stopped
// answering is given up (and another upstream used) within about 15 s
// (the upstream's front refuses pings more often than etcd's 5 s); and a
// reconnect backoff of at most 2 s, so that an upstream back after an
// outage is used again within that (gRPC's grows to 2 minutes).
func upstreamClientConfig(c clientv3.Config) clientv3.Config {
	c.DialTimeout = 2 * time.Second // cascade.Config's UpstreamTimeout: a client made lazily authenticates within it
	c.DialKeepAliveTime, c.DialKeepAliveTimeout = 10*time.Second, 5*time.Second
	c.DialOptions = append(c.DialOptions, grpc.WithConnectParams(grpc.ConnectParams{
		Backoff:           grpcbackoff.Config{BaseDelay: 250 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
		MinConnectTimeout: 5 * time.Second,
	}))
	return c
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
