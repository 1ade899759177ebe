// Command replica runs an understudy replica: an etcd learner that serves
// etcd's v3 API to unmodified clients.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/jonboulle/clockwork"

	"github.com/understudy-kv/understudy/config"
	"github.com/understudy-kv/understudy/replica"
	"github.com/understudy-kv/understudy/version"
)

const usage = `replica: an etcd read replica. It joins a cluster as a learner (the voters
and their quorum never change), keeps a complete copy through raft, and serves
etcd's v3 API on its own client URLs to any etcd client:

  reads        strong by default (linearizable: a ReadIndex round through the
               leader, then a local read); serializable reads are local, bounded
               by --max-staleness or the request's "understudy-max-staleness"
               gRPC metadata when one is set
  watches      from the replica's own store
  writes, leases, auth and member changes
               forwarded to the leader through raft, answered once applied here
               (read-your-writes on this replica)

Usage:
  replica --name r1 --join http://voter:2379 \
    --listen-peer-urls http://10.0.0.5:2480 --listen-client-urls http://10.0.0.5:2479
  replica mirror …          copy a prefix into another cluster (replica mirror --help)
  replica compare …         learner vs mirror consistency, side by side (replica compare --help)
  replica status|promote|leave|hold …
                            members, lag, promotion, maintenance holds
                            (replica status --help)
  replica --version         understudy's version and source revision, etcd's, Go's

On first start the replica adds itself as a learner through --join, catches up
and serves; it joins no cluster it is not given (--join, or --upstream for a
cascaded replica). If it is not caught up within --join-timeout it removes the
learner entry it added and exits non-zero. A data dir that holds a member
restarts as that member and adds nothing, if --join (left out: the members the
data dir's member list names) reaches that member's cluster and lists it under
--name; a data dir of another cluster, of a removed member, of another replica
or of a cascaded replica is refused before anything is served.

Settings come from, highest first: flags, UNDERSTUDY_<FLAG> environment
variables (--max-staleness is UNDERSTUDY_MAX_STALENESS), the --config-file
YAML (keys are flag names), then defaults.

Flags:
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, clockwork.NewRealClock(), os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs the command args name; clock is the one clock of whatever it
// runs.
func run(ctx context.Context, clock clockwork.Clock, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "mirror":
			return runMirror(ctx, clock, args[1:], stdout, stderr)
		case "compare":
			return runCompare(ctx, clock, args[1:], stdout, stderr)
		case "status", "promote", "leave", "hold":
			return runAdmin(ctx, clock, args[0], args[1:], stdout, stderr)
		case "--version", "-version":
			fmt.Fprint(stdout, version.String())
			return 0
		}
	}
	cfg := config.DefaultReplica()
	fs := config.NewReplicaFlags(&cfg)
	err := config.LoadReplica(&cfg, fs, args)
	if errors.Is(err, config.ErrHelp) {
		fmt.Fprint(stdout, usage)
		config.PrintFlags(stdout, fs)
		return 0
	}
	if err = errors.Join(err, cfg.Validate()); err != nil {
		printProblems(stderr, err)
		return 2
	}
	for _, key := range config.UnknownEnv(fs) {
		fmt.Fprintf(stderr, "replica: warning: %s names no flag of replica (ignored; see --help)\n", key)
	}
	if err := replica.Run(ctx, cfg, replica.Options{Clock: clock}); err != nil {
		printProblems(stderr, err)
		if errors.Is(err, replica.ErrNoCluster) {
			return 2 // a flag to give, as the other refusals of bad input
		}
		return 1
	}
	return 0
}

func printProblems(w io.Writer, err error) { config.PrintProblems(w, "replica", err) }
