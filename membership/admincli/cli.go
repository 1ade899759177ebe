// Package admincli runs replica status, promote, leave and hold from a parsed,
// validated config.Admin and says what came of it. cmd/ only parses flags.
package admincli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/backoff"
	"github.com/understudy-kv/understudy/config"
	"github.com/understudy-kv/understudy/conn"
	"github.com/understudy-kv/understudy/membership"
	"github.com/understudy-kv/understudy/podscale"
	"github.com/understudy-kv/understudy/promotion"
)

// commandTimeout bounds a whole command.
const commandTimeout = 30 * time.Second

// Run runs a.Command and returns its exit code: 0 done, 1 refused or
// failed, 2 the cluster could not be reached as configured.
func Run(ctx context.Context, clock clockwork.Clock, a config.Admin, stdout, stderr io.Writer) int {
	fail := func(code int, format string, v ...any) int {
		fmt.Fprintf(stderr, "replica %s: %s\n", a.Command, fmt.Sprintf(format, v...))
		return code
	}
	if a.Command == "leave" && a.IfScaledDown {
		if a.ShutdownDelay > 0 {
			// Endpoints first: the pod keeps serving while kube-proxy
			// and its peers stop sending clients to it.
			if err := backoff.Wait(ctx, clock, a.ShutdownDelay); err != nil {
				return fail(1, "--shutdown-delay: %v; the member stays", err)
			}
		}
		v, err := scaledDown(ctx, clock, a)
		if err != nil {
			return fail(1, "%v; the member stays", err)
		}
		if !v.Leave {
			fmt.Fprintf(stdout, "Member %s stays: %s\n", a.Target, v.Why)
			return 0
		}
		fmt.Fprintf(stdout, "Member %s leaves: %s\n", a.Target, v.Why)
	}
	// Every endpoint at once, within --dial-timeout: one that does not
	// answer as etcd is named with its cause before anything is asked.
	if _, err := a.Conn.Probe(ctx); err != nil {
		config.PrintProblems(stderr, "replica "+a.Command, err)
		return 2
	}
	cli, hc, err := membership.Dial(a.Conn)
	if err != nil {
		return fail(2, "%v", err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	fail = func(code int, format string, v ...any) int {
		fmt.Fprintf(stderr, "replica %s: %s\n", a.Command, explained(a, fmt.Errorf(format, v...)))
		return code
	}
	sts, err := membership.Status(ctx, cli, hc, a.Rule, clock)
	if err != nil {
		return fail(1, "%w", err)
	}
	switch a.Command {
	case "status":
		status(ctx, cli, sts, a, clock, stdout, stderr)
	case "promote":
		s, err := membership.Promote(ctx, clock, cli, hc, sts, a.Target, a.Force)
		if err != nil {
			return fail(1, "%w", err)
		}
		fmt.Fprintf(stdout, "Member %s promoted in cluster\n", s.ID)
	case "leave":
		s, err := membership.Leave(ctx, clock, cli, sts, a.Target)
		if err != nil {
			return fail(1, "%w", err)
		}
		fmt.Fprintf(stdout, "Member %s removed from cluster\n", s.ID)
	case "hold":
		out, err := hold(ctx, cli, sts, a, clock)
		if err != nil {
			return fail(1, "%w", err)
		}
		fmt.Fprintln(stdout, out)
	default:
		return fail(2, "unknown command (want one of %v)", config.AdminCommands)
	}
	return 0
}

// explained is err told as conn does (the endpoints, the cause, the
// advice) when the cluster refused the user or its rights; else err, and
// a refused hold, which says what a hold needs.
func explained(a config.Admin, err error) error {
	if errors.Is(err, membership.ErrHoldRefused) {
		return err
	}
	e := a.Conn.Explain(strings.Join(a.Conn.Endpoints, ","), err)
	if c := conn.ClassOf(e); c == conn.ErrAuthFailed || c == conn.ErrPermissionDenied {
		return e
	}
	return err
}

// scaledDown asks the pod's StatefulSet whether it still counts the pod
// (leave --if-scaled-down, a preStop hook).
func scaledDown(ctx context.Context, clock clockwork.Clock, a config.Admin) (podscale.Verdict, error) {
	return podscale.Check(ctx, clock, func() (podscale.Config, error) { return podscale.InCluster(a.ServiceAccountDir) }, a.Target)
}

// status prints every member, the cascaded replicas asked for, and (as a
// table) the failover under way and the maintenance holds.
func status(ctx context.Context, cli *clientv3.Client, sts []*membership.Member, a config.Admin, clock clockwork.Clock, stdout, stderr io.Writer) {
	sts = append(sts, membership.Cascaded(ctx, cli, a.Cascaded, membership.Leader(sts), clock)...)
	if a.Write == "json" {
		b, _ := json.MarshalIndent(sts, "", "  ")
		fmt.Fprintln(stdout, string(b))
		return
	}
	membership.WriteTable(stdout, sts)
	if rec, err := membership.Failover(ctx, cli); err != nil {
		fmt.Fprintf(stderr, "replica status: %v\n", explained(a, err))
	} else {
		membership.WriteFailover(stdout, rec, clock.Now())
	}
	if hs, _, err := membership.Holds(ctx, cli); err != nil {
		fmt.Fprintf(stderr, "replica status: %v\n", explained(a, err))
	} else {
		membership.WriteHolds(stdout, hs)
	}
}

// hold writes or releases a maintenance hold and says what it did.
func hold(ctx context.Context, cli *clientv3.Client, sts []*membership.Member, a config.Admin, clock clockwork.Clock) (string, error) {
	if a.Release {
		found, err := membership.Release(ctx, cli, sts, a.Target)
		switch {
		case err != nil:
			return "", err
		case !found:
			return "no hold to release", nil
		}
		return "hold released", nil
	}
	h, err := membership.Hold(ctx, cli, sts, a.Target, a.HoldFor, promotion.MaintenanceHold{Reason: a.Reason, By: a.Conn.Identity()}, clock.Now())
	if err != nil {
		return "", err
	}
	return h.String(), nil
}
