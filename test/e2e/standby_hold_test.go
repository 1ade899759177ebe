package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/understudy-kv/understudy/membership"
	"github.com/understudy-kv/understudy/promotion"
	"github.com/understudy-kv/understudy/test/harness"
)

// replicaCLI runs the replica binary with args and returns its combined
// output and whether it exited 0.
func replicaCLI(t *testing.T, bins *harness.Bins, args ...string) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bins.Replica, args...).CombinedOutput()
	return string(out), err == nil
}

// TestAHeldVoterIsNotReplacedUntilTheHoldEnds: a follower under a
// maintenance hold (replica hold), and every voter under a shorter one,
// is stopped for 3 × --failover-after: the standby does not replace it and
// says why. Its own hold is released while it is still down: the hold of
// every voter still stands, and it is still not replaced. When that one
// expires (its lease), the follower, silent all along, is replaced at
// once.
func TestAHeldVoterIsNotReplacedUntilTheHoldEnds(t *testing.T) {
	timed(t)
	const failoverAfter = standbyFailoverAfter
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3})
	s := startReplica(t, bins, c, "standby", replicaOpts{Extra: standbyArgs})
	waitRoleState(t, s, "idle", "live")
	leader := c.Leader(t)
	victim, other := following(c, leader)[0], following(c, leader)[1]
	eps := leader.ClientURL + "," + other.ClientURL
	cli := client(t, leader.ClientURL, other.ClientURL)

	out, ok := replicaCLI(t, bins, "hold", "--endpoints", eps, victim.Name, "--for", "1h", "--reason", "node reboot")
	if !ok || !strings.Contains(out, "held for maintenance") {
		t.Fatalf("replica hold %s: %s", victim.Name, out)
	}
	allHeld := time.Now()
	const allFor = 25 * time.Second
	if out, ok := replicaCLI(t, bins, "hold", "--endpoints", eps, "--all", "--for", allFor.String()); !ok {
		t.Fatalf("replica hold --all: %s", out)
	}
	out, _ = replicaCLI(t, bins, "status", "--endpoints", eps)
	if !strings.Contains(out, "voter "+victim.Name) || !strings.Contains(out, "every voter held for maintenance") || !strings.Contains(out, "node reboot") {
		t.Fatalf("replica status does not show both holds:\n%s", out)
	}

	victim.Proc.Kill()
	killed := time.Now()
	waitRoleState(t, s, "blocked", "maintenance-hold")
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for time.Since(killed) < 3*failoverAfter {
		<-tick.C
		if vs, ls := voters(t, cli); len(vs) != 3 || !contains(vs, victim.Name) || len(ls) != 1 {
			t.Fatalf("%v after the kill, under a hold: voters %v, learners %v", time.Since(killed).Round(time.Millisecond), vs, ls)
		}
	}
	if out, ok := replicaCLI(t, bins, "hold", "--endpoints", eps, "--release", victim.Name); !ok || !strings.Contains(out, "hold released") {
		t.Fatalf("replica hold --release %s: %s", victim.Name, out)
	}
	if time.Since(allHeld) >= allFor {
		t.Fatalf("the hold of every voter ran out (%v) before the test could check it stands alone; the machine is too slow for this test's timings", time.Since(allHeld))
	}
	harness.WaitFor(t, allFor+failoverAfter+15*time.Second, "the held follower replaced once every hold is gone", func() (bool, error) {
		vs, ls := voters(t, cli)
		return len(vs) == 3 && len(ls) == 0 && !contains(vs, victim.Name), fmt.Errorf("voters %v, learners %v", vs, ls)
	})
	if took := time.Since(allHeld); took < allFor-time.Second {
		t.Fatalf("replaced %v after the hold of every voter was written, before its %v ran out", took.Round(time.Millisecond), allFor)
	}
	t.Logf("replaced %v after the kill, %v after the hold of every voter was written (for %v)", time.Since(killed).Round(time.Millisecond), time.Since(allHeld).Round(time.Millisecond), allFor)
}

