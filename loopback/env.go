package loopback

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
)

// ErrClosed is returned by a call that would start something in an Env
// that is already closed.
var ErrClosed = errors.New("loopback: the Env is closed")

// EnvConfig says what NewEnv makes.
type EnvConfig struct {
	// Name names the topology: cluster tokens derive from it, so that two
	// topologies' members never join each other, and the log names it;
	// "" is "loopback".
	Name string
	// Dir holds the topology's data directories and process logs, each in
	// a directory of its own (Env.TempDir). A Dir given here is left in
	// place at Close; "" is a new temporary directory that Close removes.
	Dir string
	// Log receives the end of each process's log at Close when ShowLogs
	// says so; nil drops it.
	Log io.Writer
	// ShowLogs is asked at Close, once every process has stopped: if it
	// returns true, the last lines of each process's log are written to
	// Log, for whoever reads why the topology failed (a test shows them
	// when it failed, a command when it did). nil never shows them.
	ShowLogs func() bool
}

// Env owns what a topology starts: processes, proxies, clients and
// temporary directories. Every function that starts something takes the
// Env that is to own it; Close stops all of it, last started first. An
// Env's methods are safe for concurrent use.
type Env struct {
	name     string
	dir      string
	ownDir   bool // dir is removed at Close
	log      io.Writer
	showLogs func() bool

	mu struct {
		sync.Mutex
		closed  bool
		closers []closer
		procs   []*Proc // for their logs at Close
	}
}

// closer is one thing Close stops, and what it is, for its error.
type closer struct {
	what  string
	close func() error
}

// NewEnv returns an empty Env.
func NewEnv(cfg EnvConfig) (*Env, error) {
	e := &Env{name: cfg.Name, dir: cfg.Dir, log: cfg.Log, showLogs: cfg.ShowLogs}
	if e.name == "" {
		e.name = "loopback"
	}
	if e.log == nil {
		e.log = io.Discard
	}
	if e.dir == "" {
		dir, err := os.MkdirTemp("", "understudy-"+pathSafe(e.name)+"-")
		if err != nil {
			return nil, fmt.Errorf("loopback: directory of %s: %w", e.name, err)
		}
		e.dir, e.ownDir = dir, true
	} else if st, err := os.Stat(e.dir); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("loopback: EnvConfig.Dir %q: want an existing directory (stat: %v)", e.dir, err)
	}
	return e, nil
}

// Name is the topology's name (EnvConfig.Name).
func (e *Env) Name() string { return e.name }

// TempDir makes a new directory in the Env's (EnvConfig.Dir) and returns
// its path.
func (e *Env) TempDir() (string, error) {
	d, err := os.MkdirTemp(e.dir, "")
	if err != nil {
		return "", fmt.Errorf("loopback: temporary directory: %w", err)
	}
	return d, nil
}

// OnClose has Close call f, after whatever was registered later and before
// whatever was registered earlier. If the Env is already closed, f is
// called at once and ErrClosed returned with its error.
func (e *Env) OnClose(f func() error) error {
	return e.own("a function given to OnClose", f)
}

// own registers close, which stops what, with Close; see OnClose.
func (e *Env) own(what string, close func() error) error {
	e.mu.Lock()
	if !e.mu.closed {
		e.mu.closers = append(e.mu.closers, closer{what: what, close: close})
		e.mu.Unlock()
		return nil
	}
	e.mu.Unlock()
	if err := close(); err != nil {
		return fmt.Errorf("%w; closing %s at once: %w", ErrClosed, what, err)
	}
	return ErrClosed
}

// ownProc registers p, started by Start: Close kills it, and shows its
// log if ShowLogs asks.
func (e *Env) ownProc(p *Proc) error {
	if err := e.own("process "+p.Name(), func() error { p.Kill(); return nil }); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.mu.procs = append(e.mu.procs, p)
	return nil
}

// Close stops everything the Env started, last started first: processes
// are killed, proxies and clients closed. Then, if ShowLogs says so, the
// end of each process's log goes to Log, and the Env's own directory (when
// EnvConfig.Dir was "") is removed. It returns what failed, every failure;
// a second Close does nothing and returns nil.
func (e *Env) Close() error {
	e.mu.Lock()
	if e.mu.closed {
		e.mu.Unlock()
		return nil
	}
	e.mu.closed = true
	cs, procs := e.mu.closers, e.mu.procs
	e.mu.closers, e.mu.procs = nil, nil
	e.mu.Unlock()

	var errs []error
	for i := len(cs) - 1; i >= 0; i-- {
		if err := cs[i].close(); err != nil {
			errs = append(errs, fmt.Errorf("loopback: close %s: %w", cs[i].what, err))
		}
	}
	if e.showLogs != nil && e.showLogs() {
		for _, p := range procs {
			fmt.Fprintf(e.log, "loopback: %s (pid %d, %s), last %d lines of its log:\n%s\n",
				p.Name(), p.PID(), p.LogPath(), logTailLines, tail(p.Log(), logTailLines))
		}
	}
	if e.ownDir {
		if err := os.RemoveAll(e.dir); err != nil {
			errs = append(errs, fmt.Errorf("loopback: remove %s: %w", e.dir, err))
		}
	}
	return errors.Join(errs...)
}

// pathSafe is s with the characters a file or token name should not hold
// replaced by '-'.
func pathSafe(s string) string {
	return strings.NewReplacer("/", "-", " ", "-", ":", "-").Replace(s)
}
