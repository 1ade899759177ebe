// Package mirrorcli runs `replica mirror` and its sub-commands (verify, drain)
// from a parsed, validated config.Mirror: the clients of both sides, the
// metrics listeners, the full sync's progress, and what each prints. cmd/
// only parses flags.
package mirrorcli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/cheggaaa/pb/v3"
	"github.com/jonboulle/clockwork"
	"github.com/mattn/go-isatty"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/understudy-kv/understudy/certexpiry"
	"github.com/understudy-kv/understudy/config"
	"github.com/understudy-kv/understudy/conn"
	"github.com/understudy-kv/understudy/mirror"
)

// Mode is which of the mirror's commands runs.
type Mode int

const (
	// Copy is `replica mirror`: copy until ctx ends.
	Copy Mode = iota
	// Verify is `replica mirror verify`.
	Verify
	// Drain is `replica mirror drain`.
	Drain
)

// Run runs the command mode with cfg (validated) and returns its exit
// code: 0 done, 1 failed or (verify) a difference found, 2 bad input.
// Results go to stdout, problems and a failed verify's verdict to stderr.
func Run(ctx context.Context, clock clockwork.Clock, mode Mode, cfg config.Mirror, lg *zap.Logger, stdout, stderr io.Writer) int {
	problems := func(err error) { config.PrintProblems(stderr, "replica", err) }
	if err := probeSides(ctx, cfg); err != nil {
		problems(err)
		return 1
	}
	src, dst, err := mirrorClients(cfg, lg)
	if err != nil {
		problems(err)
		return 2
	}
	defer src.Close()
	defer dst.Close()
	switch mode {
	case Drain:
		return runDrain(ctx, cfg, src, dst, lg, stdout, problems)
	case Verify:
		return runVerify(ctx, cfg, src, dst, stdout, stderr, problems)
	}
	return runMirrorLoop(ctx, clock, cfg, src, dst, lg, stderr, problems)
}

// mirrorClients connects to both sides.
func mirrorClients(cfg config.Mirror, lg *zap.Logger) (src, dst *clientv3.Client, err error) {
	if src, err = mirrorClient(cfg, cfg.Source, "source", lg); err != nil {
		return nil, nil, err
	}
	if dst, err = mirrorClient(cfg, cfg.Dest, "dest", lg); err != nil {
		src.Close()
		return nil, nil, err
	}
	return src, dst, nil
}

// probeSides checks both clusters at once, each within its
// --*-dial-timeout: an endpoint that does not answer as etcd is named with
// its cause, one line each, before the mirror starts.
func probeSides(ctx context.Context, cfg config.Mirror) error {
	var (
		wg   sync.WaitGroup
		errs [2]error
	)
	for i, s := range []struct {
		flags config.MirrorSide
		side  string
	}{{cfg.Source, "source"}, {cfg.Dest, "dest"}} {
		s.flags.Names = conn.EtcdctlNames(s.side + "-")
		wg.Go(func() { _, errs[i] = s.flags.Probe(ctx) })
	}
	wg.Wait()
	return errors.Join(errs[:]...)
}

// runDrain is `replica mirror drain`.
func runDrain(ctx context.Context, cfg config.Mirror, src, dst *clientv3.Client, lg *zap.Logger, stdout io.Writer, problems func(error)) int {
	cut, err := mirror.Drain(ctx, mirror.DrainConfig{Source: src, Dest: dst, Settings: cfg.Settings, Quiet: mirror.DefaultDrainQuiet, Logger: lg})
	if err != nil {
		problems(err)
		return 1
	}
	fmt.Fprintln(stdout, cut.ReadyLine(cfg.Name, cfg.Prefix))
	return 0
}

// runVerify is `replica mirror verify`.
func runVerify(ctx context.Context, cfg config.Mirror, src, dst *clientv3.Client, stdout, stderr io.Writer, problems func(error)) int {
	cut, err := mirror.ReadCutover(ctx, dst, cfg.Name)
	if err != nil {
		problems(err)
		return 2
	}
	if cut != nil {
		fmt.Fprintln(stdout, cut.RecordLine())
	}
	diffs, rev, err := mirror.Verify(ctx, mirror.VerifyConfig{Source: src, Dest: dst, Settings: cfg.Settings, Cutover: cut})
	for _, d := range diffs {
		fmt.Fprintln(stdout, d)
	}
	if err != nil {
		problems(err)
		return 2
	}
	unowned, verdict, agree := mirror.Verdict(diffs, rev, cut, cfg.Name)
	if unowned != "" {
		fmt.Fprintln(stdout, unowned)
	}
	if !agree {
		fmt.Fprintln(stderr, verdict)
		return 1
	}
	fmt.Fprintln(stdout, verdict)
	return 0
}

