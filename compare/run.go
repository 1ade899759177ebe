package compare

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/understudy-kv/understudy/config"
	"github.com/understudy-kv/understudy/conn"
)

// preflightTimeout bounds the wait for the mirror to copy a first key.
const preflightTimeout = 30 * time.Second

// Options are what Run needs besides the configuration.
type Options struct {
	// Stdout receives the table, or the JSON report with --json.
	Stdout io.Writer
	// Progress, if not nil, shows a progress bar (give it a terminal).
	Progress io.Writer
	// HarnessLog receives, when a --local run fails, the end of the log of
	// each process of its topology; nil drops them.
	HarnessLog io.Writer
	Logger     *zap.Logger
	// Clock times the run: its start, the fault window, the readers'
	// arrivals, the probes, the drain and the progress bar; nil is the
	// real clock. Request timeouts are contexts, on the real clock.
	Clock clockwork.Clock
}

// withDefaults fills what opts leaves out.
func (opts Options) withDefaults() Options {
	if opts.Stdout == nil {
		opts.Stdout = io.Discard
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Clock == nil {
		opts.Clock = clockwork.NewRealClock()
	}
	return opts
}

// Run measures every path, prints the report and writes the files under
// cfg.Out: with cfg.Local on a topology of its own, else on the clusters
// cfg.Endpoints names, under a prefix it deletes afterwards.
func Run(ctx context.Context, cfg config.Compare, opts Options) (*Analysis, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	var (
		a   *Analysis
		err error
	)
	switch {
	case cfg.Local:
		a, err = runLocal(ctx, cfg, opts)
	default:
		a, err = runRemote(ctx, cfg, opts)
	}
	if err != nil {
		return nil, err
	}
	if cfg.JSON {
		err = a.JSON(opts.Stdout)
	} else {
		err = a.Table(opts.Stdout)
	}
	if err != nil {
		return a, err
	}
	if cfg.Out != "" {
		if err := a.WriteFiles(cfg.Out); err != nil {
			return a, err
		}
		if !cfg.JSON {
			fmt.Fprintf(opts.Stdout, "report and plots in %s\n", cfg.Out)
		}
	}
	if cfg.Doc != "" {
		if err := a.UpdateDoc(cfg.Doc, cfg.Out, cfg.Command); err != nil {
			return a, err
		}
	}
	return a, nil
}

// Injector applies a fault and undoes it. Inject and Heal are called from
// one goroutine, in that order.
type Injector interface {
	Inject() error
	Heal() error
}

func runRemote(ctx context.Context, cfg config.Compare, opts Options) (*Analysis, error) {
	var cl Clients
	sides := []struct {
		flag string
		urls []string
		dst  **clientv3.Client
	}{{"primary", cfg.Endpoints.Primary, &cl.Primary}, {"replica", cfg.Endpoints.Replica, &cl.Replica}, {"mirror-dest", cfg.Endpoints.MirrorDest, &cl.Mirror},
		{"cascaded", cfg.Endpoints.Cascaded, &cl.Cascaded}}
	if err := probeRemote(ctx, cfg.Endpoints); err != nil {
		return nil, err
	}
	for _, side := range sides {
		if len(side.urls) == 0 {
			continue // --cascaded is optional
		}
		cli, err := dial(cfg.Endpoints, side.urls, opts.Logger)
		if err != nil {
			return nil, fmt.Errorf("compare: --%s: %w", side.flag, err)
		}
		defer cli.Close()
		*side.dst = cli
	}
	rctx, cancel := context.WithTimeout(ctx, cfg.RequestTimeout)
	resp, err := cl.Primary.Get(rctx, cfg.Prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	cancel()
	if err != nil {
		return nil, fmt.Errorf("compare: --primary: %w", err)
	}
	if resp.Count > 0 {
		return nil, fmt.Errorf("%w (%q holds %d)", ErrPrefixInUse, cfg.Prefix, resp.Count)
	}
	defer func() {
		// Everything under the prefix is compare's; the mirror carries
		// the deletion to the destination.
		dctx, cancel := context.WithTimeout(context.Background(), cfg.RequestTimeout)
		defer cancel()
		if _, err := cl.Primary.Delete(dctx, cfg.Prefix, clientv3.WithPrefix()); err != nil {
			opts.Logger.Warn("could not delete the prefix", zap.String("prefix", cfg.Prefix), zap.Error(err))
		}
	}()
	return Measure(ctx, cfg, cl, nil, opts)
}

// clientFlags are the client flags towards the endpoints of flag
// (--primary, --replica, …): the credentials every side shares.
func clientFlags(e config.CompareEndpoints, flag string, urls []string) conn.Flags {
	n := conn.EtcdctlNames("")
	n.Endpoints = "--" + flag
	return conn.Flags{Endpoints: urls, Credentials: e.Credentials, Names: n}
}

// probeRemote checks every side at once, within --dial-timeout: each
// endpoint answers as etcd, the replica is a member of the primary's
// cluster, and the mirror's destination is another cluster.
func probeRemote(ctx context.Context, e config.CompareEndpoints) error {
	sides := []struct {
		flag string
		urls []string
	}{{"primary", e.Primary}, {"replica", e.Replica}, {"mirror-dest", e.MirrorDest}, {"cascaded", e.Cascaded}}
	reached := make([]conn.Reached, len(sides))
	errs := make([]error, len(sides))
	var wg sync.WaitGroup
	for i, s := range sides {
		if len(s.urls) > 0 {
			wg.Go(func() { reached[i], errs[i] = clientFlags(e, s.flag, s.urls).Probe(ctx) })
		}
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	primary := reached[0]
	expected := fmt.Sprintf("the cluster of --primary %s", primary.Answered[0])
	if r := reached[1]; r.ClusterID != primary.ClusterID {
		return clientFlags(e, "replica", e.Replica).WrongCluster(r.Answered[0], r.ClusterID, primary.ClusterID, expected)
	}
	if r := reached[2]; r.ClusterID == primary.ClusterID {
		return &conn.Error{Flag: "--mirror-dest", Endpoint: r.Answered[0], Class: conn.ErrWrongCluster,
			Cause:  fmt.Sprintf("a member of cluster %x, %s: a mirror copies into another cluster", r.ClusterID, expected),
			Advice: "give the client URLs of the cluster the mirror copies --prefix into"}
	}
	return nil
}

func dial(e config.CompareEndpoints, urls []string, lg *zap.Logger) (*clientv3.Client, error) {
	cfg, err := clientFlags(e, "", urls).ClientConfig(lg.Named("client").WithOptions(zap.IncreaseLevel(zap.WarnLevel)))
	if err != nil {
		return nil, err
	}
	cfg.DialOptions = DialOptions()
	return clientv3.New(cfg)
}

// Measure runs the workload against cl, injects and heals the fault with
// inj (nil: none), and judges what it saw. The mirror must copy cfg.Prefix
// into cl.Mirror under the same names.
func Measure(ctx context.Context, cfg config.Compare, cl Clients, inj Injector, opts Options) (*Analysis, error) {
	opts = opts.withDefaults()
	clock := opts.Clock
	if err := preflight(ctx, clock, cfg, cl); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := &workload{cfg: cfg, cl: cl, clock: clock}
	started := make(chan time.Time, 1)
	type result struct {
		h   *History
		err error
	}
	done := make(chan result, 1)
	go func() {
		h, err := w.run(ctx, started)
		done <- result{h, err}
	}()
	var base time.Time
	select {
	case base = <-started:
	case r := <-done:
		return nil, r.err
	}
	bar := startBar(opts.Progress, clock, base, cfg.Duration)
	defer bar.stop()

	var from, to time.Duration
	var faultErr error
	if inj != nil {
		at, length := cfg.FaultWindow()
		if waitUntil(ctx, clock, base.Add(at)) {
			from = clock.Since(base)
			bar.status("fault: " + string(cfg.Fault))
			opts.Logger.Info("injecting", zap.String("fault", string(cfg.Fault)), zap.Duration("at", from))
			if faultErr = inj.Inject(); faultErr == nil {
				waitUntil(ctx, clock, base.Add(at+length))
			}
			to = clock.Since(base)
			bar.status("healed")
			faultErr = errors.Join(faultErr, inj.Heal())
			opts.Logger.Info("healed", zap.String("fault", string(cfg.Fault)), zap.Duration("at", to))
		}
		if faultErr != nil {
			cancel()
			<-done
			return nil, fmt.Errorf("compare: fault %s: %w", cfg.Fault, faultErr)
		}
	}
	r := <-done
	if r.err != nil {
		return nil, r.err
	}
	bar.status("checking")
	return Analyze(cfg, r.h, from, to), nil
}

// preflight checks that the mirror copies the prefix: a key put now must
// reach the destination.
func preflight(ctx context.Context, clock clockwork.Clock, cfg config.Compare, cl Clients) error {
	key := cfg.Prefix + "ready"
	rctx, cancel := context.WithTimeout(ctx, cfg.RequestTimeout)
	resp, err := cl.Primary.Put(rctx, key, "1")
	cancel()
	if errors.Is(err, rpctypes.ErrPermissionDenied) {
		user, _ := cfg.Endpoints.UserPassword()
		return fmt.Errorf("compare: put %s through the primary: %w (--user %q needs read and write on --prefix %s, and nothing more: `etcdctl role grant-permission ROLE readwrite %s --prefix`)", key, err, user, cfg.Prefix, cfg.Prefix)
	}
	if err != nil {
		return fmt.Errorf("compare: put %s through the primary: %w", key, err)
	}
	deadline := clock.Now().Add(preflightTimeout)
	for {
		rctx, cancel := context.WithTimeout(ctx, cfg.RequestTimeout)
		got, err := cl.Mirror.Get(rctx, key)
		cancel()
		if err == nil && got.Count == 1 {
			return nil
		}
		if clock.Now().After(deadline) {
			return fmt.Errorf("compare: %s (revision %d on the primary) did not reach the mirror's destination within %v (last error: %v): is a mirror copying --prefix %s there?",
				key, resp.Header.Revision, preflightTimeout, err, cfg.Prefix)
		}
		if !waitUntil(ctx, clock, clock.Now().Add(50*time.Millisecond)) {
			return ctx.Err()
		}
	}
}

// waitUntil waits until t on clock or ctx's end, and says whether t came.
func waitUntil(ctx context.Context, clock clockwork.Clock, t time.Time) bool {
	timer := clock.NewTimer(t.Sub(clock.Now()))
	defer timer.Stop()
	select {
	case <-timer.Chan():
		return true
	case <-ctx.Done():
		return false
	}
}
