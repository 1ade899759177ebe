package e2e

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/test/harness"
)

var (
	faultRuns = flag.Int("faults.runs", 1, "how many times each fault scenario runs (TestFault); runs after the first draw their timings at random from -faults.seed")
	faultSeed = flag.Uint64("faults.seed", 1, "seed of the fault scenarios' timings; run i uses seed+i")
)

// faultEnv is one scenario's cluster: 3 voters and a replica, every raft
// link behind a proxy (so one process's links can be cut or slowed), and a
// proxy in front of the first voter's client URL.
type faultEnv struct {
	t *testing.T
	c *harness.Cluster
	r *harness.Replica
	// hub, in a faultCase with viaHub, is the replica r obtains its read
	// indexes from (--read-index-via).
	hub        *harness.Replica
	clientProx *harness.Proxy
	voters     *clientv3.Client // through the client proxy and the other voters
	rep        *clientv3.Client
}

// faultCase is one fault: inject starts it and returns what ends it.
type faultCase struct {
	name string
	// touchesVoters: the fault is on a voter or its links, so clients of
	// the voters may see errors; otherwise every write through the voters
	// must succeed (the replica never costs the cluster its writes).
	touchesVoters bool
	// viaHub: the replica under test shares the rounds of another
	// replica (--read-index-via), the hub.
	viaHub bool
	inject func(e *faultEnv) (heal func())
}

func signal(t *testing.T, p *harness.Proc, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(p.PID(), sig); err != nil {
		t.Fatalf("signal %v to %s: %v", sig, p.Name(), err)
	}
}

var faultCases = []faultCase{
	{name: "leader-kill-restart", touchesVoters: true, inject: func(e *faultEnv) func() {
		m := e.c.WaitLeader(e.t, 30*time.Second)
		m.Proc.Kill()
		return func() { m.Proc.Restart(e.t) }
	}},
	{name: "leader-pause", touchesVoters: true, inject: func(e *faultEnv) func() {
		m := e.c.WaitLeader(e.t, 30*time.Second)
		signal(e.t, m.Proc, syscall.SIGSTOP)
		// Paused until another member leads.
		harness.WaitFor(e.t, 30*time.Second, "a new leader while the old one is paused", func() (bool, error) {
			for _, o := range e.c.Members {
				if o == m {
					continue
				}
				st, err := e.c.Status(o)
				if err != nil {
					return false, err
				}
				if st.Leader != 0 && st.Leader != m.ID {
					return true, nil
				}
			}
			return false, fmt.Errorf("no other leader than %s yet", m.Name)
		})
		return func() { signal(e.t, m.Proc, syscall.SIGCONT) }
	}},
	{name: "replica-kill-restart", inject: func(e *faultEnv) func() {
		e.r.Proc.Kill()
		return func() { e.r.Proc.Restart(e.t); e.r.WaitServing(e.t, 2*time.Minute) }
	}},
	{name: "replica-pause", inject: func(e *faultEnv) func() {
		signal(e.t, e.r.Proc, syscall.SIGSTOP)
		return func() { signal(e.t, e.r.Proc, syscall.SIGCONT) }
	}},
	{name: "replica-peer-blackhole", inject: func(e *faultEnv) func() {
		e.r.CutPeerLinks(e.t, e.c)
		return func() { e.r.HealPeerLinks(e.c) }
	}},
	{name: "replica-peer-delay", inject: func(e *faultEnv) func() {
		e.r.DelayPeerLinks(e.t, e.c, 100*time.Millisecond)
		return func() { e.r.HealPeerLinks(e.c) }
	}},
	{name: "replica-hub-pause", viaHub: true, inject: func(e *faultEnv) func() {
		signal(e.t, e.hub.Proc, syscall.SIGSTOP)
		return func() { signal(e.t, e.hub.Proc, syscall.SIGCONT) }
	}},
	{name: "replica-hub-delay", viaHub: true, inject: func(e *faultEnv) func() {
		// The hub's rounds slow to ~60ms: strong reads through it that
		// arrive while a request is in flight ask anew, overlapping.
		e.hub.DelayPeerLinks(e.t, e.c, 30*time.Millisecond)
		return func() { e.hub.HealPeerLinks(e.c) }
	}},
	{name: "voter-client-blackhole", touchesVoters: true, inject: func(e *faultEnv) func() {
		e.clientProx.Blackhole()
		return e.clientProx.Heal
	}},
}

