package loopback

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestProcLifecycle(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A shell that reports its start and exits 3 on SIGTERM; the loop lets
	// the trap run between short sleeps.
	p := must[*Proc](t)(Start(testEnv(t), ProcConfig{Name: "sh", Bin: "/bin/sh", Args: []string{"-c",
		`echo "started $GREETING"; trap 'echo stopping; exit 3' TERM; while :; do sleep 0.05; done`},
		Env: []string{"GREETING=hello"}}))
	if err := p.WaitLog(ctx, "started hello"); err != nil {
		t.Fatal(err)
	}
	if p.Exited() {
		t.Fatal("exited early")
	}
	p.Stop()
	if code, err := p.Wait(ctx); err != nil || code != 3 {
		t.Fatalf("after Stop: exit %d, %v; want 3", code, err)
	}
	if !strings.Contains(p.Log(), "stopping") {
		t.Fatalf("log lacks the trap's output:\n%s", p.Log())
	}

	first := p.PID()
	if err := p.Restart(); err != nil {
		t.Fatal(err)
	}
	if p.PID() == first {
		t.Fatalf("restart kept pid %d", first)
	}
	if err := p.WaitLog(ctx, "started hello"); err != nil {
		t.Fatal(err)
	}
	// Output from before the restart does not satisfy a wait after it.
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancelShort()
	if err := p.WaitLog(short, "stopping"); err == nil {
		t.Fatal("WaitLog matched output of the previous run")
	}
	p.Kill()
	if code, err := p.Wait(ctx); err != nil || code != -1 {
		t.Fatalf("after Kill: exit %d, %v; want -1", code, err)
	}
	if n := strings.Count(p.Log(), "started hello"); n != 2 {
		t.Fatalf("log has %d starts, want 2 (appended across restarts):\n%s", n, p.Log())
	}
	if err := p.WaitLog(ctx, "never printed"); err == nil || ctx.Err() != nil {
		t.Fatalf("WaitLog on an exited process: %v, want an immediate error", err)
	}
}

// A process started through Exec (a Host's, such as ip netns exec) runs
// Bin with its arguments and keeps the PID that Kill signals: env execs it.
func TestProcThroughExec(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := must[*Proc](t)(Start(testEnv(t), ProcConfig{Name: "through-env", Exec: []string{"/usr/bin/env", "GREETING=hello"}, Bin: "/bin/sh",
		Args: []string{"-c", `echo "started $GREETING as $$"; while :; do sleep 0.05; done`}}))
	want := "started hello as " + strconv.Itoa(p.PID())
	if err := p.WaitLog(ctx, want); err != nil {
		t.Fatalf("%v; log:\n%s", err, p.Log())
	}
	p.Kill()
	if code, err := p.Wait(ctx); err != nil || code != -1 {
		t.Fatalf("after Kill: exit %d, %v; want -1", code, err)
	}
}
