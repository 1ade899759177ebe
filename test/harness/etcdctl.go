package harness

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// etcdctlTimeout bounds one Etcdctl run: above the dial and command
// timeouts it passes, so etcdctl's own error is what a test sees.
const etcdctlTimeout = 30 * time.Second

// Etcdctl runs the real etcdctl against endpoints and returns its stdout.
// Defaults --dial-timeout 5s and --command-timeout 10s come before args, so
// args can override them. The error carries stderr.
func Etcdctl(t TB, bins *Bins, endpoints []string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), etcdctlTimeout)
	defer cancel()
	cmd := etcdctlCommand(ctx, bins, endpoints, args)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("did not finish within %v: %w", etcdctlTimeout, ctx.Err())
	}
	if err != nil {
		return stdout.String(), fmt.Errorf("harness: etcdctl %s: %w\nstderr:\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// MustEtcdctl is Etcdctl that fails the test, with etcdctl's whole output,
// when etcdctl fails.
func MustEtcdctl(t TB, bins *Bins, endpoints []string, args ...string) string {
	t.Helper()
	out, err := Etcdctl(t, bins, endpoints, args...)
	if err != nil {
		t.Fatalf("%v\nstdout:\n%s", err, out)
	}
	return out
}

// EtcdctlCmd returns an etcdctl command, not started, for long-running ones
// such as watch whose output a test reads as it comes. It is killed at
// cleanup if still running.
func EtcdctlCmd(t TB, bins *Bins, endpoints []string, args ...string) *exec.Cmd {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return etcdctlCommand(ctx, bins, endpoints, args)
}

func etcdctlCommand(ctx context.Context, bins *Bins, endpoints []string, args []string) *exec.Cmd {
	full := append([]string{
		"--endpoints", strings.Join(endpoints, ","),
		"--dial-timeout", "5s",
		"--command-timeout", "10s",
	}, args...)
	cmd := exec.CommandContext(ctx, bins.Etcdctl, full...)
	cmd.Env = etcdctlEnv()
	return cmd
}

// etcdctlEnv is the test's environment without ETCDCTL_* variables, which
// would otherwise change what etcdctl does (ETCDCTL_API, ETCDCTL_ENDPOINTS…).
func etcdctlEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ETCDCTL_") {
			env = append(env, kv)
		}
	}
	return env
}