// TestFault runs every fault of faultCases against a fresh cluster and
// replica under a workload, and checks each guarantee that applies (see
// checkFaultRun): strong reads through the replica linearizable (porcupine),
// bounded reads never older than their bound by the writer's own
// acknowledgements, the replica's watch equal to the voters' history
// (ordered, no gap, no duplicate, resumed across restarts), the voters'
// quorum and writes untouched; every fault of cascadeFaultCases against
// cascaded replicas (see runCascadeFault); and every fault of
// mirrorFaultCases against a mirror (see runMirrorFault).
//
// go test ./test/e2e -run TestFault -faults.runs=20 runs each many times
// with random timings.
func TestFault(t *testing.T) {
	bins := harness.Binaries(t)
	harness.Must(t, bins.RequireReplica())
	for _, fc := range faultCases {
		t.Run(fc.name, func(t *testing.T) {
			for run := range *faultRuns {
				t.Run(fmt.Sprintf("run-%d", run), func(t *testing.T) {
					rng := rand.New(rand.NewPCG(*faultSeed+uint64(run), uint64(len(fc.name))))
					runFault(t, fc, rng, run == 0)
				})
			}
		})
	}
	for _, fc := range cascadeFaultCases {
		t.Run(fc.name, func(t *testing.T) {
			beside(t)
			for run := range *faultRuns {
				t.Run(fmt.Sprintf("run-%d", run), func(t *testing.T) {
					rng := rand.New(rand.NewPCG(*faultSeed+uint64(run), uint64(len(fc.name))))
					runCascadeFault(t, fc, rng, run == 0)
				})
			}
		})
	}
	for _, fc := range mirrorFaultCases {
		t.Run(fc.name, func(t *testing.T) {
			beside(t)
			for run := range *faultRuns {
				t.Run(fmt.Sprintf("run-%d", run), func(t *testing.T) {
					rng := rand.New(rand.NewPCG(*faultSeed+uint64(run), uint64(len(fc.name))))
					runMirrorFault(t, fc, rng, run == 0)
				})
			}
		})
	}
}

func runFault(t *testing.T, fc faultCase, rng *rand.Rand, fixed bool) {
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3, PeerProxies: true})
	e := &faultEnv{t: t, c: c}
	if fc.viaHub {
		e.hub = harness.StartReplica(t, c, harness.ReplicaConfig{Name: "hub", PeerProxy: true})
		e.r = harness.StartReplica(t, c, harness.ReplicaConfig{Name: "r1", PeerProxy: true, Extra: []string{"--read-index-via", e.hub.ClientURL}})
	} else {
		e.r = harness.StartReplica(t, c, harness.ReplicaConfig{Name: "r1", PeerProxy: true})
	}
	r := e.r
	e.clientProx = harness.NewProxy(t, strings.TrimPrefix(c.Members[0].ClientURL, "http://"))
	e.voters = client(t, e.clientProx.URL(), c.Members[1].ClientURL, c.Members[2].ClientURL)
	e.rep = client(t, r.ClientURL)

	// Timings: fixed for the first run (CI), drawn for the others; the
	// workload is under way on every path before the first second.
	before, during, after := time.Second, 4*time.Second, time.Second
	if !fixed {
		before = time.Duration(500+rng.IntN(2500)) * time.Millisecond
		during = time.Duration(1000+rng.IntN(6000)) * time.Millisecond
		after = time.Duration(500+rng.IntN(2500)) * time.Millisecond
	}
	t.Logf("fault %s: after %v, for %v, then %v more", fc.name, before, during, after)

	w := startWorkload(t, e)
	w.waitOps(t, 20) // the workload is under way on every path
	hold(before)
	heal := fc.inject(e)
	injected := w.now()
	hold(during)
	heal()
	healed := w.now()
	hold(after)
	w.stop()
	checkFaultRun(t, e, w, fc, injected, healed)
	if fc.viaHub {
		checkRoundsBySource(t, e.r, fc.name == "replica-hub-pause")
	}
}

// checkRoundsBySource requires r to have done rounds through its hub,
// some of them overlapping (strong reads arriving while a request was in
// flight, --read-index-via-in-flight) and, if own (the hub was paused),
// rounds of its own: every path was checked.
func checkRoundsBySource(t *testing.T, r *harness.Replica, own bool) {
	t.Helper()
	m := harness.MustScrape(t, r.ClientURL+"/metrics")
	via, ownRounds := m.Sum("understudy_replica_read_index_rounds_total", "source=via"), m.Sum("understudy_replica_read_index_rounds_total", "source=own")
	overlapping := m.Sum("understudy_replica_read_index_via_overlapping_total")
	t.Logf("rounds through the hub: %v (overlapping another: %v), own: %v", via, overlapping, ownRounds)
	if via == 0 || overlapping == 0 || (own && ownRounds == 0) {
		t.Fatalf("rounds through the hub %v, overlapping %v, own %v: want rounds through the hub, some overlapping, and own ones if the hub was paused", via, overlapping, ownRounds)
	}
}

// hold lets the workload run, or a fault last, for d: a phase of the
// scenario, not a wait for a condition (those use harness.WaitFor).
func hold(d time.Duration) { <-time.After(d) }
