package e2e

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The suite runs in three phases, each test in the one its first call puts
// it in:
//
//  1. Alone (no call): one at a time, with the machine to themselves. Tests
//     that bound a latency while they load the machine themselves (a drain
//     within 5 s under 8 writers, a watch resumed within 2 s under 101
//     watchers, a hub dropped within 2 s under a loop of strong reads, a
//     fault workload's 3 s writes), reads and writes failing within 2 s
//     through a quorum loss, freshness headers' figures, `replica
//     compare`'s figures or the balancer's choices, and those that listen
//     on etcd's default ports.
//  2. timed(t): up to timedWidth at a time once the alone ones are done,
//     with nothing else. Tests that hold a timer to a lightly loaded
//     cluster: a window in which no live voter may look silent, a
//     standby's failover bound beside a paced writer (writerPace) whose
//     every put must take under an election timeout, a hold, a lease that
//     expires or is kept alive across a delay, a replica gone quiet (a 2 s
//     readiness window), streams kept open between slow rounds, a cut
//     link's readiness change, an error within a few dial timeouts. Each
//     keeps a few processes mostly idle on timers; three such beside each
//     other leave the 2 cores mostly idle, so none is starved (a starved
//     voter would look dead).
//  3. beside(t): up to -parallel at a time (4, as CI runs it) once the
//     timed ones are done. Tests a loaded machine can slow and never fail:
//     every deadline they hold anything to is many times what that thing
//     takes (a command's 10 s, a condition's minute; a loopback failover
//     of 6-8.5 s against its 20 s bound), and what they check otherwise is
//     a safety property, which holds however slow the machine (strong reads
//     linearizable by porcupine, a watch with no gap, a mirror's copy
//     exact, a bounded read never older than its bound). A subtest that
//     calls beside runs beside its siblings only, while its parent, alone,
//     keeps the machine from every other test.
//
// Go's own -parallel limit would count a test waiting for its phase as
// running, so TestMain lifts it and the lanes below do the limiting.
var (
	// timedTests are the timed tests -run selected, counted while the
	// alone ones run (each calls timed before it is paused); beside
	// tests wait for them all.
	timedTests            sync.WaitGroup
	timedLane, besideLane chan struct{}
)

// timedWidth is how many timed tests run at once.
const timedWidth = 3

func TestMain(m *testing.M) {
	flag.Parse()
	width, err := strconv.Atoi(flag.Lookup("test.parallel").Value.String())
	if err != nil || width < 1 {
		fmt.Fprintf(os.Stderr, "e2e: -parallel %s: want a count of at least 1\n", flag.Lookup("test.parallel").Value)
		os.Exit(2)
	}
	besideLane = make(chan struct{}, width)
	timedLane = make(chan struct{}, min(width, timedWidth))
	if err := flag.Set("test.parallel", "1000"); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: lifting -parallel: %v\n", err)
		os.Exit(2)
	}
	os.Exit(m.Run())
}

// timed puts t in the timed phase. Only top-level tests call it.
func timed(t *testing.T) {
	t.Helper()
	if strings.Contains(t.Name(), "/") {
		t.Fatalf("timed(t) in subtest %s: only a top-level test takes the timed phase", t.Name())
	}
	timedTests.Add(1)
	t.Cleanup(timedTests.Done)
	t.Parallel()
	enter(t, timedLane)
}

// beside puts t in the beside phase, or, for a subtest of a test that runs
// alone, beside its siblings.
func beside(t *testing.T) {
	t.Helper()
	top, _, sub := strings.Cut(t.Name(), "/")
	if _, held := inLane.Load(top); sub && held {
		// Its parent keeps its place until its subtests end: with the
		// lane full of such parents, none would.
		t.Fatalf("beside(t) in %s, whose parent %s called timed or beside: only a subtest of a test that runs alone may", t.Name(), top)
	}
	t.Parallel()
	if !sub {
		timedTests.Wait()
	}
	enter(t, besideLane)
}

// inLane holds the names of the top-level tests that took a lane.
var inLane sync.Map

// enter takes a place in lane until t and its cleanups are done (the
// cleanups t registers later, such as stopping its processes, run first).
func enter(t *testing.T, lane chan struct{}) {
	lane <- struct{}{}
	if !strings.Contains(t.Name(), "/") {
		inLane.Store(t.Name(), true)
	}
	t.Cleanup(func() { <-lane })
}
