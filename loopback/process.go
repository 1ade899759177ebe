package loopback

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jonboulle/clockwork"
)

const (
	// stopGrace is how long Stop waits after SIGTERM before SIGKILL.
	stopGrace = 10 * time.Second
	// logTailLines is how much of each log Env.Close shows (ShowLogs).
	logTailLines = 200
	// pollInterval paces WaitLog.
	pollInterval = 25 * time.Millisecond
)

// ProcConfig says what process to start.
type ProcConfig struct {
	// Name labels the process in its log file name and in failure output.
	Name string
	// Bin is the executable's path.
	Bin  string
	Args []string
	// Env is appended to the test process's environment; a later entry
	// for the same variable wins.
	Env []string
	// Dir is the working directory; "" is a fresh temp dir, so that
	// defaults such as etcd's ./default.etcd never land in the source tree.
	Dir string
	// Exec, if set, runs Bin through it (Host.Exec): Exec's first word
	// is started, with the rest, Bin and Args as its arguments. It must
	// exec Bin, not fork it, so that Kill, a pause and BlackholeFrom,
	// which go by PID, reach Bin.
	Exec []string
}

// Proc is a process started by Start. Its methods are safe for concurrent
// use.
type Proc struct {
	cfg     ProcConfig
	logPath string
	clock   clockwork.Clock // Stop's grace, WaitLog's polls

	mu  sync.Mutex
	cur *run // the latest start; replaced by Restart
}

// run is one start of a Proc. state is written once, by the goroutine that
// waits for the process, before it closes done; read it only after done.
type run struct {
	cmd      *exec.Cmd
	logStart int64 // log size after this run's start marker
	done     chan struct{}
	state    *os.ProcessState // nil if waiting failed; ExitCode is then -1
}

// Start starts a process with stdout and stderr appended to a log file in
// a directory of e, in a process group of its own so that Kill also
// reaches anything it started. e's Close kills it if it still runs, and
// shows the end of its log if e's ShowLogs asks.
func Start(e *Env, cfg ProcConfig) (*Proc, error) {
	if cfg.Name == "" {
		cfg.Name = filepath.Base(cfg.Bin)
	}
	if cfg.Dir == "" {
		dir, err := e.TempDir()
		if err != nil {
			return nil, fmt.Errorf("loopback: start %s: %w", cfg.Name, err)
		}
		cfg.Dir = dir
	}
	logDir, err := e.TempDir()
	if err != nil {
		return nil, fmt.Errorf("loopback: start %s: %w", cfg.Name, err)
	}
	p := &Proc{cfg: cfg, logPath: filepath.Join(logDir, cfg.Name+".log"), clock: clockwork.NewRealClock()}
	if err := p.start(); err != nil {
		return nil, err
	}
	// Killed at Close before the Env's directory is removed: the process
	// must be gone before its directories are.
	if err := e.ownProc(p); err != nil {
		return nil, fmt.Errorf("loopback: start %s: %w", cfg.Name, err)
	}
	return p, nil
}

func (p *Proc) start() error {
	f, err := os.OpenFile(p.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("loopback: start %s: %w", p.cfg.Name, err)
	}
	defer f.Close() // the child has its own descriptor
	args := p.Args()
	// A marker per start, for whoever reads a log that spans restarts.
	if _, err := fmt.Fprintf(f, "### loopback: starting %s %s\n", strings.Join(append(slices.Clone(p.cfg.Exec), p.cfg.Bin), " "), strings.Join(args, " ")); err != nil {
		return fmt.Errorf("loopback: start %s: %w", p.cfg.Name, err)
	}
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("loopback: start %s: %w", p.cfg.Name, err)
	}
	cmd := exec.Command(p.cfg.Bin, args...)
	if len(p.cfg.Exec) > 0 {
		cmd = exec.Command(p.cfg.Exec[0], slices.Concat(p.cfg.Exec[1:], []string{p.cfg.Bin}, args)...)
	}
	// An *os.File, not a pipe: Wait then returns when the process exits,
	// even if something it started still holds the log open.
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Dir = p.cfg.Dir
	if len(p.cfg.Env) > 0 {
		cmd.Env = append(os.Environ(), p.cfg.Env...)
	}
	// Pdeathsig: a test binary that dies without running its cleanups
	// (killed, or its output pipe closed) takes its processes with it,
	// rather than leaving clusters running that later tests compete with.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("loopback: start %s: %w", p.cfg.Name, err)
	}
	r := &run{cmd: cmd, logStart: fi.Size(), done: make(chan struct{})}
	go func() {
		_ = cmd.Wait() // the outcome is in ProcessState
		r.state = cmd.ProcessState
		close(r.done)
	}()
	p.mu.Lock()
	p.cur = r
	p.mu.Unlock()
	return nil
}

func (p *Proc) run() *run {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cur
}

// Name is the name the process was started with.
func (p *Proc) Name() string { return p.cfg.Name }

