// Package loopback starts real etcd, primary and replica processes on
// 127.0.0.1, with ports picked at run time and logs kept per process, and
// TCP proxies in front of them to cut or slow traffic (or each process on a
// Host of its own, an address in a network namespace): the local topology
// that `replica compare --local` runs and that the end-to-end tests
// (test/harness) and benchmarks are built on. It runs installed binaries
// (Bins); it links no test code.
//
// An Env owns everything started in it, and its Close stops it all, last
// started first. Every call that can fail returns an error: test/harness
// turns those into test failures. Nothing here sleeps to synchronise:
// waits poll a condition under a deadline (WaitFor, Proc.WaitLog).
package loopback
