// Command primary runs one voting etcd member, with etcd's own flags and
// understudy's defaults, or with --dev a whole local deployment.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	etcdversion "go.etcd.io/etcd/api/v3/version"

	"github.com/understudy-kv/understudy/config"
	"github.com/understudy-kv/understudy/devcluster"
	"github.com/understudy-kv/understudy/primary"
	"github.com/understudy-kv/understudy/version"
)

const usage = `primary: one voting etcd member (etcd v%s, embedded), the voters that
understudy replicas join. It takes etcd's own flags with etcd's meanings; with
no flags it is a single-member cluster on 127.0.0.1:2379 (clients) and
127.0.0.1:2380 (peers) with its data in ./default.etcd, as etcd is.

Usage:
  primary [flags]          run one member
  primary --dev            run 3 voters and a replica on 127.0.0.1 for trying things out

Settings come from, highest first: flags, UNDERSTUDY_<FLAG> environment
variables (--max-learners is UNDERSTUDY_MAX_LEARNERS), then etcd's ETCD_<FLAG>
ones (an etcd unit file's environment works unchanged), the --config-file YAML
(etcd's config file format), then defaults.

Flags:
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg := config.DefaultPrimary()
	pf := config.NewPrimaryFlags(&cfg)
	pf.FS.SetOutput(stdout)
	err := pf.Load(args)
	if errors.Is(err, config.ErrHelp) {
		fmt.Fprintf(stdout, usage, etcdversion.Version)
		config.PrintFlags(stdout, pf.FS)
		return 0
	}
	// Validate even when some flags did not parse, so that every problem is
	// reported in one go.
	if err = errors.Join(err, cfg.Validate()); err != nil {
		printProblems(stderr, err)
		return 2
	}
	if cfg.PrintVersion {
		fmt.Fprint(stdout, version.String())
		return 0
	}
	for _, key := range config.UnknownEnv(pf.FS, config.EtcdEnvPrefix, config.EnvPrefix) {
		fmt.Fprintf(stderr, "primary: warning: %s names no flag of primary (ignored; see --help)\n", key)
	}
	if cfg.Dev {
		err = devcluster.Run(ctx, devcluster.Config{Dir: cfg.DevDir, Out: stdout, BasePort: cfg.DevPort})
	} else {
		err = primary.Run(ctx, cfg)
	}
	if err != nil {
		printProblems(stderr, err)
		return 1
	}
	return 0
}

func printProblems(w io.Writer, err error) { config.PrintProblems(w, "primary", err) }
