// Package harness starts real etcd, primary and replica processes on
// 127.0.0.1 for end-to-end tests, with ports picked at run time, logs kept per
// process and printed when a test fails, and an in-test TCP proxy to cut or
// slow traffic between them; or each on a host of its own in a network
// namespace, cut by iptables (Net).
//
// It is the test side of package loopback, whose calls return errors: the
// harness's take t and fail it (Must), and everything a test starts lives
// in a loopback.Env that t.Cleanup closes (NewEnv). Nothing here sleeps to
// synchronise: waits poll a condition under a deadline (WaitFor, WaitLog).
package harness
