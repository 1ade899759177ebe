//go:build localcompare

package main

import "github.com/understudy-kv/understudy/test/comparelocal"

// Built with -tags localcompare (the tests' replica, and
// `go run -tags localcompare ./cmd/replica compare --local`): the local
// topology, which links the test harness, is not in the shipped binary.
func init() { localCompare = comparelocal.Run }
