package harness

import (
	"fmt"
	"io"
	"os"
	"sync"
)

// Runner is the TB of a program outside `go test` that drives the harness
// (the benchmark, test/bench): Fatal ends the call made through Do with an
// error, Cleanup functions run at Finish, last first, and TempDir
// directories are removed then. A product command uses package loopback,
// whose calls return errors, instead.
type Runner struct {
	name string
	log  io.Writer

	mu       sync.Mutex
	cleanups []func()
	failed   bool
	dirs     []string
}

var _ TB = (*Runner)(nil)

// runnerFatal is the panic value by which Fatal unwinds to Do.
type runnerFatal struct{ msg string }

// NewRunner returns a Runner named name (cluster tokens and process names
// derive from it) that logs to log, or nowhere if log is nil.
func NewRunner(name string, log io.Writer) *Runner {
	if log == nil {
		log = io.Discard
	}
	return &Runner{name: name, log: log}
}

// Do calls f and returns the error f failed with through Fatal, if any.
// Harness calls that may fail must be made inside Do, on its goroutine.
func (r *Runner) Do(f func()) (err error) {
	defer func() {
		if v := recover(); v != nil {
			rf, ok := v.(runnerFatal)
			if !ok {
				panic(v)
			}
			err = fmt.Errorf("%s: %s", r.name, rf.msg)
		}
	}()
	f()
	return nil
}

// Finish runs the cleanups, last first, and removes the temporary
// directories.
func (r *Runner) Finish() {
	r.mu.Lock()
	cs, dirs := r.cleanups, r.dirs
	r.cleanups, r.dirs = nil, nil
	r.mu.Unlock()
	for i := len(cs) - 1; i >= 0; i-- {
		cs[i]()
	}
	for _, d := range dirs {
		os.RemoveAll(d)
	}
}

func (r *Runner) Helper()      {}
func (r *Runner) Name() string { return r.name }
func (r *Runner) Failed() bool { r.mu.Lock(); defer r.mu.Unlock(); return r.failed }
func (r *Runner) Logf(format string, args ...any) {
	fmt.Fprintf(r.log, "[%s] %s\n", r.name, fmt.Sprintf(format, args...))
}
func (r *Runner) Log(args ...any) { r.Logf("%s", fmt.Sprint(args...)) }
func (r *Runner) Errorf(format string, args ...any) {
	r.mu.Lock()
	r.failed = true
	r.mu.Unlock()
	r.Logf(format, args...)
}
func (r *Runner) Error(args ...any) { r.Errorf("%s", fmt.Sprint(args...)) }
func (r *Runner) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	panic(runnerFatal{fmt.Sprintf(format, args...)})
}
func (r *Runner) Fatal(args ...any) { r.Fatalf("%s", fmt.Sprint(args...)) }
func (r *Runner) FailNow()          { r.Fatalf("failed") }
func (r *Runner) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}
func (r *Runner) TempDir() string {
	d, err := os.MkdirTemp("", "understudy-"+r.name+"-")
	if err != nil {
		r.Fatalf("temp dir: %v", err)
	}
	r.mu.Lock()
	r.dirs = append(r.dirs, d)
	r.mu.Unlock()
	return d
}
