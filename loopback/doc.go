// Package loopback starts real etcd, primary and replica processes on
// 127.0.0.1, with ports picked at run time and logs kept per process, and
// TCP proxies in front of them to cut or slow traffic (or each process on a
// Host of its own, an address in a network namespace): the local topology
// that `replica compare --local` runs and that the end-to-end tests
// (test/harness) and benchmarks are built on. It runs installed binaries
// (Bins); it links no test code.
//
// Everything started through a TB is stopped at its cleanup (a Runner
// outside tests). Nothing here sleeps to synchronise: waits poll a
// condition under a deadline (WaitFor, Proc.WaitLog).
package loopback
