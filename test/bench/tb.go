package main

import (
	"os"

	"github.com/understudy-kv/understudy/test/harness"
)

// runner drives package harness outside `go test` (harness.Runner): a
// fatal error aborts the current scenario, and cleanups run when it ends.
type runner = harness.Runner

// scenario runs f with a fresh runner and turns a fatal error into an error.
func scenario(name string, f func(r *runner)) error {
	r := harness.NewRunner(name, os.Stderr)
	defer r.Finish()
	return r.Do(func() { f(r) })
}
