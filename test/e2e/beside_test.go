package e2e

import "testing"

// beside lets t run beside up to three other tests that call it, once the
// package's serial tests are done (go test -parallel 4, as the README's
// test command and CI run it; GOMAXPROCS, two on a 2-core host, without
// the flag). A subtest that calls it runs beside its siblings, while its
// parent still keeps the machine from every other test.
//
// A test calls it only if a loaded machine can slow it and never fail it:
//   - every deadline it holds anything to is many times what that thing
//     takes (a command's 10 s, a condition's minute; a loopback failover
//     of 6-8.5 s against its 20 s bound);
//   - what it checks otherwise is a safety property, which holds however
//     slow the machine (strong reads linearizable by porcupine, a watch
//     with no gap, a mirror's copy exact, a bounded read never older than
//     its bound).
//
// Tests that bound a latency (a put within 1 s beside a failover), a
// freshness window, a lease's keep-alive, a readiness change, a failover
// across a 150 ms RTT (up to 14.7 s under load against 20 s), a window in
// which no live voter may look silent (silence is judged by a timer: a
// starved voter looks dead), or a compare report's figures stay serial,
// with the machine to themselves.
func beside(t *testing.T) {
	t.Helper()
	t.Parallel()
}
