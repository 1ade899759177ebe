package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ProcConfig says what to run.
type ProcConfig struct {
	Name string
	Bin  string
	Args []string
	// Env is added to the test's environment.
	Env []string
	// Dir is the working directory (default: a fresh temporary one).
	Dir string
}

// Proc is a process under test. Its stdout and stderr go to one log file,
// kept across restarts.
type Proc struct {
	cfg     ProcConfig
	logPath string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when the current run has exited
	code int
}

// Start starts a process; t.Cleanup kills it if it still runs, and prints
// the tail of its log if the test failed.
func Start(t testing.TB, cfg ProcConfig) *Proc {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	p := &Proc{cfg: cfg, logPath: filepath.Join(t.TempDir(), cfg.Name+".log")}
	if err := p.start(); err != nil {
		t.Fatalf("harness: %v", err)
	}
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("---- last lines of %s's log (%s) ----\n%s", cfg.Name, p.logPath, tail(p.Log(), 150))
		}
	})
	return p
}

func (p *Proc) start() error {
	f, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("start %s: %w", p.cfg.Name, err)
	}
	cmd := exec.Command(p.cfg.Bin, p.cfg.Args...)
	cmd.Dir = p.cfg.Dir
	cmd.Env = append(os.Environ(), p.cfg.Env...)
	cmd.Stdout, cmd.Stderr = f, f
	// Its own process group, so that a kill reaches anything it started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	fmt.Fprintf(f, "### harness: starting %s %s\n", p.cfg.Bin, strings.Join(p.cfg.Args, " "))
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", p.cfg.Name, err)
	}
	done := make(chan struct{})
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
	go func() {
		err := cmd.Wait()
		f.Close()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			code = -1
		}
		p.mu.Lock()
		p.code = code
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

// PID is the process ID of the current run.
func (p *Proc) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd.Process.Pid
}

func (p *Proc) current() (*exec.Cmd, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd, p.done
}

// Exited reports whether the current run has ended.
func (p *Proc) Exited() bool {
	_, done := p.current()
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// Kill sends SIGKILL to the process group and waits for the exit.
func (p *Proc) Kill() {
	cmd, done := p.current()
	if p.Exited() {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
}

// Stop sends SIGTERM, and SIGKILL if the process has not exited 10 seconds
// later; it returns once the process has exited.
func (p *Proc) Stop() {
	cmd, done := p.current()
	if p.Exited() {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		p.Kill()
	}
}

// Restart starts the process again with the same arguments, appending to
// the same log. The previous run must have exited.
func (p *Proc) Restart(t testing.TB) {
	t.Helper()
	if !p.Exited() {
		t.Fatalf("harness: restart %s: still running", p.cfg.Name)
	}
	if err := p.start(); err != nil {
		t.Fatalf("harness: %v", err)
	}
}

// Wait waits for the current run to exit and returns its exit code.
func (p *Proc) Wait(ctx context.Context) (int, error) {
	_, done := p.current()
	select {
	case <-done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.code, nil
	case <-ctx.Done():
		return 0, fmt.Errorf("harness: %s still running: %w", p.cfg.Name, ctx.Err())
	}
}

// Log returns everything the process has written so far.
func (p *Proc) Log() string {
	b, _ := os.ReadFile(p.logPath)
	return string(b)
}

// WaitLog waits until the log contains s (counting only what the current
// run wrote, after its start marker), or the process exits, or ctx ends.
func (p *Proc) WaitLog(ctx context.Context, s string) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		log := p.Log()
		if i := strings.LastIndex(log, "### harness: starting"); i >= 0 {
			log = log[i:]
		}
		if strings.Contains(log, s) {
			return nil
		}
		if p.Exited() {
			// One more read: the exit may have flushed it.
			if strings.Contains(p.Log(), s) {
				return nil
			}
			return fmt.Errorf("harness: %s exited before logging %q:\n%s", p.cfg.Name, s, tail(p.Log(), 30))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("harness: %s did not log %q: %w", p.cfg.Name, s, ctx.Err())
		case <-t.C:
		}
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
