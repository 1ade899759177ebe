package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/understudy-kv/understudy/test/harness"
)

// TestMirrorIntoAFullDestinationWaitsAndResumes: the destination passes
// its backend quota part way through the initial sync, and etcd raises its
// NOSPACE alarm. The mirror neither exits nor skips anything: it reports
// itself stalled and says what only the operator can do. Once the operator
// has done it (the destination restarted with a larger quota, the alarm
// disarmed), the mirror goes on by itself and verify passes.
func TestMirrorIntoAFullDestinationWaitsAndResumes(t *testing.T) {
	beside(t)
	const quota = 8 << 20
	p := startMirrorPairWith(t, 1, nil, []string{"--quota-backend-bytes", fmt.Sprint(quota)})
	bins := p.bins
	// 16 MiB under the prefix: twice the destination's quota.
	value := strings.Repeat("x", 64<<10)
	for i := range 256 {
		if _, err := p.s.Put(context.Background(), fmt.Sprintf("big/%04d", i), value); err != nil {
			t.Fatalf("put: %v", err)
		}
	}

	metrics := harness.URL(harness.FreePort(t))
	proc := p.start(t, "--prefix", "big/", "--stall-timeout", "3s", "--listen-metrics-urls", metrics)
	harness.WaitFor(t, time.Minute, "the destination's NOSPACE alarm", func() (bool, error) {
		out, err := harness.Etcdctl(t, bins, p.dst.Endpoints(), "alarm", "list")
		return strings.Contains(out, "NOSPACE"), err
	})
	harness.WaitFor(t, time.Minute, "understudy_mirror_stalled 1", func() (bool, error) {
		return metric(t, metrics, "understudy_mirror_stalled") == 1, nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := proc.WaitLog(ctx, "alarm disarm"); err != nil {
		t.Fatalf("the stall's log does not say what to do about the full destination: %v\n%s", err, proc.Log())
	}
	if proc.Exited() {
		t.Fatalf("the mirror exited on a full destination:\n%s", proc.Log())
	}

	// What an operator does: more room, then the alarm off.
	m := p.dst.Members[0]
	args := slices.Clone(m.Proc.Args())
	i := slices.Index(args, "--quota-backend-bytes")
	if i < 0 {
		t.Fatalf("the destination runs without --quota-backend-bytes: %v", args)
	}
	args[i+1] = fmt.Sprint(8 * quota)
	m.Proc.Stop()
	m.Proc.RestartWithArgs(t, args)
	p.dst.WaitLeader(t, 30*time.Second)
	harness.MustEtcdctl(t, bins, p.dst.Endpoints(), "alarm", "disarm")

	p.waitCaughtUp(t, "default")
	harness.WaitFor(t, time.Minute, "understudy_mirror_stalled 0", func() (bool, error) {
		return metric(t, metrics, "understudy_mirror_stalled") == 0, nil
	})
	mustVerify(t, p, "--prefix", "big/")
	if proc.Exited() {
		t.Fatalf("the mirror exited:\n%s", proc.Log())
	}
}