// PID is the process id of the latest start.
func (p *Proc) PID() int { return p.run().cmd.Process.Pid }

// LogPath is the log file's path.
func (p *Proc) LogPath() string { return p.logPath }

// Exited reports whether the latest start has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.run().done:
		return true
	default:
		return false
	}
}

// exitNote says how the latest start ended and the last line of its log,
// for an error about a process that exited when it should not have; call
// it once Exited.
func (p *Proc) exitNote() string {
	return fmt.Sprintf("%v; its log ends: %s", p.run().state, tail(p.Log(), 1))
}

// Kill sends SIGKILL to the process's group and waits for the process to
// exit. Killing an exited process does nothing.
func (p *Proc) Kill() {
	r := p.run()
	select {
	case <-r.done:
		return
	default:
	}
	// The group id is the pid (Setpgid); signalling the group also reaches
	// children the process started.
	if err := syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		_ = r.cmd.Process.Kill()
	}
	<-r.done
}

// Stop sends SIGTERM to the process, waits up to 10 s for it to exit, then
// kills it.
func (p *Proc) Stop() {
	r := p.run()
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.Kill()
		return
	}
	timer := p.clock.NewTimer(stopGrace)
	defer timer.Stop()
	select {
	case <-r.done:
	case <-timer.Chan():
		p.Kill()
	}
}

// Restart starts the process again with the same configuration, appending
// to the same log. A process still running is killed first.
func (p *Proc) Restart() error {
	return p.RestartWithArgs(p.Args())
}

// RestartWithArgs is Restart with args in place of the process's
// arguments, for this start and the later ones.
func (p *Proc) RestartWithArgs(args []string) error {
	p.Kill()
	p.mu.Lock()
	p.cfg.Args = slices.Clone(args)
	p.mu.Unlock()
	return p.start()
}

// RestartWithBin stops the process (Stop: SIGTERM, as an operator's
// rolling upgrade does) and starts bin in its place, with the same
// arguments, for this start and the later ones.
func (p *Proc) RestartWithBin(bin string) error {
	p.Stop()
	p.mu.Lock()
	p.cfg.Bin = bin
	p.mu.Unlock()
	return p.start()
}

// Args returns a copy of the process's arguments.
func (p *Proc) Args() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.cfg.Args)
}

// Wait waits for the latest start to exit and returns its exit code, -1 if
// a signal ended it. It returns an error only if ctx ends first.
func (p *Proc) Wait(ctx context.Context) (int, error) {
	r := p.run()
	select {
	case <-r.done:
		return r.state.ExitCode(), nil
	case <-ctx.Done():
		return -1, fmt.Errorf("loopback: wait for %s (pid %d) to exit: %w", p.cfg.Name, r.cmd.Process.Pid, ctx.Err())
	}
}

// Log returns the whole log, across restarts.
func (p *Proc) Log() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("loopback: read log of %s: %v", p.cfg.Name, err)
	}
	return string(b)
}

// WaitLog waits until s appears in what the latest start has logged (output
// of earlier starts does not count, so that a message from before a restart
// is not mistaken for a new one). It fails early if the process exits
// without logging s.
func (p *Proc) WaitLog(ctx context.Context, s string) error {
	r := p.run()
	sc := logScanner{path: p.logPath, pos: r.logStart, want: []byte(s)}
	ticker := p.clock.NewTicker(pollInterval)
	defer ticker.Stop()
	for {
		found, err := sc.scan()
		if err != nil {
			return fmt.Errorf("loopback: wait for %q in log of %s: %w", s, p.cfg.Name, err)
		}
		if found {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("loopback: wait for %q in log of %s: %w", s, p.cfg.Name, ctx.Err())
		case <-r.done:
			// Everything it wrote is in the file now: look once more.
			if found, err := sc.scan(); found || err != nil {
				return err
			}
			return fmt.Errorf("loopback: %s exited (%v) without logging %q", p.cfg.Name, r.state, s)
		case <-ticker.Chan():
		}
	}
}

// logScanner looks for want in a growing file, reading only what is new
// each time.
type logScanner struct {
	path  string
	pos   int64
	want  []byte
	carry []byte // the end of what was read, in case want straddles reads
}

func (s *logScanner) scan() (bool, error) {
	f, err := os.Open(s.path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	if _, err := f.Seek(s.pos, io.SeekStart); err != nil {
		return false, err
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return false, err
	}
	s.pos += int64(len(b))
	buf := append(s.carry, b...)
	if bytes.Contains(buf, s.want) {
		return true, nil
	}
	if keep := len(s.want) - 1; len(buf) > keep {
		buf = buf[len(buf)-keep:]
	}
	s.carry = append([]byte(nil), buf...)
	return false, nil
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	s = strings.TrimRight(s, "\n")
	i := len(s)
	for range n {
		j := strings.LastIndexByte(s[:i], '\n')
		if j < 0 {
			return s
		}
		i = j
	}
	return s[i+1:]
}