// TestAHoldWithoutRightsIsRefused: with auth on, a user whose role may not
// write under \x00understudy/ cannot write a hold (nor release one), and is
// told what it needs; root can.
func TestAHoldWithoutRightsIsRefused(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3})
	for _, args := range [][]string{
		{"user", "add", "root:rootpw"}, {"user", "grant-role", "root", "root"},
		{"role", "add", "app"}, {"role", "grant-permission", "app", "--prefix=true", "readwrite", "/app/"},
		{"user", "add", "app:apppw"}, {"user", "grant-role", "app", "app"},
		{"auth", "enable"},
	} {
		harness.MustEtcdctl(t, bins, c.Endpoints(), args...)
	}
	eps := strings.Join(c.Endpoints(), ",")
	for _, args := range [][]string{{"m2", "--for", "1h"}, {"--all", "--for", "1h"}, {"--release", "m2"}} {
		out, ok := replicaCLI(t, bins, append([]string{"hold", "--endpoints", eps, "--user", "app:apppw"}, args...)...)
		if ok || !strings.Contains(out, "refuses the hold") || !strings.Contains(out, "permission denied") || !strings.Contains(out, "write permission") {
			t.Fatalf("replica hold %v as a user without rights: exit 0 %v, want a refusal that says what is needed:\n%s", args, ok, out)
		}
	}
	if out, ok := replicaCLI(t, bins, "status", "--endpoints", eps, "--user", "root:rootpw"); !ok || strings.Contains(out, "held for maintenance") {
		t.Fatalf("a refused hold was stored:\n%s", out)
	}
	if out, ok := replicaCLI(t, bins, "hold", "--endpoints", eps, "--user", "root:rootpw", "m2", "--for", "1h"); !ok {
		t.Fatalf("replica hold as root: %s", out)
	}
}

// TestAHoldFencesTheStandbysSteps: the comparison a standby's fenced steps
// carry (membership.HoldsUnchanged) passes while no hold was written since
// the standby read the holds, and fails once a hold is written, renewed,
// written for every voter, or written by hand under a key of its own after
// the read; a release (which only loosens) does not fail it, and a read
// after any of these passes.
func TestAHoldFencesTheStandbysSteps(t *testing.T) {
	beside(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 1})
	cli := client(t, c.Endpoints()...)
	ctx := context.Background()
	sts, err := membership.Status(ctx, cli, nil, promotion.DefaultConfig(), clockwork.NewRealClock())
	if err != nil {
		t.Fatal(err)
	}
	const voter = 0xabc // the voter a standby would replace
	step := func(readAt int64) bool {
		t.Helper()
		resp, err := cli.Txn(ctx).If(membership.HoldsUnchanged(readAt)).Commit()
		if err != nil {
			t.Fatal(err)
		}
		return resp.Succeeded
	}
	read := func() int64 {
		t.Helper()
		_, rev, err := membership.Holds(ctx, cli)
		if err != nil {
			t.Fatal(err)
		}
		return rev
	}
	none := read()
	if !step(none) {
		t.Fatal("no hold, none read: the step failed")
	}
	if _, err := membership.Hold(ctx, cli, sts, "", time.Hour, promotion.MaintenanceHold{Reason: "all"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if step(none) {
		t.Fatal("a hold of every voter written after the read: the step went through")
	}
	all := read()
	if !step(all) {
		t.Fatal("the hold read: the step failed (the core, not the fence, decides on a hold it read)")
	}
	if _, err := membership.Hold(ctx, cli, sts, "", time.Hour, promotion.MaintenanceHold{Reason: "renewed"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if step(all) {
		t.Fatal("a hold renewed after the read: the step went through")
	}
	renewed := read()
	if _, err := membership.Release(ctx, cli, sts, ""); err != nil {
		t.Fatal(err)
	}
	if !step(renewed) || !step(read()) {
		t.Fatal("a hold released after the read: the step failed (a release only loosens)")
	}
	// A hold of this voter, written directly, as another tool would.
	before := read()
	if _, err := cli.Put(ctx, membership.HoldKey(voter), promotion.MaintenanceHold{Voter: voter}.Marshal()); err != nil {
		t.Fatal(err)
	}
	if step(before) {
		t.Fatal("a hold of the voter written after the read: the step went through")
	}
	// One under a key of its own that cannot be read (it holds every
	// voter: promotion.ReadMaintenanceHold).
	before = read()
	if _, err := cli.Put(ctx, membership.HoldPrefix+"by-hand", "not json"); err != nil {
		t.Fatal(err)
	}
	if step(before) {
		t.Fatal("an unreadable hold under a key of its own written after the read: the step went through")
	}
	if !step(read()) {
		t.Fatal("every hold read: the step failed")
	}
}
