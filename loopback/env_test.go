package loopback

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testEnv is an Env in one of t's temporary directories, closed at t's
// cleanup; an error closing it fails t.
func testEnv(t *testing.T) *Env {
	t.Helper()
	e, err := NewEnv(EnvConfig{Name: t.Name(), Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	})
	return e
}

// must returns a function that returns v, or fails t with err: must(t)(f()).
func must[V any](t *testing.T) func(v V, err error) V {
	return func(v V, err error) V {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func TestEnvClosesLastFirstAndReportsEveryFailure(t *testing.T) {
	e, err := NewEnv(EnvConfig{Name: "order"})
	if err != nil {
		t.Fatal(err)
	}
	dir := must[string](t)(e.TempDir())
	var order []int
	for i := 1; i <= 3; i++ {
		if err := e.OnClose(func() error {
			order = append(order, i)
			if i != 2 {
				return errors.New("closer " + string(rune('0'+i)) + " failed")
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	err = e.Close()
	if len(order) != 3 || order[0] != 3 || order[1] != 2 || order[2] != 1 {
		t.Fatalf("closers ran %v, want [3 2 1]", order)
	}
	if err == nil || !strings.Contains(err.Error(), "closer 1 failed") || !strings.Contains(err.Error(), "closer 3 failed") {
		t.Fatalf("Close: %v, want both failures", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("TempDir after Close of an Env that made its own directory: %v, want it removed", err)
	}
	if err := e.Close(); err != nil {
		t.Fatalf("second Close: %v, want nil", err)
	}
	ran := false
	if err := e.OnClose(func() error { ran = true; return nil }); !errors.Is(err, ErrClosed) || !ran {
		t.Fatalf("OnClose after Close: %v, ran %v; want ErrClosed and the function run at once", err, ran)
	}
}

// A Dir given is the caller's: Close leaves it, and the logs in it.
func TestEnvLeavesAGivenDir(t *testing.T) {
	dir := t.TempDir()
	e := must[*Env](t)(NewEnv(EnvConfig{Dir: dir}))
	sub := must[string](t)(e.TempDir())
	if filepath.Dir(sub) != dir {
		t.Fatalf("TempDir %s is not in Dir %s", sub, dir)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(sub); err != nil {
		t.Fatalf("a directory in a given Dir after Close: %v, want it left", err)
	}
	if _, err := NewEnv(EnvConfig{Dir: filepath.Join(dir, "absent")}); err == nil || !strings.Contains(err.Error(), "EnvConfig.Dir") {
		t.Fatalf("NewEnv with a Dir that does not exist: %v, want an error naming EnvConfig.Dir", err)
	}
}

// Close kills what Start started, then shows each log when ShowLogs says
// so; a Start after Close starts nothing that outlives it.
func TestEnvKillsItsProcessesAndShowsTheirLogs(t *testing.T) {
	for _, show := range []bool{false, true} {
		var log bytes.Buffer
		e := must[*Env](t)(NewEnv(EnvConfig{Name: "logs", Log: &log, ShowLogs: func() bool { return show }}))
		p := must[*Proc](t)(Start(e, ProcConfig{Name: "sh", Bin: "/bin/sh", Args: []string{"-c", `echo "a line to show"; while :; do sleep 0.05; done`}}))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := p.WaitLog(ctx, "a line to show"); err != nil {
			cancel()
			t.Fatal(err)
		}
		cancel()
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		if !p.Exited() {
			t.Fatalf("process %d still runs after Close", p.PID())
		}
		if got := strings.Contains(log.String(), "a line to show"); got != show {
			t.Fatalf("ShowLogs %v: the log shows the process's line %v:\n%s", show, got, log.String())
		}
		if _, err := Start(e, ProcConfig{Name: "late", Bin: "/bin/sh", Args: []string{"-c", "sleep 60"}}); err == nil {
			t.Fatal("Start in a closed Env: no error")
		}
	}
}
