package e2e

import "testing"

// beside lets t run beside one other test that calls it, once the
// package's serial tests are done (go test's -parallel, GOMAXPROCS by
// default: two on a 2-core CI host). A test calls it only if every
// deadline it holds anything to is many times what that thing takes (a
// command's 10 s, a condition's minute), and it bounds no failover,
// freshness, lease, readiness or latency: sharing the machine with another
// test's cluster, or with a build of etcd v3.6.8 for the mixed-version
// test, then slows it and never fails it. Failover, standby, fault-suite,
// freshness, lease, readiness, compare and balancer tests stay serial,
// with the machine to themselves.
func beside(t *testing.T) {
	t.Helper()
	t.Parallel()
}
