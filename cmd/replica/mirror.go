package main

import (
	"context"
	"errors"
	"fmt"
	"io"
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

	"github.com/understudy-kv/understudy/config"
	"github.com/understudy-kv/understudy/mirror"
	"github.com/understudy-kv/understudy/replica"
)

const mirrorUsage = `replica mirror: copy a key prefix of one etcd cluster into another, through
the source's watch. Resumable (a checkpoint in the destination, written in the
same transaction as each change), ordered and exactly once; keys deleted while
it was down are deleted on restart; a source compacted past the checkpoint
means a full sync again, never a silent gap. The mirror overwrites and deletes
only keys it wrote: an initial sync into a destination that holds other keys
in its image stops and asks for --overwrite or --prune.

Usage:
  replica mirror --source-endpoints URL[,URL…] --dest-endpoints URL[,URL…] \
    [--prefix P] [--dest-prefix Q | --no-dest-prefix] [--rev R] [--name N]
    [--failback]                           B → A after a switchover A → B
  replica mirror verify (the same flags)   compare source and destination;
                                           exit 1 on any difference
  replica mirror drain (the same flags) [--drain-timeout D]
                                           wait until the destination holds
                                           every source revision, write the
                                           cutover record; exit 0 when ready

verify compares the source at the revision in the mirror's checkpoint (or
--rev) with the destination as of that checkpoint, and prints each difference;
after a drain (the mirror not moved since), at the cutover record's revision.
drain is for a switchover (docs/mirror-dr.md): stop the writers first.

Flags:
`

func runMirror(ctx context.Context, clock clockwork.Clock, args []string, stdout, stderr io.Writer) int {
	verify := len(args) > 0 && args[0] == "verify"
	drain := len(args) > 0 && args[0] == "drain"
	if verify || drain {
		args = args[1:]
	}
	cfg := config.DefaultMirror()
	fs := config.NewMirrorFlags(&cfg)
	err := config.LoadMirror(&cfg, fs, args)
	if errors.Is(err, config.ErrHelp) {
		fmt.Fprint(stdout, mirrorUsage)
		config.PrintFlags(stdout, fs)
		return 0
	}
	if err = errors.Join(err, cfg.Validate()); err != nil {
		printProblems(stderr, err)
		return 2
	}
	lg, err := replica.NewLogger(cfg.LogLevel)
	if err != nil {
		printProblems(stderr, err)
		return 2
	}
	defer lg.Sync()
	src, dst, err := mirrorClients(cfg, lg)
	if err != nil {
		printProblems(stderr, err)
		return 2
	}
	defer src.Close()
	defer dst.Close()
	switch {
	case drain:
		return runDrain(ctx, cfg, src, dst, lg, stdout, stderr)
	case verify:
		return runVerify(ctx, cfg, src, dst, stdout, stderr)
	}
	return runMirrorLoop(ctx, clock, cfg, src, dst, lg, stderr)
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

// runDrain is `replica mirror drain`.
func runDrain(ctx context.Context, cfg config.Mirror, src, dst *clientv3.Client, lg *zap.Logger, stdout, stderr io.Writer) int {
	cut, err := mirror.Drain(ctx, mirror.DrainConfig{Source: src, Dest: dst, Prefix: cfg.Prefix, DestPrefix: cfg.MappedDestPrefix(), Name: cfg.Name,
		Timeout: cfg.DrainTimeout, Quiet: mirror.DefaultDrainQuiet, RequestTimeout: cfg.CommandTimeout, Logger: lg})
	if err != nil {
		printProblems(stderr, err)
		return 1
	}
	fmt.Fprintln(stdout, cut.ReadyLine(cfg.Name, cfg.Prefix))
	return 0
}

// runVerify is `replica mirror verify`.
func runVerify(ctx context.Context, cfg config.Mirror, src, dst *clientv3.Client, stdout, stderr io.Writer) int {
	cut, err := mirror.ReadCutover(ctx, dst, cfg.Name)
	if err != nil {
		printProblems(stderr, err)
		return 2
	}
	if cut != nil {
		fmt.Fprintln(stdout, cut.RecordLine())
	}
	diffs, rev, err := mirror.Verify(ctx, mirror.VerifyConfig{Source: src, Dest: dst, Prefix: cfg.Prefix, DestPrefix: cfg.MappedDestPrefix(), Name: cfg.Name, Rev: cfg.Rev, PageSize: cfg.PageSize, Cutover: cut})
	for _, d := range diffs {
		fmt.Fprintln(stdout, d)
	}
	if err != nil {
		printProblems(stderr, err)
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
func runMirrorLoop(ctx context.Context, clock clockwork.Clock, cfg config.Mirror, src, dst *clientv3.Client, lg *zap.Logger, stderr io.Writer) int {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	defer serveMirrorMetrics(cfg.ListenMetricsURLs, reg, lg)()
	err := mirror.Run(ctx, mirror.Config{
		Source: src, Dest: dst, Prefix: cfg.Prefix, DestPrefix: cfg.MappedDestPrefix(),
		Rev: cfg.Rev, Name: cfg.Name, MaxTxnOps: cfg.MaxTxnOps, MaxRequestBytes: cfg.MaxRequestBytes, PageSize: cfg.PageSize,
		NoLeases: cfg.NoLeases, ProgressInterval: cfg.ProgressInterval, CycleCheckInterval: cfg.CycleCheckInterval, Policy: policy(cfg), ResetPolicy: cfg.ResetPolicy, Resync: cfg.Resync, Failback: cfg.Failback,
		RequestTimeout: cfg.CommandTimeout, StallAfter: cfg.StallTimeout,
		Clock: clock, Progress: syncProgress(lg, clock), Logger: lg, Registerer: reg,
	})
	if err != nil {
		printProblems(stderr, err)
		return 1
	}
	return 0
}

// serveMirrorMetrics serves /metrics on each URL; the returned function
// closes the listeners.
func serveMirrorMetrics(urls []string, reg *prometheus.Registry, lg *zap.Logger) func() {
	var srvs []*http.Server
	for _, u := range urls {
		pu, _ := url.Parse(u)
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		srv := &http.Server{Addr: pu.Host, Handler: mux}
		go func() {
			if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				lg.Error("metrics listener", zap.String("url", u), zap.Error(err))
			}
		}()
		srvs = append(srvs, srv)
	}
	return func() {
		for _, srv := range srvs {
			srv.Close()
		}
	}
}

func policy(cfg config.Mirror) mirror.Policy {
	switch {
	case cfg.Prune:
		return mirror.Prune
	case cfg.Overwrite:
		return mirror.Overwrite
	}
	return mirror.Keep
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

// sideClient connects to one side with its own TLS and credentials.
func sideClient(s config.MirrorSide, side string, lg *zap.Logger) (*clientv3.Client, error) {
	return dialSide(clientv3.Config{}, s, side, lg)
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

// syncProgress shows a full sync as a bar on a terminal, log lines (at
// most one every 2s by clock) else.
func syncProgress(lg *zap.Logger, clock clockwork.Clock) func(copied, total int64) {
	if isatty.IsTerminal(os.Stderr.Fd()) {
		var (
			once sync.Once
			bar  *pb.ProgressBar
		)
		return func(copied, total int64) {
			once.Do(func() {
				bar = pb.New64(total).SetWriter(os.Stderr).SetTemplateString(`syncing {{counters . }} keys {{bar . }} {{percent . }} {{etime . }}`).Start()
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
