package e2e

import "testing"

// beside lets t run beside one other test that calls it, once the
// package's serial tests are done (go test's -parallel, GOMAXPROCS by
// default: two on a 2-core CI host). Only tests that bound nothing in time
// call it — no failover, freshness, lease, readiness or latency deadline
// tighter than a minute, no "every write succeeds within seconds" — so
// that sharing the machine with another test's cluster slows them and
// never changes what they check. The failover, standby, fault, freshness
// and balancer tests stay serial, with the machine to themselves.
func beside(t *testing.T) {
	t.Helper()
	t.Parallel()
}
