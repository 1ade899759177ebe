package main

import (
	"fmt"
	"os"
	"sync"
	"testing"
)

// runner lets the benchmark drive package harness, which takes a
// testing.TB, outside `go test`. Fatal errors abort the current scenario
// (recovered by scenario), and cleanups run when it ends, as in a test.
type runner struct {
	testing.TB // never called: only completes the interface
	name       string

	mu       sync.Mutex
	cleanups []func()
	failed   bool
	dirs     []string
}

type fatal struct{ msg string }

func newRunner(name string) *runner { return &runner{name: name} }

func (r *runner) Helper()      {}
func (r *runner) Name() string { return r.name }
func (r *runner) Failed() bool { r.mu.Lock(); defer r.mu.Unlock(); return r.failed }
func (r *runner) Logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "  [%s] %s\n", r.name, fmt.Sprintf(format, args...))
}
func (r *runner) Log(args ...any) { r.Logf("%s", fmt.Sprint(args...)) }
func (r *runner) Errorf(format string, args ...any) {
	r.mu.Lock()
	r.failed = true
	r.mu.Unlock()
	r.Logf(format, args...)
}
func (r *runner) Error(args ...any) { r.Errorf("%s", fmt.Sprint(args...)) }
func (r *runner) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	panic(fatal{fmt.Sprintf(format, args...)})
}
func (r *runner) Fatal(args ...any) { r.Fatalf("%s", fmt.Sprint(args...)) }
func (r *runner) FailNow()          { r.Fatalf("failed") }
func (r *runner) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}
func (r *runner) TempDir() string {
	d, err := os.MkdirTemp("", "understudy-bench-")
	if err != nil {
		r.Fatalf("temp dir: %v", err)
	}
	r.mu.Lock()
	r.dirs = append(r.dirs, d)
	r.mu.Unlock()
	return d
}

// finish runs the cleanups, last first, and removes temporary directories.
func (r *runner) finish() {
	r.mu.Lock()
	cs := r.cleanups
	r.cleanups = nil
	r.mu.Unlock()
	for i := len(cs) - 1; i >= 0; i-- {
		cs[i]()
	}
	for _, d := range r.dirs {
		os.RemoveAll(d)
	}
}

// scenario runs f with a fresh runner and turns a fatal error into an error.
func scenario(name string, f func(r *runner)) (err error) {
	r := newRunner(name)
	defer r.finish()
	defer func() {
		if v := recover(); v != nil {
			f, ok := v.(fatal)
			if !ok {
				panic(v)
			}
			err = fmt.Errorf("%s: %s", name, f.msg)
		}
	}()
	f(r)
	return nil
}
