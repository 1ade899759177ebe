package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/jonboulle/clockwork"

	"github.com/understudy-kv/understudy/config"
	"github.com/understudy-kv/understudy/membership/admincli"
)

const adminUsage = `replica status | promote | leave: the cluster's members and replicas.

Usage:
  replica status  --endpoints URL[,URL…] [--cascaded URL[,URL…]] [-w table|json]
      every member and replica: role, learner or voter, applied and commit
      index, lag in entries, freshness (replicas), the leader's raft
      progress, whether understudy would promote it now, and the
      auto-compaction each replica would run once leading; and cascaded
      replicas (no members), by --name, their advertised client URL as ID:
      their chain of upstreams, revision and lag in revisions. Errors in
      a column of their own; -w json has every field
  replica promote --endpoints URL[,URL…] NAME|ID [--force]
      promote a learner if it is live and within --promote-max-lag entries
      of the leader's commit; --force leaves the check to etcd (a learner's
      match index at least 90% of the leader's)
  replica leave   --endpoints URL[,URL…] NAME|ID
      remove a replica's member entry (the replica then stops)
  replica hold    --endpoints URL[,URL…] NAME|ID|--all --for D [--reason R]
      a maintenance hold: no standby replaces that voter (or any) until
      --for has passed or it is released; replica hold --release NAME|ID|--all

Flags:
`

func runAdmin(ctx context.Context, clock clockwork.Clock, cmd string, args []string, stdout, stderr io.Writer) int {
	var a config.Admin
	fs := config.NewAdminFlags(&a, cmd)
	err := config.LoadAdmin(&a, fs, args)
	if errors.Is(err, config.ErrHelp) {
		fmt.Fprint(stdout, adminUsage)
		config.PrintFlags(stdout, fs)
		return 0
	}
	if err = errors.Join(err, a.Validate()); err != nil {
		config.PrintProblems(stderr, "replica "+cmd, err)
		return 2
	}
	return admincli.Run(ctx, clock, a, stdout, stderr)
}