// runMirrorLoop runs the mirror until ctx ends, serving its metrics.
func runMirrorLoop(ctx context.Context, clock clockwork.Clock, cfg config.Mirror, src, dst *clientv3.Client, lg *zap.Logger, stderr io.Writer, problems func(error)) int {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}),
		certexpiry.New(certexpiry.File{Use: "source", Path: cfg.Source.Cert}, certexpiry.File{Use: "dest", Path: cfg.Dest.Cert}))
	stop, err := serveMetrics(cfg.ListenMetricsURLs, reg, lg)
	if err != nil {
		problems(err)
		return 2
	}
	defer stop()
	err = mirror.Run(ctx, mirror.Config{Source: src, Dest: dst, Settings: cfg.Settings,
		Clock: clock, Progress: syncProgress(lg, clock, stderr), Logger: lg, Registerer: reg})
	if err != nil {
		problems(err)
		return 1
	}
	lg.Info("mirror stopped", zap.String("name", cfg.Name), zap.String("prefix", cfg.Prefix),
		zap.NamedError("cause", context.Cause(ctx)))
	return 0
}

// serveMetrics listens on each URL (an address taken or not allowed is an
// error here, before the mirror starts) and serves /metrics from reg; the
// returned function closes the listeners and waits for their servers.
func serveMetrics(urls []string, reg *prometheus.Registry, lg *zap.Logger) (stop func(), err error) {
	var (
		srvs []*http.Server
		wg   sync.WaitGroup
	)
	stop = func() {
		for _, srv := range srvs {
			srv.Close()
		}
		wg.Wait()
	}
	for _, u := range urls {
		pu, err := url.Parse(u)
		if err != nil {
			stop()
			return nil, fmt.Errorf("--listen-metrics-urls %s: %w", u, err)
		}
		ln, err := net.Listen("tcp", pu.Host)
		if err != nil {
			stop()
			return nil, fmt.Errorf("--listen-metrics-urls %s: %w", u, err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		srvs = append(srvs, srv)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				lg.Error("metrics listener stopped", zap.String("url", u), zap.Error(err))
			}
		}()
	}
	return stop, nil
}

// grpcOverheadBytes is what etcd's gRPC server takes beyond
// --max-request-bytes (embed's grpcOverheadBytes).
const grpcOverheadBytes = 512 * 1024

// mirrorClient connects to one side of a mirror, with gRPC keepalive. The
// destination's client sends what the destination takes (--max-request-bytes
// and gRPC's overhead), not clientv3's default 2 MiB: a mirror given a larger
// --max-request-bytes must not refuse its own transactions.
func mirrorClient(m config.Mirror, s config.MirrorSide, side string, lg *zap.Logger) (*clientv3.Client, error) {
	cfg := clientv3.Config{DialKeepAliveTime: m.KeepaliveTime, DialKeepAliveTimeout: m.KeepaliveTimeout}
	if side == "dest" {
		cfg.MaxCallSendMsgSize = m.MaxRequestBytes + grpcOverheadBytes
	}
	return dialSide(cfg, s, side, lg)
}

func dialSide(cfg clientv3.Config, s config.MirrorSide, side string, lg *zap.Logger) (*clientv3.Client, error) {
	base, err := s.ClientConfig(lg.Named(side + "-client").WithOptions(zap.IncreaseLevel(zap.ErrorLevel)))
	if err != nil {
		return nil, fmt.Errorf("--%s-cacert/--%s-cert/--%s-key: %w", side, side, side, err)
	}
	base.DialKeepAliveTime, base.DialKeepAliveTimeout = cfg.DialKeepAliveTime, cfg.DialKeepAliveTimeout
	base.MaxCallSendMsgSize = cfg.MaxCallSendMsgSize
	cli, err := clientv3.New(base)
	if err != nil {
		return nil, fmt.Errorf("--%s-endpoints: %w", side, err)
	}
	return cli, nil
}

// syncProgress shows a full sync as a bar on stderr when it is a
// terminal, log lines (at most one every 2s by clock) else.
func syncProgress(lg *zap.Logger, clock clockwork.Clock, stderr io.Writer) func(copied, total int64) {
	if f, ok := stderr.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
		var (
			once sync.Once
			bar  *pb.ProgressBar
		)
		return func(copied, total int64) {
			once.Do(func() {
				bar = pb.New64(total).SetWriter(stderr).SetTemplateString(`syncing {{counters . }} keys {{bar . }} {{percent . }} {{etime . }}`).Start()
			})
			bar.SetTotal(max(total, copied))
			bar.SetCurrent(copied)
			if copied >= total {
				bar.Finish()
			}
		}
	}
	var last time.Time
	return func(copied, total int64) {
		if copied < total && clock.Since(last) < 2*time.Second {
			return
		}
		last = clock.Now()
		lg.Info("syncing", zap.Int64("copied", copied), zap.Int64("keys", total))
	}
}
