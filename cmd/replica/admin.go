package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/understudy-kv/understudy/config"
	"github.com/understudy-kv/understudy/conn"
	"github.com/understudy-kv/understudy/membership"
	"github.com/understudy-kv/understudy/promotion"
)

const adminUsage = `replica status | promote | leave: the cluster's members and replicas.

Usage:
  replica status  --endpoints URL[,URL…] [--cascaded URL[,URL…]] [-w table|json]
      every member and replica: role, learner or voter, applied and commit
      index, lag in entries, freshness (replicas), leader, and whether
      understudy would promote it now; and cascaded replicas (no members):
      their chain of upstreams, revision and lag in revisions
  replica promote --endpoints URL[,URL…] NAME|ID [--force]
      promote a learner if it is live and within --promote-max-lag entries
      of the leader's commit; --force leaves the check to etcd (a learner's
      match index at least 90% of the leader's)
  replica leave   --endpoints URL[,URL…] NAME|ID
      remove a replica's member entry (the replica then stops)

Flags:
`

type adminFlags struct {
	conn     conn.Flags
	cascaded []string
	write    string
	force    bool
	rule     promotion.Config
}

func newAdminFlags(a *adminFlags) *flag.FlagSet {
	fs := flag.NewFlagSet("replica admin", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	a.rule = promotion.DefaultConfig()
	a.conn.Endpoints = []string{"http://127.0.0.1:2379"}
	fs.Func("endpoints", "Client URLs of the cluster, comma-separated (default http://127.0.0.1:2379).", func(s string) error {
		a.conn.Endpoints = strings.Split(s, ",")
		return nil
	})
	fs.Func("cascaded", "status: client URLs of cascaded replicas to show too (they are no members), comma-separated.", func(s string) error {
		a.cascaded = strings.Split(s, ",")
		return nil
	})
	fs.StringVar(&a.write, "w", "table", "Output format of status: table or json.")
	fs.StringVar(&a.write, "write-out", "table", "Same as -w.")
	fs.BoolVar(&a.force, "force", false, "promote: skip understudy's check; etcd's own still applies.")
	fs.Uint64Var(&a.rule.MaxLag, "promote-max-lag", a.rule.MaxLag, "Most entries behind the leader's commit a learner may be to be promoted.")
	fs.DurationVar(&a.rule.LeaderContact, "promote-leader-contact", a.rule.LeaderContact, "A learner must have heard from the leader within this long to be promoted.")
	a.conn.Register(fs, "", "the members'")
	return fs
}

func runAdmin(ctx context.Context, clock clockwork.Clock, cmd string, args []string, stdout, stderr io.Writer) int {
	var a adminFlags
	fs := newAdminFlags(&a)
	fail := func(code int, format string, v ...any) int {
		fmt.Fprintf(stderr, "replica %s: %s\n", cmd, fmt.Sprintf(format, v...))
		return code
	}
	if err := fs.Parse(reorder(fs, args)); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, adminUsage)
			config.PrintFlags(stdout, fs)
			return 0
		}
		return fail(2, "%v", err)
	}
	if a.write != "table" && a.write != "json" {
		return fail(2, "-w %q: want table or json", a.write)
	}
	switch {
	case cmd == "status" && fs.NArg() > 0:
		return fail(2, "%q: unexpected argument", fs.Arg(0))
	case cmd != "status" && fs.NArg() != 1:
		return fail(2, "give one member NAME or hex ID")
	}
	cli, hc, err := membership.Dial(a.conn)
	if err != nil {
		return fail(2, "%v", err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	sts, err := membership.Status(ctx, cli, hc, a.rule, clock)
	if err != nil {
		return fail(1, "%v", err)
	}
	switch cmd {
	case "status":
		sts = append(sts, membership.Cascaded(ctx, cli, a.cascaded, membership.Leader(sts), clock)...)
		if a.write == "json" {
			b, _ := json.MarshalIndent(sts, "", "  ")
			fmt.Fprintln(stdout, string(b))
		} else {
			membership.WriteTable(stdout, sts)
			if rec, err := membership.Failover(ctx, cli); err != nil {
				fmt.Fprintf(stderr, "replica status: %v\n", err)
			} else {
				membership.WriteFailover(stdout, rec, clock.Now())
			}
		}
	case "promote":
		s, err := membership.Promote(ctx, cli, hc, sts, fs.Arg(0), a.force)
		if err != nil {
			return fail(1, "%v", err)
		}
		fmt.Fprintf(stdout, "Member %s promoted in cluster\n", s.ID)
	default:
		s, err := membership.Leave(ctx, cli, sts, fs.Arg(0))
		if err != nil {
			return fail(1, "%v", err)
		}
		fmt.Fprintf(stdout, "Member %s removed from cluster\n", s.ID)
	}
	return 0
}

// reorder puts flags before positional arguments, so that
// `replica promote r1 --endpoints …` works as etcdctl users expect.
func reorder(fs *flag.FlagSet, args []string) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" {
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		if f := fs.Lookup(name); f != nil {
			if bf, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && bf.IsBoolFlag() {
				continue
			}
			if i+1 < len(args) {
				flags = append(flags, args[i+1])
				i++
			}
		}
	}
	return append(flags, pos...)
}
